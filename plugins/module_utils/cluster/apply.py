# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writes: server-side apply with one field manager, label patches, each only when something differs.

Check mode means one thing in every module: observe, plan, and send every write that differs as a server-side
dry run (`dryRun=All`: the API server validates it, admission and strict field validation included, and stores
nothing), so a check run refuses what the real run would be refused and writes nothing (the audit log shows no
mutating request without dryRun). Every write function takes `check_mode` and then does exactly that, returning
the Change it would make. A second run finds nothing different and sends nothing. `dry_run_apply` is the one
place a dry run is sent; modules that validate every object before their first write call it too.

Every write returns a Change; `change_report(changes)` is the one result contract of the modules: `changed`,
`changes` (a list in write order, each `key` = kind/namespace/name or kind/name, `kind`, `namespace`, `name`,
`fields` that differ, `before` and `after` of those fields only, nested as in the object); KubegpuModule adds
`diff` ({before: {key: ...}, after: {key: ...}}, what `--diff` shows) from `changes`, only under --diff.

Each write goes through `cluster.write` with a check of its own effect: when a connection drops after the
request was sent (or the server answers 5xx), the object is read again and the write is sent again only if
it did not take effect, so every write reaches the API server once (retry.py).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import (
    ClusterError,
    DynamicApiError,
    NotFoundError,
    describe_api_error,
    plain_json,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import FIELD_MANAGER
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.objects import (
    diff_of,
    difference_paths,
    dotted,
    merged,
    object_key,
    subset,
)


class Change(object):
    """What a write did (or would do): whether anything changed, the fields, and before/after of those fields."""

    def __init__(self, kind, name, namespace=None, fields=None, before=None, after=None):
        self.kind, self.name, self.namespace = kind, name, namespace
        self.fields = fields or []
        self.before, self.after = before, after
        # The object as the server stored it after the write (when the write's answer was read): not part of the
        # result; a watched wait folds it in (cluster/watch.py), so that it judges what was just written.
        self.written = None

    @property
    def changed(self):
        return bool(self.fields)

    @property
    def key(self):
        return object_key(self.kind, self.name, self.namespace)

    def as_dict(self):
        return {"key": self.key, "kind": self.kind, "name": self.name, "namespace": self.namespace,
                "fields": self.fields, "before": self.before, "after": self.after}


def change_report(changes, diff=False):
    """The result every module returns for its writes: {changed, changes} (see the module docstring).

    `diff` is KubegpuModule's to add (from `changes`, only under --diff); diff=True builds it here too, for a caller
    outside a module. Not by default: on thousands of nodes it was a quarter of the module's own time (a deep copy
    per node)."""
    done = [c.as_dict() for c in changes if c is not None and c.changed]
    out = {"changed": bool(done), "changes": done}
    if diff:
        out["diff"] = diff_of(done)
    return out


def _target(obj):
    meta = obj["metadata"]
    return obj["kind"], meta["name"], meta.get("namespace")


def planned_change(obj, current):
    """The Change that applying `obj` over `current` (None: absent) makes, computed without a request."""
    kind, name, namespace = _target(obj)
    desired_part = dict((k, v) for k, v in obj.items() if k not in ("apiVersion", "kind"))
    if current is None:
        return Change(kind, name, namespace, ["(new object)"], before=None, after=desired_part)
    paths = difference_paths(desired_part, current)
    return Change(kind, name, namespace, [dotted(p) for p in paths], before=subset(current, paths),
                  after=subset(merged(current, desired_part), paths))


def apply_object(cluster, obj, check_mode, current=None, current_known=False, field_manager=FIELD_MANAGER,
                 validate=True):
    """Server-side apply `obj` (the fields we own) if the live object differs. Returns a Change.

    Pass `current` (with current_known=True) when a list call already fetched it, to save a GET. Stages that
    own different fields of one object (the ClusterPolicy) use different field managers: an apply under one
    manager removes the fields that manager applied before and no longer sends. In check mode a changed object
    is sent as a dry run (validate=False: only computed, for a module that validates in a step of its own).
    """
    kind, name, namespace = _target(obj)
    if not current_known:
        current = cluster.get(obj["apiVersion"], kind, name, namespace)
    desired_part = dict((k, v) for k, v in obj.items() if k not in ("apiVersion", "kind"))
    change = planned_change(obj, current)
    if not change.changed:
        return change
    if check_mode:
        if validate:
            dry_run_apply(cluster, obj, field_manager)
        return change
    resource = cluster.resource(obj["apiVersion"], kind)
    if resource is None:
        raise ClusterError("{0} {1}: the API server does not serve {2} (is its operator installed?)".format(
            kind, name, obj["apiVersion"]))
    try:
        cluster.write("apply {0} {1}".format(kind, _title(name, namespace)),
                      lambda: cluster.dynamic.server_side_apply(resource, body=obj, name=name, namespace=namespace,
                                                                field_manager=field_manager, force_conflicts=True),
                      verify=lambda: _in_place(cluster, obj["apiVersion"], kind, name, namespace, desired_part))
    except DynamicApiError as e:
        raise ClusterError(describe_api_error("apply {0} {1}".format(kind, name), e))
    return change


def _title(name, namespace):
    return "{0}/{1}".format(namespace, name) if namespace else name


def _in_place(cluster, api_version, kind, name, namespace, desired):
    """Whether the live object already has every field of `desired` (None: the field is absent)."""
    live = cluster.get(api_version, kind, name, namespace)
    return live is not None and not difference_paths(desired, live)


def patch_labels(cluster, api_version, kind, name, labels, check_mode, current_labels, namespace=None):
    """Set (value) or remove (None) labels on one object with a merge patch, only those that differ."""
    return patch_metadata(cluster, api_version, kind, name, labels, {}, check_mode, current_labels, {}, namespace)


def patch_metadata(cluster, api_version, kind, name, labels, annotations, check_mode, current_labels,
                   current_annotations, namespace=None):
    """Set (value) or remove (None) labels and annotations of one object in one merge patch, only those that differ.

    In check mode the patch is sent as a dry run once per distinct patch and kind in a run: the server's answer
    (RBAC, label syntax) depends on the patch, not on which of a thousand nodes gets it.
    """
    wanted = dict((k, v) for k, v in labels.items() if (current_labels or {}).get(k) != v)
    notes = dict((k, v) for k, v in (annotations or {}).items() if (current_annotations or {}).get(k) != v)
    before, after = {}, {}
    if wanted:
        before["labels"] = dict((k, (current_labels or {}).get(k)) for k in wanted)
        after["labels"] = wanted
    if notes:
        before["annotations"] = dict((k, (current_annotations or {}).get(k)) for k in notes)
        after["annotations"] = notes
    change = Change(kind, name, namespace, sorted(["metadata.labels." + k for k in wanted] +
                                                  ["metadata.annotations." + k for k in notes]),
                    before={"metadata": before} if before else None, after={"metadata": after} if after else None)
    if not change.changed:
        return change
    patch = {"metadata": after}
    if check_mode:
        seen = getattr(cluster, "_dry_run_patches", None)
        if seen is None:
            seen = cluster._dry_run_patches = set()
        fingerprint = (api_version, kind, namespace, repr(sorted(wanted.items())), repr(sorted(notes.items())))
        if fingerprint not in seen:
            seen.add(fingerprint)
            dry_run_patch(cluster, api_version, kind, name, patch, namespace)
        return change
    change.written = patch_object(cluster, api_version, kind, name, patch, namespace)
    return change


def dry_run_patch(cluster, api_version, kind, name, patch, namespace=None):
    """A merge patch sent as a dry run (nothing stored); raises ClusterError with the server's reason."""
    resource = cluster.resource(api_version, kind)
    try:
        cluster.dynamic.patch(resource, body=patch, name=name, namespace=namespace,
                              content_type="application/merge-patch+json", dry_run="All", serializer=plain_json)
    except DynamicApiError as e:
        raise ClusterError(_refused("patch", kind, _title(name, namespace), api_version, e))


def patch_object(cluster, api_version, kind, name, patch, namespace=None):
    """A JSON merge patch, for fields that server-side apply would take ownership of from others. Returns the server's
    answer as plain JSON (None when a retry found the patch in place already)."""
    resource = cluster.resource(api_version, kind)
    try:
        # The answer stays plain JSON: decoding it into the dynamic client's ResourceInstance cost more CPU than
        # the request itself, a thousand times in a roll-out.
        answer = cluster.write("patch {0} {1}".format(kind, _title(name, namespace)),
                               lambda: cluster.dynamic.patch(resource, body=patch, name=name, namespace=namespace,
                                                             content_type="application/merge-patch+json",
                                                             serializer=plain_json),
                               verify=lambda: _in_place(cluster, api_version, kind, name, namespace, patch))
    except DynamicApiError as e:
        raise ClusterError(describe_api_error("patch {0} {1}".format(kind, name), e))
    return answer if isinstance(answer, dict) else None


def apply_configmap(cluster, name, namespace, data, check_mode, current=None, current_known=False,
                    field_manager=FIELD_MANAGER):
    """Apply a ConfigMap whose `data` we own whole: keys we no longer send are removed (server-side apply drops
    fields a manager stops sending), so the comparison is exact rather than a subset."""
    if not current_known:
        current = cluster.get("v1", "ConfigMap", name, namespace)
    have = (current or {}).get("data") or {}
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}
    if current is not None and have == data:
        return Change("ConfigMap", name, namespace)
    keys = sorted(k for k in set(have) | set(data) if have.get(k) != data.get(k))
    fields = ["data." + k for k in keys] if current else ["(new object)"]
    change = Change("ConfigMap", name, namespace, fields,
                    before={"data": dict((k, have.get(k)) for k in keys)} if current else None,
                    after={"data": dict((k, data.get(k)) for k in keys)} if current else
                    {"metadata": body["metadata"], "data": data})
    if check_mode:
        dry_run_apply(cluster, body, field_manager)
    else:
        resource = cluster.resource("v1", "ConfigMap")
        try:
            cluster.write("apply ConfigMap {0}/{1}".format(namespace, name),
                          lambda: cluster.dynamic.server_side_apply(resource, body=body, name=name, namespace=namespace,
                                                                    field_manager=field_manager, force_conflicts=True),
                          verify=lambda: _configmap_holds(cluster, name, namespace, data))
        except DynamicApiError as e:
            raise ClusterError(describe_api_error("apply ConfigMap {0}/{1}".format(namespace, name), e))
    return change


