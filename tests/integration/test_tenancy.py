"""The tenancy stage (playbook tenancy, module tenancy_quotas) against a local cluster of its own.

Fleet tools/devcluster/fleets/tenancy-kubernetes.yaml starts without Kueue's CRDs: the stage installs Kueue's real
chart with the Go-built helm, then writes ResourceFlavors, ClusterQueues, LocalQueues and priority classes that the
real API server validates against the chart's CRDs (Kueue's controller and webhooks do not run here). Then the
quotas follow a MIG layout change, bad inputs are refused with zero writes, and in ResourceQuota mode the API
server's quota admission refuses a pod over its team's GPU quota. Writes are counted in the audit log.
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubernetes.dynamic.exceptions import ForbiddenError, NotFoundError

from conftest import REPO, task_result, wait_for
from kubegpu_devcluster import paths, testing

PLAYBOOK = "playbooks/tenancy.yml"
CHARTS = paths.charts_dir()
KUEUE = "kueue.x-k8s.io/v1beta2"
NODE_FLAVOR = "kubegpu-cpu-memory"   # cpu and memory in every ClusterQueue (docs/tenancy.md, "What Kueue counts")
DRA_MAPPING = {"name": "gpu.nvidia.com", "deviceClassNames": ["gpu.nvidia.com"]}
MIXED = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
pytestmark = pytest.mark.skipif(not (CHARTS / "kueue").is_dir(), reason=f"the Kueue chart is not at {CHARTS}")


def pools(layout):
    return [
        {"name": "llm-h100", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
         "sharing": {"strategy": "mig", "mig": {"layout": layout}}},
        {"name": "embed-l40s", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-L40S"}},
         "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}},
        {"name": "dra-h200", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H200"}},
         "sharing": {"strategy": "dra"}},
    ]


TEAMS = [
    {"name": "research", "namespaces": ["research", "research-dev"], "priority": "interactive",
     "quotas": [{"pool": "llm-h100", "share": 0.5}, {"pool": "embed-l40s", "units": 8}]},
    {"name": "batch", "priority": "batch", "lend": False,
     "quotas": [{"pool": "llm-h100", "share": 0.25}, {"pool": "dra-h200", "units": 4}]},
]


@pytest.fixture(scope="module")
def helm_bin():
    out = subprocess.run([str(REPO / "tools" / "devcluster" / "build.sh")], check=True, capture_output=True,
                         text=True).stdout.strip().splitlines()[-1]
    return Path(out) / "helm"


@pytest.fixture(scope="module")
def cluster(devcluster_session):
    """A cluster of this file's own, on the tenancy fleet (no Kueue CRDs until the chart brings them)."""
    with testing.own_cluster(REPO / ".cache" / "tenancy-cluster", type(devcluster_session)) as dc:
        dc.fleet("tenancy-kubernetes", fresh=True)
        yield dc


def run(dc, helm_bin, *args, layout=None, teams=None, dra=None, **settings):
    variables = {"kubegpu_platform": "kubernetes", "kubegpu_node_pools": pools(layout or "all-1g.10gb"),
                 "kubegpu_tenancy": dict({"teams": TEAMS if teams is None else teams,
                                          "helm": {"charts_dir": str(CHARTS), "binary": str(helm_bin)}}, **settings)}
    if dra is not None:
        variables["kubegpu_dra"] = dra
    return playbook(dc, variables, *args)


def playbook(dc, variables, *args):
    """The tenancy playbook with these variables, as users run it: (JSON output, localhost's stats, seconds)."""
    t0 = time.monotonic()
    proc = dc.playbook(PLAYBOOK, "-i", "localhost,", "-c", "local", "-e",
                       "ansible_python_interpreter={{ ansible_playbook_python }}", "-e", json.dumps(variables), *args,
                       env={"ANSIBLE_STDOUT_CALLBACK": "json"})
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"ansible-playbook printed no JSON (rc {proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return out, out["stats"]["localhost"], time.monotonic() - t0


def module(dc, helm_bin, layout=None, teams=None, apply=False, **settings):
    """The tenancy_quotas module once (plan only unless apply)."""
    return dc.module("tenancy_quotas", {
        "pools": pools(layout or "all-1g.10gb"), "platform": "kubernetes", "apply": apply,
        "settings": dict({"teams": TEAMS if teams is None else teams,
                          "helm": {"charts_dir": str(CHARTS), "binary": str(helm_bin)}}, **settings)})


