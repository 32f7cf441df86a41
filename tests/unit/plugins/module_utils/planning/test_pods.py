# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.pods import gpu_requests, is_pending_for_gpu


def c(name, requests=None, limits=None):
    return {"name": name, "resources": dict(({"requests": requests} if requests else {}),
                                            **({"limits": limits} if limits else {}))}


@pytest.mark.parametrize("spec, expected", [
    ({"containers": [c("a")]}, {}),
    ({"containers": [c("a", {"cpu": "1", "memory": "1Gi"})]}, {}),
    ({"containers": [c("a", {"nvidia.com/gpu": "1"})]}, {"nvidia.com/gpu": 1}),
    # limits stand in for requests of extended resources
    ({"containers": [c("a", limits={"nvidia.com/gpu": "2"})]}, {"nvidia.com/gpu": 2}),
    # sum of app containers
    ({"containers": [c("a", {"nvidia.com/gpu": "1"}), c("b", {"nvidia.com/gpu": "2"})]}, {"nvidia.com/gpu": 3}),
    # the largest init container wins over a smaller sum
    ({"containers": [c("a", {"nvidia.com/gpu": "1"})], "initContainers": [c("i", {"nvidia.com/gpu": "4"})]},
     {"nvidia.com/gpu": 4}),
    # init containers run one by one: their max, not their sum
    ({"containers": [c("a", {"nvidia.com/gpu": "2"})],
      "initContainers": [c("i", {"nvidia.com/gpu": "1"}), c("j", {"nvidia.com/gpu": "1"})]}, {"nvidia.com/gpu": 2}),
    # several resources, MIG included
    ({"containers": [c("a", {"nvidia.com/mig-3g.40gb": "1"}), c("b", {"nvidia.com/mig-1g.10gb": "2"})]},
     {"nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-1g.10gb": 2}),
    # pod overhead adds to the effective request
    ({"containers": [c("a", {"nvidia.com/gpu": "1"})], "overhead": {"nvidia.com/gpu": "1", "cpu": "250m"}},
     {"nvidia.com/gpu": 2}),
    # zero requests are left out
    ({"containers": [c("a", {"nvidia.com/gpu": "0"})]}, {}),
])
def test_gpu_requests(spec, expected):
    assert gpu_requests({"spec": spec}) == expected


GPU_SPEC = {"containers": [c("a", {"nvidia.com/gpu": "1"})]}
UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/9 nodes are available: 9 Insufficient nvidia.com/gpu."}


@pytest.mark.parametrize("pod, expected", [
    ({"spec": GPU_SPEC, "status": {"phase": "Pending", "conditions": [UNSCHEDULABLE]}}, True),
    # not a GPU pod
    ({"spec": {"containers": [c("a")]}, "status": {"phase": "Pending", "conditions": [UNSCHEDULABLE]}}, False),
    # scheduled, waiting for its containers
    ({"spec": dict(GPU_SPEC, nodeName="n1"), "status": {"phase": "Pending"}}, False),
    # the scheduler has not looked at it yet
    ({"spec": GPU_SPEC, "status": {"phase": "Pending"}}, False),
    ({"spec": GPU_SPEC, "status": {"phase": "Running", "conditions": [dict(UNSCHEDULABLE, status="True")]}}, False),
    # being deleted
    ({"metadata": {"deletionTimestamp": "2026-11-30T22:00:00Z"}, "spec": GPU_SPEC,
      "status": {"phase": "Pending", "conditions": [UNSCHEDULABLE]}}, False),
])
def test_is_pending_for_gpu(pod, expected):
    assert is_pending_for_gpu(pod) is expected
