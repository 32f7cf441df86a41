"""The serving stage (playbook serving, modules serving_platform and serving_models) against the local cluster.

Fleets tools/devcluster/fleets/serving-*.yaml: each starts without the serving platform's CRDs, which its install
brings (the real KServe and KEDA charts with the Go-built helm on Kubernetes; the simulated OLM on OpenShift). The
real API server validates every object against the upstream CRDs, the real scheduler places the pods KServe's
simulated controller asks for, and the KServe / KEDA / Knative simulators scale them (knobs: the request annotation
on an InferenceService, serving.idle_seconds). Writes are counted in the audit log (the admin user's: the modules'
and helm's own).

The node pools are set up by a fixture as the node_pools and dra stages leave them (the pool label, the resources
the device plugin would advertise for the pool's sharing, the DRA plugin's label and the claim templates), so that
these tests time the serving stage alone.
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from conftest import REPO, wait_for
from kubegpu_devcluster import cert_manager, crds, paths, testing
from kubegpu_devcluster.simulators.serving import REQUESTS_ANNOTATION

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.selection import resolve_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import parse_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.slices import pool_slices

PLAYBOOK = "playbooks/serving.yml"
INVENTORY = Path(__file__).parent / "serving" / "inventory.yml"
CHARTS = paths.charts_dir()
ISVC = "serving.kserve.io/v1beta1"
NS = "llm"
POOL_LABEL = "kubegpu.io/node-pool"
DRA_LABEL = "nvidia.com/dra-kubelet-plugin"
# The four placements: model -> (pool its pod must land in, the request its pool implies).
PLACEMENTS = {
    "bge-large": ("embed-l40s", {"nvidia.com/gpu": "1"}),
    "llama-8b": ("llm-h100", {"nvidia.com/mig-3g.40gb": "1"}),
    "llama-8b-dra": ("dra-h200", None),          # a resource claim: no extended resource
    "llama-70b": ("whole-a100", {"nvidia.com/gpu": "2"}),
}

pytestmark = pytest.mark.skipif(not (CHARTS / "kserve").is_dir(), reason=f"the KServe charts are not at {CHARTS}")


def inventory():
    return yaml.safe_load(INVENTORY.read_text())["all"]["vars"]


@pytest.fixture(scope="module")
def helm_bin():
    out = subprocess.run([str(REPO / "tools" / "devcluster" / "build.sh")], check=True, capture_output=True,
                         text=True).stdout.strip().splitlines()[-1]
    return Path(out) / "helm"


def prepare_pools(dc):
    """Node pools as node_pools and dra leave them: the pool label and the resources the device plugin advertises
    for each pool's sharing (the planner's own slices), the DRA node labelled for the kubelet plugin, and the
    claim templates published (dra_claim_templates)."""
    settings = inventory()
    nodes_api = dc.admin.resources.get(api_version="v1", kind="Node")
    nodes = [n.to_dict() for n in nodes_api.get().items]
    pools = parse_pools(settings["kubegpu_node_pools"])
    selected = resolve_pools(pools, nodes)
    for pool in pools:
        members = selected.get(pool.name) or []
        labels = {POOL_LABEL: pool.name}
        resources = {}
        if pool.strategy == "dra":
            labels[DRA_LABEL] = "true"
            resources = {"nvidia.com/gpu": "0"}
        else:
            for item in pool_slices([pool], members):
                resources[item.resource_name] = str(item.units_per_node)
            resources.setdefault("nvidia.com/gpu", "0")
        for node in members:
            name = node["metadata"]["name"]
            nodes_api.patch(name=name, body={"metadata": {"labels": labels}},
                            content_type="application/merge-patch+json")
            nodes_api.status.patch(name=name, body={"status": {"capacity": resources, "allocatable": resources}},
                                   content_type="application/merge-patch+json")
    result = dc.module("dra_claim_templates", {"claim_templates": settings["kubegpu_dra"]["claim_templates"]})
    assert not result.get("failed"), result.get("msg")


def _vars(helm_bin, models=None, **changes):
    settings = inventory()["kubegpu_serving"]
    settings = dict(settings, helm={"charts_dir": str(CHARTS), "binary": str(helm_bin)}, **changes)
    if models is not None:
        settings["models"] = models
    return ["-e", json.dumps({"kubegpu_serving": settings})]


def run(dc, helm_bin, *args, models=None, **changes):
    t0 = time.monotonic()
    proc = dc.playbook(PLAYBOOK, "-i", str(INVENTORY), *_vars(helm_bin, models, **changes), *args)
    seconds = time.monotonic() - t0
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"ansible-playbook printed no JSON (rc {proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return out, out["stats"]["localhost"], seconds


def _name(task):
    return task["task"]["name"].split(" : ", 1)[-1]


def task(out, name):
    found = [t["hosts"]["localhost"] for p in out["plays"] for t in p["tasks"] if _name(t).startswith(name)]
    assert found, f"no task named {name!r}"
    return found[-1]


def failure(out):
    for play in out["plays"]:
        for t in play["tasks"]:
            result = t["hosts"].get("localhost", {})
            if result.get("failed"):
                return result
    return None


def why(out):
    """The failed task's name and message, and each failed loop item's, whole: an assertion message that is not a
    string is cut to a few hundred characters, and a loop's own message is only "One or more items failed"."""
    for play in out["plays"]:
        for t in play["tasks"]:
            result = t["hosts"].get("localhost", {})
            if result.get("failed"):
                items = ["item {0}: {1}".format(r.get("item"), r.get("msg")) for r in result.get("results") or []
                         if r.get("failed")]
                return "\n".join(["{0}: {1}".format(_name(t), result.get("msg"))] + items)
    return ""


