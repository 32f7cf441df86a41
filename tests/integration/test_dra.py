"""The DRA stage (playbook dra, modules dra_platform, dra_nodes, dra_claim_templates) against the local cluster.

Default fleet: OpenShift 4.20.3, where DRA is a Technology Preview. The real API server validates every object
(CEL included), the real scheduler allocates claims from the ResourceSlices the DRA kubelet plugin simulator
publishes, and the real DRA driver chart (shared/charts) is installed with the Go-built helm. Writes are counted
in the audit log (the admin user's: the modules' and helm's own).
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError

from conftest import REPO, task_result, wait_for
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DRA_FIELD_MANAGER
from kubegpu_devcluster import cert_manager, paths

PLAYBOOK = "playbooks/dra.yml"
INVENTORY = Path(__file__).parent / "dra" / "inventory.yml"
CHART = paths.charts_dir() / "dra-driver-nvidia-gpu"
RESOURCE = "resource.k8s.io/v1"
CONFIG = "config.openshift.io/v1"
DRA_NODE = "gpu-h200-000"
PLUGIN = "nvidia.com/dra-kubelet-plugin"
DEPLOY = "nvidia.com/gpu.deploy.device-plugin"
RELEASE = "dra-driver-nvidia-gpu"
CP_API = "nvidia.com/v1"
RBAC = "rbac.authorization.k8s.io/v1"
SCC_GRANT = "kubegpu-dra-driver-privileged-scc"
EVICTION_ENV = {"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": PLUGIN}
OTHERS_ENV = {"name": "ENABLE_GPU_POD_EVICTION", "value": "true"}
H200_POOL = {"name": "dra-h200", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H200"}},
             "sharing": {"strategy": "dra"}}

pytestmark = pytest.mark.skipif(not CHART.is_dir(), reason=f"the DRA driver chart is not at {CHART}")


@pytest.fixture(scope="module")
def helm_bin():
    out = subprocess.run([str(REPO / "tools" / "devcluster" / "build.sh")], check=True, capture_output=True,
                         text=True).stdout.strip().splitlines()[-1]
    return Path(out) / "helm"


@pytest.fixture(scope="module")
def cluster(devcluster_session, helm_bin):
    """The default fleet with the default feature set; afterwards everything the stage wrote is taken back."""
    dc = devcluster_session
    dc.fleet("default")
    _default_feature_set(dc)
    # Whatever ran before (test_gpu_node_pools leaves its ClusterPolicy): none, so that the stage writes the driver
    # manager's env only into the policy the test below creates.
    policies = dc.admin.resources.get(api_version=CP_API, kind="ClusterPolicy")
    for policy in policies.get().items:
        policies.delete(name=policy.metadata.name)
    wait_for(lambda: not policies.get().items, timeout=60, what="earlier ClusterPolicies gone")
    nodes = dc.admin.resources.get(api_version="v1", kind="Node")
    before = nodes.get(name=DRA_NODE).metadata.labels
    original = {PLUGIN: before.get(PLUGIN), DEPLOY: before.get(DEPLOY)}
    yield dc
    _uninstall(dc, helm_bin)
    nodes.patch(name=DRA_NODE, body={"metadata": {"labels": original}}, content_type="application/merge-patch+json")
    _default_feature_set(dc)


def _default_feature_set(dc):
    """FeatureGate cluster as a new cluster has it. Its CRD refuses to drop a featureSet (irreversible, as on a real
    cluster), so the simulated cluster's object is recreated."""
    api = dc.admin.resources.get(api_version=CONFIG, kind="FeatureGate")
    if (api.get(name="cluster").spec or {}).get("featureSet"):
        api.delete(name="cluster")
        api.create(body={"apiVersion": CONFIG, "kind": "FeatureGate", "metadata": {"name": "cluster"}, "spec": {}})


def _uninstall(dc, helm_bin):
    subprocess.run([str(helm_bin), "uninstall", RELEASE, "-n", RELEASE, "--kubeconfig", str(dc.kubeconfig)],
                   capture_output=True, check=False)
    ns_api = dc.admin.resources.get(api_version="v1", kind="Namespace")
    classes = dc.admin.resources.get(api_version=RESOURCE, kind="DeviceClass")
    for item in classes.get(label_selector="app.kubernetes.io/managed-by=kubegpu.platform").items:
        classes.delete(name=item.metadata.name)
    for name in ("llm", RELEASE):
        try:
            ns_api.delete(name=name)
        except NotFoundError:
            pass
    wait_for(lambda: not [n for n in ns_api.get().items if n.metadata.name in ("llm", RELEASE)], timeout=60,
             what="the DRA namespaces to be deleted")


