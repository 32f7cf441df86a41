"""The serving simulators (kserve, keda, knative) against the real API server, controller-manager, scheduler, KWOK
and cert-manager, on fleets/serving-kubernetes.yaml with the real KServe and KEDA charts installed by helm.

One cluster for the module (.cache/serving-sim-cluster, apart from other test clusters). The tests run in file
order: the first installs the charts the others use.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kubegpu_devcluster import __main__ as devcluster
from kubegpu_devcluster import cert_manager, cluster, crds, paths
from kubegpu_devcluster.testing import wait_for
from serving_cluster import ISVC, NS, Cluster, conditions, isvc, requests

REPO = Path(__file__).resolve().parents[3]
FLEET = paths.DEVCLUSTER_ROOT / "fleets" / "serving-kubernetes.yaml"
IDLE = "3"


@pytest.fixture(scope="module")
def sc():
    state = Path(os.environ.get("KUBEGPU_SERVING_CLUSTER_DIR", REPO / ".cache" / "serving-sim-cluster"))
    os.environ["DEVCLUSTER_DIR"] = str(state)
    t0 = time.monotonic()
    devcluster.up(state, FLEET)
    print(f"\nserving cluster ready in {time.monotonic() - t0:.1f} s")
    c = Cluster(state)
    c.knobs({"serving.idle_seconds": IDLE})
    c.api("v1", "Namespace").create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    from kubegpu_devcluster.control_plane import wait_default_service_account
    wait_default_service_account(c.admin, 60, NS)
    yield c
    cluster.down(state)


def test_real_charts_install_with_helm(sc):
    """kserve-crd, keda, kserve-resources and kserve-runtime-configs install as users install them; the
    certificates their webhooks ask cert-manager for are issued; the controllers' pods run."""
    charts = paths.charts_dir()
    t0 = time.monotonic()
    sc.helm("install", "kserve-crd", str(charts / "kserve" / "kserve-crd"), "-n", "kserve", "--create-namespace")
    sc.helm("install", "keda", str(charts / "keda"), "-n", "keda", "--create-namespace", "--wait", "--timeout", "120s")
    sc.helm("install", "kserve", str(charts / "kserve" / "kserve-resources"), "-n", "kserve", "--wait",
            "--timeout", "120s")
    sc.helm("install", "kserve-runtimes", str(charts / "kserve" / "kserve-runtime-configs"), "-n", "kserve",
            "--set", "kserve.servingruntime.enabled=true")
    print(f"charts installed in {time.monotonic() - t0:.1f} s")
    assert "kserve-resources-v0.20.0" in sc.helm("list", "-A")
    issued = cert_manager.issued(sc.admin, "kserve", "serving-cert")
    assert issued["secret"]["metadata"]["name"] == "kserve-webhook-server-cert"
    assert sc.get("v1", "ConfigMap", "inferenceservice-config", "kserve")
    assert sc.get(ISVC.replace("v1beta1", "v1alpha1"), "ClusterServingRuntime", "kserve-huggingfaceserver", None)
    # KEDA's external metrics APIService stays unavailable (nothing answers for it here); clients carry on.
    api = sc.get("apiregistration.k8s.io/v1", "APIService", "v1beta1.external.metrics.k8s.io", None)
    assert conditions(api)["Available"]["status"] == "False"


def test_keda_isvc_ready_scales_to_zero_and_back(sc):
    """Standard mode + autoscalerClass keda: Deployment, Service, ScaledObject (minReplicaCount 0); the real
    scheduler puts the pod on the group asked for with its GPUs; idle -> 0 replicas and the GPUs free; a
    request -> 1 again; the InferenceService stays Ready throughout."""
    sc.api(ISVC, "InferenceService").create(body=isvc("llm-keda", gpus=2), namespace=NS)
    t0 = time.monotonic()
    pod = wait_for(lambda: [p for p in sc.pods("serving.kserve.io/inferenceservice=llm-keda")
                            if (p.get("status") or {}).get("phase") == "Running"], what="predictor pod running")[0]
    assert pod["spec"]["nodeName"].startswith("gpu-a100-")
    container = pod["spec"]["containers"][0]
    assert container["name"] == "kserve-container" and container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert "--model_name=llm-keda" in container["args"] and "--backend=vllm" in container["args"]
    wait_for(lambda: conditions(sc.get(ISVC, "InferenceService", "llm-keda")).get("Ready", {}).get("status") == "True",
             what="InferenceService Ready")
    obj = sc.get(ISVC, "InferenceService", "llm-keda")
    assert obj["status"]["url"] == f"http://llm-keda-{NS}.example.com"
    assert obj["status"]["clusterServingRuntimeName"] == "kserve-huggingfaceserver"
    so = sc.get("keda.sh/v1alpha1", "ScaledObject", "llm-keda-predictor")
    assert so["spec"]["minReplicaCount"] == 0 and so["spec"]["scaleTargetRef"]["name"] == "llm-keda-predictor"
    assert so["spec"]["triggers"][0]["type"] == "prometheus"
    assert sc.get("v1", "Service", "llm-keda-predictor")
    # idle: scaled to zero, no pod holds the GPUs, still Ready
    wait_for(lambda: sc.get("apps/v1", "Deployment", "llm-keda-predictor")["spec"]["replicas"] == 0
             and not sc.pods("serving.kserve.io/inferenceservice=llm-keda"), timeout=90, what="scale to zero")
    print(f"created -> Ready -> zero in {time.monotonic() - t0:.1f} s")
    assert conditions(sc.get(ISVC, "InferenceService", "llm-keda"))["Ready"]["status"] == "True"
    so = sc.get("keda.sh/v1alpha1", "ScaledObject", "llm-keda-predictor")
    assert conditions(so)["Ready"]["status"] == "True" and conditions(so)["Active"]["status"] == "False"
    # a request: back to one, on a GPU node
    t1 = time.monotonic()
    requests(sc, "llm-keda", 1)
    pod = wait_for(lambda: [p for p in sc.pods("serving.kserve.io/inferenceservice=llm-keda")
                            if (p.get("status") or {}).get("phase") == "Running"], what="scale from zero")[0]
    assert pod["spec"]["nodeName"].startswith("gpu-a100-")
    assert conditions(sc.get("keda.sh/v1alpha1", "ScaledObject", "llm-keda-predictor"))["Active"]["status"] == "True"
    print(f"request -> pod running in {time.monotonic() - t1:.1f} s")
    # idle again: back to zero
    requests(sc, "llm-keda", 0)
    wait_for(lambda: sc.get("apps/v1", "Deployment", "llm-keda-predictor")["spec"]["replicas"] == 0,
             timeout=90, what="scale to zero again")