def _configmap_holds(cluster, name, namespace, data):
    live = cluster.get("v1", "ConfigMap", name, namespace)
    return live is not None and (live.get("data") or {}) == data


def update_object(cluster, api_version, kind, name, mutate, namespace=None, field_manager=None, check_mode=False):
    """Read-modify-write: `mutate(obj)` changes a copy of the live object in place and returns whether it did.

    The update carries the resourceVersion it read; on 409 (someone wrote in between) the object is read
    again and `mutate` applied to the new version, within the retry budget. A try that may have reached the
    server is never sent blindly again: the next try re-reads, and stops when `mutate` finds nothing to do.
    Returns whether an update was sent. For fields shared with other writers, where apply would take them over.
    field_manager names the writer in managedFields (the client library's default otherwise). In check mode the
    update is sent once as a dry run.
    """
    resource = cluster.resource(api_version, kind)
    if resource is None:
        raise ClusterError("{0} {1}: the API server does not serve {2}".format(kind, name, api_version))
    sent = []

    def attempt():
        live = cluster.get(api_version, kind, name, namespace)
        if live is None:
            raise ClusterError("{0} {1} does not exist".format(kind, _title(name, namespace)))
        if not mutate(live):
            return
        extra = {"field_manager": field_manager} if field_manager else {}
        if check_mode:
            extra["dry_run"] = "All"
        cluster.dynamic.replace(resource, body=live, name=name, namespace=namespace, **extra)
        sent.append(True)

    if check_mode:
        try:
            attempt()
        except DynamicApiError as e:
            raise ClusterError(_refused("update", kind, _title(name, namespace), api_version, e))
        return bool(sent)
    try:
        cluster.retrier.call("update {0} {1}".format(kind, _title(name, namespace)), attempt, resend=True,
                             retry_conflicts=True)
    except DynamicApiError as e:
        raise ClusterError(describe_api_error("update {0} {1}".format(kind, name), e))
    return bool(sent)


