# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.rollout import node_progress

CHANGE = {"mig_change": True, "allocatable_after": {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/gpu": 0}}


def node(labels, allocatable):
    return {"metadata": {"name": "n", "labels": labels}, "status": {"allocatable": allocatable}}


@pytest.mark.parametrize("labels, allocatable, state, detail", [
    ({"nvidia.com/mig.config.state": "pending", "nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change",
      "nvidia.com/gpu.deploy.dcgm": "true"}, {}, "pending",
     "nvidia.com/mig.config.state=pending, operands paused-for-mig-change: device-plugin"),
    ({"nvidia.com/mig.config.state": "failed", "nvidia.com/mig.config": "kubegpu-x"}, {}, "failed",
     "nvidia.com/mig.config.state=failed (mig-manager could not apply kubegpu-x; see the nvidia-mig-manager pod log)"),
    # success is set before the device plugin catches up: still pending until allocatable matches
    ({"nvidia.com/mig.config.state": "success"}, {"nvidia.com/gpu": "8"}, "pending",
     "allocatable nvidia.com/gpu 8 of 0, nvidia.com/mig-1g.10gb 0 of 16"),
    ({"nvidia.com/mig.config.state": "success"}, {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "16"}, "done",
     "ready"),
])
def test_mig_progress(labels, allocatable, state, detail):
    assert node_progress(node(labels, allocatable), CHANGE) == (state, detail)


def test_time_slicing_progress_needs_only_allocatable():
    change = {"mig_change": False, "allocatable_after": {"nvidia.com/gpu": 16}}
    assert node_progress(node({}, {"nvidia.com/gpu": "4"}), change)[0] == "pending"
    assert node_progress(node({}, {"nvidia.com/gpu": "16", "cpu": "8"}), change) == ("done", "ready")
