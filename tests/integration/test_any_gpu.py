"""Issue 9: pools of any NVIDIA GPU for time-slicing and MPS; MIG refused on models the catalog lacks.

Fleet any-gpu.yaml: 2 x A40 nodes (4 GPUs, not MIG-capable), 2 x H200 NVL nodes (2 GPUs), one RTX A6000 node
(no MIG) and one RTX PRO 5000 Blackwell node (MIG-capable hardware the MIG catalog does not cover). The module
runs the way tests/integration/test_gpu_node_pools.py runs it.
"""
from __future__ import annotations

import pytest

from conftest import gpu_allocatable, node_labels, wait_for
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import POOL_LABEL
V1A1 = "operators.coreos.com/v1alpha1"
GPU = "gpu-operator-certified"
OPERATOR_NS = "nvidia-gpu-operator"
POOLS = [
    {"name": "embed-a40", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-A40"}},
     "max_unavailable": "100%", "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}},
    {"name": "batch-h200nvl", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H200-NVL"}},
     "max_unavailable": "100%", "sharing": {"strategy": "mps", "mps": {"replicas": 8}}},
]
# 4 x A40 x 4 time-slices; 2 x H200 NVL x 8 MPS replicas; the RTX nodes are in no pool.
EXPECTED = {
    "gpu-a40-000": {"nvidia.com/gpu": 16},
    "gpu-a40-001": {"nvidia.com/gpu": 16},
    "gpu-h200nvl-000": {"nvidia.com/gpu": 16},
    "gpu-h200nvl-001": {"nvidia.com/gpu": 16},
    "gpu-a6000-000": {"nvidia.com/gpu": 2},
    "gpu-pro5000-000": {"nvidia.com/gpu": 2},
}


@pytest.fixture(scope="module")
def operator(devcluster_session):
    """The any-gpu fleet with the GPU Operator installed as test_cluster_policy installs it, and a ready ClusterPolicy.

    This file runs first in a session: what it adds for itself (the ClusterPolicy, the module's ConfigMaps) goes
    again at the end and the default fleet comes back, so later files find the cluster as they expect it.
    """
    dc = devcluster_session
    dc.fleet("any-gpu")
    csvs = dc.admin.resources.get(api_version=V1A1, kind="ClusterServiceVersion").get().items
    if not any(c.metadata.name.startswith(GPU) and (c.status or {}).get("phase") == "Succeeded" for c in csvs):
        result = dc.module("olm_operator", {"package": GPU, "namespace": OPERATOR_NS, "channel": "v26.3",
                                            "timeout": 120})
        assert not result.get("failed"), result.get("msg")
    policies = dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    created = not policies.get().items
    if created:
        policies.create(body={"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                              "metadata": {"name": "gpu-cluster-policy"},
                              "spec": {"operator": {}, "daemonsets": {}, "driver": {}, "toolkit": {},
                                       "devicePlugin": {}, "dcgm": {}, "dcgmExporter": {}, "gfd": {},
                                       "nodeStatusExporter": {}, "mig": {"strategy": "single"}}})
    wait_for(lambda: (policies.get().items[0].status or {}).get("state") == "ready", what="ClusterPolicy ready")
    namespace = policies.get().items[0].status["namespace"]
    configmaps = dc.admin.resources.get(api_version="v1", kind="ConfigMap")
    existing = set(cm.metadata.name for cm in configmaps.get(namespace=namespace).items)
    yield dc
    for name in ("kubegpu-mig-parted-config", "kubegpu-device-plugin-config"):
        if name not in existing and configmaps.get(namespace=namespace, field_selector="metadata.name=" + name).items:
            configmaps.delete(name=name, namespace=namespace)
    if created:
        policies.delete(name="gpu-cluster-policy")
        wait_for(lambda: not policies.get().items, what="ClusterPolicy deleted")
    dc.fleet("default")


@pytest.mark.parametrize("pool, expected", [
    # RTX PRO 5000 Blackwell has MIG, but the catalog has no profiles for it: refused naming the known models.
    ({"name": "mig-pro5000", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-RTX-PRO-5000-Blackwell"}},
      "sharing": {"strategy": "mig", "mig": {"layout": "all-balanced"}}},
     ["mig-pro5000", "gpu-pro5000-000", "NVIDIA-RTX-PRO-5000-Blackwell is not in the MIG catalog",
      "NVIDIA-H100-80GB-HBM3", "NVIDIA-H20", "time-slicing, mps or none"]),
    # A40 and RTX A6000 have no MIG: refused as such, every node named, grouped by model.
    ({"name": "mig-any", "selector": {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                                                            "values": ["NVIDIA-A40", "NVIDIA-RTX-A6000"]}]},
      "sharing": {"strategy": "mig", "mig": {"layout": "all-balanced"}}},
     ["mig-any", "nodes 'gpu-a40-000', 'gpu-a40-001' have NVIDIA-A40, which is not MIG-capable",
      "node 'gpu-a6000-000' (NVIDIA-RTX-A6000): NVIDIA-RTX-A6000 is not MIG-capable"]),
])
def test_mig_pool_of_a_model_without_mig_catalog_fails_before_any_write(operator, pool, expected):
    dc = operator
    mark = dc.audit.mark()
    result = dc.module("gpu_node_pools", {"pools": [pool]})
    assert result.get("failed") is True
    for words in expected:
        assert words in result["msg"], (words, result["msg"])
    assert dc.audit.writes(mark) == []


