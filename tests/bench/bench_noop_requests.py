"""Benchmark: what a run of the collection costs on a 1,000-node fleet, in requests and seconds.

Starts its own local cluster (.cache/bench-cluster) with tools/devcluster/fleets/large-1000.yaml, runs each
read-only entry point a few times, and prints measured figures from the audit log and the clock. Not a test:
it asserts nothing and prints what it measured.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "devcluster"))

from kubegpu_devcluster import __main__ as devcluster  # noqa: E402
from kubegpu_devcluster import cluster  # noqa: E402
from kubegpu_devcluster.audit import AuditLog  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "3"))


def run_module(state: Path, name: str) -> dict:
    env = dict(os.environ, K8S_AUTH_KUBECONFIG=str(cluster.kubeconfig_path(state)),
               ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(["ansible", "localhost", "-m", f"kubegpu.platform.{name}"], cwd=REPO, env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def main() -> None:
    state = REPO / ".cache" / "bench-cluster"
    os.environ["DEVCLUSTER_DIR"] = str(state)
    subprocess.run([str(REPO / "tools" / "devcluster" / "build.sh")], check=True, stdout=subprocess.DEVNULL)
    fleet = REPO / "tools" / "devcluster" / "fleets" / "large-1000.yaml"
    t0 = time.monotonic()
    devcluster.up(state, fleet)
    print(f"cluster with {fleet.name} ready in {time.monotonic() - t0:.1f} s")
    audit = AuditLog(state / "audit.log")
    try:
        seconds, requests, writes = [], [], []
        for dummy in range(RUNS):
            mark = audit.mark()
            t = time.monotonic()
            result = run_module(state, "gpu_cluster_info")
            seconds.append(time.monotonic() - t)
            requests.append(len(audit.events(mark)))
            writes.append(len(audit.writes(mark)))
        print(f"gpu_cluster_info on {result['gpu_nodes']['nodes']} nodes, {RUNS} runs: "
              f"median {statistics.median(seconds):.2f} s (min {min(seconds):.2f}, max {max(seconds):.2f}), "
              f"requests per run {sorted(set(requests))}, writes per run {sorted(set(writes))}")
    finally:
        cluster.down(state)


if __name__ == "__main__":
    main()