def _refused(verb, kind, title, api_version, e):
    if getattr(e, "status", None) in (401, 403):
        return describe_api_error("dry-run {0} {1} {2}".format(verb, kind, title), e)
    summary = getattr(e, "summary", None)
    reason = summary() if callable(summary) else e
    return ("{0} {1}: the API server refused it in a dry run (HTTP {2}), so nothing was written: {3} Check the field "
            "names and values against the {0} schema ({4}).".format(kind, title, getattr(e, "status", None), reason,
                                                                    api_version))


def dry_run_apply(cluster, obj, field_manager=FIELD_MANAGER):
    """Ask the API server to validate `obj` with a server-side apply dry run (nothing is stored).

    Strict field validation: a misspelt field is refused rather than silently dropped. Raises ClusterError with
    the server's own message, so a field it refuses (a CEL expression that does not compile, a value out of
    range) is reported before anything is written. Returns False, sending nothing that fails, when the object's
    namespace does not exist yet (a run that creates it validates its objects when it writes them).
    """
    kind, name, namespace = _target(obj)
    resource = cluster.resource(obj["apiVersion"], kind)
    if resource is None:
        raise ClusterError("{0} {1}: the API server does not serve {2} (is its operator installed?)".format(
            kind, name, obj["apiVersion"]))
    try:
        cluster.dynamic.server_side_apply(resource, body=obj, name=name, namespace=namespace,
                                          field_manager=field_manager, force_conflicts=True, dry_run="All",
                                          query_params=[("fieldValidation", "Strict")])
    except NotFoundError:
        if namespace:
            return False
        raise
    except DynamicApiError as e:
        raise ClusterError(_refused("apply", kind, _title(name, namespace), obj["apiVersion"], e))
    return True


def delete_object(cluster, obj, check_mode):
    """Delete an object we own and no longer want. Returns a Change with its fields before."""
    kind, name, namespace = _target(obj)
    before = dict((k, obj.get(k)) for k in ("metadata", "spec") if k in obj)
    change = Change(kind, name, namespace, ["(deleted)"], before=before, after=None)
    try:
        cluster.resource(obj["apiVersion"], kind).delete(name=name, namespace=namespace,
                                                         **({"dry_run": "All"} if check_mode else {}))
    except NotFoundError:
        pass
    except DynamicApiError as e:
        raise ClusterError(describe_api_error("delete {0} {1}".format(kind, name), e))
    return change
