# -*- coding: utf-8 -*-
"""The one waiter with a fake reader and clock: predicates per kind, budgets, timeout and failure text, progress."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import (
    FAILED,
    READY,
    WAITING,
    PROGRESS_LOG_ENV,
    Target,
    WaitFailed,
    WaitTimeout,
    api_served,
    condition,
    operand_configs,
    resource_slices,
    state_ready,
    wait_for,
)


class Clock(object):
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


class FakeReader(object):
    """get/list/served_versions answer the next scripted value each call (the last one repeats)."""

    def __init__(self, reads):
        self.reads = list(reads)
        self.calls = []

    def _next(self):
        return self.reads.pop(0) if len(self.reads) > 1 else self.reads[0]

    def get(self, api_version, kind, name, namespace=None):
        self.calls.append(("get", kind, name, namespace))
        return self._next()

    def list(self, api_version, kind, namespace=None, label_selector=None):
        self.calls.append(("list", kind, namespace, label_selector))
        return self._next()

    def served_versions(self, group):
        self.calls.append(("discovery", group))
        return self._next()


def policy(state, conditions=(), generation=1):
    return {"kind": "ClusterPolicy", "metadata": {"name": "cluster-policy", "generation": generation},
            "status": {"state": state, "conditions": list(conditions)} if state else {}}


NOT_READY = {"type": "Ready", "status": "False", "reason": "OperandsNotReady", "message": "driver not ready",
             "observedGeneration": 1}
POLICY = Target("nvidia.com/v1", "ClusterPolicy", name="cluster-policy")


def run(reads, target, predicate, timeout=60, **kwargs):
    clock = Clock()
    reader = FakeReader(reads)
    return wait_for(reader, target, predicate, timeout, interval=2, clock=clock, sleep=clock.sleep, **kwargs), reader


def test_cluster_policy_ready_after_polls_one_get_each():
    outcome, reader = run([policy(None), policy("notReady", [NOT_READY]), policy("ready")], POLICY, state_ready())
    assert outcome.ready and outcome.items == {"cluster-policy": (READY, "ready")}
    assert reader.calls == [("get", "ClusterPolicy", "cluster-policy", None)] * 3
    assert outcome.progress["lines"] == [
        "0 s: ClusterPolicy/cluster-policy: no status yet (0 s)",
        "2 s: ClusterPolicy/cluster-policy: state notReady: Ready=False (reason OperandsNotReady): driver not ready (0 s)",
        "4 s: ClusterPolicy/cluster-policy: ready"]


def test_ready_from_an_older_generation_is_not_ready():
    stale = policy("ready", [dict(NOT_READY, status="True")], generation=2)
    with pytest.raises(WaitTimeout) as err:
        run([stale], POLICY, state_ready(), timeout=4)
    assert "older generation" in str(err.value)


def test_timeout_names_object_expected_last_seen_and_how_long():
    with pytest.raises(WaitTimeout) as err:
        run([policy("notReady", [NOT_READY])], POLICY, state_ready(), timeout=10)
    assert str(err.value) == (
        "ClusterPolicy/cluster-policy: not ready after 10 s (expected status.state == ready); last seen: "
        "state notReady: Ready=False (reason OperandsNotReady): driver not ready for 10 s")
    assert err.value.progress["pending"] == {
        "cluster-policy": "state notReady: Ready=False (reason OperandsNotReady): driver not ready (10 s)"}


def test_ignored_policy_fails_at_once():
    with pytest.raises(WaitFailed) as err:
        run([policy("ignored")], POLICY, state_ready())
    assert "ignored by the GPU Operator" in str(err.value) and "after 0 s" in str(err.value)


def test_budget_returns_not_ready_with_progress_and_started_bounds_the_whole_wait():
    outcome, reader = run([policy("notReady")], POLICY, state_ready(), timeout=60, budget=5, started=990.0)
    assert not outcome.ready and len(reader.calls) == 4       # polls at 0, 2, 4 and 5 s of this call
    assert outcome.progress["waited_s"] == 15.0 and outcome.progress["ready"] == []
    assert outcome.progress["summary"].startswith("ClusterPolicy/cluster-policy: state notReady")
    # a later round, past the whole wait's timeout: the error counts from `started`
    with pytest.raises(WaitTimeout) as err:
        run([policy("notReady")], POLICY, state_ready(), timeout=60, budget=5, started=900.0)
    assert "not ready after 100 s" in str(err.value)


def test_condition_reports_the_failing_condition_and_not_found():
    isvc = {"metadata": {"name": "llm"}, "status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "RevisionMissing", "message": "no revision ready"}]}}
    target = Target("serving.kserve.io/v1beta1", "InferenceService", name="llm", namespace="models")
    with pytest.raises(WaitTimeout) as err:
        run([None, isvc], target, condition("Ready"), timeout=4)
    assert "expected condition Ready=True" in str(err.value)
    assert "last seen: Ready=False (reason RevisionMissing): no revision ready for 2 s" in str(err.value)
    ready = dict(isvc, status={"conditions": [{"type": "Ready", "status": "True"}]})
    assert run([isvc, ready], target, condition("Ready"))[0].ready


def test_condition_failed_reason_stops():
    dep = {"metadata": {"name": "d"}, "status": {"conditions": [
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "stuck"}]}}
    with pytest.raises(WaitFailed):
        run([dep], Target("apps/v1", "Deployment", name="d", namespace="n"),
            condition("Progressing", failed_reasons=("ProgressDeadlineExceeded",)))


def ds(name, cm):
    """A DaemonSet mounting ConfigMap `cm` as its `config` volume."""
    return {"metadata": {"name": name}, "spec": {"template": {"spec": {"volumes": [
        {"name": "config", "configMap": {"name": cm}}]}}}}


def test_list_target_progress_counts_ready_items():
    target = Target("apps/v1", "DaemonSet", namespace="gpu-operator", title="operands")
    wanted = {"plugin": ("config", "new"), "mig": ("config", "new"), "absent": ("config", "new")}
    outcome, reader = run([[ds("plugin", "old"), ds("mig", "new")], [ds("plugin", "new"), ds("mig", "new")]],
                          target, operand_configs(wanted))
    assert outcome.ready and reader.calls == [("list", "DaemonSet", "gpu-operator", None)] * 2
    assert outcome.progress["lines"][0] == "0 s: operands: 2/3 ready; plugin: mounts old, not new (0 s)"


def test_resource_slices_and_discovery():
    slices = [{"spec": {"driver": "gpu.nvidia.com", "nodeName": "a", "devices": [{}, {}]}}]
    target = Target("resource.k8s.io/v1", "ResourceSlice", names=["a", "b"], title="ResourceSlices")
    with pytest.raises(WaitTimeout) as err:
        run([slices], target, resource_slices(["a", "b"]), timeout=2)
    assert "b: no ResourceSlice of gpu.nvidia.com for 2 s" in str(err.value)
    assert err.value.progress["ready"] == ["a"]
    served = Target.custom("resource.k8s.io", read=lambda c: c.served_versions("x"))
    outcome, dummy = run([[], ["v1"]], served, api_served("resource.k8s.io"))
    assert outcome.ready and outcome.items["resource.k8s.io"] == (READY, "served as v1")


def test_failed_items_without_fail_fast_wait_for_the_others(monkeypatch):
    from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import Predicate
    states = iter([{"a": (FAILED, "x"), "b": (WAITING, "y")}, {"a": (FAILED, "x"), "b": (READY, "ok")}])
    pred = Predicate("done", lambda observed, target: next(states), fail_fast=False)
    outcome, reader = run([[]], Target("v1", "Node"), pred, raise_on_failure=False)
    assert outcome.ready and outcome.failed == ["a"] and len(reader.calls) == 2


def test_on_poll_takes_each_items_next_step_between_polls_and_its_verdict_is_judged():
    """The hook sees each read; an item it holds back stays waiting, whatever the predicate said."""
    from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import Predicate
    reads = [[{"metadata": {"name": "a"}, "done": True}, {"metadata": {"name": "b"}, "done": False}],
             [{"metadata": {"name": "a"}, "done": True}, {"metadata": {"name": "b"}, "done": True}]]
    held, stepped = {"a", "b"}, []

    def judge(observed, target):
        return dict((o["metadata"]["name"], (READY if o["done"] else WAITING, "d")) for o in observed)

    def on_poll(observed, items):
        due = sorted(o["metadata"]["name"] for o in observed if o["done"] and o["metadata"]["name"] in held)
        stepped.append(due)
        held.difference_update(due)
        for name in due:
            items[name] = (WAITING, "next step sent")
        return items
    outcome, reader = run(reads, Target("v1", "Node"), Predicate("done", judge), on_poll=on_poll)
    # a's step at the first poll, b's at the second; the wait ends on the poll after the last step.
    assert stepped == [["a"], ["b"], []] and len(reader.calls) == 3 and outcome.ready


def test_polls_start_an_interval_apart_however_long_a_poll_takes():
    """A slow read (a 1,000-node list) and the steps on_poll sends count in the interval: the next poll starts
    `interval` after the last one started, at once when the poll took longer."""
    clock = Clock()
    starts, sleeps = [], []

    class SlowReader(FakeReader):
        def get(self, *args, **kwargs):
            starts.append(clock.now)
            clock.now += 0.5   # the read
            return FakeReader.get(self, *args, **kwargs)

    def on_poll(observed, items):
        clock.now += 0.75 if len(starts) == 1 else 2.5   # the steps sent from the first poll, then a slower batch
        return items

    def sleep(seconds):
        sleeps.append(seconds)
        clock.sleep(seconds)
    reader = SlowReader([policy(None), policy(None), policy("ready")])
    outcome = wait_for(reader, POLICY, state_ready(), 60, interval=2, clock=clock, sleep=sleep, on_poll=on_poll)
    assert outcome.ready
    assert sleeps == [0.75, 0.0] and [s - starts[0] for s in starts] == [0.0, 2.0, 5.0]


def test_progress_log_file_gets_each_change(tmp_path, monkeypatch):
    log = tmp_path / "progress.log"
    monkeypatch.setenv(PROGRESS_LOG_ENV, str(log))
    run([policy(None), policy(None), policy("ready")], POLICY, state_ready())
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and lines[0].endswith("ClusterPolicy/cluster-policy: no status yet (0 s)")


def judge(predicate, obj):
    return predicate.judge(obj, POLICY)["cluster-policy"]


def test_state_ready_table():
    reasons = [{"type": "Ready", "status": "False", "reason": "DriverNotReady", "message": "driver pods failing"},
               {"type": "Error", "status": "True", "reason": "DriverNotReady", "message": "driver pods failing"}]
    assert judge(state_ready(), policy("ready")) == (READY, "ready")
    assert judge(state_ready(), None) == (WAITING, "not found")
    assert judge(state_ready(), policy(None)) == (WAITING, "no status yet")
    assert judge(state_ready(), policy("notReady", reasons)) == (WAITING, (
        "state notReady: Ready=False (reason DriverNotReady): driver pods failing; Error=True (reason "
        "DriverNotReady): driver pods failing"))
    assert judge(state_ready(), policy("ignored"))[0] == FAILED
    stale = policy("ready", [{"type": "Ready", "status": "True", "reason": "Reconciled", "observedGeneration": 2}],
                   generation=3)
    assert judge(state_ready(), stale)[0] == WAITING
    stale["metadata"]["generation"] = 2
    assert judge(state_ready(), stale)[0] == READY


def test_a_line_counts_many_items_per_detail_and_names_the_longest_waiting():
    names = ["ds-%02d" % i for i in range(30)]
    target = Target("apps/v1", "DaemonSet", namespace="gpu-operator", title="operands")
    first = [ds(n, "old") for n in names[:20]] + [ds(n, "older") for n in names[20:]]
    # At 2 s: five mount the new ConfigMap, three of the oldest move on to the old one.
    second = [ds(n, "new") for n in names[:5]] + [ds(n, "old") for n in names[5:23]] + [
        ds(n, "older") for n in names[23:]]
    outcome, dummy = run([first, second, [ds(n, "new") for n in names]], target,
                         operand_configs(dict((n, ("config", "new")) for n in names)))
    assert outcome.ready
    lines = outcome.progress["lines"]
    # Most first; in each detail the ones in it longest (ds-20..22 came to "old" at 2 s: 0 s).
    assert lines[1] == ("2 s: operands: 5/30 ready; 18 mounts old, not new (longest: ds-05 2 s, ds-06 2 s, ds-07 2 s); "
                        "7 mounts older, not new (longest: ds-23 2 s, ds-24 2 s, ds-25 2 s)"), lines
    assert "ds-20: mounts old" not in lines[1] and len(lines[1]) < 200
    assert lines[2] == "4 s: operands: 30/30 ready"


def test_a_line_with_many_details_counts_the_rest():
    names = ["ds-%02d" % i for i in range(12)]
    target = Target("apps/v1", "DaemonSet", namespace="gpu-operator", title="operands")
    # Twelve DaemonSets, each mounting a ConfigMap of its own: five details named, seven counted.
    outcome, dummy = run([[ds(n, "cm-" + n) for n in names], [ds(n, "new") for n in names]], target,
                         operand_configs(dict((n, ("config", "new")) for n in names)))
    first = outcome.progress["lines"][0]
    assert first.startswith("0 s: operands: 0/12 ready; 1 mounts cm-ds-00, not new (longest: ds-00 0 s); ")
    assert first.endswith("; 1 mounts cm-ds-04, not new (longest: ds-04 0 s); 7 more in 7 other states"), first
