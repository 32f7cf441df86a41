"""Many clusters in one run (docs/many-clusters.md): an inventory with one host per cluster, each host with its own
kubeconfig (K8S_AUTH_KUBECONFIG as a host variable), its own pools and its own settings for every stage, converged
by ONE run of the whole `site` playbook (every stage, in site's order) with forks=2.

Two local clusters of this file's own:
- alpha, the demo fleet (OpenShift 4.20): the GPU Operator through OLM; a time-sliced pool and a DRA pool (the
  DRA stage with the Technology Preview acknowledged in the inventory, as a user says so); a team's Kueue quota on
  its time-sliced pool (Kueue's API is served, nothing installed); OpenShift AI through OLM serving a model on that
  pool in the team's namespace; monitoring with the console plugin.
- beta, the kubernetes fleet as a fresh cluster (without the Kueue, KServe, KEDA and Knative CRDs its stages'
  charts bring): the GPU Operator through Helm; a time-sliced pool and a DRA pool (no acknowledgement on
  Kubernetes); a team of its own, Kueue through its chart; KServe and KEDA through their charts serving a model of
  its own in the team's namespace; monitoring with another alert threshold.
Each must get its pools and only its pools, and each stage's objects of its own settings and none of the other's
(read from the API servers). Then a run where one host's cluster is unreachable and another's pool is refused:
those hosts fail, the healthy one converges, and the refused host's cluster sees no write. Last, one uninstall run
takes both clusters back to what they were before the first site run (every object of every kind).
"""
from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError

from conftest import REPO, Devcluster, node_labels
from kubegpu_devcluster import paths, testing
from snapshots import differences, kept_on_purpose, snapshot

POOL_LABEL = "kubegpu.io/node-pool"
CHARTS = paths.charts_dir()
ISVC = "serving.kserve.io/v1beta1"
KUEUE = "kueue.x-k8s.io/v1beta2"
RULE = ("monitoring.coreos.com/v1", "PrometheusRule", "kubegpu-gpu-alerts")

pytestmark = pytest.mark.skipif(
    not all((CHARTS / c).is_dir() for c in ("gpu-operator", "dra-driver-nvidia-gpu", "kueue", "kserve", "keda")),
    reason=f"the charts are not at {CHARTS}")

ALPHA_POOLS = [
    {"name": "alpha-h100", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
     "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 2}}},
    {"name": "alpha-h200", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "p5e.48xlarge"}},
     "sharing": {"strategy": "dra"}},
]
BETA_POOLS = [
    {"name": "beta-t4", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "g4dn.12xlarge"}},
     "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 3}}},
    {"name": "beta-b200", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "p6-b200.48xlarge"}},
     "sharing": {"strategy": "dra"}},
]
# The second run: alpha gains a pool (so that its convergence is a change, not a no-op); beta's pool is refused.
ALPHA_POOLS_2 = ALPHA_POOLS + [
    {"name": "alpha-l40s", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "g6e.12xlarge"}},
     "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}},
]
BAD_POOLS = [dict(BETA_POOLS[0], sharing={"strategy": "time-slicing", "time_slicing": {"replicas": 0}}), BETA_POOLS[1]]