def test_unknown_runtime_and_unschedulable_pod_fail_with_reasons(sc):
    api = sc.api(ISVC, "InferenceService")
    bad = isvc("no-runtime")
    bad["spec"]["predictor"]["model"]["runtime"] = "no-such-runtime"
    api.create(body=bad, namespace=NS)
    cond = wait_for(lambda: conditions(sc.get(ISVC, "InferenceService", "no-runtime")).get("PredictorReady"),
                    what="PredictorReady on an unknown runtime")
    assert cond["status"] == "False" and cond["reason"] == "RuntimeNotRecognized"
    status = sc.get(ISVC, "InferenceService", "no-runtime")["status"]
    assert status["modelStatus"]["lastFailureInfo"]["reason"] == "RuntimeNotRecognized"
    assert sc.get("apps/v1", "Deployment", "no-runtime-predictor") is None
    # 16 GPUs on a 4-GPU node: the real scheduler cannot place it
    api.create(body=isvc("too-big", gpus=16, min_replicas=1), namespace=NS)
    cond = wait_for(lambda: conditions(sc.get(ISVC, "InferenceService", "too-big")).get("PredictorReady", {})
                    .get("reason") == "MinimumReplicasUnavailable"
                    and conditions(sc.get(ISVC, "InferenceService", "too-big"))["PredictorReady"], what="not available")
    assert cond["status"] == "False"
    assert conditions(sc.get(ISVC, "InferenceService", "too-big"))["Ready"]["status"] == "False"
    pod = wait_for(lambda: sc.pods("serving.kserve.io/inferenceservice=too-big"), what="pending pod")[0]
    sched = wait_for(lambda: conditions(sc.get("v1", "Pod", pod["metadata"]["name"])).get("PodScheduled"),
                     what="PodScheduled")
    assert sched["reason"] == "Unschedulable" and "nvidia.com/gpu" in sched["message"]