def models_with(**changes):
    """The inventory's models with fields of some changed by name (a field set to None is dropped)."""
    out = []
    for m in inventory()["kubegpu_serving"]["models"]:
        m = dict(m, **changes.get(m["name"], {}))
        out.append(dict((k, v) for k, v in m.items() if v is not None))
    return out


def isvcs(dc):
    return {i.metadata.name: i.to_dict() for i in dc.admin.resources.get(api_version=ISVC, kind="InferenceService")
            .get(namespace=NS).items}


def set_requests(dc, names, value):
    api = dc.admin.resources.get(api_version=ISVC, kind="InferenceService")
    for name in names:
        api.patch(name=name, namespace=NS, body={"metadata": {"annotations": {REQUESTS_ANNOTATION: value}}},
                  content_type="application/merge-patch+json")


def running_pods(dc, model):
    """The model's running pods: KServe's label in Standard mode, Knative's service label in Knative mode."""
    api = dc.admin.resources.get(api_version="v1", kind="Pod")
    pods = {}
    for selector in (f"serving.kserve.io/inferenceservice={model}", f"serving.knative.dev/service={model}-predictor"):
        for p in api.get(namespace=NS, label_selector=selector).items:
            pods[p.metadata.name] = p
    return [p.to_dict() for p in pods.values() if p.status.phase == "Running" and not p.metadata.deletionTimestamp]