def test_check_mode_plans_and_writes_nothing(operator):
    dc = operator
    mark = dc.audit.mark()
    result = dc.module("gpu_node_pools", {"pools": POOLS}, check=True, diff=True)
    assert not result.get("failed"), result.get("msg")
    assert dc.audit.writes(mark) == []
    pools = {p["name"]: p for p in result["plan"]["pools"]}
    assert pools["embed-a40"]["nodes"] == ["gpu-a40-000", "gpu-a40-001"]
    assert pools["batch-h200nvl"]["nodes"] == ["gpu-h200nvl-000", "gpu-h200nvl-001"]
    for pool in pools.values():
        for name, change in pool["node_changes"].items():
            assert {k: v for k, v in change["allocatable_after"].items() if v} == EXPECTED[name], name


def test_converge_then_second_run_writes_nothing(operator):
    dc = operator
    result = dc.module("gpu_node_pools", {"pools": POOLS})
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    wait_for(lambda: all(gpu_allocatable(dc)[name] == expected for name, expected in EXPECTED.items()),
             what="allocatable as planned")
    assert node_labels(dc, "gpu-a40-000")["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert node_labels(dc, "gpu-a40-000")["nvidia.com/gpu.product"] == "NVIDIA-A40-SHARED"
    assert "nvidia.com/mig.config" not in node_labels(dc, "gpu-a40-000")       # not MIG-capable: no MIG label
    assert node_labels(dc, "gpu-h200nvl-000")["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert node_labels(dc, "gpu-h200nvl-000")["nvidia.com/mig.config"] == "all-disabled"
    assert POOL_LABEL not in node_labels(dc, "gpu-a6000-000")
    mark = dc.audit.mark()
    again = dc.module("gpu_node_pools", {"pools": POOLS})
    assert not again.get("failed"), again.get("msg")
    assert again["changed"] is False
    assert dc.audit.writes(mark) == []


def test_time_slicing_pool_of_a_gpu_the_catalog_does_not_know(operator):
    dc = operator
    pool = {"name": "ws-a6000", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-RTX-A6000"}},
            "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 2}}}
    result = dc.module("gpu_node_pools", {"pools": POOLS + [pool]}, check=True)
    assert not result.get("failed"), result.get("msg")
    change = result["plan"]["pools"][2]["node_changes"]["gpu-a6000-000"]
    assert {k: v for k, v in change["allocatable_after"].items() if v} == {"nvidia.com/gpu": 4}
