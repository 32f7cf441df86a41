# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.cluster_text import cluster_report

INFO = {
    "platform": {"name": "openshift", "version": "4.20.3", "kubernetes_version": "v1.34.4"},
    "gpu_operator": {"installed": False, "method": "olm", "version": "26.7.0", "namespace": "nvidia-gpu-operator",
                     "phase": "Installing",
                     "cluster_policies": [{"name": "gpu-cluster-policy", "state": "notReady", "conditions": [
                         {"type": "Ready", "status": "False", "reason": "DriverNotReady", "message": ""}]}]},
    "dra": {"served_versions": ["v1", "v1beta2"], "device_classes": ["gpu.nvidia.com"], "resource_slices": 3},
    "serving": {"kserve": {"api": True, "controller": False}, "knative_serving": {"api": True},
                "keda": {"api": False}, "openshift_ai": {"api": True, "data_science_clusters": []}},
    "gpu_nodes": {"nodes": 5, "gpu_nodes": 3, "models": [
        {"product": "NVIDIA-H100-80GB-HBM3", "nodes": 2, "gpus": 16, "memory_mib": 81559, "mig_capable": True,
         "allocatable": {"nvidia.com/mig-1g.10gb": 56, "nvidia.com/gpu": 8}, "sharing": {"mig": 1, "none": 1},
         "mig_states": {"all-1g.10gb=success": 1}},
        {"product": "Tesla-T4", "nodes": 1, "gpus": 4, "memory_mib": None, "mig_capable": False,
         "allocatable": {}, "sharing": {"time-slicing": 1}, "mig_states": {}}]},
}


def test_summary_lines():
    lines = cluster_report(INFO)
    assert lines[0] == "Platform:     openshift 4.20.3 (Kubernetes v1.34.4)"
    assert lines[1] == ("GPU Operator: 26.7.0 via olm in nvidia-gpu-operator (phase Installing); "
                        "ClusterPolicy gpu-cluster-policy: notReady (Ready: DriverNotReady)")
    assert lines[2] == "DRA:          resource.k8s.io v1/v1beta2; 1 device classes; 3 resource slices"
    assert "KEDA API no" in lines[3] and "KServe API yes, controller no" in lines[3]
    assert lines[4] == "Nodes:        5 in all, 3 with NVIDIA GPUs"


def test_table_columns_line_up():
    lines = cluster_report(INFO)
    table = lines[lines.index("") + 1:]
    header, rule, h100, t4 = table
    assert header.split() == ["GPU", "model", "Nodes", "GPUs", "Memory", "MIG", "Allocatable", "Sharing", "MIG",
                              "config"]
    assert h100.index("16") == header.index("GPUs")
    assert "nvidia.com/gpu=8, nvidia.com/mig-1g.10gb=56" in h100
    assert t4.split()[:5] == ["Tesla-T4", "1", "4", "?", "no"]
    assert set(rule) <= {"-", " "}


def test_no_operator_and_no_gpus():
    info = dict(INFO, gpu_operator={"installed": False, "method": None, "cluster_policies": []},
                dra={"served_versions": [], "device_classes": [], "resource_slices": 0},
                gpu_nodes={"nodes": 2, "gpu_nodes": 0, "models": []})
    lines = cluster_report(info)
    assert lines[1] == "GPU Operator: not installed"
    assert lines[2].startswith("DRA:          not served")
    assert lines[-1].startswith("(no GPU nodes)")


def test_pool_table_follows_the_model_table():
    info = dict(INFO, pools=[{"name": "llm-h100", "nodes": 2, "products": ["NVIDIA-H100-80GB-HBM3"],
                              "allocatable": {"nvidia.com/mig-1g.10gb": 32}, "sharing": {"mig": 2},
                              "mig_states": {"success": 2}}])
    lines = cluster_report(info)
    start = lines.index("", lines.index("") + 1)
    header, dummy, row = lines[start + 1:start + 4]
    assert header.split() == ["Node", "pool", "Nodes", "GPU", "model", "Allocatable", "Sharing", "MIG", "state"]
    assert row.split() == ["llm-h100", "2", "NVIDIA-H100-80GB-HBM3", "nvidia.com/mig-1g.10gb=32", "mig=2", "success=2"]


def test_dra_nodes_and_claim_templates():
    dra = dict(INFO["dra"], nodes={"gpu-h200-000": 8}, claim_templates=[
        {"name": "gpu-80g", "device_class": "kubegpu-gpu-80g", "claims": ["ResourceClaimTemplate llm/gpu-80g"]},
        {"name": "orphan", "device_class": None, "claims": []}])
    lines = cluster_report(dict(INFO, dra=dra))
    assert lines[3] == "DRA nodes:    gpu-h200-000 (8 devices)"
    assert lines[4] == "Claim template gpu-80g: DeviceClass kubegpu-gpu-80g; ResourceClaimTemplate llm/gpu-80g"
    assert lines[5] == "Claim template orphan: DeviceClass missing; no claims"


def test_served_models_per_pool_and_claim_template():
    serving = dict(INFO["serving"], models=[
        {"name": "llm/bge", "pool": "embed-l40s", "claim_template": None, "ready": True, "min_replicas": 0},
        {"name": "llm/llama-dra", "pool": None, "claim_template": "gpu-80g", "ready": False, "min_replicas": 1},
        {"name": "llm/llama-8b", "pool": "embed-l40s", "claim_template": None, "ready": True, "min_replicas": 1}])
    lines = cluster_report(dict(INFO, serving=serving))
    assert lines[4] == "Served on claim template gpu-80g: llm/llama-dra (not ready)"
    assert lines[5] == "Served on pool embed-l40s: llm/bge (Ready, scales to zero), llm/llama-8b (Ready)"
    assert lines[6] == "Nodes:        5 in all, 3 with NVIDIA GPUs"
