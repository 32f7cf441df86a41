"""Many clusters in one run (docs/many-clusters.md): an inventory with one host per cluster, each host with its own
kubeconfig (K8S_AUTH_KUBECONFIG as a host variable) and its own pools, converged by ONE site run with forks=2.

Two local clusters of this file's own: alpha (the demo fleet, OpenShift: the GPU Operator through OLM) and beta
(the kubernetes fleet: the GPU Operator through Helm). Each must get its pools and only its pools. Then a run where
one host's cluster is unreachable and another's pool is refused: those hosts fail, the healthy one converges, and
the refused host's cluster sees no write.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO, Devcluster, node_labels
from kubegpu_devcluster import paths, testing
from snapshots import differences, kept_on_purpose, snapshot

POOL_LABEL = "kubegpu.io/node-pool"
ALPHA_POOLS = [
    {"name": "alpha-h100", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
     "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 2}}},
]
BETA_POOLS = [
    {"name": "beta-t4", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "g4dn.12xlarge"}},
     "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 3}}},
]
# The second run: alpha gains a pool (so that its convergence is a change, not a no-op); beta's pool is refused.
ALPHA_POOLS_2 = ALPHA_POOLS + [
    {"name": "alpha-l40s", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "g6e.12xlarge"}},
     "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}},
]
BAD_POOLS = [{"name": "beta-t4", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "g4dn.12xlarge"}},
              "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 0}}}]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Every object of both clusters before the first site run (snapshots.snapshot), for the uninstall at the end.
BEFORE = {}


@pytest.fixture(scope="module")
def clusters():
    """Two clusters of this file's own (not the session's, which this file never starts), one after the other."""
    with testing.own_cluster(REPO / ".cache" / "many-clusters-alpha", Devcluster) as alpha:
        with testing.own_cluster(REPO / ".cache" / "many-clusters-beta", Devcluster) as beta:
            beta.fleet("kubernetes")
            BEFORE.update(alpha=snapshot(alpha), beta=snapshot(beta))
            yield alpha, beta


def _helm_bin() -> str:
    out = subprocess.run([str(REPO / "tools" / "devcluster" / "build.sh")], check=True, capture_output=True,
                         text=True).stdout.strip().splitlines()[-1]
    return str(Path(out) / "helm")


def _host(kubeconfig, pools) -> dict:
    return {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
            "K8S_AUTH_KUBECONFIG": str(kubeconfig), "kubegpu_node_pools": pools}


def _inventory(tmp: Path, hosts: dict) -> Path:
    charts = paths.charts_dir()
    inventory = {"clusters": {"hosts": hosts, "vars": {
        "kubegpu_gpu_operator": {
            "timeout": 180, "nfd": {"timeout": 180},
            # Helm on the kubernetes fleet (beta); OLM on OpenShift (alpha) ignores it.
            "helm": {"chart": f"{charts}/gpu-operator", "repo_url": "", "binary": _helm_bin()}},
    }}}
    path = tmp / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    return path


def _run(dc, inventory: Path, report_dir: Path, forks: int, playbook: str = "site"):
    t0 = time.monotonic()
    # The environment's K8S_AUTH_KUBECONFIG (the session's cluster) must not be what the hosts reach.
    env = {"K8S_AUTH_KUBECONFIG": "/nonexistent/kubeconfig", "KUBEGPU_API_RETRY_BUDGET": "10",
           "ANSIBLE_SHOW_CUSTOM_STATS": "1"}
    # The stages the two fleets need no more input for: DRA on OpenShift 4.20 needs an irreversible acknowledgement
    # (test_dra.py), serving and tenancy their own fleets; the report is the per-cluster result.
    tags = ["--tags", "gpu_operator,node_pools,report"] if playbook == "site" else []
    proc = dc.playbook(f"kubegpu.platform.{playbook}", "-i", str(inventory), "-f", str(forks), *tags,
                       "-e", "kubegpu_hosts=clusters", "-e", f"report_dir={report_dir}", env=env)
    seconds = time.monotonic() - t0
    (REPO / ".cache" / "many-clusters-last-run.json").write_text(proc.stdout)   # to read after a failure
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"ansible-playbook printed no JSON (rc {proc.returncode}): {proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return out, seconds


def _failed_tasks(out, host):
    return [(t["task"]["name"], t["hosts"][host].get("msg", "")[:300]) for p in out["plays"] for t in p["tasks"]
            if host in t["hosts"] and t["hosts"][host].get("failed") and not t["hosts"][host].get("ignore_errors")
            and "failed_when_result" not in t["hosts"][host]]


def _pools(dc) -> dict:
    """{node: pool label} of the nodes that carry one."""
    nodes = [n.to_dict() for n in dc.admin.resources.get(api_version="v1", kind="Node").get().items]
    return {n["metadata"]["name"]: n["metadata"]["labels"][POOL_LABEL] for n in nodes
            if POOL_LABEL in n["metadata"].get("labels", {})}


def _instance_types(dc, instance_type) -> set:
    nodes = dc.admin.resources.get(api_version="v1", kind="Node").get().items
    return {n.metadata.name for n in nodes if n.metadata.labels.get("node.kubernetes.io/instance-type") == instance_type}


def test_one_site_run_converges_two_clusters_each_with_its_own_pools(clusters, tmp_path):
    alpha, beta = clusters
    inventory = _inventory(tmp_path, {"alpha": _host(alpha.kubeconfig, ALPHA_POOLS),
                                      "beta": _host(beta.kubeconfig, BETA_POOLS)})
    out, seconds = _run(alpha, inventory, tmp_path / "report", forks=2)
    stats = out["stats"]
    assert set(stats) == {"alpha", "beta"}
    assert stats["alpha"]["failures"] == 0, _failed_tasks(out, "alpha")
    assert stats["beta"]["failures"] == 0, _failed_tasks(out, "beta")
    assert stats["alpha"]["changed"] > 0 and stats["beta"]["changed"] > 0

    # Each cluster has its own pools, and none of the other's.
    assert _pools(alpha) == dict.fromkeys(_instance_types(alpha, "p5.48xlarge"), "alpha-h100")
    assert _pools(beta) == dict.fromkeys(_instance_types(beta, "g4dn.12xlarge"), "beta-t4")
    assert _pools(alpha) and _pools(beta)
    # The GPU Operator reached each cluster its own way: OLM on OpenShift, Helm on Kubernetes.
    subs = alpha.admin.resources.get(api_version=testing.OLM_V1A1, kind="Subscription").get().items
    assert "gpu-operator-certified" in [s.spec.name for s in subs]
    assert beta.admin.resources.get(api_version="apps/v1", kind="Deployment").get(
        name="gpu-operator", namespace="gpu-operator").metadata.labels["helm.sh/chart"] == "gpu-operator-v26.7.0"
    assert beta.admin.resources.get(api_version=testing.OLM_V1A1, kind="Subscription").get().items == []
    node = sorted(_pools(beta))[0]
    assert node_labels(beta, node)["nvidia.com/device-plugin.config"].startswith("kubegpu-beta-t4-")

    # A report per cluster: its own file, and its own lines in the job's artifacts.
    for name, pool in (("alpha", "alpha-h100"), ("beta", "beta-t4")):
        report = json.loads((tmp_path / "report" / name / "capacity.json").read_text())
        assert [p["name"] for p in report["pools"]] == [pool, "(no pool)"], report["pools"]
    artifacts = out.get("global_custom_stats", {})
    assert set(artifacts.get("kubegpu_capacity_by_cluster", {})) == {"alpha", "beta"}
    assert artifacts["kubegpu_capacity_by_cluster"]["beta"].keys() == {"beta-t4", "(no pool)"}
    assert set(artifacts["kubegpu_capacity"]) == {"alpha/alpha-h100", "alpha/(no pool)", "beta/beta-t4", "beta/(no pool)"}
    print(f"\ntwo clusters, one site run (forks=2): {seconds:.1f} s, changed alpha={stats['alpha']['changed']}"
          f" beta={stats['beta']['changed']}")


def test_a_broken_cluster_fails_its_host_only(clusters, tmp_path):
    alpha, beta = clusters
    # gamma: a cluster whose API server does not answer (a kubeconfig naming a closed port).
    config = yaml.safe_load(Path(alpha.kubeconfig).read_text())
    for c in config["clusters"]:
        c["cluster"]["server"] = f"https://127.0.0.1:{_free_port()}"
    dead = tmp_path / "dead.kubeconfig"
    dead.write_text(yaml.safe_dump(config))
    os.chmod(dead, 0o600)
    inventory = _inventory(tmp_path, {"alpha": _host(alpha.kubeconfig, ALPHA_POOLS_2),
                                      "beta": _host(beta.kubeconfig, BAD_POOLS),
                                      "gamma": _host(dead, ALPHA_POOLS)})
    beta_mark = beta.audit.mark()
    out, seconds = _run(alpha, inventory, tmp_path / "report", forks=3)
    stats = out["stats"]

    assert stats["alpha"]["failures"] == 0, _failed_tasks(out, "alpha")
    assert _pools(alpha) == dict(dict.fromkeys(_instance_types(alpha, "p5.48xlarge"), "alpha-h100"),
                                 **dict.fromkeys(_instance_types(alpha, "g6e.12xlarge"), "alpha-l40s"))
    assert (tmp_path / "report" / "alpha" / "capacity.json").exists()
    assert set(out["global_custom_stats"]["kubegpu_capacity_by_cluster"]) == {"alpha"}

    [(task, msg)] = _failed_tasks(out, "beta")
    assert "replicas" in msg and "beta-t4" in msg, msg
    assert [str(e) for e in beta.audit.writes(beta_mark)] == [], "the refused cluster was written to"
    assert _pools(beta) == dict.fromkeys(_instance_types(beta, "g4dn.12xlarge"), "beta-t4")   # as run 1 left it

    [(task, msg)] = _failed_tasks(out, "gamma")
    assert "127.0.0.1" in msg or "connect" in msg.lower(), msg
    assert not (tmp_path / "report" / "beta").exists() and not (tmp_path / "report" / "gamma").exists()
    print(f"\none healthy, one refused, one unreachable cluster (forks=3): {seconds:.1f} s")


def test_one_uninstall_run_takes_both_clusters_back(clusters, tmp_path):
    """uninstall with the same inventory: each cluster back to what it was before the first site run (every object
    of every kind, less what is kept on purpose: CRDs), OLM's objects on alpha and the Helm release on beta
    included (the snapshot compares Secrets too: Helm's release records); a second uninstall changes nothing on
    either."""
    alpha, beta = clusters
    inventory = _inventory(tmp_path, {"alpha": _host(alpha.kubeconfig, ALPHA_POOLS_2),
                                      "beta": _host(beta.kubeconfig, BETA_POOLS)})
    out, seconds = _run(alpha, inventory, tmp_path / "report", 2, "uninstall")
    stats = out["stats"]
    assert stats["alpha"]["failures"] == 0, _failed_tasks(out, "alpha")
    assert stats["beta"]["failures"] == 0, _failed_tasks(out, "beta")
    assert stats["alpha"]["changed"] > 0 and stats["beta"]["changed"] > 0
    for name, dc in (("alpha", alpha), ("beta", beta)):
        left = differences(BEFORE[name], snapshot(dc))
        unexpected = {k: v for k, v in left.items() if not kept_on_purpose(k)}
        assert unexpected == {}, name + ":\n" + "\n".join(f"{k}: {v}" for k, v in unexpected.items())

    again, seconds_again = _run(alpha, inventory, tmp_path / "report", 2, "uninstall")
    assert again["stats"]["alpha"]["changed"] == 0 and again["stats"]["beta"]["changed"] == 0, (
        [t["task"]["name"] for p in again["plays"] for t in p["tasks"]
         if any(h.get("changed") for h in t["hosts"].values())])
    print(f"\none uninstall run, two clusters (forks=2): {seconds:.1f} s; again: {seconds_again:.1f} s")
