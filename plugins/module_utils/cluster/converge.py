# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One converge pipeline: how every stage that writes a set of objects writes it.

A stage renders its objects (in the order they must be written) and observes what it wrote before (the objects
carrying its marks: its label selector); `Converge.run` does the rest, in named steps:

1. plan: each object against its live version (no request); only those that differ are written;
2. validate: each object to write is sent as a server-side dry run before the first write, so a refusal names
   the object and nothing was written. Not dry-run: an object in a namespace the run still has to create (the
   server would only say the namespace is missing), an object of an API group the run installs first (not served
   yet), and an object replaced whole (its spec is immutable: the server would refuse the change it replaces);
3. namespaces: the namespaces the objects to write live in and that do not exist yet are created, marked as the
   collection's (uninstall's `mark_created_namespace`); a Namespace the stage renders itself gets the same mark;
4. apply: in plan order, under the stage's field manager;
5. prune: what carries the stage's marks and is no longer rendered, in the stage's kind order (objects that name
   others first).

Check mode is the same run: steps 2 and 3 send their dry runs, step 4 sends nothing more, prunes are dry-run
deletes. A second run finds nothing different and sends nothing. Steps a stage needs in between (a wait, a
read-modify-write of another object) are hooks of `run`, not loops of the stage's own.

Every step returns the `Change`s of apply.py, in write order: `change_report` turns them into the module's result.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import (
    apply_object,
    delete_object,
    dry_run_apply,
    planned_change,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import ClusterError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import FIELD_MANAGER
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.objects import object_key
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.uninstall.ownership import (
    mark_created_namespace,
)

REPLACED = "(replaced: spec is immutable)"


def key(obj):
    """How a stage's maps, results and diffs name an object: `kind/namespace/name`, or `kind/name`."""
    meta = obj["metadata"]
    return object_key(obj["kind"], meta["name"], meta.get("namespace"))


def namespace_object(name, labels=None):
    """A Namespace the run creates, with `labels` and the mark that tells the uninstall it is the collection's."""
    return mark_created_namespace({"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": name, "labels": dict(labels or {})}}, None)


class Write(object):
    """One object that differs from the cluster: the object, its live version (None: absent), the Change, and
    whether it is replaced whole (deleted, then created) rather than applied over."""

    def __init__(self, obj, current, change, replace=False):
        self.obj, self.current, self.change, self.replace = obj, current, change, replace

    @property
    def namespace(self):
        return self.obj["metadata"].get("namespace")