def _vars(helm_bin, **changes):
    """kubegpu_dra of the test inventory with the local chart and helm, and `changes`, as one extra-vars file."""
    settings = yaml.safe_load(INVENTORY.read_text())["all"]["vars"]["kubegpu_dra"]
    helm = dict({"chart": str(CHART), "binary": str(helm_bin)}, **changes.pop("helm", {}))
    settings = dict(settings, helm=helm, timeout=60, **changes)
    return ["-e", json.dumps({"kubegpu_dra": settings})]


def _run(dc, helm_bin, *args, **changes):
    proc = dc.playbook(PLAYBOOK, "-i", str(INVENTORY), *_vars(helm_bin, **changes), *args)
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"ansible-playbook printed no JSON (rc {proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return out, out["stats"]["localhost"]


def _failure(out):
    for play in out["plays"]:
        for task in play["tasks"]:
            result = task["hosts"].get("localhost", {})
            if result.get("failed"):
                return result
    return None


def _slices(dc):
    return sorted(s.spec.nodeName for s in dc.admin.resources.get(api_version=RESOURCE, kind="ResourceSlice").get().items
                  if s.spec.driver == "gpu.nvidia.com")


def _labels(dc, name=DRA_NODE):
    return dc.admin.resources.get(api_version="v1", kind="Node").get(name=name).metadata.labels


def _feature_set(dc):
    return (dc.admin.resources.get(api_version=CONFIG, kind="FeatureGate").get(name="cluster").spec or {}).get(
        "featureSet")


# -- order matters: refusals and check mode on the untouched cluster, then the install, then the rest


def test_openshift_before_4_21_without_acknowledgement_is_refused_and_writes_nothing(cluster, helm_bin):
    dc = cluster
    mark = dc.audit.mark()
    out, stats = _run(dc, helm_bin, acknowledge_tech_preview_no_upgrade=False)
    failed = _failure(out)
    assert failed and stats["failures"] == 1
    assert "irreversible" in failed["msg"] and "blocks every upgrade" in failed["msg"]
    assert failed["requirements"] == [
        "set kubegpu_dra.acknowledge_tech_preview_no_upgrade: true, or upgrade to OpenShift 4.21 where DRA is GA"]
    assert dc.audit.writes(mark) == []
    assert _feature_set(dc) is None