def failure(out):
    for play in out["plays"]:
        for t in play["tasks"]:
            result = t["hosts"].get("localhost", {})
            if result.get("failed") and not result.get("skipped"):
                return result
    return None


def changed(out):
    """What each changed task says changed (for failure messages)."""
    return [(t["task"]["name"], t["hosts"]["localhost"].get("changes") or t["hosts"]["localhost"].get("diff"))
            for p in out["plays"] for t in p["tasks"] if t["hosts"].get("localhost", {}).get("changed")]


def listed(dc, kind, api_version=KUEUE, namespace=None):
    items = dc.admin.resources.get(api_version=api_version, kind=kind).get(namespace=namespace).items
    return {(i.metadata.namespace, i.metadata.name) if namespace is None and i.metadata.namespace else i.metadata.name:
            i.to_dict() for i in items}


def nominal(queues):
    """{(flavor, resource): sum of nominal quotas over the ClusterQueues}, GPU flavors only."""
    out = {}
    for queue in queues.values():
        for group in queue["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                if flavor["name"] == NODE_FLAVOR:
                    continue
                for resource in flavor["resources"]:
                    key = (flavor["name"], resource["name"])
                    out[key] = out.get(key, 0) + int(resource["nominalQuota"])
    return out


def node_group(queue):
    """{resource: nominal quota} of a ClusterQueue's cpu/memory group."""
    groups = [g for g in queue["spec"]["resourceGroups"] if g["coveredResources"] == ["cpu", "memory"]]
    assert len(groups) == 1 and [f["name"] for f in groups[0]["flavors"]] == [NODE_FLAVOR], queue["spec"]
    return dict((r["name"], str(r["nominalQuota"])) for r in groups[0]["flavors"][0]["resources"])


def capacity(out):
    plan = task_result(out, "Plan the teams' quotas")
    return dict(((pool, name), units) for pool, entry in plan["capacity"].items()
                for name, units in entry["resources"].items())


REFUSALS = [
    ("unknown pool", [dict(TEAMS[0], quotas=[{"pool": "llm-h10", "share": 0.5}])],
     "no such pool (did you mean 'llm-h100'?)"),
    ("unknown resource", [dict(TEAMS[0], quotas=[{"pool": "llm-h100", "units": {"nvidia.com/mig-7g.80gb": 1}}])],
     "units name resource 'nvidia.com/mig-7g.80gb', which the pool does not offer"),
]


def test_tenancy(cluster, helm_bin):
    dc = cluster
    started = time.monotonic()

    # Bad inputs: refused before anything is written (Kueue not installed either). The playbook's preflight play
    # refuses an over-subscribed pool; the module refuses an unknown pool and an unknown resource.
    mark = dc.audit.mark()
    out, stats, dummy = run(dc, helm_bin, teams=[dict(TEAMS[0], quotas=[{"pool": "embed-l40s", "units": 33}])])
    assert "pool 'embed-l40s' nvidia.com/gpu: the teams' quotas add up to 33 (research: 33), above the 32 the pool " \
           "offers (2 nodes)" in failure(out)["msg"]
    for what, teams, message in REFUSALS:
        result = module(dc, helm_bin, teams=teams, apply=True)
        assert result.get("failed") and message in result["msg"], (what, result.get("msg"))
    assert dc.audit.writes(mark) == []

    # Check mode on a cluster without Kueue: the plan, and zero writes.
    mark = dc.audit.mark()
    out, stats, seconds = run(dc, helm_bin, "--check", "--diff")
    assert not failure(out), failure(out)
    assert task_result(out, "Plan the teams' quotas")["charts"][0]["chart"] == "kueue"
    assert dc.audit.writes(mark) == []
    print(f"\ncheck mode before Kueue: {seconds:.1f} s, 0 writes")

    # Converge: Kueue's chart installed, every object accepted by its CRDs.
    mark = dc.audit.mark()
    out, stats, seconds = run(dc, helm_bin)
    assert not failure(out), failure(out)
    print(f"converged in {seconds:.1f} s with {len(dc.audit.writes(mark))} writes")
    crd = dc.admin.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    assert crd.get(name="clusterqueues.kueue.x-k8s.io").metadata.labels["app.kubernetes.io/managed-by"] == "Helm"
    queues = listed(dc, "ClusterQueue")
    assert sorted(queues) == ["batch", "research", "unassigned"]
    assert sorted(listed(dc, "ResourceFlavor")) == ["dra-h200", "embed-l40s", "kubegpu-cpu-memory", "llm-h100"]
    assert (listed(dc, "ResourceFlavor")[NODE_FLAVOR].get("spec") or {}).get("nodeLabels") is None
    # cpu and memory covered by every queue, by default what the GPU pools' nodes offer (Kueue admits nothing else).
    plan = task_result(out, "Plan the teams' quotas")
    for name, queue in queues.items():
        assert node_group(queue) == plan["node_quotas"][name] and plan["node_quotas"][name]["cpu"] != "0", name
    # The DRA pool's mapping is in the Configuration the chart wrote (Kueue counts claims only through it).
    assert plan["device_class_mappings"] == [DRA_MAPPING]
    config = dc.admin.resources.get(api_version="v1", kind="ConfigMap").get(
        name="kueue-manager-config", namespace="kueue-system").data["controller_manager_config.yaml"]
    assert yaml.safe_load(config)["resources"]["deviceClassMappings"] == [DRA_MAPPING]
    assert not task_result(out, "Write the queues and quotas").get("warnings")
    assert sorted(listed(dc, "LocalQueue")) == [("batch", "batch"), ("research", "research"),
                                                ("research-dev", "research")]
    assert sorted(listed(dc, "WorkloadPriorityClass")) == ["batch", "interactive", "serving"]
    assert listed(dc, "PriorityClass", "scheduling.k8s.io/v1")["batch"]["preemptionPolicy"] == "Never"
    # Quotas equal the pools' capacity in their own names: all-1g.10gb runs MIG single, nvidia.com/gpu (2 x 8 x 7).
    cap = capacity(out)
    assert cap[("llm-h100", "nvidia.com/gpu")] == 112 and cap[("dra-h200", "gpu.nvidia.com")] == 8
    assert nominal(queues) == dict((k, v) for k, v in cap.items())
    research = {(f["name"], r["name"]): r for g in queues["research"]["spec"]["resourceGroups"]
                for f in g["flavors"] for r in f["resources"]}
    assert int(research[("llm-h100", "nvidia.com/gpu")]["nominalQuota"]) == 56
    assert all(r.get("lendingLimit") == 0 for g in queues["batch"]["spec"]["resourceGroups"]
               for f in g["flavors"] for r in f["resources"])

    # Second run and check mode: nothing changes, nothing written.
    mark = dc.audit.mark()
    again, stats, seconds = run(dc, helm_bin)
    assert not failure(again), failure(again)
    assert stats["changed"] == 0, changed(again)
    assert dc.audit.writes(mark) == []
    print(f"second run: {seconds:.1f} s, 0 writes")

    # The capacity report (gpu_cluster_info) reads the teams back from the cluster alone: the quotas from the
    # ClusterQueues, use and borrowing from their status, which Kueue's controller keeps (no controller runs here,
    # so the test writes the status as it would: research uses 60 of its 56 units, 4 borrowed).
    dc.admin.resources.get(api_version=KUEUE, kind="ClusterQueue").status.patch(
        name="research", content_type="application/merge-patch+json", body={"status": {"flavorsUsage": [
            {"name": "llm-h100", "resources": [{"name": "nvidia.com/gpu", "total": "60", "borrowed": "4"}]}]}})
    teams = dc.module("gpu_cluster_info", {})["teams"]
    assert {"team": "research", "pool": "llm-h100", "resource": "nvidia.com/gpu", "quota": 56, "used": 60,
            "borrowed": 4} in teams, teams
    read_back = {}
    for row in teams:
        read_back[(row["pool"], row["resource"])] = read_back.get((row["pool"], row["resource"]), 0) + row["quota"]
    assert read_back == cap

    # A claim template added once Kueue is there: the chart is not written again, so the stage says what Kueue's
    # Configuration lacks (a warning, no write).
    mark = dc.audit.mark()
    dra = {"claim_templates": [{"name": "gpu-40g", "namespaces": ["research"], "min_memory": "40Gi"}]}
    out, stats, dummy = run(dc, helm_bin, "--check", dra=dra)
    assert not failure(out), failure(out)
    warnings = " ".join(task_result(out, "Plan the teams' quotas").get("warnings") or [])
    assert "Kueue does not count DRA claims of DeviceClass kubegpu-gpu-40g against the gpu.nvidia.com quotas" in \
        warnings and "ConfigMap kueue-system/kueue-manager-config" in warnings, warnings
    assert dc.audit.writes(mark) == []

    # A MIG layout change: the quotas follow in the pool's new resource names and counts.
    out, stats, dummy = run(dc, helm_bin, layout=MIXED)
    assert not failure(out), failure(out)
    queues = listed(dc, "ClusterQueue")
    cap = capacity(out)
    assert cap[("llm-h100", "nvidia.com/mig-1g.10gb")] == 32 and ("llm-h100", "nvidia.com/gpu") not in cap
    assert nominal(queues) == cap
    # ... and a layout that leaves a team's units above what the pool offers is refused, naming the team.
    teams = [dict(TEAMS[0], quotas=[{"pool": "llm-h100", "units": {"nvidia.com/mig-1g.10gb": 32}}])]
    assert not module(dc, helm_bin, layout=MIXED, teams=teams).get("failed")
    mark = dc.audit.mark()
    result = module(dc, helm_bin, layout={"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}, teams=teams, apply=True)
    assert ("pool 'llm-h100' nvidia.com/mig-1g.10gb: the teams' quotas add up to 32 (research: 32), above the 16"
            in result["msg"])
    assert dc.audit.writes(mark) == []

    # Without Kueue: its objects pruned, a ResourceQuota per namespace, enforced by the API server's admission.
    out, stats, dummy = run(dc, helm_bin, layout=MIXED, kueue=False)
    assert not failure(out), failure(out)
    assert listed(dc, "ClusterQueue") == {} and listed(dc, "LocalQueue") == {}
    quotas = listed(dc, "ResourceQuota", "v1")
    hard = quotas[("research", "kubegpu-gpu-quota")]["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "4" and hard["requests.nvidia.com/mig-1g.10gb"] == "8"
    mark = dc.audit.mark()
    again, stats, dummy = run(dc, helm_bin, layout=MIXED, kueue=False)
    assert stats["changed"] == 0 and dc.audit.writes(mark) == [], changed(again)
    pods = dc.admin.resources.get(api_version="v1", kind="Pod")
    # The API server's quota admission enforces status.hard, which kube-controller-manager's resourcequota controller
    # copies from spec.hard after the quota is written: until then it admits anything (as on any cluster).
    rq = dc.admin.resources.get(api_version="v1", kind="ResourceQuota")

    def enforced():
        status = rq.get(name="kubegpu-gpu-quota", namespace="research").to_dict().get("status") or {}
        return status.get("hard") == hard and set(status.get("used") or {}) >= set(hard)
    wait_for(enforced, timeout=120, what="the resourcequota controller to publish the quota's status.hard")

    def pod(name, gpus):
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "research"},
                "spec": {"containers": [{"name": "c", "image": "busybox",
                                         "resources": {"limits": {"nvidia.com/mig-1g.10gb": str(gpus)}}}]}}
    pods.create(body=pod("fits", 8), namespace="research")
    with pytest.raises(ForbiddenError) as refused:
        pods.create(body=pod("over", 1), namespace="research")
    assert "exceeded quota" in str(refused.value)
    # The report's usage comes from the quota's status (the API server's quota admission counted the pod).
    usage = module(dc, helm_bin, layout=MIXED, kueue=False)["usage"]
    assert {"team": "research", "pool": "llm-h100", "resource": "nvidia.com/mig-1g.10gb", "quota": 16, "used": 8,
            "borrowed": 0} in usage
    teams = dc.module("gpu_cluster_info", {})["teams"]
    [row] = [r for r in teams if r["team"] == "research" and r["resource"] == "nvidia.com/mig-1g.10gb"]
    assert (row["quota"], row["used"], row["borrowed"]) == (16, 8, 0), teams
    pods.delete(name="fits", namespace="research", grace_period_seconds=0)
    print(f"test_tenancy: {time.monotonic() - started:.1f} s")


def run_openshift(dc, *args):
    """The tenancy playbook on the OpenShift fleet as a user runs it there: no Helm settings, Kueue through OLM."""
    variables = {"kubegpu_platform": "openshift", "kubegpu_node_pools": pools("all-1g.10gb"),
                 "kubegpu_tenancy": {"teams": TEAMS}}
    return playbook(dc, variables, *args)


def test_tenancy_openshift(cluster):
    """The OpenShift path (issue 15): the Red Hat build of Kueue installed through OLM (package kueue-operator in
    openshift-kueue-operator, the OLM simulator's catalog), its operand Kueue "cluster" (kueue.openshift.io/v1)
    accepted by the operator's real CRD, then the queues accepted by Kueue's CRDs the operator brings; check mode
    and the second run write nothing. Same cluster as test_tenancy, on the OpenShift tenancy fleet."""
    dc = cluster
    # A cluster where Kueue was never installed: test_tenancy's chart brought CRDs the fleet's list lacks
    # (MultiKueue, ProvisioningRequestConfig), which would keep kueue.x-k8s.io served.
    crds = dc.admin.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    for crd in crds.get(label_selector="app.kubernetes.io/managed-by=Helm").items:
        if crd.spec.group == "kueue.x-k8s.io":
            crds.delete(name=crd.metadata.name)
    wait_for(lambda: not [c for c in crds.get(label_selector="app.kubernetes.io/managed-by=Helm").items
                          if c.spec.group == "kueue.x-k8s.io"], what="the Kueue chart's CRDs gone")
    dc.fleet("tenancy-openshift", fresh=True)

    def kueue_served():
        try:
            dc.admin.request("GET", "/apis/kueue.x-k8s.io")
        except NotFoundError:
            return False
        return True
    wait_for(lambda: not kueue_served(), what="kueue.x-k8s.io no longer served")
    started = time.monotonic()

    # Check mode on a cluster without Kueue or its operator: the plan names the operator; zero writes.
    mark = dc.audit.mark()
    out, stats, seconds = run_openshift(dc, "--check", "--diff")
    assert not failure(out), (failure(out) or {}).get("msg")
    plan = task_result(out, "Plan the teams' quotas")
    assert plan["platform"] == "openshift" and not plan["kueue_served"] and plan["charts"] == []
    assert [(o["package"], o["namespace"]) for o in plan["operators"]] == [("kueue-operator", "openshift-kueue-operator")]
    assert dc.audit.writes(mark) == []
    print(f"\nOpenShift check mode before Kueue: {seconds:.1f} s, 0 writes")

    # Converge: operator installed (Subscription, OperatorGroup for all namespaces, CSV Succeeded), the operand
    # written, Kueue's API served, the queues accepted.
    mark = dc.audit.mark()
    out, stats, seconds = run_openshift(dc)
    assert not failure(out), (failure(out) or {}).get("msg")
    print(f"OpenShift converged in {seconds:.1f} s with {len(dc.audit.writes(mark))} writes")
    ns = "openshift-kueue-operator"
    subs = listed(dc, "Subscription", "operators.coreos.com/v1alpha1", namespace=ns)
    assert [s["spec"]["name"] for s in subs.values()] == ["kueue-operator"]
    groups = listed(dc, "OperatorGroup", "operators.coreos.com/v1", namespace=ns)
    assert [g["spec"].get("targetNamespaces") for g in groups.values()] == [None]    # AllNamespaces
    csvs = listed(dc, "ClusterServiceVersion", "operators.coreos.com/v1alpha1", namespace=ns)
    assert [c["status"]["phase"] for c in csvs.values()] == ["Succeeded"]
    kueue = dc.admin.resources.get(api_version="kueue.openshift.io/v1", kind="Kueue").get(name="cluster").to_dict()
    assert kueue["spec"]["managementState"] == "Managed"
    assert kueue["spec"]["config"]["integrations"]["frameworks"] == ["BatchJob", "Pod", "Deployment", "StatefulSet"]
    # The DRA pool's mapping in the operand's own field, accepted by the operator's CRD schema.
    assert kueue["spec"]["config"]["resources"] == {"deviceClassMappings": [DRA_MAPPING]}
    queues = listed(dc, "ClusterQueue")
    assert sorted(queues) == ["batch", "research", "unassigned"]
    assert sorted(listed(dc, "LocalQueue")) == [("batch", "batch"), ("research", "research"),
                                                ("research-dev", "research")]
    assert nominal(queues) == capacity(out)
    assert node_group(queues["research"]) == task_result(out, "Plan the teams' quotas")["node_quotas"]["research"]

    # Second run and check mode: nothing changes, nothing written.
    for args in ((), ("--check",)):
        mark = dc.audit.mark()
        again, stats, seconds = run_openshift(dc, *args)
        assert not failure(again), (failure(again) or {}).get("msg")
        assert stats["changed"] == 0, changed(again)
        assert dc.audit.writes(mark) == []
    print(f"test_tenancy_openshift: {time.monotonic() - started:.1f} s")
