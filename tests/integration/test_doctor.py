"""The doctor (ansible-playbook kubegpu.platform.doctor) on the demo fleet: healthy once converged, then every fault
injected at once on different nodes, each found with its evidence and fix; never a write, check mode or not.

A cluster of this file's own (the session's may hold what earlier tests left, which would be true findings). The demo
inventory's GPU Operator and node pools converge once (the doctor reads nodes, pods and operands; serving and DRA add
nothing it reads that these do not). Faults come as a user or the hardware would bring them: simulator knobs
(mig-manager fail/hang, device plugin crash-looping, a GPU lost), a taint, a label edit, a ClusterPolicy edit, and
pods (one KWOK OOMKills, one needs a newer CUDA, two cannot be placed, one oversubscribes a time-sliced GPU).
"""
from __future__ import annotations

import json
import time

import pytest

from conftest import REPO, Devcluster, task_result
from kubegpu_devcluster import testing
from kubegpu_devcluster.testing import wait_for

INVENTORY = REPO / "examples" / "demo" / "inventory.yml"
DOCTOR = "playbooks/doctor.yml"
NS = "doctor-demo"
POOL = "kubegpu.io/node-pool"


@pytest.fixture(scope="module")
def cluster():
    # Not the session's cluster (not even started for this file alone): a clean one is what "healthy" needs.
    with testing.own_cluster(REPO / ".cache" / "doctor-cluster", Devcluster) as dc:
        started = time.monotonic()
        for playbook in ("playbooks/gpu_operator.yml", "playbooks/node_pools.yml"):
            proc = dc.playbook(playbook, "-i", str(INVENTORY), env={"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default"})
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        print(f"\ndemo GPU Operator and node pools converged in {time.monotonic() - started:.1f} s")
        _api(dc, "Namespace").create(body={"metadata": {"name": NS}})
        yield dc


def _api(dc, kind, api_version="v1"):
    return dc.admin.resources.get(api_version=api_version, kind=kind)


def doctor(dc, *args):
    """Run the doctor playbook; (return code, the module's result, the printed lines, the stats), and the writes the
    collection's user made meanwhile (none, ever)."""
    mark = dc.audit.mark()
    proc = dc.playbook(DOCTOR, "-i", str(INVENTORY), *args, env={"ANSIBLE_SHOW_CUSTOM_STATS": "true"})
    out = json.loads(proc.stdout)
    writes = dc.audit.writes(mark)
    assert not writes, [str(w) for w in writes]
    result = task_result(out, "Diagnose GPU nodes and GPU pods")
    lines = task_result(out, "Print the findings")["msg"]
    return proc.returncode, result, lines, out.get("global_custom_stats") or {}