def test_dra_pool_overlapping_a_device_plugin_pool_is_refused(cluster, helm_bin):
    dc = cluster
    time_slicing = {"name": "shared-h200", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H200"}},
                    "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}}
    mark = dc.audit.mark()
    out, dummy = _run(dc, helm_bin, "-e", json.dumps({"kubegpu_node_pools": [H200_POOL, time_slicing]}))
    failed = _failure(out)
    assert "pool 'dra-h200' (strategy dra) and pool 'shared-h200' (strategy time-slicing) both take node " \
           f"{DRA_NODE}" in failed["msg"]
    assert dc.audit.writes(mark) == []


def test_invalid_cel_is_refused_by_the_api_server_and_nothing_is_written(cluster, helm_bin):
    dc = cluster
    bad = {"name": "bad-cel", "namespaces": ["llm"], "cel": "device.attributes['gpu.nvidia.com'].productName =="}
    mark = dc.audit.mark()
    out, dummy = _run(dc, helm_bin, claim_templates=[{"name": "ok", "namespaces": ["llm"]}, bad])
    failed = _failure(out)
    # Refused by the playbook's first play (preflight), with the dra stage's own dry run.
    assert "claim template 'bad-cel': the API server refused its DeviceClass kubegpu-bad-cel, so nothing was " \
        "written" in failed["msg"], failed["msg"]
    assert "compilation failed" in failed["msg"] or "Syntax error" in failed["msg"], failed["msg"]
    assert dc.audit.writes(mark) == []
    # The validation was the API server's: its dry runs are in the log.
    assert any("dryRun=All" in e.uri and e.resource == "deviceclasses" for e in dc.audit.events(mark))


def test_check_mode_shows_the_plan_and_writes_nothing(cluster, helm_bin):
    dc = cluster
    mark = dc.audit.mark()
    out, stats = _run(dc, helm_bin, "--check", "--diff")
    assert not _failure(out), _failure(out)
    assert dc.audit.writes(mark) == []
    platform = task_result(out, "Check the platform")
    assert platform["changed"] and [c["kind"] for c in platform["changes"]] == [
        "FeatureGate", "ClusterRole", "ClusterRoleBinding"]     # OpenShift: the driver's privileged SCC grant
    assert platform["diff"]["after"]["FeatureGate/cluster"] == {"spec": {"featureSet": "TechPreviewNoUpgrade"}}
    assert platform["scc"] == [f"{RELEASE}/{RELEASE}-service-account-controller",
                               f"{RELEASE}/{RELEASE}-service-account-kubeletplugin"]
    assert platform["dra_pools"] == {"dra-h200": [DRA_NODE]}
    nodes = task_result(out, "Hand the DRA pools")
    assert nodes["node_labels"][DRA_NODE][DEPLOY] == "false"
    templates = task_result(out, "Publish the claim templates")
    assert {c["kind"] for c in templates["changes"]} >= {"DeviceClass", "ResourceClaimTemplate", "ResourceClaim"}
    assert _feature_set(dc) is None


def test_install_converges(cluster, helm_bin):
    dc = cluster
    mark = dc.audit.mark()
    t0 = time.monotonic()
    out, stats = _run(dc, helm_bin)
    seconds = time.monotonic() - t0
    assert not _failure(out), _failure(out)
    writes = dc.audit.writes(mark)
    print(f"\nDRA stage converged in {seconds:.1f} s with {len(writes)} writes")
    assert _feature_set(dc) == "TechPreviewNoUpgrade"
    # The driver: the real chart, GPU allocation acknowledged, the kubelet plugin on the DRA pool's nodes only.
    values = json.loads(subprocess.run([str(helm_bin), "get", "values", RELEASE, "-n", RELEASE, "-o", "json",
                                        "--kubeconfig", str(dc.kubeconfig)], capture_output=True, text=True,
                                       check=True).stdout)
    assert values["gpuResourcesEnabledOverride"] is True and values["resources"]["gpus"]["enabled"] is True
    assert values["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert values["kubeletPlugin"]["nodeSelector"] == {PLUGIN: "true"}
    assert values["webhook"] == {"enabled": False}
    assert values["featureGates"] == {"TimeSlicingSettings": True}     # shared-ts shares by time-slicing
    plugin = dc.admin.resources.get(api_version="apps/v1", kind="DaemonSet").get(
        name=f"{RELEASE}-kubelet-plugin", namespace=RELEASE)
    assert plugin.to_dict()["spec"]["template"]["spec"]["nodeSelector"] == {PLUGIN: "true"}
    # The pool's nodes: the plugin's label, the device plugin off; ResourceSlices for exactly those nodes.
    labels = _labels(dc)
    assert labels[PLUGIN] == "true" and labels[DEPLOY] == "false"
    assert task_result(out, "Wait until each DRA node publishes")["devices"] == {DRA_NODE: 8}
    assert _slices(dc) == [DRA_NODE]
    # The templates and what satisfies each.
    classes = dc.admin.resources.get(api_version=RESOURCE, kind="DeviceClass")
    assert {"kubegpu-gpu-80g", "kubegpu-h200-pair", "kubegpu-shared-ts", "kubegpu-b200-only"} <= {
        c.metadata.name for c in classes.get().items}
    rcts = dc.admin.resources.get(api_version=RESOURCE, kind="ResourceClaimTemplate").get(namespace="llm").items
    assert sorted(t.metadata.name for t in rcts) == ["b200-only", "gpu-80g", "h200-pair"]
    dc.admin.resources.get(api_version=RESOURCE, kind="ResourceClaim").get(name="shared-ts", namespace="llm")
    report = task_result(out, "Publish the claim templates")["templates"]
    assert report["gpu-80g"]["nodes"] == [DRA_NODE] and len(report["gpu-80g"]["devices"][DRA_NODE]) == 8
    assert report["h200-pair"]["nodes"] == [DRA_NODE]
    assert report["b200-only"] == {"devices": {}, "nodes": [], "exact": True, "device_class": "kubegpu-b200-only",
                                   "claims": ["llm/b200-only"]}
    warnings = task_result(out, "Publish the claim templates")["warnings"]
    assert any("claim template 'b200-only': no node's devices satisfy it" in w for w in warnings)


def test_second_run_changes_and_writes_nothing(cluster, helm_bin):
    dc = cluster
    mark = dc.audit.mark()
    out, stats = _run(dc, helm_bin)
    assert not _failure(out), _failure(out)
    assert stats["changed"] == 0
    assert dc.audit.writes(mark) == []


def _may_use_privileged_scc(dc, namespace, name):
    review = dc.admin.resources.get(api_version="authorization.k8s.io/v1", kind="SubjectAccessReview").create(body={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": f"system:serviceaccount:{namespace}:{name}",
                 "resourceAttributes": {"group": "security.openshift.io", "resource": "securitycontextconstraints",
                                        "name": "privileged", "verb": "use"}}})
    return review.status.allowed


def test_openshift_lets_the_driver_service_accounts_use_the_privileged_scc(cluster, helm_bin):
    dc = cluster
    role = dc.admin.resources.get(api_version=RBAC, kind="ClusterRole").get(name=SCC_GRANT).to_dict()
    assert role["rules"] == [{"apiGroups": ["security.openshift.io"], "resources": ["securitycontextconstraints"],
                              "resourceNames": ["privileged"], "verbs": ["use"]}]
    binding = dc.admin.resources.get(api_version=RBAC, kind="ClusterRoleBinding").get(name=SCC_GRANT).to_dict()
    granted = sorted((s["namespace"], s["name"]) for s in binding["subjects"])
    # Exactly the service accounts the chart created for its controller and kubelet plugin.
    accounts = dc.admin.resources.get(api_version="v1", kind="ServiceAccount").get(namespace=RELEASE).items
    assert granted == sorted((RELEASE, a.metadata.name) for a in accounts
                             if a.metadata.name.endswith(("-controller", "-kubeletplugin")))
    assert granted == [(RELEASE, f"{RELEASE}-service-account-controller"),
                       (RELEASE, f"{RELEASE}-service-account-kubeletplugin")]
    # The API server's own RBAC says yes to those and no to any other account.
    assert all(_may_use_privileged_scc(dc, ns, name) for ns, name in granted)
    assert not _may_use_privileged_scc(dc, RELEASE, "default")

    # Turned off: the grant goes; on again: it comes back; each a write per object, then none.
    mark = dc.audit.mark()
    out, dummy = _run(dc, helm_bin, openshift_scc=False)
    assert not _failure(out), _failure(out)
    assert sorted((w.verb, w.resource) for w in dc.audit.writes(mark)) == [
        ("delete", "clusterrolebindings"), ("delete", "clusterroles")]
    assert not _may_use_privileged_scc(dc, *granted[0])
    mark = dc.audit.mark()
    out, dummy = _run(dc, helm_bin)
    assert task_result(out, "Check the platform")["scc"] == ["/".join(g) for g in granted]
    assert sorted((w.verb, w.resource) for w in dc.audit.writes(mark)) == [
        ("patch", "clusterrolebindings"), ("patch", "clusterroles")]
    mark = dc.audit.mark()
    out, stats = _run(dc, helm_bin)
    assert stats["changed"] == 0 and dc.audit.writes(mark) == []


def test_cluster_info_shows_dra_nodes_and_claim_templates(cluster):
    dra = cluster.module("gpu_cluster_info")["dra"]
    assert dra["nodes"] == {DRA_NODE: 8}
    templates = {t["name"]: t for t in dra["claim_templates"]}
    assert sorted(templates) == ["b200-only", "gpu-80g", "h200-pair", "shared-ts"]
    assert templates["gpu-80g"] == {"name": "gpu-80g", "device_class": "kubegpu-gpu-80g",
                                    "claims": ["ResourceClaimTemplate llm/gpu-80g"]}
    assert templates["shared-ts"]["claims"] == ["ResourceClaim llm/shared-ts"]


def test_diff_shows_a_changed_template_before_and_after(cluster):
    dc = cluster
    mark = dc.audit.mark()
    result = dc.module("dra_claim_templates", {"claim_templates": [
        {"name": "gpu-80g", "namespaces": ["llm"], "min_memory": "200Gi"}], "prune": False}, check=True, diff=True)
    assert not result.get("failed"), result.get("msg")
    assert dc.audit.writes(mark) == []
    before = result["diff"]["before"]["DeviceClass/kubegpu-gpu-80g"]
    after = result["diff"]["after"]["DeviceClass/kubegpu-gpu-80g"]
    assert "quantity('80Gi')" in before["spec"]["selectors"][0]["cel"]["expression"]
    assert "quantity('200Gi')" in after["spec"]["selectors"][0]["cel"]["expression"]
    # Nothing has 200Gi (an H200 has 141 GB): warned before anything is applied.
    assert result["templates"]["gpu-80g"]["nodes"] == []


def _pod(name, template):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "llm"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                     "containers": [{"name": "server", "image": "vllm/vllm-openai",
                                     "resources": {"claims": [{"name": "gpu"}]}}]}}


