# -*- coding: utf-8 -*-
"""The rounds of one wait: changes and progress lines carried to the last round; the progress line printed."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import Rounds
from ansible_collections.kubegpu.platform.plugins.plugin_utils.progress import progress_line

PARAMS = {"name": "cp", "wait_round": 5, "wait_started": 1000.0}


def test_a_later_round_reports_what_earlier_rounds_changed(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    first = Rounds(PARAMS)
    change = {"key": "ClusterPolicy/cp", "before": None, "after": {"spec": {}}}
    r1 = {"changed": True, "changes": [change], "ready": False, "progress": {"lines": ["0 s: cp: no status yet"]}}
    first.merge(r1, last=False)
    assert os.path.exists(first.path)
    first.memory.setdefault("ClusterPolicy/cp", {})["cp"] = ["waiting", "no status yet", 1000.0]

    second = Rounds(PARAMS)
    assert second.path == first.path and second.state["carried"]["changes"] == [change]
    r2 = {"changed": False, "changes": [], "ready": True,
          "progress": {"lines": ["9 s: cp: ready"]}}
    second.merge(r2, last=True)
    assert r2["changed"] is True and r2["changes"] == [change]
    assert r2["progress"]["lines"] == ["0 s: cp: no status yet", "9 s: cp: ready"]
    assert not os.path.exists(first.path)
    assert Rounds(dict(PARAMS, wait_started=2000.0)).state["carried"] == {}   # another wait


def test_approvals_of_an_earlier_round_are_reported(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    plan = {"name": "install-abc", "csvs": ["gpu.v2"]}
    Rounds(PARAMS).merge({"changed": True, "changes": [], "approved_plans": [plan], "ready": False}, last=False)
    final = {"changed": False, "changes": [], "approved_plans": [], "ready": True}
    Rounds(PARAMS).merge(final, last=True)
    assert final["changed"] is True and final["approved_plans"] == [plan] and final["changes"] == []


def test_progress_line_only_for_a_round_that_is_not_over():
    progress = {"summary": "ClusterPolicy/cp: state notReady (4 s)", "expected": "status.state == ready",
                "waited_s": 12.4}
    assert progress_line("localhost", {"ready": False, "progress": progress}) == (
        "[localhost] waiting 12 s for status.state == ready: ClusterPolicy/cp: state notReady (4 s)")
    assert progress_line("localhost", {"ready": True, "progress": progress}) is None
    assert progress_line("localhost", {"ready": False, "failed": True, "progress": progress}) is None
    assert progress_line("localhost", {"changed": False}) is None


def test_the_same_wait_against_two_clusters_keeps_two_records(tmp_path, monkeypatch):
    """One inventory host per cluster: identical task arguments, a different K8S_AUTH_* environment."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", "/clusters/east")
    east = Rounds(PARAMS)
    east.merge({"changed": True, "changes": [{"key": "ClusterPolicy/cp"}], "ready": False}, last=False)
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", "/clusters/west")
    west = Rounds(PARAMS)
    assert west.path != east.path and west.state["carried"] == {}
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", "/clusters/east")
    assert Rounds(PARAMS).state["carried"]["changes"] == [{"key": "ClusterPolicy/cp"}]


def test_a_roll_out_of_several_rounds_is_reported_whole_by_the_last(tmp_path, monkeypatch):
    """Per-node maps are merged, not appended: a node's later state replaces its earlier one, and a node only an
    earlier round saw stays in the last round's report."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    first = {"changed": True, "ready": False, "rollout": {"llm": {
        "gpu-0": {"state": "waiting", "detail": "started", "seconds": 0.5},
        "gpu-1": {"state": "waiting", "detail": "mig.config.state pending", "seconds": 1.0}}}}
    Rounds(PARAMS).merge(first, last=False)
    final = {"changed": False, "ready": True, "rollout": {"llm": {
        "gpu-1": {"state": "done", "detail": "ready", "seconds": 5.0}}, "released": {
        "gpu-9": {"state": "done", "detail": "ready", "seconds": 5.5}}}}
    Rounds(PARAMS).merge(final, last=True)
    assert final["rollout"] == {
        "llm": {"gpu-0": {"state": "waiting", "detail": "started", "seconds": 0.5},
                "gpu-1": {"state": "done", "detail": "ready", "seconds": 5.0}},
        "released": {"gpu-9": {"state": "done", "detail": "ready", "seconds": 5.5}}}
