# -*- coding: utf-8 -*-
"""The roll-out's node wait (wait_for, a Node list target, node_changes) with a scripted cluster and clock: one list
per poll, failure and timeout reporting."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import (
    Target,
    WaitTimeout,
    node_changes,
    wait_for,
)

CHANGE = {"mig_change": True, "allocatable_after": {"nvidia.com/mig-3g.40gb": 16}}


def node(name, state, mig=0):
    return {"metadata": {"name": name, "labels": {"nvidia.com/mig.config.state": state}},
            "status": {"allocatable": {"nvidia.com/mig-3g.40gb": str(mig)}}}


class ScriptedCluster(object):
    """Returns the next node list on each list call and counts the calls."""

    def __init__(self, polls):
        self.polls = list(polls)
        self.calls = []

    def list(self, api_version, kind, label_selector=None):
        self.calls.append((api_version, kind, label_selector))
        return self.polls.pop(0) if len(self.polls) > 1 else self.polls[0]


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def wait_for_nodes(cluster, changes, timeout, interval=1.0, clock=None):
    """As the roll-out driver waits (cluster/rollout.py): failed nodes end the wait only once none is waiting."""
    target = Target("v1", "Node", label_selector="pool=p", names=sorted(changes), title="pool 'p'")
    outcome = wait_for(cluster, target, node_changes(changes), timeout, interval=interval, raise_on_failure=False,
                       clock=clock, sleep=clock.sleep)
    return dict((n, (s, d, outcome.since.get(n, 0.0))) for n, (s, d) in outcome.items.items()), outcome.failed


def test_done_when_state_and_allocatable_match():
    cluster = ScriptedCluster([
        [node("a", "pending"), node("b", "pending")],
        [node("a", "success", 16), node("b", "success")],      # b: success but device plugin not caught up
        [node("a", "success", 16), node("b", "success", 16)],
    ])
    clock = Clock()
    states, failed = wait_for_nodes(cluster, {"a": CHANGE, "b": CHANGE}, 60, interval=2, clock=clock)
    assert failed == []
    assert states["a"] == ("ready", "ready", 2.0) and states["b"] == ("ready", "ready", 4.0)
    assert cluster.calls == [("v1", "Node", "pool=p")] * 3


def test_a_failed_node_does_not_abandon_the_others_of_its_batch():
    cluster = ScriptedCluster([[node("a", "failed"), node("b", "pending")],
                               [node("a", "failed"), node("b", "success", 16)]])
    clock = Clock()
    states, failed = wait_for_nodes(cluster, {"a": CHANGE, "b": CHANGE}, 60, clock=clock)
    assert failed == ["a"] and states["a"][0] == "failed" and states["b"][0] == "ready"
    assert len(cluster.calls) == 2


def test_timeout_names_pending_nodes():
    cluster = ScriptedCluster([[node("a", "pending")]])
    clock = Clock()
    with pytest.raises(WaitTimeout) as err:
        wait_for_nodes(cluster, {"a": CHANGE}, 5, interval=1, clock=clock)
    assert "not ready after 5 s" in str(err.value) and "a: nvidia.com/mig.config.state=pending for 5 s" in str(err.value)


def test_a_vanished_node_fails():
    cluster = ScriptedCluster([[]])
    clock = Clock()
    states, failed = wait_for_nodes(cluster, {"a": CHANGE}, 5, clock=clock)
    assert failed == ["a"] and states["a"][1] == "node is gone"