def test_the_scheduler_allocates_claims_from_the_templates(cluster):
    dc = cluster
    pods = dc.admin.resources.get(api_version="v1", kind="Pod")
    claims = dc.admin.resources.get(api_version=RESOURCE, kind="ResourceClaim")
    pods.create(body=_pod("fits", "h200-pair"), namespace="llm")
    pods.create(body=_pod("never-fits", "b200-only"), namespace="llm")
    try:
        placed = wait_for(lambda: pods.get(name="fits", namespace="llm").spec.nodeName, timeout=120,
                          what="the pod with claim template h200-pair to be scheduled")
        assert placed == DRA_NODE

        def allocation():
            for claim in claims.get(namespace="llm").items:
                owner = (claim.metadata.annotations or {}).get("resource.kubernetes.io/pod-claim-name")
                if claim.metadata.name.startswith("fits-") and owner == "gpu":
                    return (claim.status or {}).get("allocation")
            return None
        results = wait_for(allocation, timeout=120, what="the claim of pod fits to be allocated")["devices"]["results"]
        assert len(results) == 2 and {r["pool"] for r in results} == {DRA_NODE}
        assert {r["driver"] for r in results} == {"gpu.nvidia.com"}

        def unschedulable():
            pod = pods.get(name="never-fits", namespace="llm")
            return [c for c in pod.status.conditions or [] if c.type == "PodScheduled" and c.reason == "Unschedulable"]
        [condition] = wait_for(unschedulable, timeout=120, what="the scheduler to give up on pod never-fits")
        assert "cannot allocate all claims" in condition.message
        assert pods.get(name="never-fits", namespace="llm").status.phase == "Pending"
    finally:
        for name in ("fits", "never-fits"):
            pods.delete(name=name, namespace="llm", grace_period_seconds=0)