def _pod(name, requests, node_selector=None, env=None, args=None, annotations=None):
    container = {"name": "main", "image": "vllm/vllm-openai:v0.11.0",
                 "resources": {"requests": requests, "limits": requests}}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if args:
        container["args"] = args
    spec = {"containers": [container], "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}}, "spec": spec}


def _pod_status(dc, name):
    return _api(dc, "Pod").get(name=name, namespace=NS).to_dict().get("status") or {}


def _node(dc, name):
    return _api(dc, "Node").get(name=name).to_dict()


def test_healthy_demo_fleet_is_healthy(cluster):
    dc = cluster
    # A workload as the demo's would run: an embedding model on a quarter of a time-sliced L40S.
    _api(dc, "Pod").create(body=_pod("embed", {"nvidia.com/gpu": "1"}, {POOL: "embed-l40s"},
                                     args=["--gpu-memory-utilization", "0.22"]), namespace=NS)
    wait_for(lambda: _pod_status(dc, "embed").get("phase") == "Running", timeout=60, what="embed pod running")
    wait_for(lambda: all(p.status.phase == "Running" for p in _api(dc, "Pod").get(
        namespace="nvidia-gpu-operator", label_selector="app=nvidia-dcgm-exporter").items) and len(_api(dc, "Pod").get(
            namespace="nvidia-gpu-operator", label_selector="app=nvidia-dcgm-exporter").items) == 6,
        timeout=60, what="a DCGM exporter pod on each of the 6 GPU nodes")
    rc, result, lines, stats = doctor(dc, "-e", "doctor_fail_on=degraded")
    assert rc == 0, lines
    assert result["summary"]["verdict"] == "healthy", lines
    assert result["findings"] == [] and result["checked"] == {"gpu_nodes": 6, "gpu_pods": 1}
    assert lines == ["Verdict: healthy (0 finding(s): 0 failing, 0 degraded; examined 6 GPU node(s), 1 GPU pod(s))"]
    assert stats["kubegpu_doctor"]["verdict"] == "healthy"
    checked = doctor(dc, "--check", "-e", "doctor_fail_on=degraded")
    assert checked[0] == 0 and checked[1]["summary"]["verdict"] == "healthy"


def _found(result, pattern, obj):
    hits = [f for f in result["findings"] if f["pattern"] == pattern and f["object"] == obj]
    assert hits, f"no {pattern} on {obj}: " + json.dumps(result["findings"], indent=1)
    return hits


def test_every_injected_fault_is_found(cluster):
    dc = cluster
    nodes, pods = _api(dc, "Node"), _api(dc, "Pod")
    # The hardware and the operator's components: a MIG change that fails, one that hangs (gpu-operator#2833), a
    # device plugin crash-looping, a GPU fallen off the bus.
    dc.knobs({"mig-manager.fail_nodes": "gpu-h100-001", "mig-manager.hang_nodes": "gpu-h100-000",
              "mig-manager.seconds": "0.5", "device-plugin.fail_nodes": "gpu-l40s-000",
              "device-plugin.lost_gpus": "gpu-l40s-001=1"})
    for name in ("gpu-h100-000", "gpu-h100-001"):
        nodes.patch(name=name, body={"metadata": {"labels": {"nvidia.com/mig.config": "all-disabled"}}},
                    content_type="application/merge-patch+json")
    # What people do: operands left paused by hand, a taint the exporter does not tolerate, scraping switched off.
    nodes.patch(name="gpu-a100-000", content_type="application/merge-patch+json", body={"metadata": {"labels": {
        "nvidia.com/gpu.deploy.dcgm-exporter": "paused-for-mig-change"}}})
    nodes.patch(name="gpu-h200-000", body={"spec": {"taints": [{"key": "example.com/maintenance",
                                                                "effect": "NoExecute"}]}},
                content_type="application/merge-patch+json")
    policy = _api(dc, "ClusterPolicy", "nvidia.com/v1").get().items[0].metadata.name
    _api(dc, "ClusterPolicy", "nvidia.com/v1").patch(
        name=policy, content_type="application/merge-patch+json",
        body={"spec": {"dcgmExporter": {"serviceMonitor": {"enabled": False}}}})
    # Workloads: OOMKilled, needs CUDA 13.2 (the demo's driver 580 supports 13.0), asks for a MIG profile no pool
    # offers, asks a MIG pool for whole GPUs, and asks for 4 x 90% of GPUs that have 3 healthy left.
    pods.create(namespace=NS, body=_pod("oom", {"nvidia.com/gpu": "1"}, {POOL: "batch-a100"},
                                        annotations={"devcluster.kubegpu.io/oom-kill": "true"}))
    pods.create(namespace=NS, body=_pod("new-cuda", {"nvidia.com/gpu": "1"}, {POOL: "batch-a100"},
                                        env={"NVIDIA_REQUIRE_CUDA": "cuda>=13.2 brand=tesla,driver>=570"}))
    pods.create(namespace=NS, body=_pod("no-such-slice", {"nvidia.com/mig-7g.80gb": "1"}))
    pods.create(namespace=NS, body=_pod("whole-on-mig", {"nvidia.com/gpu": "1"}, {POOL: "llm-h100"}))
    pods.create(namespace=NS, body=_pod("greedy", {"nvidia.com/gpu": "4"},
                                        {"kubernetes.io/hostname": "gpu-l40s-001"},
                                        args=["--gpu-memory-utilization=0.9"]))

    def labels(name):
        return _node(dc, name)["metadata"]["labels"]

    wait_for(lambda: labels("gpu-h100-001").get("nvidia.com/mig.config.state") == "failed", timeout=60,
             what="gpu-h100-001 MIG failed")
    wait_for(lambda: labels("gpu-h100-000").get("nvidia.com/mig.config.state") == "pending", timeout=60,
             what="gpu-h100-000 MIG pending")
    pending_since = time.monotonic()
    wait_for(lambda: (_node(dc, "gpu-l40s-001")["status"]["allocatable"].get("nvidia.com/gpu"),
                      labels("gpu-l40s-001").get("nvidia.com/gpu.count")) == ("12", "3"), timeout=60,
             what="gpu-l40s-001: a GPU lost")
    wait_for(lambda: _node(dc, "gpu-l40s-000")["status"]["allocatable"].get("nvidia.com/gpu") == "0", timeout=60,
             what="gpu-l40s-000 advertises nothing")
    wait_for(lambda: any(s.get("lastState", {}).get("terminated", {}).get("reason") == "OOMKilled"
                         for s in _pod_status(dc, "oom").get("containerStatuses") or []), timeout=60, what="oom")
    for name in ("no-such-slice", "whole-on-mig"):
        wait_for(lambda n=name: any(c.get("reason") == "Unschedulable" for c in _pod_status(dc, n).get("conditions") or []),
                 timeout=60, what=f"{name} unschedulable")
    for name in ("new-cuda", "greedy"):
        wait_for(lambda n=name: _pod_status(dc, n).get("phase") == "Running", timeout=60, what=f"{name} running")
    wait_for(lambda: not [p for p in pods.get(namespace="nvidia-gpu-operator", label_selector="app=nvidia-dcgm-exporter").items
                          if p.spec.nodeName in ("gpu-h200-000", "gpu-a100-000")], timeout=90,
             what="no exporter pod on the tainted H200 and the paused A100")
    wait_for(lambda: time.monotonic() - pending_since > 6, timeout=30, what="the MIG change pending past 5 s")

    rc, result, lines, stats = doctor(dc, "-e", "doctor_mig_pending_timeout=5")
    assert rc != 0, lines   # failing findings: the default doctor_fail_on=failing fails the run
    summary = result["summary"]
    assert summary["verdict"] == "failing"
    assert stats["kubegpu_doctor"] == summary

    (f,) = _found(result, "mig_failed", "Node/gpu-h100-001")
    assert (f["field"], f["value"]) == ("metadata.labels[nvidia.com/mig.config.state]", "failed")
    assert "nvidia-mig-manager" in f["fix"]
    (f,) = _found(result, "mig_pending_too_long", "Node/gpu-h100-000")
    assert f["value"] == "pending" and "device-plugin" in f["message"] and "drain" in f["fix"]
    (f,) = _found(result, "operands_paused", "Node/gpu-a100-000")
    assert f["value"] == {"dcgm-exporter": "paused-for-mig-change"}
    assert "nvidia.com/gpu.deploy.dcgm-exporter=true" in f["fix"]
    (f,) = _found(result, "device_plugin_not_advertising", "Node/gpu-l40s-000")
    assert f["field"] == "status.allocatable" and f["value"] == {"nvidia.com/gpu": 0}
    lost = _found(result, "gpu_lost", "Node/gpu-l40s-001")
    # GFD's count below what node_pools recorded (kubegpu.io/gpu-count), and the kubelet's allocatable below capacity.
    assert [(x["field"], x["value"]) for x in lost] == [("metadata.labels[nvidia.com/gpu.count]", 3),
                                                        ("status.allocatable[nvidia.com/gpu]", 12)]
    (f,) = _found(result, "time_slicing_oversubscribed", "Node/gpu-l40s-001")
    assert "Pod/doctor-demo/greedy (4 x 0.90)" in f["message"]
    (f,) = _found(result, "oom_killed", "Pod/doctor-demo/oom")
    assert (f["field"], f["value"]) == ("status.containerStatuses[main].lastState.terminated.reason", "OOMKilled")
    (f,) = _found(result, "cuda_mismatch", "Pod/doctor-demo/new-cuda")
    assert f["value"] == "cuda>=13.2" and "580.105.08" in f["message"] and "13.0" in f["fix"]
    (f,) = _found(result, "pending_for_gpu", "Pod/doctor-demo/no-such-slice")
    assert f["severity"] == "failing" and "no pool offers nvidia.com/mig-7g.80gb" in f["message"]
    (f,) = _found(result, "pending_for_gpu", "Pod/doctor-demo/whole-on-mig")
    assert f["severity"] == "degraded" and "batch-a100" in f["message"] and f["value"] == {"nvidia.com/gpu": 1}
    (f,) = _found(result, "dcgm_exporter_missing", "Node/gpu-h200-000")
    assert "taints" in f["fix"]
    (f,) = _found(result, "dcgm_not_scraped", "ClusterPolicy/" + policy)
    assert (f["field"], f["value"]) == ("spec.dcgmExporter.serviceMonitor.enabled", False)
    # Nothing else: the healthy nodes and pods stay silent.
    expected = {"mig_failed": 1, "mig_pending_too_long": 1, "operands_paused": 1, "device_plugin_not_advertising": 1,
                "gpu_lost": 2, "time_slicing_oversubscribed": 1, "oom_killed": 1, "cuda_mismatch": 1,
                "pending_for_gpu": 2, "dcgm_exporter_missing": 1, "dcgm_not_scraped": 1}
    assert summary["counts"] == expected, json.dumps(result["findings"], indent=1)
    assert any(line.startswith("[failing] mig_failed: Node/gpu-h100-001") for line in lines)

    # Check mode reads the same and writes nothing; doctor_fail_on=never reports without failing.
    again = doctor(dc, "--check", "-e", "doctor_mig_pending_timeout=5", "-e", "doctor_fail_on=never")
    assert again[0] == 0 and again[1]["summary"]["counts"] == expected
