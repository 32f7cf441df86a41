# -*- coding: utf-8 -*-
"""The one converge pipeline: dry runs before the first write, namespaces, apply order, prune, check mode, no-op."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster import converge
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import change_report, planned_change
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import ClusterError, DynamicApiError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import MANAGED_BY
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.objects import merged

MARK = {"app.kubernetes.io/part-of": "test-stage"}
SERVED = ("v1", "kubegpu.test/v1")


class Answer(object):
    """The API server's answer to a request it refuses (422), as the dynamic client reads it."""

    def __init__(self, message):
        self.status, self.reason, self.headers = 422, "Unprocessable Entity", {"Content-Type": "application/json"}
        self.body = json.dumps({"kind": "Status", "message": message})


class Resource(object):
    def __init__(self, cluster, kind):
        self.cluster, self.kind = cluster, kind

    def delete(self, name=None, namespace=None, **kwargs):
        dry = kwargs.get("dry_run") == "All"
        self.cluster.calls.append(("dry-run delete" if dry else "delete", converge.key(
            {"kind": self.kind, "metadata": {"name": name, "namespace": namespace}})))
        if not dry:
            self.cluster.store.pop(converge.key({"kind": self.kind, "metadata": {"name": name,
                                                                                 "namespace": namespace}}))


class FakeCluster(object):
    """The API server as far as the pipeline sees it: a store of objects, the kinds served, every request in order.

    A dry run stores nothing; a real apply into a namespace that does not exist fails, as the server would."""

    def __init__(self, objects=(), served=SERVED, refuse=None):
        self.store = dict((converge.key(o), copy.deepcopy(o)) for o in objects)
        self.served, self.refuse = served, refuse or {}
        self.calls = []
        self.dynamic = self

    def resource(self, api_version, kind):
        return Resource(self, kind) if api_version in self.served else None

    def get(self, api_version, kind, name, namespace=None):
        raise AssertionError("the pipeline reads nothing: the stage observed it")

    def write(self, what, send, verify=None):
        return send()

    def server_side_apply(self, resource, body=None, name=None, namespace=None, field_manager=None, dry_run=None,
                          **kwargs):
        k = converge.key(body)
        self.calls.append(("dry-run apply" if dry_run else "apply", k, field_manager))
        if k in self.refuse:
            raise DynamicApiError(Answer(self.refuse[k]))
        if dry_run:
            return
        assert namespace is None or converge.key(ns(namespace)) in self.store, "namespace %s missing" % namespace
        self.store[k] = merged(self.store.get(k) or {}, copy.deepcopy(body))

    def ours(self):
        return dict((k, o) for k, o in self.store.items()
                    if all(((o["metadata"].get("labels") or {}).get(m) == v for m, v in MARK.items())))

    def namespaces(self):
        return dict((o["metadata"]["name"], o) for o in self.store.values() if o["kind"] == "Namespace")

    def writes(self):
        return [c for c in self.calls if not c[0].startswith("dry-run")]


def ns(name, labels=None):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": dict({"name": name}, **(
        {"labels": labels} if labels is not None else {}))}


def thing(name, namespace=None, kind="Thing", value=1):
    meta = {"name": name, "labels": dict(MARK)}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "kubegpu.test/v1", "kind": kind, "metadata": meta, "spec": {"value": value}}


def pipeline(cluster, check=False, **kwargs):
    """The pipeline as a stage builds it: what it observed (its objects by its marks, the namespaces) passed in."""
    ours = cluster.ours()
    kwargs.setdefault("namespaces", cluster.namespaces())
    return converge.Converge(cluster, check, "kubegpu.platform/test", live=ours, ours=ours, **kwargs)


def test_key_and_namespace_object_are_the_ones_every_stage_uses():
    assert converge.key(thing("a", "ns")) == "Thing/ns/a" and converge.key(thing("a")) == "Thing/a"
    made = converge.namespace_object("llm", {"openshift.io/cluster-monitoring": "true"})
    assert made == ns("llm", dict({"openshift.io/cluster-monitoring": "true"}, **MANAGED_BY))