def _install_knative(sc: Cluster) -> None:
    """What Knative Serving's install brings: its CRDs and the knative-serving ConfigMaps."""
    others = sorted({d.name for root in (paths.crds_dir(), paths.own_crds_dir()) for d in root.iterdir()
                     if d.is_dir()} - {"knative"})
    crds.load(sc.admin, paths.crds_dir(), skip=others)
    sc.admin.resources.invalidate_cache()
    sc.api("v1", "Namespace").create(body={"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "knative-serving"}})
    for name, data in (("config-autoscaler", {"enable-scale-to-zero": "true", "stable-window": "60s"}),
                       ("config-domain", {"example.com": ""})):
        sc.api("v1", "ConfigMap").create(namespace="knative-serving", body={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "knative-serving"},
            "data": data})


def test_knative_mode_scales_to_zero_and_refuses_dra_claims(sc):
    _install_knative(sc)
    api = sc.api(ISVC, "InferenceService")
    body = isvc("llm-kn", mode="Knative", autoscaler=None, gpus=1, group="gpu-l40s")
    body["metadata"]["annotations"]["autoscaling.knative.dev/scale-to-zero-pod-retention-period"] = "1m"
    api.create(body=body, namespace=NS)
    t0 = time.monotonic()
    wait_for(lambda: conditions(sc.get(ISVC, "InferenceService", "llm-kn")).get("Ready", {}).get("status") == "True",
             timeout=90, what="Knative InferenceService Ready")
    ksvc = sc.get("serving.knative.dev/v1", "Service", "llm-kn-predictor")
    tmpl = ksvc["spec"]["template"]["metadata"]["annotations"]
    assert tmpl["autoscaling.knative.dev/min-scale"] == "0" and tmpl["autoscaling.knative.dev/class"] == \
        "kpa.autoscaling.knative.dev"
    assert ksvc["status"]["latestReadyRevisionName"] == "llm-kn-predictor-00001"
    pods = sc.pods("serving.knative.dev/revision=llm-kn-predictor-00001")
    assert pods and pods[0]["spec"]["nodeName"].startswith("gpu-l40s-")
    assert [c["name"] for c in pods[0]["spec"]["containers"]] == ["kserve-container", "queue-proxy"]
    wait_for(lambda: not sc.pods("serving.knative.dev/revision=llm-kn-predictor-00001"), timeout=90,
             what="Knative scale to zero")
    print(f"Knative: created -> Ready -> zero in {time.monotonic() - t0:.1f} s")
    rev = wait_for(lambda: conditions(sc.get("serving.knative.dev/v1", "Revision", "llm-kn-predictor-00001"))
                   .get("Active", {}).get("reason") == "NoTraffic"
                   and sc.get("serving.knative.dev/v1", "Revision", "llm-kn-predictor-00001"), what="NoTraffic")
    assert conditions(rev)["Ready"]["status"] == "True"
    assert conditions(sc.get(ISVC, "InferenceService", "llm-kn"))["Ready"]["status"] == "True"
    requests(sc, "llm-kn", 3)
    wait_for(lambda: [p for p in sc.pods("serving.knative.dev/revision=llm-kn-predictor-00001")
                      if (p.get("status") or {}).get("phase") == "Running"], what="Knative scale from zero")
    # a revision whose container fails (knob): the InferenceService names Knative's reason and message
    sc.knobs({"serving.idle_seconds": IDLE, "knative.fail_revisions": "llm-kn-bad-predictor-00001"})
    api.create(body=isvc("llm-kn-bad", mode="Knative", autoscaler=None, gpus=1, group="gpu-l40s"), namespace=NS)
    cond = wait_for(lambda: conditions(sc.get(ISVC, "InferenceService", "llm-kn-bad")).get("PredictorReady", {})
                    .get("reason") == "RevisionFailed"
                    and conditions(sc.get(ISVC, "InferenceService", "llm-kn-bad"))["PredictorReady"], what="RevisionFailed")
    assert cond["status"] == "False" and 'Revision "llm-kn-bad-predictor-00001" failed' in cond["message"]
    sc.knobs({"serving.idle_seconds": IDLE, "knative.fail_revisions": ""})
    # DRA claims in Knative mode: refused as Knative's webhook refuses them; no Knative Service
    claim = isvc("llm-kn-dra", mode="Knative", autoscaler=None, gpus=0, group="gpu-h200")
    claim["spec"]["predictor"]["model"]["resources"] = {"claims": [{"name": "gpu"}]}
    claim["spec"]["predictor"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "h200-whole"}]
    api.create(body=claim, namespace=NS)
    cond = wait_for(lambda: conditions(sc.get(ISVC, "InferenceService", "llm-kn-dra")).get("PredictorReady"),
                    what="refusal")
    assert cond["status"] == "False" and "must not set the field(s)" in cond["message"]
    assert "resourceClaims" in cond["message"]
    assert sc.get("serving.knative.dev/v1", "Service", "llm-kn-dra-predictor") is None


def test_standard_mode_carries_dra_claims_to_the_scheduler(sc):
    """The same claim in Standard mode: the Deployment carries resourceClaims and the real scheduler allocates
    a device of the simulated DRA driver's ResourceSlice on the H200 node."""
    node = "gpu-h200-000"
    sc.api("v1", "Node").patch(name=node, body={"metadata": {"labels": {"nvidia.com/dra-kubelet-plugin": "true"}}},
                               content_type="application/merge-patch+json")
    sc.api("resource.k8s.io/v1", "DeviceClass").create(body={
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                      "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}})
    sc.api("resource.k8s.io/v1", "ResourceClaimTemplate").create(namespace=NS, body={
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "h200-whole", "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "count": 1}}]}}}})
    body = isvc("llm-dra", gpus=0, group="gpu-h200", min_replicas=1, autoscaler="keda")
    body["spec"]["predictor"]["model"]["resources"] = {"claims": [{"name": "gpu"}]}
    body["spec"]["predictor"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "h200-whole"}]
    sc.api(ISVC, "InferenceService").create(body=body, namespace=NS)
    pod = wait_for(lambda: [p for p in sc.pods("serving.kserve.io/inferenceservice=llm-dra")
                            if (p.get("status") or {}).get("phase") == "Running"], timeout=90, what="DRA pod running")[0]
    assert pod["spec"]["nodeName"] == node
    assert pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == "h200-whole"
    claim = sc.get("resource.k8s.io/v1", "ResourceClaim", pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"])
    assert claim["status"]["allocation"]["devices"]["results"][0]["driver"] == "gpu.nvidia.com"
    wait_for(lambda: conditions(sc.get(ISVC, "InferenceService", "llm-dra")).get("Ready", {}).get("status") == "True",
             what="DRA InferenceService Ready")
