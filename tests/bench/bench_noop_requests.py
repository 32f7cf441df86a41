"""Benchmark: what a run of the collection costs, in API requests and seconds, on 9 and on 1,000 GPU nodes.

Starts its own local cluster (.cache/bench-cluster), installs the GPU Operator through the simulated OLM,
then for the demo fleet and for tools/devcluster/fleets/large-1000.yaml: converges four node pools (one per
sharing strategy), runs the same pools again (a no-op) and gpu_cluster_info, and prints what it measured
from the audit log and the clock. Not a test: it asserts nothing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "devcluster"))
sys.path.insert(0, str(REPO / "tests" / "integration"))

from kubegpu_devcluster import __main__ as devcluster  # noqa: E402
from kubegpu_devcluster import cluster  # noqa: E402
from kubegpu_devcluster.audit import AuditLog  # noqa: E402

FLEETS = REPO / "tools" / "devcluster" / "fleets"


def pools(scale: str) -> list:
    everything = "100%" if scale == "large" else 1
    return [
        {"name": "llm-h100", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
         "max_unavailable": everything, "sharing": {"strategy": "mig", "mig": {"layout": "all-balanced"}}},
        {"name": "embed-l40s", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-L40S"}},
         "max_unavailable": everything, "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}},
        {"name": "batch-a100", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
         "max_unavailable": everything, "sharing": {"strategy": "mps", "mps": {"replicas": 4}}},
        {"name": "plain-h200", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H200"}},
         "max_unavailable": everything, "sharing": {"strategy": "none"}},
    ]


def run_module(state: Path, name: str, args: dict | None = None, check: bool = False) -> dict:
    env = dict(os.environ, K8S_AUTH_KUBECONFIG=str(cluster.kubeconfig_path(state)),
               ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    cmd = ["ansible", "localhost", "-m", f"kubegpu.platform.{name}"] + (["-a", json.dumps(args)] if args else [])
    proc = subprocess.run(cmd + (["--check"] if check else []), cwd=REPO, env=env, capture_output=True, text=True,
                          check=False)
    if not proc.stdout.strip():
        raise RuntimeError(f"{' '.join(cmd)} printed nothing: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def measure(state: Path, audit: AuditLog, label: str, name: str, args: dict | None = None, check: bool = False) -> dict:
    mark = audit.mark()
    t0 = time.monotonic()
    result = run_module(state, name, args, check)
    took = time.monotonic() - t0
    events = audit.events(mark)
    writes = [e for e in events if e.is_write]
    print(f"  {label:<34} {took:7.1f} s  {len(events):5d} requests  {len(writes):5d} writes"
          + ("  FAILED: " + result.get("msg", "")[:200] if result.get("failed") else ""))
    return result


def install_operator(dc) -> None:
    from kubegpu_devcluster.testing import approve_plan, csv_phase, install_plans, olm_subscribe, wait_for
    ns = olm_subscribe(dc, "v26.7")
    approve_plan(dc, ns, wait_for(lambda: install_plans(dc, ns), what="InstallPlan")[0])
    wait_for(lambda: csv_phase(dc, ns, "gpu-operator-certified.v26.7.0") == "Succeeded", what="CSV")
    policies = dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    policies.create(body={"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "gpu-cluster-policy"},
                          "spec": {"operator": {}, "daemonsets": {}, "driver": {}, "toolkit": {}, "devicePlugin": {},
                                   "dcgm": {}, "dcgmExporter": {}, "gfd": {}, "nodeStatusExporter": {}}})
    wait_for(lambda: (policies.get().items[0].status or {}).get("state") == "ready", what="ClusterPolicy ready")


def main() -> None:
    from conftest import Devcluster
    state = REPO / ".cache" / "bench-cluster"
    os.environ["DEVCLUSTER_DIR"] = str(state)
    subprocess.run([str(REPO / "tools" / "devcluster" / "build.sh")], check=True, stdout=subprocess.DEVNULL)
    t0 = time.monotonic()
    devcluster.up(state, FLEETS / "default.yaml")
    print(f"cluster ready in {time.monotonic() - t0:.1f} s")
    audit = AuditLog(state / "audit.log")
    dc = Devcluster(state)
    dc.fleet_file = FLEETS / "default.yaml"
    try:
        install_operator(dc)
        for fleet, scale in (("default", "demo"), ("large-1000", "large")):
            t0 = time.monotonic()
            dc.fleet(fleet)
            print(f"fleet {fleet}: loaded in {time.monotonic() - t0:.1f} s")
            measure(state, audit, "gpu_node_pools check mode (plan)", "gpu_node_pools", {"pools": pools(scale)},
                    check=True)
            measure(state, audit, "gpu_node_pools converge", "gpu_node_pools", {"pools": pools(scale), "timeout": 600})
            for attempt in (1, 2):
                measure(state, audit, f"gpu_node_pools no-op run {attempt}", "gpu_node_pools", {"pools": pools(scale)})
            measure(state, audit, "gpu_cluster_info", "gpu_cluster_info")
    finally:
        cluster.down(state)


if __name__ == "__main__":
    main()
