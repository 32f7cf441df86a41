# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writes: server-side apply with one field manager, label patches, each only when something differs.

Every write function takes `check_mode`: then it sends nothing and returns what it would do, so a check run
writes nothing (the audit log shows no mutating request) and shows the same plan. A second run finds nothing
different and sends nothing.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import (
    ClusterError,
    DynamicApiError,
    NotFoundError,
    describe_api_error,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.objects import differences, merged, pick

FIELD_MANAGER = "kubegpu.platform"


class Change(object):
    """What a write did (or would do): whether anything changed, the fields, and before/after of those fields."""

    def __init__(self, kind, name, namespace=None, fields=None, before=None, after=None):
        self.kind, self.name, self.namespace = kind, name, namespace
        self.fields = fields or []
        self.before, self.after = before, after

    @property
    def changed(self):
        return bool(self.fields)

    def as_dict(self):
        return {"kind": self.kind, "name": self.name, "namespace": self.namespace, "fields": self.fields,
                "before": self.before, "after": self.after}


def _target(obj):
    meta = obj["metadata"]
    return obj["kind"], meta["name"], meta.get("namespace")


def apply_object(cluster, obj, check_mode, current=None, current_known=False, field_manager=FIELD_MANAGER):
    """Server-side apply `obj` (the fields we own) if the live object differs. Returns a Change.

    Pass `current` (with current_known=True) when a list call already fetched it, to save a GET. Stages that
    own different fields of one object (the ClusterPolicy) use different field managers: an apply under one
    manager removes the fields that manager applied before and no longer sends.
    """
    kind, name, namespace = _target(obj)
    if not current_known:
        current = cluster.get(obj["apiVersion"], kind, name, namespace)
    desired_part = dict((k, v) for k, v in obj.items() if k not in ("apiVersion", "kind"))
    fields = differences(desired_part, current) if current is not None else ["(new object)"]
    change = Change(kind, name, namespace, fields,
                    before=pick(current, desired_part) if current is not None else None,
                    after=merged(pick(current, desired_part) if current else {}, desired_part))
    if not change.changed or check_mode:
        return change
    resource = cluster.resource(obj["apiVersion"], kind)
    if resource is None:
        raise ClusterError("{0} {1}: the API server does not serve {2} (is its operator installed?)".format(
            kind, name, obj["apiVersion"]))
    try:
        cluster.dynamic.server_side_apply(resource, body=obj, name=name, namespace=namespace,
                                          field_manager=field_manager, force_conflicts=True)
    except DynamicApiError as e:
        raise ClusterError(describe_api_error("apply {0} {1}".format(kind, name), e))
    return change


def patch_labels(cluster, api_version, kind, name, labels, check_mode, current_labels, namespace=None):
    """Set (value) or remove (None) labels on one object with a merge patch, only those that differ."""
    wanted = dict((k, v) for k, v in labels.items() if (current_labels or {}).get(k) != v)
    change = Change(kind, name, namespace, sorted("metadata.labels." + k for k in wanted),
                    before=dict((k, (current_labels or {}).get(k)) for k in wanted), after=wanted)
    if not wanted or check_mode:
        return change
    patch_object(cluster, api_version, kind, name, {"metadata": {"labels": wanted}}, namespace)
    return change


def patch_object(cluster, api_version, kind, name, patch, namespace=None):
    """A JSON merge patch, for fields that server-side apply would take ownership of from others."""
    resource = cluster.resource(api_version, kind)
    try:
        cluster.dynamic.patch(resource, body=patch, name=name, namespace=namespace,
                              content_type="application/merge-patch+json")
    except DynamicApiError as e:
        raise ClusterError(describe_api_error("patch {0} {1}".format(kind, name), e))


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
    fields = sorted("data." + k for k in set(have) | set(data) if have.get(k) != data.get(k)) if current else \
        ["(new object)"]
    change = Change("ConfigMap", name, namespace, fields, before={"data": have} if current else None,
                    after={"data": data})
    if not check_mode:
        try:
            cluster.dynamic.server_side_apply(cluster.resource("v1", "ConfigMap"), body=body, name=name,
                                              namespace=namespace, field_manager=field_manager, force_conflicts=True)
        except DynamicApiError as e:
            raise ClusterError(describe_api_error("apply ConfigMap {0}/{1}".format(namespace, name), e))
    return change


def dry_run_apply(cluster, obj, field_manager=FIELD_MANAGER):
    """Ask the API server to validate `obj` with a server-side apply dry run (nothing is stored).

    Raises ClusterError with the server's own message, so a field it refuses (a CEL expression that does not
    compile, a value out of range) is reported before anything is written.
    """
    kind, name, namespace = _target(obj)
    resource = cluster.resource(obj["apiVersion"], kind)
    if resource is None:
        raise ClusterError("{0} {1}: the API server does not serve {2}".format(kind, name, obj["apiVersion"]))
    try:
        cluster.dynamic.server_side_apply(resource, body=obj, name=name, namespace=namespace,
                                          field_manager=field_manager, force_conflicts=True, dry_run="All")
    except DynamicApiError as e:
        raise ClusterError(describe_api_error("validate {0} {1}".format(kind, name), e))


def delete_object(cluster, obj, check_mode):
    """Delete an object we own and no longer want. Returns a Change with its fields before."""
    kind, name, namespace = _target(obj)
    before = dict((k, obj.get(k)) for k in ("metadata", "spec") if k in obj)
    change = Change(kind, name, namespace, ["(deleted)"], before=before, after=None)
    if check_mode:
        return change
    try:
        cluster.resource(obj["apiVersion"], kind).delete(name=name, namespace=namespace)
    except NotFoundError:
        pass
    except DynamicApiError as e:
        raise ClusterError(describe_api_error("delete {0} {1}".format(kind, name), e))
    return change