def _stages(cluster: str, platform: str) -> dict:
    """One cluster's own settings of the stages after node_pools: names carry the cluster's name, so that what each
    cluster got can be told apart."""
    dra = {"helm": {"chart": str(CHARTS / "dra-driver-nvidia-gpu"), "binary": _helm_bin()}, "timeout": 180,
           "claim_templates": [{"name": f"{cluster}-gpu", "namespaces": [f"{cluster}-llm"], "min_memory": "80G"}]}
    if platform == "openshift":
        # The demo fleet is OpenShift 4.20, where DRA is a Technology Preview whose feature set is irreversible: the
        # user's explicit say, as in examples/demo/inventory.yml (the uninstall leaves the FeatureGate, plan.KEPT).
        dra["acknowledge_tech_preview_no_upgrade"] = True
    pool = f"{cluster}-h100" if platform == "openshift" else f"{cluster}-t4"
    # The model's namespace is the team's: its InferenceService is queued in the team's LocalQueue.
    tenancy = {"teams": [{"name": f"{cluster}-serving", "namespaces": [f"{cluster}-llm"], "priority": "serving",
                          "quotas": [{"pool": pool, "share": 0.5}]}]}
    serving = {"namespace": f"{cluster}-llm", "timeout": 300, "runtimes": [{"name": "vllm"}],
               "models": [{"name": f"{cluster}-llama-8b", "runtime": "vllm", "pool": pool,
                           "storage_uri": "hf://meta-llama/Llama-3.1-8B-Instruct"}]}
    if platform == "kubernetes":
        # Kueue, KServe and KEDA from the workspace's charts (no registry is reached), with the local cluster's helm.
        tenancy["helm"] = serving["helm"] = {"charts_dir": str(CHARTS), "binary": _helm_bin()}
    return {
        "kubegpu_dra": dra,
        "kubegpu_tenancy": tenancy,
        "kubegpu_serving": serving,
        "kubegpu_monitoring": {"alerts": {"gpu_memory_used_percent": 95 if platform == "openshift" else 90},
                               **({"openshift": {"console_plugin": True}} if platform == "openshift" else {})},
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Every object of both clusters before the first site run (snapshots.snapshot), for the uninstall at the end.
BEFORE = {}


def _kubernetes_fleet_fresh(folder: Path) -> Path:
    """The kubernetes fleet as a cluster with no platform yet: without Kueue's, KServe's, KEDA's and Knative's CRDs,
    which the tenancy and serving stages' charts bring, as fleets/tenancy-kubernetes.yaml and
    serving-kubernetes.yaml have it. (The fleet file loads a subset of them for tests that write queues and models
    without the install; the charts refuse to take over CRDs they did not make.)"""
    fleet = yaml.safe_load((testing.FLEETS / "kubernetes.yaml").read_text())
    fleet["without_crds"] = sorted(set(fleet.get("without_crds") or []) | {"kueue", "kserve", "keda", "knative"})
    path = folder / "kubernetes-fresh.yaml"
    path.write_text(yaml.safe_dump(fleet))
    return path


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    """Two clusters of this file's own (not the session's, which this file never starts), one after the other; beta
    starts with its fleet (from a seed without those CRDs: switching to it would delete them, tens of seconds)."""
    beta_fleet = _kubernetes_fleet_fresh(tmp_path_factory.mktemp("fleet"))
    with testing.own_cluster(REPO / ".cache" / "many-clusters-alpha", Devcluster) as alpha:
        with testing.own_cluster(REPO / ".cache" / "many-clusters-beta", Devcluster, beta_fleet) as beta:
            BEFORE.update(alpha=snapshot(alpha), beta=snapshot(beta))
            yield alpha, beta


@functools.lru_cache(maxsize=None)
def _helm_bin() -> str:
    out = subprocess.run([str(REPO / "tools" / "devcluster" / "build.sh")], check=True, capture_output=True,
                         text=True).stdout.strip().splitlines()[-1]
    return str(Path(out) / "helm")


def _host(kubeconfig, pools, stages=None) -> dict:
    return {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
            "K8S_AUTH_KUBECONFIG": str(kubeconfig), "kubegpu_node_pools": pools, **(stages or {})}


def _alpha(dc, pools=None) -> dict:
    return _host(dc.kubeconfig, pools or ALPHA_POOLS, _stages("alpha", "openshift"))


def _beta(dc, pools=None) -> dict:
    return _host(dc.kubeconfig, pools or BETA_POOLS, _stages("beta", "kubernetes"))


def _inventory(tmp: Path, hosts: dict) -> Path:
    inventory = {"clusters": {"hosts": hosts, "vars": {
        "kubegpu_gpu_operator": {
            "timeout": 180, "nfd": {"timeout": 180},
            # Helm on the kubernetes fleet (beta); OLM on OpenShift (alpha) ignores it.
            "helm": {"chart": f"{CHARTS}/gpu-operator", "repo_url": "", "binary": _helm_bin()}},
    }}}
    path = tmp / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    return path


def _run(dc, inventory: Path, report_dir: Path, forks: int, playbook: str = "site", tags: str = ""):
    t0 = time.monotonic()
    # The environment's K8S_AUTH_KUBECONFIG (the session's cluster) must not be what the hosts reach.
    env = {"K8S_AUTH_KUBECONFIG": "/nonexistent/kubeconfig", "KUBEGPU_API_RETRY_BUDGET": "10",
           "ANSIBLE_SHOW_CUSTOM_STATS": "1"}
    # `site` runs whole (every stage, each host with its own settings) unless a test narrows it with tags.
    proc = dc.playbook(f"kubegpu.platform.{playbook}", "-i", str(inventory), "-f", str(forks),
                       *(["--tags", tags] if tags else []),
                       "-e", "kubegpu_hosts=clusters", "-e", f"report_dir={report_dir}", env=env)
    seconds = time.monotonic() - t0
    # The run's output, to read after a failure: one file per test (of a test's runs, its last).
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split("::")[-1].split(" ")[0] or playbook
    (REPO / ".cache" / f"many-clusters-{test}.json").write_text(proc.stdout)
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


def _expected_pools(dc, pools) -> dict:
    """{node: pool} as `pools` (each selecting by instance type) want it."""
    out = {}
    for pool in pools:
        out.update(dict.fromkeys(_instance_types(dc, pool["selector"]["matchLabels"]["node.kubernetes.io/instance-type"]),
                                 pool["name"]))
    return out


def _names(dc, api_version, kind, namespace=None) -> set:
    """Names of a kind's objects (`namespace/name` of namespaced ones listed across namespaces); none if not served."""
    try:
        items = dc.admin.resources.get(api_version=api_version, kind=kind).get(namespace=namespace).items
    except NotFoundError:
        return set()
    return {i.metadata.name if namespace or not i.metadata.namespace else f"{i.metadata.namespace}/{i.metadata.name}"
            for i in items}


def _rule_threshold(dc, namespace) -> str:
    api_version, kind, name = RULE
    rule = dc.admin.resources.get(api_version=api_version, kind=kind).get(name=name, namespace=namespace).to_dict()
    return [r["expr"] for r in rule["spec"]["groups"][0]["rules"] if r["alert"] == "GPUMemoryAlmostFull"][0]


def test_one_site_run_converges_two_clusters_each_with_its_own_pools(clusters, tmp_path):
    alpha, beta = clusters
    inventory = _inventory(tmp_path, {"alpha": _alpha(alpha), "beta": _beta(beta)})
    out, seconds = _run(alpha, inventory, tmp_path / "report", forks=2)
    stats = out["stats"]
    assert set(stats) == {"alpha", "beta"}
    assert stats["alpha"]["failures"] == 0, _failed_tasks(out, "alpha")
    assert stats["beta"]["failures"] == 0, _failed_tasks(out, "beta")
    assert stats["alpha"]["changed"] > 0 and stats["beta"]["changed"] > 0

    # Each cluster has its own pools, and none of the other's.
    assert _pools(alpha) == _expected_pools(alpha, ALPHA_POOLS)
    assert _pools(beta) == _expected_pools(beta, BETA_POOLS)
    assert set(_pools(alpha).values()) == {"alpha-h100", "alpha-h200"}
    assert set(_pools(beta).values()) == {"beta-t4", "beta-b200"}
    # The GPU Operator reached each cluster its own way: OLM on OpenShift, Helm on Kubernetes.
    subs = alpha.admin.resources.get(api_version=testing.OLM_V1A1, kind="Subscription").get().items
    assert "gpu-operator-certified" in [s.spec.name for s in subs]
    assert beta.admin.resources.get(api_version="apps/v1", kind="Deployment").get(
        name="gpu-operator", namespace="gpu-operator").metadata.labels["helm.sh/chart"] == "gpu-operator-v26.7.0"
    assert beta.admin.resources.get(api_version=testing.OLM_V1A1, kind="Subscription").get().items == []
    node = sorted(n for n, p in _pools(beta).items() if p == "beta-t4")[0]
    assert node_labels(beta, node)["nvidia.com/device-plugin.config"].startswith("kubegpu-beta-t4-")

    # DRA: each cluster's claim template in its own namespace, the kubelet plugin on its own DRA pool's nodes; the
    # acknowledgement set OpenShift's feature set on alpha only.
    for dc, name, pool in ((alpha, "alpha", "alpha-h200"), (beta, "beta", "beta-b200")):
        assert _names(dc, "resource.k8s.io/v1", "ResourceClaimTemplate") == {f"{name}-llm/{name}-gpu"}
        classes = {c for c in _names(dc, "resource.k8s.io/v1", "DeviceClass") if c.startswith("kubegpu-")}
        assert classes == {f"kubegpu-{name}-gpu"}, classes
        plugin = {n for n, labels in ((n, node_labels(dc, n)) for n in _pools(dc))
                  if labels.get("nvidia.com/dra-kubelet-plugin") == "true"}
        assert plugin == {n for n, p in _pools(dc).items() if p == pool}, plugin
    feature_gate = alpha.admin.resources.get(api_version="config.openshift.io/v1", kind="FeatureGate").get(name="cluster")
    assert feature_gate.spec.featureSet == "TechPreviewNoUpgrade"
    # Tenancy: each cluster's team queue (and the shared one), its LocalQueue in the team's namespace; Kueue's chart
    # installed on beta (alpha serves Kueue's API already).
    assert _names(alpha, KUEUE, "ClusterQueue") == {"alpha-serving", "unassigned"}
    assert _names(beta, KUEUE, "ClusterQueue") == {"beta-serving", "unassigned"}
    assert _names(alpha, KUEUE, "LocalQueue") == {"alpha-llm/alpha-serving"}
    assert _names(beta, KUEUE, "LocalQueue") == {"beta-llm/beta-serving"}
    assert "sh.helm.release.v1.kueue.v1" in _names(beta, "v1", "Secret", "kueue-system")
    # Serving: each cluster's model on its own cluster only, placed on its own pool; OpenShift AI through OLM on
    # alpha, KServe's chart through Helm on beta.
    for dc, name, pool in ((alpha, "alpha", "alpha-h100"), (beta, "beta", "beta-t4")):
        isvcs = dc.admin.resources.get(api_version=ISVC, kind="InferenceService").get().items
        assert [(i.metadata.namespace, i.metadata.name) for i in isvcs] == [(f"{name}-llm", f"{name}-llama-8b")]
        assert isvcs[0].metadata.labels["kubegpu.io/node-pool"] == pool
        assert isvcs[0].metadata.labels["kueue.x-k8s.io/queue-name"] == f"{name}-serving"
    assert "rhods-operator" in [s.spec.name for s in alpha.admin.resources.get(
        api_version=testing.OLM_V1A1, kind="Subscription").get().items]
    assert "sh.helm.release.v1.kserve.v1" in _names(beta, "v1", "Secret", "kserve")
    # Monitoring: each cluster's PrometheusRule with its own threshold, in its own operator namespace.
    assert _rule_threshold(alpha, "nvidia-gpu-operator").endswith("> 95")
    assert _rule_threshold(beta, "gpu-operator").endswith("> 90")
    assert "console-plugin-nvidia-gpu" in _names(alpha, "console.openshift.io/v1", "ConsolePlugin")

    # A report per cluster: its own file, and its own lines in the job's artifacts.
    for name, pools in (("alpha", ["alpha-h100", "alpha-h200"]), ("beta", ["beta-t4", "beta-b200"])):
        report = json.loads((tmp_path / "report" / name / "capacity.json").read_text())
        assert sorted(p["name"] for p in report["pools"]) == sorted(pools + ["(no pool)"]), report["pools"]
    artifacts = out.get("global_custom_stats", {})
    assert set(artifacts.get("kubegpu_capacity_by_cluster", {})) == {"alpha", "beta"}
    assert artifacts["kubegpu_capacity_by_cluster"]["beta"].keys() == {"beta-t4", "beta-b200", "(no pool)"}
    assert set(artifacts["kubegpu_capacity"]) == {"alpha/alpha-h100", "alpha/alpha-h200", "alpha/(no pool)",
                                                  "beta/beta-t4", "beta/beta-b200", "beta/(no pool)"}
    print(f"\ntwo clusters, one whole site run (forks=2): {seconds:.1f} s, changed alpha={stats['alpha']['changed']}"
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
    inventory = _inventory(tmp_path, {"alpha": _alpha(alpha, ALPHA_POOLS_2), "beta": _beta(beta, BAD_POOLS),
                                      "gamma": _host(dead, ALPHA_POOLS[:1])})
    beta_mark = beta.audit.mark()
    # Narrowed to the stages this run is about. beta is refused and gamma is unreachable in the preflight, before
    # any stage, so the later stages would change nothing about them; on alpha they would rerun the first test's
    # converge (driver, queues, model, rules), which is this file's slowest part, for no assert of this test (the
    # shared queue following a new pool is test_tenancy's). The report play after the skipped ones still shows
    # the healthy host going on to the end.
    out, seconds = _run(alpha, inventory, tmp_path / "report", forks=3, tags="gpu_operator,node_pools,report")
    stats = out["stats"]

    assert stats["alpha"]["failures"] == 0, _failed_tasks(out, "alpha")
    assert _pools(alpha) == _expected_pools(alpha, ALPHA_POOLS_2)
    assert (tmp_path / "report" / "alpha" / "capacity.json").exists()
    assert set(out["global_custom_stats"]["kubegpu_capacity_by_cluster"]) == {"alpha"}

    [(task, msg)] = _failed_tasks(out, "beta")
    assert "replicas" in msg and "beta-t4" in msg, msg
    assert [str(e) for e in beta.audit.writes(beta_mark)] == [], "the refused cluster was written to"
    assert _pools(beta) == _expected_pools(beta, BETA_POOLS)   # as run 1 left it

    [(task, msg)] = _failed_tasks(out, "gamma")
    assert "127.0.0.1" in msg or "connect" in msg.lower(), msg
    assert not (tmp_path / "report" / "beta").exists() and not (tmp_path / "report" / "gamma").exists()
    print(f"\none healthy, one refused, one unreachable cluster (forks=3): {seconds:.1f} s")


def test_one_uninstall_run_takes_both_clusters_back(clusters, tmp_path):
    """uninstall with the same inventory: each cluster back to what it was before the first site run (every object
    of every kind, less what is kept on purpose: CRDs, alpha's FeatureGate), every stage's objects included: OLM's
    operators on alpha (the GPU Operator, OpenShift AI and what its operator made), the Helm releases (the DRA
    driver on both; the GPU Operator, Kueue, KServe and KEDA on beta: the snapshot compares Secrets too, Helm's
    release records), the queues, claim templates, models and alert rules on both; a second uninstall changes
    nothing on either."""
    alpha, beta = clusters
    inventory = _inventory(tmp_path, {"alpha": _alpha(alpha, ALPHA_POOLS_2), "beta": _beta(beta)})
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