def model_state(dc, model) -> str:
    """What a model's pods, their claims and its workload controllers show, for a wait that timed out: where the
    chain from the request to a running pod stopped (scale, scheduling, claim allocation)."""
    lines = []
    for kind, api_version in (("Deployment", "apps/v1"), ("ReplicaSet", "apps/v1")):
        for o in dc.admin.resources.get(api_version=api_version, kind=kind).get(namespace=NS).items:
            if o.metadata.name.startswith(model + "-"):
                lines.append(f"{kind} {o.metadata.name}: replicas {o.spec.replicas}, ready {o.status.readyReplicas}")
    for selector in (f"serving.kserve.io/inferenceservice={model}", f"serving.knative.dev/service={model}-predictor"):
        for pod in dc.admin.resources.get(api_version="v1", kind="Pod").get(namespace=NS, label_selector=selector).items:
            pod = pod.to_dict()
            conditions = [(c["type"], c["status"], c.get("reason"), c.get("message"))
                          for c in pod["status"].get("conditions") or []]
            lines.append(f"Pod {pod['metadata']['name']}: {pod['status'].get('phase')} on "
                         f"{pod['spec'].get('nodeName')}, deleting {bool(pod['metadata'].get('deletionTimestamp'))}, "
                         f"{conditions}, claims {pod['status'].get('resourceClaimStatuses')}")
    for claim in dc.admin.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim").get(namespace=NS).items:
        claim = claim.to_dict()
        if claim["metadata"]["name"].startswith(model + "-"):
            lines.append(f"ResourceClaim {claim['metadata']['name']}: allocated "
                         f"{bool((claim.get('status') or {}).get('allocation'))}, reserved for "
                         f"{[r.get('name') for r in (claim.get('status') or {}).get('reservedFor') or []]}")
    # The chain above the pods: the InferenceService, and in Knative mode the Service, Configuration and Revisions.
    for api_version, kind in ((ISVC, "InferenceService"), ("serving.knative.dev/v1", "Service"),
                              ("serving.knative.dev/v1", "Configuration"), ("serving.knative.dev/v1", "Revision")):
        try:
            items = dc.admin.resources.get(api_version=api_version, kind=kind).get(namespace=NS).items
        except Exception as e:  # the kind is not served on this flavour
            lines.append(f"{kind}: {e.__class__.__name__}")
            continue
        for o in items:
            o = o.to_dict()
            if o["metadata"]["name"] == model or o["metadata"]["name"].startswith(model + "-"):
                conditions = [(c["type"], c["status"], c.get("reason"), c.get("message"))
                              for c in (o.get("status") or {}).get("conditions") or []]
                lines.append(f"{kind} {o['metadata']['name']}: generation {o['metadata'].get('generation')}, "
                             f"annotations {(o['metadata'].get('annotations') or {}).get(REQUESTS_ANNOTATION)!r} "
                             f"requests, {conditions}")
    events = dc.admin.resources.get(api_version="v1", kind="Event").get(namespace=NS).items
    lines += [f"Event {e.involvedObject.kind}/{e.involvedObject.name}: {e.reason}: {e.message}" for e in events
              if (e.involvedObject.name or "").startswith(model + "-")][-15:]
    # What the simulators said about it (or failed at): the serving chain below KServe is theirs.
    log = dc.state / "simulators.log"
    if log.exists():
        said = [line for line in log.read_text(errors="replace").splitlines()[-3000:]
                if model in line or "Traceback" in line or "Error" in line]
        lines += ["simulators.log: " + line for line in said[-25:]]
    return "\n".join(lines) or f"nothing of {model} in {NS}"


def wait_for_model(dc, model, predicate, what, timeout=120):
    """wait_for(predicate) on a model's pods; on timeout, fail with model_state's account of them."""
    try:
        return wait_for(predicate, timeout=timeout, what=what)
    except pytest.fail.Exception as e:
        pytest.fail(f"{e}\n{model_state(dc, model)}")


def node_pool(dc, node):
    return (dc.admin.resources.get(api_version="v1", kind="Node").get(name=node).metadata.labels or {}).get(POOL_LABEL)


