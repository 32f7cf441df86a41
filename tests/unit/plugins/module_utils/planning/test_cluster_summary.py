# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.cluster_summary import (
    gpu_operator_status,
    is_gpu_node,
    sharing_state,
    summarize_gpu_nodes,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import POOL_LABEL


def node(name, labels, allocatable=None):
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable or {}}}


H100 = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559", "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "success"}


@pytest.mark.parametrize("labels, expected", [
    ({"nvidia.com/gpu.present": "true"}, True),
    ({"feature.node.kubernetes.io/pci-10de.present": "true"}, True),
    ({"feature.node.kubernetes.io/pci-0302_10de.present": "true"}, True),
    ({"feature.node.kubernetes.io/pci-0300_10de.present": "true"}, True),
    ({"feature.node.kubernetes.io/pci-1002.present": "true"}, False),
    ({"nvidia.com/gpu.present": "false"}, False),
    ({}, False),
])
def test_is_gpu_node(labels, expected):
    assert is_gpu_node(node("n", labels)) is expected


@pytest.mark.parametrize("labels, expected", [
    ({}, {"strategy": "none"}),
    ({"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/device-plugin.config": "embed"},
     {"strategy": "time-slicing", "device_plugin_config": "embed"}),
    ({"nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "success"},
     {"strategy": "none", "mig_config": "all-disabled", "mig_state": "success"}),
    ({"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "pending",
      "nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change", "nvidia.com/gpu.deploy.dcgm": "true",
      "nvidia.com/gpu.deploy.gpu-feature-discovery": "paused-for-mig-change"},
     {"strategy": "mig", "mig_config": "all-1g.10gb", "mig_state": "pending",
      "paused_operands": ["device-plugin", "gpu-feature-discovery"]}),
    ({"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/gpu.sharing-strategy": "time-slicing"},
     {"strategy": "mig+time-slicing", "mig_config": "all-1g.10gb", "mig_state": "unknown"}),
])
def test_sharing_state(labels, expected):
    assert sharing_state(labels) == expected


def test_summary_groups_by_physical_model_and_counts():
    nodes = [
        node("h1", H100, {"nvidia.com/gpu": "8", "cpu": "96"}),
        node("h2", dict(H100, **{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED",
                                 "nvidia.com/gpu.sharing-strategy": "time-slicing"}), {"nvidia.com/gpu": "32"}),
        node("h3", dict(H100, **{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
                                 "nvidia.com/gpu.count": "56", "nvidia.com/mig.config": "all-1g.10gb"}),
             {"nvidia.com/gpu": "56"}),
        node("t1", {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "Tesla-T4",
                    "nvidia.com/gpu.count": "4", "nvidia.com/gpu.memory": "15360"}, {"nvidia.com/gpu": "4"}),
        node("cpu", {"kubernetes.io/os": "linux"}, {"cpu": "8"}),
        node("new", {"feature.node.kubernetes.io/pci-10de.present": "true"}),
    ]
    summary = summarize_gpu_nodes(nodes)
    assert summary["nodes"] == 6 and summary["gpu_nodes"] == 5
    h100, t4, unknown = summary["models"]
    assert h100["product"] == "NVIDIA-H100-80GB-HBM3"
    assert (h100["nodes"], h100["node_names"]) == (3, ["h1", "h2", "h3"])
    # under MIG single strategy gpu.count counts MIG devices, not GPUs: h3 adds none
    assert h100["gpus"] == 16
    assert h100["allocatable"] == {"nvidia.com/gpu": 8 + 32 + 56}
    assert h100["sharing"] == {"none": 1, "time-slicing": 1, "mig": 1}
    assert h100["mig_states"] == {"all-disabled=success": 2, "all-1g.10gb=success": 1}
    assert (t4["product"], t4["gpus"], t4["memory_mib"], t4["mig_capable"]) == ("Tesla-T4", 4, 15360, False)
    assert unknown["product"].startswith("unknown") and unknown["gpus"] == 0


def test_operator_via_olm_ignores_copied_csvs():
    csvs = [
        {"metadata": {"name": "gpu-operator-certified.v26.3.3", "namespace": "other"},
         "status": {"phase": "Succeeded", "reason": "Copied"}},
        {"metadata": {"name": "gpu-operator-certified.v26.7.0", "namespace": "nvidia-gpu-operator"},
         "status": {"phase": "Installing"}},
        {"metadata": {"name": "nfd.4.20.0", "namespace": "openshift-nfd"}, "status": {"phase": "Succeeded"}},
    ]
    policies = [{"metadata": {"name": "gpu-cluster-policy"},
                 "status": {"state": "notReady", "conditions": [
                     {"type": "Ready", "status": "False", "reason": "DriverNotReady", "message": "x",
                      "lastTransitionTime": "t"}]}}]
    status = gpu_operator_status(csvs, [], policies)
    assert (status["installed"], status["method"], status["version"], status["namespace"], status["phase"]) == \
        (False, "olm", "26.7.0", "nvidia-gpu-operator", "Installing")
    assert status["cluster_policies"] == [{"name": "gpu-cluster-policy", "state": "notReady", "conditions": [
        {"type": "Ready", "status": "False", "reason": "DriverNotReady", "message": "x"}]}]


def test_operator_via_helm_reads_chart_version():
    deploy = {"metadata": {"name": "gpu-operator", "namespace": "gpu-operator",
                           "labels": {"helm.sh/chart": "gpu-operator-v26.7.0"}}}
    status = gpu_operator_status([], [deploy], [])
    assert (status["installed"], status["method"], status["version"], status["namespace"]) == \
        (True, "helm", "26.7.0", "gpu-operator")


def test_operator_absent():
    status = gpu_operator_status([], [], [])
    assert (status["installed"], status["method"], status["cluster_policies"]) == (False, None, [])


def test_pools_sum_capacity_per_pool_label():
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.cluster_summary import summarize_pools
    nodes = [
        node("h1", dict(H100, **{POOL_LABEL: "llm", "nvidia.com/mig.config": "kubegpu-llm-1"}),
             {"nvidia.com/mig-1g.10gb": "16", "nvidia.com/gpu": "0"}),
        node("h2", dict(H100, **{POOL_LABEL: "llm", "nvidia.com/mig.config": "kubegpu-llm-1",
                                 "nvidia.com/mig.config.state": "pending"}), {"nvidia.com/mig-1g.10gb": "0"}),
        node("l1", {POOL_LABEL: "embed", "nvidia.com/gpu.product": "NVIDIA-L40S-SHARED",
                    "nvidia.com/gpu.sharing-strategy": "time-slicing"}, {"nvidia.com/gpu": "16"}),
        node("free", H100, {"nvidia.com/gpu": "8"}),
    ]
    assert summarize_pools(nodes) == [
        {"name": "embed", "nodes": 1, "products": ["NVIDIA-L40S"], "allocatable": {"nvidia.com/gpu": 16},
         "sharing": {"time-slicing": 1}, "mig_states": {}},
        {"name": "llm", "nodes": 2, "products": ["NVIDIA-H100-80GB-HBM3"],
         "allocatable": {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/gpu": 0},
         "sharing": {"mig": 2}, "mig_states": {"success": 1, "pending": 1}},
    ]
