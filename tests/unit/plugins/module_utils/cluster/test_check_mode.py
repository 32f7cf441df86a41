# -*- coding: utf-8 -*-
"""Check mode means one thing for every write: a server-side dry run of what differs, and a Change keyed by object."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster import apply


class Recorder(object):
    """A dynamic client and resource stand-in that records every call."""

    def __init__(self):
        self.calls = []

    def server_side_apply(self, resource, **kwargs):
        self.calls.append(("apply", kwargs.get("name"), kwargs.get("dry_run"), kwargs.get("query_params")))

    def patch(self, resource, **kwargs):
        self.calls.append(("patch", kwargs.get("name"), kwargs.get("dry_run"), None))

    def delete(self, name=None, namespace=None, **kwargs):
        self.calls.append(("delete", name, kwargs.get("dry_run"), None))


class FakeCluster(object):
    def __init__(self, live=None):
        self.dynamic = Recorder()
        self.live = live or {}

    def resource(self, api_version, kind):
        return self.dynamic

    def get(self, api_version, kind, name, namespace=None):
        return self.live.get((kind, name))

    def write(self, what, send, verify=None):
        raise AssertionError("check mode must not write: " + what)


def test_apply_in_check_mode_dry_runs_only_what_differs():
    live = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": {"k": "old"}}
    cluster = FakeCluster({("ConfigMap", "c"): live})
    obj = dict(live, data={"k": "new"})
    change = apply.apply_object(cluster, obj, True)
    assert cluster.dynamic.calls == [("apply", "c", "All", [("fieldValidation", "Strict")])]
    assert change.as_dict() == {"key": "ConfigMap/n/c", "kind": "ConfigMap", "name": "c", "namespace": "n",
                                "fields": ["data.k"], "before": {"data": {"k": "old"}}, "after": {"data": {"k": "new"}}}
    cluster.dynamic.calls = []
    assert not apply.apply_object(cluster, live, True).changed and cluster.dynamic.calls == []
    assert apply.apply_object(cluster, obj, True, validate=False).changed and cluster.dynamic.calls == []


def test_label_patches_are_dry_run_once_per_distinct_patch_and_deletes_are_dry_run():
    cluster = FakeCluster()
    for node in ("a", "b"):
        change = apply.patch_labels(cluster, "v1", "Node", node, {"pool": "x", "gone": None}, True, {"gone": "1"})
    assert [c[:3] for c in cluster.dynamic.calls] == [("patch", "a", "All")]
    assert change.key == "Node/b" and change.before == {"metadata": {"labels": {"gone": "1", "pool": None}}}
    assert change.after == {"metadata": {"labels": {"gone": None, "pool": "x"}}}
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}}
    assert apply.delete_object(cluster, obj, True).fields == ["(deleted)"]
    assert cluster.dynamic.calls[-1][:3] == ("delete", "c", "All")


def test_change_report_is_the_result_contract():
    changes = [apply.Change("Node", "a", None, ["metadata.labels.x"], {"metadata": {"labels": {"x": None}}},
                            {"metadata": {"labels": {"x": "1"}}}), apply.Change("ConfigMap", "c", "n")]
    report = apply.change_report(changes, diff=True)
    assert report["changed"] is True and [c["key"] for c in report["changes"]] == ["Node/a"]
    assert report["diff"] == {"before": {"Node/a": {"metadata": {"labels": {"x": None}}}},
                              "after": {"Node/a": {"metadata": {"labels": {"x": "1"}}}}}
    assert apply.change_report([], diff=True) == {"changed": False, "changes": [], "diff": {"before": {}, "after": {}}}
    # By default no diff is built (KubegpuModule builds it from `changes`, only under --diff).
    assert apply.change_report(changes) == dict((k, v) for k, v in report.items() if k != "diff")