def test_templates_no_longer_listed_are_pruned(cluster):
    dc = cluster
    settings = yaml.safe_load(INVENTORY.read_text())["all"]["vars"]["kubegpu_dra"]["claim_templates"]
    kept = [t for t in settings if t["name"] != "b200-only"]
    result = dc.module("dra_claim_templates", {"claim_templates": kept})
    assert not result.get("failed"), result.get("msg")
    deleted = sorted((c["kind"], c["name"]) for c in result["changes"] if c["fields"] == ["(deleted)"])
    assert deleted == [("DeviceClass", "kubegpu-b200-only"), ("ResourceClaimTemplate", "b200-only")]
    with pytest.raises(NotFoundError):
        dc.admin.resources.get(api_version=RESOURCE, kind="DeviceClass").get(name="kubegpu-b200-only")
    assert dc.module("dra_claim_templates", {"claim_templates": kept})["changed"] is False


def test_a_node_leaving_the_dra_pool_gets_the_device_plugin_back(cluster):
    dc = cluster
    result = dc.module("dra_nodes", {"pools": [], "wait": False})
    assert not result.get("failed"), result.get("msg")
    assert result["node_labels"] == {DRA_NODE: {PLUGIN: None, DEPLOY: None}}
    labels = _labels(dc)
    assert PLUGIN not in labels and DEPLOY not in labels
    wait_for(lambda: _slices(dc) == [], timeout=120, what="the node's ResourceSlice to go")
    # And back: the slice returns.
    result = dc.module("dra_nodes", {"pools": [H200_POOL], "timeout": 30})
    assert result["devices"] == {DRA_NODE: 8}


def _policy(dc):
    return dc.admin.resources.get(api_version=CP_API, kind="ClusterPolicy").get(name="gpu-cluster-policy").to_dict()