REFUSALS = [
    ("a MIG profile the pool does not offer", {"llama-8b": {"mig_profile": "1g.10gb", "sizing": None}},
     "mig_profile is '1g.10gb', but pool 'llm-h100' does not offer it (it offers: 3g.40gb)"),
    ("a model that does not fit", {"llama-70b": {"gpus": None, "pool": "embed-l40s", "sizing": {
        "parameters": 70600000000, "precision": "bf16", "context": 8192, "architecture": {
            "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128}}}},
     "kubegpu_serving.models[3] (llama-70b): model does not fit pool 'embed-l40s'"),
    ("an unknown pool", {"bge-large": {"pool": "embed-t4"}}, "pool is 'embed-t4', which kubegpu_node_pools does not"),
    ("an unknown claim template", {"llama-8b-dra": {"claim_template": "gpu-200g"}},
     "claim_template is 'gpu-200g', which kubegpu_dra.claim_templates does not list"),
    ("an unknown runtime", {"bge-large": {"runtime": "tei"}}, "runtime is 'tei', which kubegpu_serving.runtimes"),
]


# Where Knative mode is the default (OpenShift AI 2.x): a claim there, and a model that cannot scale to zero.
KNATIVE_REFUSALS = [
    ("a DRA claim in Knative mode", {"llama-8b-dra": {"mode": None}},
     "Knative Serving rejects pods with resource claims"),
    ("min_replicas 0 where only the HPA scales", {"llama-8b-dra": {"min_replicas": 0}},
     "min_replicas is 0, but OpenShift AI 2.25.0 in RawDeployment mode scales with the HPA only"),
]


PREFLIGHT_TASK = "Check the inventory and the cluster before anything is written"


def check_refusals(dc, helm_bin, refusals=None, build=models_with, **settings):
    """Each refusal: the run stops in its first play (preflight, which plans the models as the stage's platform
    step does) with the message, and nothing is written."""
    for what, changes, message in refusals or REFUSALS:
        models = build(**changes)
        mark = dc.audit.mark()
        out, stats, dummy = run(dc, helm_bin, models=models, **settings)
        failed = failure(out)
        assert failed and message in failed["msg"], (what, failed and failed["msg"])
        assert _name_of_failed(out) == PREFLIGHT_TASK, what
        assert dc.audit.writes(mark) == [], what


def _name_of_failed(out):
    for play in out["plays"]:
        for t in play["tasks"]:
            if t["hosts"].get("localhost", {}).get("failed"):
                return _name(t)
    return ""


def converge_and_check(dc, helm_bin, flavor, mode_names):
    """Check mode writes nothing; the run converges; a second run writes nothing. Returns the converge's output."""
    mark = dc.audit.mark()
    out, stats, seconds = run(dc, helm_bin, "--check", "--diff")
    assert not failure(out), why(out)
    assert dc.audit.writes(mark) == []
    platform = task(out, "Detect the serving platform")
    assert platform["platform"]["flavor"] == flavor
    print(f"\n{flavor}: check mode {seconds:.1f} s")

    mark = dc.audit.mark()
    out, stats, seconds = run(dc, helm_bin)
    assert not failure(out), why(out)
    writes = dc.audit.writes(mark)
    print(f"{flavor}: converged in {seconds:.1f} s with {len(writes)} writes")
    live = isvcs(dc)
    assert sorted(live) == sorted(PLACEMENTS)
    for name, obj in live.items():
        ready = [c for c in obj["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", (name, obj["status"])
    assert {live[n]["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] for n in live} <= set(mode_names)
    runtimes = dc.admin.resources.get(api_version="serving.kserve.io/v1alpha1", kind="ServingRuntime").get(namespace=NS)
    assert sorted(r.metadata.name for r in runtimes.items) == ["vllm", "vllm-embed"]

    mark = dc.audit.mark()
    t0 = time.monotonic()
    again, stats, dummy = run(dc, helm_bin)
    assert not failure(again), why(again)
    assert stats["changed"] == 0
    assert dc.audit.writes(mark) == []
    print(f"{flavor}: second run {time.monotonic() - t0:.1f} s, 0 writes")
    return out


def check_placements_and_scale_to_zero(dc, scale_to_zero):
    """Every model on demand: one pod on the pool it asked for, with the request the pool implies; idle: zero pods
    for those that scale to zero (the GPU free again); on demand again: back to one."""
    dc.knobs({"serving.idle_seconds": "2"})
    set_requests(dc, PLACEMENTS, "1")
    for model, (pool, request) in PLACEMENTS.items():
        [pod] = wait_for_model(dc, model, lambda: running_pods(dc, model), f"a running pod of {model}")
        assert node_pool(dc, pod["spec"]["nodeName"]) == pool, model
        limits = pod["spec"]["containers"][0]["resources"].get("limits") or {}
        gpu_limits = dict((k, str(v)) for k, v in limits.items() if k.startswith("nvidia.com/"))
        if request is None:
            assert pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == "gpu-80g"
            assert gpu_limits == {}
        else:
            assert gpu_limits == request, model
    set_requests(dc, list(scale_to_zero), "0")
    for model in scale_to_zero:
        wait_for_model(dc, model, lambda: not running_pods(dc, model), f"{model} to scale to zero")
    for model in scale_to_zero:
        ready = [c for c in isvcs(dc)[model]["status"]["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True", "a model scaled to zero stays Ready"
    set_requests(dc, scale_to_zero, "1")
    for model in scale_to_zero:
        wait_for_model(dc, model, lambda: len(running_pods(dc, model)) == 1, f"{model} back to one pod")
    set_requests(dc, PLACEMENTS, "0")


# -- Kubernetes: the real KServe and KEDA charts --------------------------------------------------------------------


@pytest.fixture(scope="module")
def serving_cluster(devcluster_session):
    """A cluster of this file's own: the session's may hold what earlier tests installed (the demo inventory
    served through OpenShift AI, its namespaces and models), which the fleet switches below do not take out."""
    with testing.own_cluster(REPO / ".cache" / "serving-cluster", type(devcluster_session)) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kubernetes(serving_cluster, helm_bin):
    dc = serving_cluster
    # An earlier test may have served the demo inventory (OpenShift AI's operators): their simulated operators
    # would bring back the KServe CRDs this fleet starts without.
    switch_serving_fleet(dc, "serving-kubernetes")
    dc.clear_knobs()
    prepare_pools(dc)
    yield dc
    dc.clear_knobs()


def test_kubernetes_refusals_write_nothing(kubernetes, helm_bin):
    check_refusals(kubernetes, helm_bin)


def test_kubernetes_keda_crds_no_release_owns_are_refused_before_any_write(kubernetes, helm_bin):
    """KEDA's CRDs left on the cluster without KEDA (an earlier install, applied by hand): Helm would refuse the keda
    chart half-way, after KServe's charts went in. The preflight says so, names the way out, and writes nothing."""
    dc = kubernetes
    crd = yaml.safe_load((paths.crds_dir() / "keda" / "keda.sh_scaledobjects.yaml").read_text())
    api = dc.admin.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    api.create(body=crd)
    try:
        # Right after the create the API server may answer a status whose conditions are still null.
        wait_for(lambda: any(c["type"] == "Established" and c["status"] == "True" for c in
                             ((api.get(name=crd["metadata"]["name"]).to_dict().get("status") or {}).get("conditions")
                              or [])),
                 timeout=60, what="the hand-applied ScaledObject CRD to be served")
        mark = dc.audit.mark()
        out, dummy, dummy2 = run(dc, helm_bin)
        failed = failure(out)
        assert failed and "no Helm release owns the CRDs" in failed["msg"], failed
        assert _name_of_failed(out) == PREFLIGHT_TASK
        assert dc.audit.writes(mark) == []
    finally:
        api.delete(name=crd["metadata"]["name"])
        crds.wait_gone(dc.admin, [crd["metadata"]["name"]])


def test_kubernetes_installs_kserve_and_keda_and_converges(kubernetes, helm_bin):
    dc = kubernetes
    out = converge_and_check(dc, helm_bin, "kserve", {"Standard"})
    releases = task(out, "Install the charts")["results"]
    assert [r["item"]["name"] for r in releases] == ["kserve-crd", "kserve", "keda"]
    bge = isvcs(dc)["bge-large"]
    assert bge["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "keda"
    scaled = dc.admin.resources.get(api_version="keda.sh/v1alpha1", kind="ScaledObject").get(
        name="bge-large-predictor", namespace=NS).to_dict()
    assert scaled["spec"]["minReplicaCount"] == 0
    # The real cert-manager (the local cluster runs it) issued the certificate KServe's webhooks serve with, from
    # the chart's self-signed Issuer, and wrote its CA into each of the chart's webhook configurations.
    issued = cert_manager.issued(dc.admin, "kserve", "serving-cert")
    assert issued["request"]["spec"]["issuerRef"]["name"] == "selfsigned-issuer"
    assert [t.split("/")[0] for t in issued["targets"]] == (
        ["MutatingWebhookConfiguration"] + ["ValidatingWebhookConfiguration"] * 5)


def test_kubernetes_placements_scale_to_zero_and_back(kubernetes):
    check_placements_and_scale_to_zero(kubernetes, list(PLACEMENTS))


SERVING_PACKAGES = ("rhods-operator", "serverless-operator", "servicemeshoperator", "authorino-operator",
                    "openshift-custom-metrics-autoscaler-operator")
SERVING_CSVS = ("rhods-operator.", "serverless-operator.", "servicemeshoperator.", "authorino-operator.",
                "custom-metrics-autoscaler.")


def uninstall_serving_operators(dc):
    """Take the serving stack's operators out (Subscriptions, then CSVs), as an uninstall would, before a fleet
    switch: the OpenShift AI simulator brings a Succeeded CSV's CRDs back, which the switch deletes."""
    olm = "operators.coreos.com/v1alpha1"
    subs = dc.admin.resources.get(api_version=olm, kind="Subscription")
    for item in subs.get().items:
        if item.spec.name in SERVING_PACKAGES:
            subs.delete(name=item.metadata.name, namespace=item.metadata.namespace)
    csvs = dc.admin.resources.get(api_version=olm, kind="ClusterServiceVersion")

    def ours():
        return [c for c in csvs.get().items if c.metadata.name.startswith(SERVING_CSVS)]
    for item in ours():
        csvs.delete(name=item.metadata.name, namespace=item.metadata.namespace)
    wait_for(lambda: not ours(), timeout=120, what="the serving operators' CSVs to be deleted")


def switch_serving_fleet(dc, name):
    """The earlier fixture's models deleted, then the serving operators, then the fleet `name` loaded afresh.

    Models first, as an uninstall takes them out, and while their CRD is still served: the garbage collector deletes
    a predictor Deployment only once it can look its owner up, which it cannot once the switch has deleted the
    KServe CRDs (until a platform installs them again, in the middle of the next converge). A Deployment left so was
    taken over by the next InferenceService of the same name with its replicas as they were: 0 after the earlier
    fixture's scale to zero, which no HPA raises again (the HPA leaves a target at zero alone)."""
    deployments = dc.admin.resources.get(api_version="apps/v1", kind="Deployment")

    def workloads():   # the predictors' and, in Knative mode, their Revisions' Deployments
        return [d.metadata.name for d in deployments.get(namespace=NS).items]
    dc.admin.resources.invalidate_cache()   # an earlier switch may have taken the CRD away, a platform brought it
    try:
        api = dc.admin.resources.get(api_version=ISVC, kind="InferenceService")
        models = [item.metadata.name for item in api.get(namespace=NS).items]
    except (ResourceNotFoundError, NotFoundError):   # no KServe: no models either
        models = []
    for model in models:
        api.delete(name=model, namespace=NS)
    if models:
        wait_for(lambda: not workloads(), timeout=120, what=f"the InferenceServices' Deployments in {NS} to be deleted")
    uninstall_serving_operators(dc)
    dc.fleet(name, fresh=True)


# -- OpenShift AI 3.x: Standard mode, KEDA from the Custom Metrics Autoscaler ------------------------------------------


@pytest.fixture(scope="module")
def openshift_ai_3(serving_cluster):
    dc = serving_cluster
    switch_serving_fleet(dc, "serving-openshift-ai-3")
    dc.clear_knobs()
    prepare_pools(dc)
    yield dc
    dc.clear_knobs()


def test_openshift_ai_3_installs_through_olm_and_converges(openshift_ai_3, helm_bin):
    dc = openshift_ai_3
    out = converge_and_check(dc, helm_bin, "openshift-ai-3", {"Standard"})
    installed = [r["item"]["package"] for r in task(out, "Install the operators")["results"]]
    assert installed == ["openshift-custom-metrics-autoscaler-operator", "rhods-operator"]
    dsc = dc.admin.resources.get(api_version="datasciencecluster.opendatahub.io/v2", kind="DataScienceCluster").get(
        name="default-dsc").to_dict()
    assert dsc["spec"]["components"]["kserve"]["managementState"] == "Managed"
    controllers = dc.admin.resources.get(api_version="keda.sh/v1alpha1", kind="KedaController")
    controllers.get(name="keda", namespace="openshift-keda")
    assert isvcs(dc)["llama-8b-dra"]["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "keda"
    # The report shows each served model with where it runs.
    served = dc.module("gpu_cluster_info")["serving"]["models"]
    assert [(m["name"], m["pool"] or m["claim_template"], m["ready"]) for m in served] == [
        ("llm/bge-large", "embed-l40s", True), ("llm/llama-70b", "whole-a100", True), ("llm/llama-8b", "llm-h100", True),
        ("llm/llama-8b-dra", "gpu-80g", True)]


def test_openshift_ai_3_refuses_knative_mode(openshift_ai_3, helm_bin):
    dc = openshift_ai_3
    mark = dc.audit.mark()
    out, dummy, dummy2 = run(dc, helm_bin, mode="knative")
    assert "removed Serverless (Knative) mode" in failure(out)["msg"]
    assert _name_of_failed(out) == PREFLIGHT_TASK
    assert dc.audit.writes(mark) == []


def test_openshift_ai_3_placements_scale_to_zero_and_back(openshift_ai_3):
    check_placements_and_scale_to_zero(openshift_ai_3, list(PLACEMENTS))


# -- OpenShift AI 2.x: Knative (Serverless) mode ------------------------------------------------------------------


def models_2x(**changes):
    """On 2.x the claim runs in RawDeployment mode (Knative refuses claims) with the HPA: at least one replica."""
    base = {"llama-8b-dra": {"mode": "standard", "min_replicas": 1}}
    for name, fields in changes.items():
        base[name] = dict(base.get(name, {}), **fields)
    return models_with(**base)


@pytest.fixture(scope="module")
def openshift_ai_2(serving_cluster):
    dc = serving_cluster
    switch_serving_fleet(dc, "serving-openshift-ai-2")
    dc.clear_knobs()
    prepare_pools(dc)
    yield dc
    dc.clear_knobs()


def test_openshift_ai_2_refusals_write_nothing(openshift_ai_2, helm_bin):
    check_refusals(openshift_ai_2, helm_bin, KNATIVE_REFUSALS, build=models_2x, openshift_ai={"channel": "stable"})


def test_openshift_ai_2_installs_serverless_and_converges(openshift_ai_2, helm_bin):
    dc = openshift_ai_2
    models_2 = models_2x()
    mark = dc.audit.mark()
    out, stats, dummy = run(dc, helm_bin, "--check", models=models_2, openshift_ai={"channel": "stable"})
    assert not failure(out), why(out)
    assert dc.audit.writes(mark) == []
    out, stats, seconds = run(dc, helm_bin, models=models_2, openshift_ai={"channel": "stable"})
    assert not failure(out), "\n".join([why(out)] + [model_state(dc, m["name"]) for m in models_2])
    print(f"\nopenshift-ai-2: converged in {seconds:.1f} s")
    installed = [r["item"]["package"] for r in task(out, "Install the operators")["results"]]
    assert installed == ["servicemeshoperator", "serverless-operator", "authorino-operator", "rhods-operator"]
    live = isvcs(dc)
    assert live["bge-large"]["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Serverless"
    assert live["bge-large"]["metadata"]["annotations"][
        "autoscaling.knative.dev/scale-to-zero-pod-retention-period"] == "5m"
    assert live["bge-large"]["metadata"]["annotations"]["serving.knative.dev/progress-deadline"] == "1800s"
    assert live["llama-8b-dra"]["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "RawDeployment"
    for obj in live.values():
        ready = [c for c in obj["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", obj["status"]
    mark = dc.audit.mark()
    again, stats, dummy = run(dc, helm_bin, models=models_2, openshift_ai={"channel": "stable"})
    assert stats["changed"] == 0 and dc.audit.writes(mark) == []


def test_openshift_ai_2_placements_scale_to_zero_and_back(openshift_ai_2):
    check_placements_and_scale_to_zero(openshift_ai_2, ["bge-large", "llama-8b", "llama-70b"])
