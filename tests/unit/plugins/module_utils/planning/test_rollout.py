# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.rollout import Progress, Window, node_progress
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.states import FAILED, READY, WAITING

CHANGE = {"mig_change": True, "allocatable_after": {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/gpu": 0}}


def node(labels, allocatable):
    return {"metadata": {"name": "n", "labels": labels}, "status": {"allocatable": allocatable}}


@pytest.mark.parametrize("labels, allocatable, state, detail", [
    ({"nvidia.com/mig.config.state": "pending", "nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change",
      "nvidia.com/gpu.deploy.dcgm": "true"}, {}, WAITING,
     "nvidia.com/mig.config.state=pending, operands paused-for-mig-change: device-plugin"),
    ({"nvidia.com/mig.config.state": "failed", "nvidia.com/mig.config": "kubegpu-x"}, {}, FAILED,
     "nvidia.com/mig.config.state=failed (mig-manager could not apply kubegpu-x; see the nvidia-mig-manager pod log)"),
    # success is set before the device plugin catches up: still pending until allocatable matches
    ({"nvidia.com/mig.config.state": "success"}, {"nvidia.com/gpu": "8"}, WAITING,
     "allocatable nvidia.com/gpu 8 of 0, nvidia.com/mig-1g.10gb 0 of 16"),
    ({"nvidia.com/mig.config.state": "success"}, {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "16"}, READY,
     "ready"),
])
def test_mig_progress(labels, allocatable, state, detail):
    assert node_progress(node(labels, allocatable), CHANGE) == (state, detail)


def test_time_slicing_progress_needs_only_allocatable():
    change = {"mig_change": False, "allocatable_after": {"nvidia.com/gpu": 16}}
    assert node_progress(node({}, {"nvidia.com/gpu": "4"}), change)[0] == WAITING
    assert node_progress(node({}, {"nvidia.com/gpu": "16", "cpu": "8"}), change) == (READY, "ready")


def test_progress_judges_a_node_again_only_once_it_changed(monkeypatch):
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools import rollout
    calls = []
    monkeypatch.setattr(rollout, "node_progress", lambda n, c: calls.append(n["metadata"]["name"]) or ("pending", "x"))
    progress = Progress()
    pending = {"metadata": {"name": "a", "resourceVersion": "7"}}
    for dummy in range(3):
        assert progress(pending, CHANGE) == ("pending", "x")
    assert calls == ["a"]
    progress({"metadata": {"name": "a", "resourceVersion": "8"}}, CHANGE)
    progress({"metadata": {"name": "b", "resourceVersion": "8"}}, CHANGE)
    progress({"metadata": {"name": "c"}}, CHANGE)   # no resourceVersion: judged each time
    progress({"metadata": {"name": "c"}}, CHANGE)
    assert calls == ["a", "a", "b", "c", "c"]


def test_progress_follows_the_node_from_pending_to_done():
    progress = Progress()
    stages = [({"nvidia.com/mig.config.state": "pending"}, {}), ({"nvidia.com/mig.config.state": "success"}, {}),
              ({"nvidia.com/mig.config.state": "success"}, {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "16"})]
    seen = []
    for version, (labels, allocatable) in enumerate(stages):
        n = node(labels, allocatable)
        n["metadata"]["resourceVersion"] = str(version + 1)
        seen.append(progress(n, CHANGE)[0])
    assert seen == [WAITING, WAITING, READY]


def test_window_starts_a_node_as_soon_as_one_in_flight_is_done():
    window = Window(2, in_flight=["a"], queue=["a", "b", "c", "d"])
    assert window.queue == ["b", "c", "d"]            # a node already in flight is not started twice
    assert window.take() == ["b"] and window.take() == []
    window.settle(["a"])
    assert window.take() == ["c"] and window.in_flight == ["b", "c"]
    window.settle(["b", "c"])
    assert window.take() == ["d"] and window.queue == []


def test_window_over_full_from_an_earlier_call_starts_nothing_until_below_its_size():
    window = Window(1, in_flight=["a", "b"], queue=["c"])
    window.settle(["a"])
    assert window.take() == []
    window.settle(["b"])
    assert window.take() == ["c"]


def test_a_failed_node_halts_the_window_and_keeps_its_slot():
    window = Window(2, in_flight=["a", "b"], queue=["c", "d"])
    window.settle(["a"], failed=["b"])
    assert window.halted and window.take() == [] and window.queue == ["c", "d"]
    assert window.in_flight == ["b"]


def test_window_size_is_at_least_one():
    assert Window(0, in_flight=[], queue=["a", "b"]).take() == ["a"]