class Converge(object):
    """The converge pipeline of one stage (see the module docstring).

    live: {key: live object} of what the stage compares its objects with (defaults to `ours`).
    ours: {key: live object} of what carries the stage's marks: pruned when no longer rendered ({}: no prune).
    namespaces: {name: live Namespace} of the namespaces that exist; None for a stage that writes only cluster-
      scoped objects (nothing created, nothing skipped).
    namespace_labels: {name: labels} a namespace the run creates carries from the start.
    prune_kinds: kinds in the order their objects are pruned; other kinds after, by name.
    replace(obj, change): whether an object that exists must be replaced whole (an immutable spec changes); it
      may raise the stage's refusal.
    refused(obj, error): the stage's exception for a dry run the API server refused (default: the ClusterError).
    later: API groups the run installs before it writes their objects: while one is not served, its objects are
      shown as new and not dry-run.
    missing: {kind: what to do} when a kind to write is not served.
    """

    def __init__(self, cluster, check_mode, field_manager=FIELD_MANAGER, live=None, ours=None, namespaces=None,
                 namespace_labels=None, prune_kinds=(), replace=None, refused=None, later=(), missing=None):
        self.cluster, self.check_mode, self.field_manager = cluster, check_mode, field_manager
        self.ours = ours or {}
        self.live = self.ours if live is None else live
        self.namespaces = namespaces
        self.namespace_labels = namespace_labels or {}
        self.prune_kinds = tuple(prune_kinds)
        self.replace, self.refused = replace, refused
        self.later = tuple(later)
        self.missing = missing or {}
        self.created = []   # the namespaces the run created (check mode: would create)

    def run(self, desired, validated=None, namespaces_ready=None, applied=None):
        """Every step in order; returns the Changes in write order. Hooks, each called once and returning Changes
        (or None): `validated` after every dry run and before the first write, `namespaces_ready` once the
        namespaces exist, `applied` after the last apply and before the first prune."""
        writes = self.plan(desired)
        self.validate(writes)
        changes = list(_hook(validated))
        changes += self.create_namespaces(writes, desired)
        changes += _hook(namespaces_ready)
        changes += self.apply(writes)
        changes += _hook(applied)
        changes += self.prune(desired)
        return changes

    def current(self, obj):
        if obj["kind"] == "Namespace" and self.namespaces is not None:
            return self.namespaces.get(obj["metadata"]["name"])
        return self.live.get(key(obj))

    def plan(self, desired):
        """[Write] of the objects that differ, in plan order; nothing is sent."""
        writes = []
        for obj in desired:
            current = self.current(obj)
            if obj["kind"] == "Namespace":
                obj = mark_created_namespace(obj, current)
            change = planned_change(obj, current)
            if not change.changed:
                continue
            replace = current is not None and self.replace is not None and bool(self.replace(obj, change))
            writes.append(Write(obj, current, change, replace))
        return writes

    def _made_later(self, obj):
        """Whether the namespace of `obj` is still to be created by this run."""
        namespace = obj["metadata"].get("namespace")
        return bool(namespace) and self.namespaces is not None and namespace not in self.namespaces

    def validate(self, writes):
        """Dry-run each write that can be (see the module docstring); raises before anything is written."""
        for write in writes:
            obj = write.obj
            if write.replace or obj["apiVersion"].split("/")[0] in self.later:
                continue
            if self.cluster.resource(obj["apiVersion"], obj["kind"]) is None:
                raise ClusterError("%s: the API server does not serve %s %s: %s. Nothing was written."
                                   % (key(obj), obj["apiVersion"], obj["kind"],
                                      self.missing.get(obj["kind"], "install its operator first")))
            if self._made_later(obj):
                continue
            try:
                dry_run_apply(self.cluster, obj, self.field_manager)
            except ClusterError as e:
                if self.refused is None:
                    raise
                raise self.refused(obj, e)

    def create_namespaces(self, writes, desired):
        """Create (check mode: dry-run) the namespaces the writes need that neither exist nor are rendered."""
        rendered = set(o["metadata"]["name"] for o in desired if o["kind"] == "Namespace")
        self.created = sorted(set(w.namespace for w in writes if self._made_later(w.obj)) - rendered)
        return [apply_object(self.cluster, namespace_object(ns, self.namespace_labels.get(ns)), self.check_mode,
                             current=None, current_known=True, field_manager=self.field_manager)
                for ns in self.created]

    def apply(self, writes):
        """Apply each write in plan order (check mode: validate sent the dry runs; a replaced object's delete is
        dry-run here)."""
        changes = []
        for write in writes:
            if write.replace:
                delete_object(self.cluster, write.current, self.check_mode)
                write.change.fields = [REPLACED] + write.change.fields
            if not self.check_mode:
                apply_object(self.cluster, write.obj, False, current=None if write.replace else write.current,
                             current_known=True, field_manager=self.field_manager)
            changes.append(write.change)
        return changes

    def prune(self, desired):
        """Delete (check mode: dry-run) what carries the stage's marks and is no longer rendered."""
        wanted = set(key(o) for o in desired)
        stale = [o for k, o in self.ours.items() if k not in wanted]
        return [delete_object(self.cluster, obj, self.check_mode) for obj in sorted(stale, key=self._prune_rank)]

    def _prune_rank(self, obj):
        kind, meta = obj["kind"], obj["metadata"]
        rank = self.prune_kinds.index(kind) if kind in self.prune_kinds else len(self.prune_kinds)
        return rank, kind, meta.get("namespace") or "", meta["name"]


def _hook(step):
    return [c for c in (step() if step is not None else None) or [] if c is not None]


__all__ = ["Converge", "Write", "key", "namespace_object", "REPLACED"]
