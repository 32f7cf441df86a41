# -*- coding: utf-8 -*-
"""GPU units a pod requests, counted as kube-scheduler counts them, and which pods wait for GPUs."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.pods import gpu_requests, is_pending_for_gpu, is_unschedulable

GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-3g.40gb"


def container(requests=None, limits=None, **extra):
    resources = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return dict({"name": "c", "resources": resources}, **extra)


def pod(containers, init=None, overhead=None, node=None, phase="Pending", deleting=False):
    spec = {"containers": containers}
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = overhead
    if node:
        spec["nodeName"] = node
    meta = {"name": "p", "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize("p, expected", [
    (pod([container({GPU: "1"})]), {GPU: 1}),
    # A limit alone is the request (the API server defaults requests from limits).
    (pod([container(limits={GPU: 2})]), {GPU: 2}),
    # Containers add up; resources other than nvidia.com/* are not ours; zeros are left out.
    (pod([container({GPU: "1", "cpu": "2"}), container({GPU: "2", MIG: "0"})]), {GPU: 3}),
    (pod([container({MIG: "1"}), container({"nvidia.com/gpu.shared": "1"})]),
     {MIG: 1, "nvidia.com/gpu.shared": 1}),
    # An init container runs alone: the pod needs the larger of it and the app containers together.
    (pod([container({GPU: "1"})], init=[container({GPU: "4"}), container({GPU: "2"})]), {GPU: 4}),
    (pod([container({GPU: "3"})], init=[container({GPU: "2"})]), {GPU: 3}),
    (pod([container({MIG: "1"})], init=[container({GPU: "1"})]), {GPU: 1, MIG: 1}),
    # A sidecar (restartable init container) keeps its units beside the app and beside later init containers.
    (pod([container({GPU: "1"})], init=[container({GPU: "1"}, restartPolicy="Always"), container({GPU: "2"})]),
     {GPU: 3}),
    (pod([container({GPU: "2"})], init=[container({GPU: "1"}, restartPolicy="Always")]), {GPU: 3}),
    # Pod overhead (from its RuntimeClass) comes on top.
    (pod([container({GPU: "1"})], overhead={GPU: "1", "memory": "1Gi"}), {GPU: 2}),
    (pod([container({"cpu": "1"})]), {}),
    (pod([container()]), {}),
])
def test_effective_requests(p, expected):
    assert gpu_requests(p) == expected


def test_pod_without_spec_requests_nothing():
    assert gpu_requests({"metadata": {"name": "x"}}) == {}


@pytest.mark.parametrize("p, expected", [
    (pod([container({GPU: "1"})]), True),
    (pod([container({GPU: "1"})], node="n1"), False),            # bound: the kubelet has it now
    (pod([container({GPU: "1"})], phase="Running", node="n1"), False),
    (pod([container({"cpu": "1"})]), False),                     # not a GPU pod
    (pod([container({GPU: "1"})], deleting=True), False),
    (pod([container({GPU: "1"})], phase="Failed"), False),
    (dict(pod([container({GPU: "1"})]), status={}), True),       # no status yet: just created
])
def test_pending_for_gpu(p, expected):
    assert is_pending_for_gpu(p) is expected


_UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                  "message": "0/9 nodes are available: 9 Insufficient nvidia.com/gpu."}


@pytest.mark.parametrize("status, expected", [
    ({"phase": "Pending", "conditions": [_UNSCHEDULABLE]}, True),
    # the scheduler has not looked at it yet
    ({"phase": "Pending"}, False),
    ({"phase": "Running", "conditions": [dict(_UNSCHEDULABLE, status="True")]}, False),
])
def test_is_unschedulable(status, expected):
    assert is_unschedulable({"status": status}) is expected