def _manager_env(dc):
    return ((_policy(dc)["spec"]["driver"].get("manager") or {}).get("env")) or []


def test_the_gpu_operator_driver_manager_is_told_the_dra_plugin_label(cluster, helm_bin):
    dc = cluster
    api = dc.admin.resources.get(api_version=CP_API, kind="ClusterPolicy")
    spec = dict((key, {}) for key in ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "gfd",
                                      "nodeStatusExporter", "operator", "toolkit"))
    spec["driver"] = {"manager": {"env": [OTHERS_ENV]}}
    api.server_side_apply(body={"apiVersion": CP_API, "kind": "ClusterPolicy",
                                "metadata": {"name": "gpu-cluster-policy"}, "spec": spec},
                          field_manager="gpu-operator-stand-in")
    try:
        mark = dc.audit.mark()
        out, dummy = _run(dc, helm_bin, "--check")
        assert not _failure(out), _failure(out)
        assert dc.audit.writes(mark) == []
        assert task_result(out, "Hand the DRA pools")["cluster_policy"]["after"] == [OTHERS_ENV, EVICTION_ENV]
        assert _manager_env(dc) == [OTHERS_ENV]

        mark = dc.audit.mark()
        out, dummy = _run(dc, helm_bin)
        assert not _failure(out), _failure(out)
        writes = dc.audit.writes(mark)
        print(f"\ndriver manager env set with {len(writes)} write(s): {[str(w) for w in writes]}")
        # (the playbook also puts back claim template b200-only, which an earlier test pruned)
        assert [w.verb for w in writes if w.resource == "clusterpolicies"] == ["update"]
        # Merged with the entry someone else set, and written under the stage's own field manager.
        assert _manager_env(dc) == [OTHERS_ENV, EVICTION_ENV]
        assert DRA_FIELD_MANAGER in [m["manager"] for m in _policy(dc)["metadata"]["managedFields"]]

        mark = dc.audit.mark()
        out, stats = _run(dc, helm_bin)
        assert stats["changed"] == 0 and dc.audit.writes(mark) == []

        # No DRA pool remains: the entry goes, the other stays.
        mark = dc.audit.mark()
        result = dc.module("dra_nodes", {"pools": [], "driver_owner": "gpu-operator", "wait": False})
        assert not result.get("failed"), result.get("msg")
        assert _manager_env(dc) == [OTHERS_ENV]
        assert ("update", "clusterpolicies") in [(w.verb, w.resource) for w in dc.audit.writes(mark)]
        # The pool back with a driver the host installs: no entry either; then nothing to write.
        result = dc.module("dra_nodes", {"pools": [H200_POOL], "driver_owner": "host", "timeout": 30})
        assert not result.get("failed"), result.get("msg")
        assert _manager_env(dc) == [OTHERS_ENV]
        mark = dc.audit.mark()
        assert dc.module("dra_nodes", {"pools": [H200_POOL], "driver_owner": "host", "wait": False})["changed"] is False
        assert dc.audit.writes(mark) == []
    finally:
        api.delete(name="gpu-cluster-policy")


def test_the_admission_webhook_gets_its_certificate_from_cert_manager(cluster, helm_bin):
    """docs/dra.md: with cert-manager installed, the chart's webhook turned on through helm.values gets its
    certificate from the real cert-manager (the local cluster runs it), and its configuration the CA; a second run
    writes nothing although cert-manager wrote into the chart's ValidatingWebhookConfiguration."""
    dc = cluster
    webhook = {"helm": {"values": {"webhook": {"enabled": True}}}}
    out, dummy = _run(dc, helm_bin, **webhook)
    assert not _failure(out), _failure(out)
    issued = cert_manager.issued(dc.admin, RELEASE, f"{RELEASE}-webhook-cert")
    assert issued["certificate"]["spec"]["dnsNames"] == [f"{RELEASE}-webhook.{RELEASE}.svc"]
    assert issued["request"]["spec"]["issuerRef"]["name"] == f"{RELEASE}-webhook-issuer"
    assert issued["targets"] == [f"ValidatingWebhookConfiguration/{RELEASE}-webhook-config"]
    mark = dc.audit.mark()
    out, stats = _run(dc, helm_bin, **webhook)
    assert not _failure(out), _failure(out)
    assert stats["changed"] == 0 and dc.audit.writes(mark) == []
