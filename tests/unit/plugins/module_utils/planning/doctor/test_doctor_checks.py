# -*- coding: utf-8 -*-
"""One table per pattern: the node or pod, and the findings (pattern, field, value) the check must give."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor import (
    monitoring_checks,
    node_checks,
    pod_checks,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.findings import (
    DEGRADED,
    FAILING,
    PATTERNS,
)

sys.path.insert(0, os.path.dirname(__file__))
from fixtures import gpu_node, gpu_pod  # noqa: E402  pylint: disable=wrong-import-position

NOW = 1_800_000_000.0   # 2027-01-15T08:00:00Z


def iso(epoch):
    import time
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def state_written(seconds_ago):
    return [{"manager": "nvidia-mig-manager", "operation": "Update", "apiVersion": "v1", "time": iso(NOW - seconds_ago),
             "fieldsV1": {"f:metadata": {"f:labels": {"f:nvidia.com/mig.config.state": {}}}}},
            {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": iso(NOW), "subresource": "status",
             "fieldsV1": {"f:status": {}}}]


def short(findings):
    return [(f["pattern"], f["field"], f["value"]) for f in findings]


NODE_CTX = {"now": NOW, "mig_pending_timeout": 600, "pods": []}
PAUSED = {"nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change",
          "nvidia.com/gpu.deploy.dcgm-exporter": "paused-for-mig-change"}

NODE_CASES = [
    # id, check, node, pods on it, expected (pattern, field, value)
    ("healthy node: nothing", node_checks.NODE_CHECKS, gpu_node(), [], []),
    ("mig failed", [node_checks.check_mig_failed],
     gpu_node(labels={"nvidia.com/mig.config": "kubegpu-llm-h100", "nvidia.com/mig.config.state": "failed"}), [],
     [("mig_failed", "metadata.labels[nvidia.com/mig.config.state]", "failed")]),
    ("mig pending, young: normal", [node_checks.check_mig_pending_too_long],
     gpu_node(labels=dict(PAUSED, **{"nvidia.com/mig.config.state": "pending"}), managed=state_written(30)), [], []),
    ("mig pending past the threshold", [node_checks.check_mig_pending_too_long],
     gpu_node(labels=dict(PAUSED, **{"nvidia.com/mig.config.state": "pending"}), managed=state_written(3600)), [],
     [("mig_pending_too_long", "metadata.labels[nvidia.com/mig.config.state]", "pending")]),
    ("mig pending, no managedFields: cannot tell, no finding", [node_checks.check_mig_pending_too_long],
     gpu_node(labels={"nvidia.com/mig.config.state": "pending"}), [], []),
    ("paused operands while pending: normal", [node_checks.check_operands_paused],
     gpu_node(labels=dict(PAUSED, **{"nvidia.com/mig.config.state": "pending"})), [], []),
    ("paused operands left after the change", [node_checks.check_operands_paused],
     gpu_node(labels=PAUSED), [],
     [("operands_paused", "metadata.labels[nvidia.com/gpu.deploy.<operand>]",
       {"device-plugin": "paused-for-mig-change", "dcgm-exporter": "paused-for-mig-change"})]),
    ("device plugin advertising nothing", [node_checks.check_device_plugin_not_advertising],
     gpu_node(allocatable={"cpu": "96", "nvidia.com/gpu": "0"}), [],
     [("device_plugin_not_advertising", "status.allocatable", {"nvidia.com/gpu": 0})]),
    ("no GPU resource at all", [node_checks.check_device_plugin_not_advertising],
     gpu_node(allocatable={"cpu": "96"}), [], [("device_plugin_not_advertising", "status.allocatable", {})]),
    ("plugin paused by a MIG change: not reported here", [node_checks.check_device_plugin_not_advertising],
     gpu_node(labels=dict(PAUSED, **{"nvidia.com/mig.config.state": "pending"}), allocatable={"nvidia.com/gpu": "0"}),
     [], []),
    ("MIG mixed: mig resources count", [node_checks.check_device_plugin_not_advertising],
     gpu_node(allocatable={"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "8"}), [], []),
    ("gpu.count below the recorded count", [node_checks.check_gpu_lost],
     gpu_node(labels={"nvidia.com/gpu.count": "7"}, annotations={"kubegpu.io/gpu-count": "8"},
              allocatable={"nvidia.com/gpu": "7"}), [],
     [("gpu_lost", "metadata.labels[nvidia.com/gpu.count]", 7)]),
    ("unhealthy GPU: allocatable below capacity", [node_checks.check_gpu_lost],
     gpu_node(allocatable={"nvidia.com/gpu": "7"}, capacity={"nvidia.com/gpu": "8"}), [],
     [("gpu_lost", "status.allocatable[nvidia.com/gpu]", 7)]),
    ("MIG single: gpu.count counts MIG devices, not compared", [node_checks.check_gpu_lost],
     gpu_node(labels={"nvidia.com/gpu.count": "16", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"},
              annotations={"kubegpu.io/gpu-count": "8"}, allocatable={"nvidia.com/gpu": "16"}), [], []),
    ("time-sliced, fits", [node_checks.check_time_slicing_oversubscribed],
     gpu_node(labels={"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.count": "1"}),
     [gpu_pod("a", args=["--gpu-memory-utilization", "0.45"]), gpu_pod("b", args=["--gpu-memory-utilization=0.45"])],
     []),
    ("time-sliced, oversubscribed", [node_checks.check_time_slicing_oversubscribed],
     gpu_node(labels={"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.count": "1",
                      "nvidia.com/gpu.memory": "1000"}),
     [gpu_pod("a", args=["--gpu-memory-utilization", "0.6"]), gpu_pod("b", args=["--gpu-memory-utilization=0.6"])],
     [("time_slicing_oversubscribed", "pods on node (--gpu-memory-utilization x replicas)", 1200)]),
    ("time-sliced, undeclared need: nothing to compare", [node_checks.check_time_slicing_oversubscribed],
     gpu_node(labels={"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.count": "1"}),
     [gpu_pod("a"), gpu_pod("b")], []),
    ("not time-sliced: memory isolation is not this check's", [node_checks.check_time_slicing_oversubscribed],
     gpu_node(labels={"nvidia.com/gpu.count": "1"}),
     [gpu_pod("a", args=["--gpu-memory-utilization", "0.9"]), gpu_pod("b", args=["--gpu-memory-utilization", "0.9"])],
     []),
]


@pytest.mark.parametrize("checks, node, pods, expected", [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_node_checks(checks, node, pods, expected):
    found = []
    for check in checks:
        found += check(node, dict(NODE_CTX, pods=pods))
    assert short(found) == expected
    for f in found:
        assert f["object"] == "Node/gpu-0" and f["fix"] and f["message"] and f["severity"] == PATTERNS[f["pattern"]]


OOM = {"name": "main", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
       "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137, "finishedAt": "2026-11-30T22:00:00Z"}}}
UNSCHEDULABLE = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                  "message": "0/9 nodes are available"}]
NODES = {"gpu-0": gpu_node(), "gpu-1": gpu_node("gpu-1", labels={"nvidia.com/cuda.runtime-version.full": "12.4"})}


def pools(extra_pods=()):
    nodes = list(NODES.values()) + [gpu_node("l40s-0", labels={"kubegpu.io/node-pool": "embed-l40s"},
                                             allocatable={"nvidia.com/gpu": "16"})]
    return pod_checks.pools_offering(nodes, pod_checks.free_units(nodes, list(extra_pods)))


POD_CASES = [
    ("healthy pod", pod_checks.POD_CHECKS, gpu_pod(env={"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"}), [], []),
    ("needs newer CUDA than the driver", [pod_checks.check_cuda_mismatch],
     gpu_pod(node="gpu-1", env={"NVIDIA_REQUIRE_CUDA": "cuda>=12.8 brand=tesla,driver>=470,driver<471"}), [],
     [("cuda_mismatch", "spec.containers[0].env[NVIDIA_REQUIRE_CUDA]", "cuda>=12.8")]),
    ("major version only", [pod_checks.check_cuda_mismatch],
     gpu_pod(env={"NVIDIA_REQUIRE_CUDA": "cuda>=14"}), [],
     [("cuda_mismatch", "spec.containers[0].env[NVIDIA_REQUIRE_CUDA]", "cuda>=14.0")]),
    ("equal is fine", [pod_checks.check_cuda_mismatch],
     gpu_pod(node="gpu-1", env={"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"}), [], []),
    ("undeclared: nothing to compare", [pod_checks.check_cuda_mismatch], gpu_pod(node="gpu-1"), [], []),
    ("OOMKilled last time", [pod_checks.check_oom_killed], gpu_pod(statuses=[OOM]), [],
     [("oom_killed", "status.containerStatuses[main].lastState.terminated.reason", "OOMKilled")]),
    ("OOMKilled now", [pod_checks.check_oom_killed],
     gpu_pod(statuses=[{"name": "main", "state": {"terminated": {"reason": "OOMKilled"}}}]), [],
     [("oom_killed", "status.containerStatuses[main].state.terminated.reason", "OOMKilled")]),
    ("pending, a pool has room", [pod_checks.check_pending_for_gpu],
     gpu_pod(node=None, phase="Pending", conditions=UNSCHEDULABLE, requests={"nvidia.com/gpu": "4"}), [],
     [("pending_for_gpu", "spec.containers[*].resources", {"nvidia.com/gpu": 4})]),
    ("pending, no pool offers the resource", [pod_checks.check_pending_for_gpu],
     gpu_pod(node=None, phase="Pending", conditions=UNSCHEDULABLE, requests={"nvidia.com/mig-7g.80gb": "1"}), [],
     [("pending_for_gpu", "spec.containers[*].resources", {"nvidia.com/mig-7g.80gb": 1})]),
    ("pending, pools full", [pod_checks.check_pending_for_gpu],
     gpu_pod(node=None, phase="Pending", conditions=UNSCHEDULABLE, requests={"nvidia.com/gpu": "17"}),
     [], [("pending_for_gpu", "spec.containers[*].resources", {"nvidia.com/gpu": 17})]),
]


@pytest.mark.parametrize("checks, pod, placed, expected", [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES])
def test_pod_checks(checks, pod, placed, expected):
    found = []
    for check in checks:
        found += check(pod, {"nodes": NODES, "pools": pools(placed)})
    assert short(found) == expected
    for f in found:
        assert f["object"] == "Pod/llm/p" and f["fix"] and f["message"]


def test_pending_names_the_pools_and_severity():
    pod = gpu_pod(node=None, phase="Pending", conditions=UNSCHEDULABLE, requests={"nvidia.com/gpu": "4"})
    (room,) = pod_checks.check_pending_for_gpu(pod, {"nodes": NODES, "pools": pools()})
    assert room["severity"] == DEGRADED
    assert "embed-l40s (16 nvidia.com/gpu free)" in room["message"] and "llm-h100 (16 nvidia.com/gpu free)" in room["message"]
    # what runs on a pool takes its units: the H100 pool full, only the L40S one left
    busy = [gpu_pod("x", node="gpu-0", requests={"nvidia.com/gpu": "8"}),
            gpu_pod("y", node="gpu-1", requests={"nvidia.com/gpu": "6"})]
    (left,) = pod_checks.check_pending_for_gpu(pod, {"nodes": NODES, "pools": pools(busy)})
    assert "llm-h100" not in left["message"] and "embed-l40s" in left["message"]
    # 17 GPUs in one pod: no node has them, though the pools have more in total
    big = gpu_pod(node=None, phase="Pending", conditions=UNSCHEDULABLE, requests={"nvidia.com/gpu": "17"})
    (full,) = pod_checks.check_pending_for_gpu(big, {"nodes": NODES, "pools": pools()})
    assert "full" in full["message"] and full["severity"] == DEGRADED
    never = gpu_pod(node=None, phase="Pending", conditions=UNSCHEDULABLE, requests={"nvidia.com/mig-7g.80gb": "1"})
    (none,) = pod_checks.check_pending_for_gpu(never, {"nodes": NODES, "pools": pools()})
    assert none["severity"] == FAILING and "offered: nvidia.com/gpu" in none["message"]


def _policy(exporter=None):
    spec = {"dcgmExporter": exporter} if exporter is not None else {}
    return {"metadata": {"name": "cluster-policy"}, "spec": spec, "status": {"namespace": "gpu-operator"}}


def _ds(name="nvidia-dcgm-exporter"):
    return {"metadata": {"name": name, "namespace": "gpu-operator"}}


def _exporter_pod(node, phase="Running"):
    return {"metadata": {"name": "nvidia-dcgm-exporter-" + node, "namespace": "gpu-operator",
                         "labels": {"app": "nvidia-dcgm-exporter"}}, "spec": {"nodeName": node}, "status": {"phase": phase}}


SM = {"metadata": {"name": "nvidia-dcgm-exporter", "namespace": "gpu-operator"}}
NS = {"metadata": {"name": "gpu-operator", "labels": {"openshift.io/cluster-monitoring": "true"}}}


def view(**changes):
    base = {"policy": _policy({"enabled": True, "serviceMonitor": {"enabled": True}}), "operator_namespace": "gpu-operator",
            "daemonsets": [_ds()], "exporter_pods": [_exporter_pod("gpu-0")], "gpu_nodes": [gpu_node()],
            "service_monitors": [SM], "namespace": NS, "platform": "openshift"}
    base.update(changes)
    return base


MONITORING_CASES = [
    ("healthy", view(), []),
    ("no operator yet", view(policy=None, operator_namespace=None, daemonsets=[], exporter_pods=[]), []),
    ("exporter disabled", view(policy=_policy({"enabled": False})),
     [("dcgm_exporter_missing", "spec.dcgmExporter.enabled", False)]),
    ("DaemonSet absent", view(daemonsets=[_ds("nvidia-device-plugin-daemonset")], exporter_pods=[]),
     [("dcgm_exporter_missing", "metadata.name", None)]),
    ("no exporter pod on a GPU node", view(exporter_pods=[_exporter_pod("gpu-0", phase="Pending")]),
     [("dcgm_exporter_missing", "pods of DaemonSet gpu-operator/nvidia-dcgm-exporter on node", None)]),
    ("exporter paused on the node: not expected there",
     view(exporter_pods=[], gpu_nodes=[gpu_node(labels={"nvidia.com/gpu.deploy.dcgm-exporter": "paused-for-mig-change"})]),
     []),
    ("no ServiceMonitor", view(service_monitors=[], policy=_policy({"serviceMonitor": {"enabled": False}})),
     [("dcgm_not_scraped", "spec.dcgmExporter.serviceMonitor.enabled", False)]),
    ("ServiceMonitor API not served", view(service_monitors=None),
     [("dcgm_not_scraped", "served", False)]),
    ("OpenShift namespace without the monitoring label",
     view(namespace={"metadata": {"name": "gpu-operator", "labels": {}}}),
     [("dcgm_not_scraped", "metadata.labels[openshift.io/cluster-monitoring]", None)]),
    ("OpenShift: nvidia-gpu-operator is monitored without the label",
     view(operator_namespace="nvidia-gpu-operator", namespace={"metadata": {"name": "nvidia-gpu-operator"}},
          exporter_pods=[dict(_exporter_pod("gpu-0"), metadata={"name": "e", "namespace": "nvidia-gpu-operator",
                                                                "labels": {"app": "nvidia-dcgm-exporter"}})]),
     []),
    ("Kubernetes: the label means nothing", view(platform="kubernetes", namespace={"metadata": {"name": "gpu-operator"}}),
     []),
]


@pytest.mark.parametrize("cluster, expected", [c[1:] for c in MONITORING_CASES], ids=[c[0] for c in MONITORING_CASES])
def test_monitoring_checks(cluster, expected):
    found = []
    for check in monitoring_checks.MONITORING_CHECKS:
        found += check(cluster)
    assert short(found) == expected
    assert all(f["fix"] and f["severity"] == DEGRADED for f in found)