def test_every_dry_run_comes_before_the_first_write_and_none_for_a_namespace_still_to_make():
    cluster = FakeCluster([ns("old"), thing("a", "old", value=0)])
    desired = [thing("a", "old"), thing("b", "new"), thing("c")]
    changes = pipeline(cluster).run(desired)
    kinds = [c[0] for c in cluster.calls]
    assert kinds.index("apply") > max(i for i, k in enumerate(kinds) if k == "dry-run apply")
    assert [c[1] for c in cluster.calls if c[0] == "dry-run apply"] == ["Thing/old/a", "Thing/c"]
    # The namespace first, then the objects in plan order, every write under the stage's field manager.
    assert cluster.writes() == [("apply", "Namespace/new", "kubegpu.platform/test"),
                                ("apply", "Thing/old/a", "kubegpu.platform/test"),
                                ("apply", "Thing/new/b", "kubegpu.platform/test"),
                                ("apply", "Thing/c", "kubegpu.platform/test")]
    assert [c.key for c in changes] == ["Namespace/new", "Thing/old/a", "Thing/new/b", "Thing/c"]
    assert changes[1].fields == ["spec.value"] and changes[2].fields == ["(new object)"]


def test_a_namespace_the_run_creates_carries_the_uninstall_mark_and_its_planned_labels():
    cluster = FakeCluster([ns("user-made")])
    run = pipeline(cluster, namespace_labels={"new": {"team": "x"}})
    run.run([thing("a", "new"), thing("b", "new"), thing("c", "user-made")])
    assert run.created == ["new"]
    assert cluster.store["Namespace/new"]["metadata"]["labels"] == dict(MANAGED_BY, team="x")
    # A namespace that exists is neither created nor marked.
    assert "labels" not in cluster.store["Namespace/user-made"]["metadata"]


def test_a_namespace_the_stage_renders_is_applied_in_plan_order_marked_only_when_the_run_creates_it():
    cluster = FakeCluster([ns("user-made")])
    run = pipeline(cluster)
    changes = run.run([ns("team-a"), ns("user-made"), thing("q", "team-a")])
    assert run.created == []    # rendered: not created a second time
    assert cluster.writes() == [("apply", "Namespace/team-a", "kubegpu.platform/test"),
                                ("apply", "Thing/team-a/q", "kubegpu.platform/test")]
    assert cluster.store["Namespace/team-a"]["metadata"]["labels"] == MANAGED_BY
    assert "labels" not in cluster.store["Namespace/user-made"]["metadata"]
    assert [c.key for c in changes] == ["Namespace/team-a", "Thing/team-a/q"]


def test_prune_deletes_only_ours_no_longer_wanted_in_the_stages_kind_order():
    theirs = dict(thing("theirs", "n"), metadata={"name": "theirs", "namespace": "n"})
    cluster = FakeCluster([ns("n"), thing("keep", "n"), thing("z-class", kind="Class"), thing("b", "n"),
                           thing("a", "n", kind="Claim"), theirs])
    changes = pipeline(cluster, prune_kinds=("Claim", "Thing")).run([thing("keep", "n")])
    assert cluster.writes() == [("delete", "Claim/n/a"), ("delete", "Thing/n/b"), ("delete", "Class/z-class")]
    assert "Thing/n/theirs" in cluster.store and "Thing/n/keep" in cluster.store
    assert [c.fields for c in changes] == [["(deleted)"]] * 3
    # ours={}: a stage run with prune off deletes nothing.
    cluster = FakeCluster([ns("n"), thing("old", "n")])
    converge.Converge(cluster, False, live=cluster.ours(), ours={}, namespaces=cluster.namespaces()).run([])
    assert cluster.calls == []


def test_check_mode_writes_nothing_and_dry_runs_every_write():
    before = [ns("n"), thing("a", "n", value=0), thing("stale", "n")]
    cluster = FakeCluster(before)
    changes = pipeline(cluster, check=True).run([thing("a", "n"), thing("b", "new")])
    assert cluster.writes() == []
    assert cluster.calls == [("dry-run apply", "Thing/n/a", "kubegpu.platform/test"),
                             ("dry-run apply", "Namespace/new", "kubegpu.platform/test"),
                             ("dry-run delete", "Thing/n/stale")]
    assert cluster.store == FakeCluster(before).store
    # The plan a check run shows is the real run's.
    real = FakeCluster(before)
    assert change_report(pipeline(real).run([thing("a", "n"), thing("b", "new")])) == change_report(changes)


def test_a_second_run_changes_nothing_and_sends_nothing():
    cluster = FakeCluster([ns("n"), thing("stale", "n")])
    desired = [ns("team"), thing("a", "n"), thing("b", "new"), thing("c")]
    assert change_report(pipeline(cluster).run(desired))["changed"]
    cluster.calls = []
    for check in (True, False):
        assert change_report(pipeline(cluster, check=check).run(desired)) == {
            "changed": False, "changes": []}
    assert cluster.calls == []


def test_a_refused_dry_run_names_the_object_and_nothing_is_written():
    cluster = FakeCluster([ns("n")], refuse={"Thing/n/bad": "spec.value: Invalid value: 7"})
    with pytest.raises(ValueError) as refused:
        pipeline(cluster, refused=lambda obj, e: ValueError("%s refused: %s" % (converge.key(obj), e))).run(
            [thing("good", "n"), thing("bad", "n", value=7), thing("new", "other")])
    assert str(refused.value).startswith("Thing/n/bad refused: Thing n/bad: the API server refused it in a dry run")
    assert "spec.value: Invalid value: 7" in str(refused.value)
    assert cluster.writes() == []
    # Without a stage's own refusal, the API server's, which names the object too.
    with pytest.raises(ClusterError, match="Thing n/bad: the API server refused it in a dry run"):
        pipeline(cluster).run([thing("bad", "n", value=7)])
    assert cluster.writes() == []


def test_a_kind_not_served_is_refused_before_any_write_unless_the_run_installs_it_first():
    cluster = FakeCluster([ns("n")], served=("v1",))
    with pytest.raises(ClusterError) as refused:
        pipeline(cluster, missing={"Thing": "install the thing operator"}).run([thing("a", "n")])
    assert str(refused.value) == ("Thing/n/a: the API server does not serve kubegpu.test/v1 Thing: install the thing "
                                  "operator. Nothing was written.")
    assert cluster.calls == []
    # A check run before the group's operator is installed: shown as new, not dry-run.
    changes = pipeline(cluster, check=True, later=("kubegpu.test",)).run([thing("a", "n")])
    assert [c.key for c in changes] == ["Thing/n/a"] and cluster.calls == []


def test_an_immutable_spec_is_replaced_delete_then_create():
    cluster = FakeCluster([ns("n"), thing("a", "n", value=0), thing("b", "n", kind="Label", value=0)])

    def replace(obj, change):
        return obj["kind"] == "Thing" and "spec.value" in change.fields

    check = pipeline(cluster, check=True, replace=replace).run([thing("a", "n"), thing("b", "n", kind="Label")])
    # The replaced object is not dry-run as an apply (the server would refuse the change): its delete is.
    assert cluster.calls == [("dry-run apply", "Label/n/b", "kubegpu.platform/test"),
                             ("dry-run delete", "Thing/n/a")]
    assert check[0].fields == [converge.REPLACED, "spec.value"]
    cluster.calls = []
    pipeline(cluster, replace=replace).run([thing("a", "n"), thing("b", "n", kind="Label")])
    assert cluster.writes() == [("delete", "Thing/n/a"), ("apply", "Thing/n/a", "kubegpu.platform/test"),
                                ("apply", "Label/n/b", "kubegpu.platform/test")]


def test_hooks_run_between_the_steps():
    cluster = FakeCluster([ns("n"), thing("stale", "n")])
    seen = []

    def step(name):
        def hook():
            seen.append((name, [c[:2] for c in cluster.writes()]))
            return [planned_change(thing(name), None)] if name != "validated" else None
        return hook

    changes = pipeline(cluster).run([thing("a", "new")], validated=step("validated"),
                                    namespaces_ready=step("namespaces_ready"), applied=step("applied"))
    assert seen == [("validated", []), ("namespaces_ready", [("apply", "Namespace/new")]),
                    ("applied", [("apply", "Namespace/new"), ("apply", "Thing/new/a")])]
    assert [c.key for c in changes] == ["Namespace/new", "Thing/namespaces_ready", "Thing/new/a", "Thing/applied",
                                        "Thing/n/stale"]
