"""OpenShift AI's serving stack on the simulated OpenShift fleets: operators installed through the simulated OLM
make their CRDs available, report their conditions, and bring up what the kserve, keda and knative simulators act
on. One cluster per class (3.x, then 2.x), each started on its fleet.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kubegpu_devcluster import __main__ as devcluster
from kubegpu_devcluster import cluster, paths
from kubegpu_devcluster.testing import wait_for
from serving_cluster import Cluster, conditions, isvc, requests

REPO = Path(__file__).resolve().parents[3]
FLEETS = paths.DEVCLUSTER_ROOT / "fleets"
SUB = "operators.coreos.com/v1alpha1"
ISVC = "serving.kserve.io/v1beta1"
APPS = "redhat-ods-applications"
NS = "models"


def start(fleet: str, folder: str):
    state = Path(os.environ.get("KUBEGPU_SERVING_CLUSTER_DIR", REPO / ".cache" / "serving-sim-cluster")).with_name(folder)
    os.environ["DEVCLUSTER_DIR"] = str(state)
    t0 = time.monotonic()
    devcluster.up(state, FLEETS / fleet)
    print(f"\n{fleet} cluster ready in {time.monotonic() - t0:.1f} s")
    c = Cluster(state)
    c.knobs({"serving.idle_seconds": "3", "olm.csv_seconds": "0.3", "openshift-ai.ready_seconds": "0.2"})
    for ns in (NS,):
        c.api("v1", "Namespace").create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    return state, c


def subscribe(c: Cluster, package: str, channel: str, namespace: str) -> None:
    c.api("v1", "Namespace").server_side_apply(body={"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": namespace}}, field_manager="tests")
    groups = c.api("operators.coreos.com/v1", "OperatorGroup")
    if not groups.get(namespace=namespace).items:
        groups.create(namespace=namespace, body={"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                                                 "metadata": {"name": namespace, "namespace": namespace}, "spec": {}})
    c.api(SUB, "Subscription").create(namespace=namespace, body={
        "apiVersion": SUB, "kind": "Subscription", "metadata": {"name": package, "namespace": namespace},
        "spec": {"name": package, "channel": channel, "source": "redhat-operators",
                 "sourceNamespace": "openshift-marketplace", "installPlanApproval": "Automatic"}})


def installed(c: Cluster, package: str, namespace: str) -> str:
    def csv():
        sub = c.get(SUB, "Subscription", package, namespace)
        name = ((sub or {}).get("status") or {}).get("installedCSV")
        found = c.get(SUB, "ClusterServiceVersion", name, namespace) if name else None
        return name if ((found or {}).get("status") or {}).get("phase") == "Succeeded" else None
    return wait_for(csv, timeout=120, what=f"{package} installed")


def crd_served(c: Cluster, name: str) -> bool:
    return bool(c.api("apiextensions.k8s.io/v1", "CustomResourceDefinition").get(
        field_selector=f"metadata.name={name}").items)


def ready_phase(c: Cluster, api_version: str, kind: str, name: str) -> dict | None:
    obj = c.get(api_version, kind, name, None)
    return obj if ((obj or {}).get("status") or {}).get("phase") == "Ready" else None


class TestOpenShiftAI3:
    @pytest.fixture(scope="class")
    @classmethod
    def oc(cls):
        state, c = start("serving-openshift-ai-3.yaml", "serving-ai3-cluster")
        yield c
        cluster.down(state)

    def test_operator_brings_its_crds_dsci_dsc_ready_and_keda_scale_to_zero(self, oc):
        assert not crd_served(oc, "datascienceclusters.datasciencecluster.opendatahub.io")
        assert not crd_served(oc, "inferenceservices.serving.kserve.io")
        t0 = time.monotonic()
        subscribe(oc, "rhods-operator", "fast-3.x", "redhat-ods-operator")
        assert installed(oc, "rhods-operator", "redhat-ods-operator") == "rhods-operator.3.5.0"
        dsci = wait_for(lambda: ready_phase(oc, "dscinitialization.opendatahub.io/v2", "DSCInitialization",
                                            "default-dsci"), what="default DSCInitialization Ready")
        assert "serviceMesh" not in dsci["spec"]
        # 3.x refuses AcceleratorProfiles (HardwareProfile replaces them): the API server answers 422
        profiles = oc.api("dashboard.opendatahub.io/v1", "AcceleratorProfile")

        def refused():   # the policy takes a moment to be enforced once created
            try:
                profiles.create(namespace=APPS, body={
                    "apiVersion": "dashboard.opendatahub.io/v1", "kind": "AcceleratorProfile",
                    "metadata": {"name": "nvidia-gpu", "namespace": APPS},
                    "spec": {"displayName": "NVIDIA GPU", "enabled": True, "identifier": "nvidia.com/gpu"}})
            except Exception as e:  # the refusal
                return str(e)
            profiles.delete(name="nvidia-gpu", namespace=APPS)
            return None
        assert "HardwareProfile" in wait_for(refused, what="AcceleratorProfile refused")
        oc.api("datasciencecluster.opendatahub.io/v2", "DataScienceCluster").create(body={
            "apiVersion": "datasciencecluster.opendatahub.io/v2", "kind": "DataScienceCluster",
            "metadata": {"name": "default-dsc"}, "spec": {"components": {"kserve": {"managementState": "Managed"}}}})
        dsc = wait_for(lambda: ready_phase(oc, "datasciencecluster.opendatahub.io/v2", "DataScienceCluster",
                                           "default-dsc"), timeout=90, what="DataScienceCluster Ready")
        assert conditions(dsc)["KserveReady"]["status"] == "True"
        assert crd_served(oc, "inferenceservices.serving.kserve.io")
        cm = oc.get("v1", "ConfigMap", "inferenceservice-config", APPS)
        assert '"RawDeployment"' in cm["data"]["deploy"]
        print(f"OpenShift AI 3.x ready with KServe in {time.monotonic() - t0:.1f} s")
        # scale to zero through the Custom Metrics Autoscaler (KEDA)
        assert not crd_served(oc, "kedacontrollers.keda.sh")
        subscribe(oc, "openshift-custom-metrics-autoscaler-operator", "stable", "openshift-keda")
        installed(oc, "openshift-custom-metrics-autoscaler-operator", "openshift-keda")
        wait_for(lambda: crd_served(oc, "kedacontrollers.keda.sh") and crd_served(oc, "scaledobjects.keda.sh"),
                 what="KEDA CRDs")
        oc.api("keda.sh/v1alpha1", "KedaController").create(namespace="openshift-keda", body={
            "apiVersion": "keda.sh/v1alpha1", "kind": "KedaController",
            "metadata": {"name": "keda", "namespace": "openshift-keda"}, "spec": {"watchNamespace": ""}})
        wait_for(lambda: ((oc.get("keda.sh/v1alpha1", "KedaController", "keda", "openshift-keda") or {})
                          .get("status") or {}).get("phase") == "Installation Succeeded", what="KedaController")
        assert oc.get("apps/v1", "Deployment", "keda-operator", "openshift-keda")
        oc.api(ISVC, "InferenceService").create(body=_with_runtime(oc, isvc("embed", gpus=1, group="gpu-l40s")),
                                                namespace=NS)
        wait_for(lambda: conditions(oc.get(ISVC, "InferenceService", "embed")).get("Ready", {}).get("status") == "True",
                 what="InferenceService Ready")
        wait_for(lambda: oc.get("apps/v1", "Deployment", "embed-predictor")["spec"]["replicas"] == 0
                 and not oc.pods("serving.kserve.io/inferenceservice=embed"), what="scale to zero")
        requests(oc, "embed", 2)
        pod = wait_for(lambda: oc.pods("serving.kserve.io/inferenceservice=embed"), what="scale from zero")[0]
        assert pod["spec"]["nodeSelector"] == {"devcluster.kubegpu.io/node-group": "gpu-l40s"}
        # Red Hat's uninstall: the DataScienceCluster and DSCInitialization go and stay gone (the operator makes its
        # default one only when it starts), then the operator's CSV; OLM deletes the webhook it made from the CSV
        # (labelled with the CSV as owner), here the policy that plays it.
        admission = "admissionregistration.k8s.io/v1"
        policy = oc.get(admission, "ValidatingAdmissionPolicy", "kubegpu-devcluster-odh-acceleratorprofile-webhook",
                        None)
        assert policy["metadata"]["labels"] == {"olm.owner": "rhods-operator.3.5.0",
                                                "olm.owner.kind": "ClusterServiceVersion",
                                                "olm.owner.namespace": "redhat-ods-operator"}
        for api_version, kind, name in (("datasciencecluster.opendatahub.io/v2", "DataScienceCluster", "default-dsc"),
                                        ("dscinitialization.opendatahub.io/v2", "DSCInitialization", "default-dsci")):
            oc.api(api_version, kind).delete(name=name)
            wait_for(lambda v=api_version, k=kind, n=name: oc.get(v, k, n, None) is None, what=f"{kind} gone")
        oc.api(SUB, "Subscription").delete(name="rhods-operator", namespace="redhat-ods-operator")
        oc.api(SUB, "ClusterServiceVersion").delete(name="rhods-operator.3.5.0", namespace="redhat-ods-operator")
        wait_for(lambda: all(oc.get(admission, k, "kubegpu-devcluster-odh-acceleratorprofile-webhook", None) is None
                             for k in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")),
                 what="the operator's admission policy gone with its CSV")
        assert oc.get("dscinitialization.opendatahub.io/v2", "DSCInitialization", "default-dsci", None) is None


def _with_runtime(c: Cluster, body: dict) -> dict:
    """A ServingRuntime in the namespace, as OpenShift AI's vllm-cuda-runtime template makes one."""
    runtimes = c.api("serving.kserve.io/v1alpha1", "ServingRuntime")
    if not runtimes.get(namespace=NS).items:
        runtimes.create(namespace=NS, body={
            "apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
            "metadata": {"name": "vllm-cuda-runtime", "namespace": NS,
                         "annotations": {"opendatahub.io/recommended-accelerators": '["nvidia.com/gpu"]'}},
            "spec": {"supportedModelFormats": [{"name": "vLLM", "autoSelect": True}],
                     "containers": [{"name": "kserve-container", "image": "quay.io/modh/vllm:simulated",
                                     "args": ["--port=8080", "--model=/mnt/models", "--served-model-name={{.Name}}"],
                                     "ports": [{"containerPort": 8080, "protocol": "TCP"}]}]}})
    body["spec"]["predictor"]["model"]["modelFormat"] = {"name": "vLLM"}
    body["spec"]["predictor"]["model"]["runtime"] = "vllm-cuda-runtime"
    return body


class TestOpenShiftAI2:
    @pytest.fixture(scope="class")
    @classmethod
    def oc(cls):
        state, c = start("serving-openshift-ai-2.yaml", "serving-ai2-cluster")
        yield c
        cluster.down(state)

    def test_serverless_needs_its_operators_then_knative_scales_to_zero(self, oc):
        subscribe(oc, "rhods-operator", "stable", "redhat-ods-operator")
        assert installed(oc, "rhods-operator", "redhat-ods-operator") == "rhods-operator.2.25.0"
        dsci = wait_for(lambda: oc.get("dscinitialization.opendatahub.io/v1", "DSCInitialization", "default-dsci",
                                       None), what="default DSCInitialization")
        assert dsci["spec"]["serviceMesh"]["managementState"] == "Managed"
        cond = wait_for(lambda: conditions(oc.get("dscinitialization.opendatahub.io/v1", "DSCInitialization",
                                                  "default-dsci", None)).get("CapabilityServiceMesh"),
                        what="service mesh condition")
        assert cond["status"] == "False" and cond["reason"] == "MissingOperator"
        oc.api("datasciencecluster.opendatahub.io/v1", "DataScienceCluster").create(body={
            "apiVersion": "datasciencecluster.opendatahub.io/v1", "kind": "DataScienceCluster",
            "metadata": {"name": "default-dsc"},
            "spec": {"components": {"kserve": {"managementState": "Managed", "defaultDeploymentMode": "Serverless",
                                               "serving": {"managementState": "Managed", "name": "knative-serving"}}}}})
        ks = wait_for(lambda: conditions(oc.get("datasciencecluster.opendatahub.io/v1", "DataScienceCluster",
                                                "default-dsc", None)).get("KserveReady"), what="KserveReady")
        assert ks["status"] == "False" and ks["reason"] == "ServerlessOperatorMissing"
        assert "serverless-operator" in ks["message"]
        dsc = oc.get("datasciencecluster.opendatahub.io/v1", "DataScienceCluster", "default-dsc", None)
        assert dsc["status"]["phase"] == "Not Ready"
        assert dsc["spec"]["components"]["kserve"]["defaultDeploymentMode"] == "Serverless"  # 2.x schema keeps it
        t0 = time.monotonic()
        for package, ns in (("serverless-operator", "openshift-serverless"),
                            ("servicemeshoperator", "openshift-operators"),
                            ("authorino-operator", "openshift-operators")):
            subscribe(oc, package, "stable", ns)
        wait_for(lambda: ready_phase(oc, "datasciencecluster.opendatahub.io/v1", "DataScienceCluster", "default-dsc"),
                 timeout=90, what="DataScienceCluster Ready")
        print(f"OpenShift AI 2.x Serverless ready in {time.monotonic() - t0:.1f} s")
        assert ready_phase(oc, "dscinitialization.opendatahub.io/v1", "DSCInitialization", "default-dsci")
        assert conditions(oc.get("operator.knative.dev/v1beta1", "KnativeServing", "knative-serving",
                                 "knative-serving"))["Ready"]["status"] == "True"
        assert '"Serverless"' in oc.get("v1", "ConfigMap", "inferenceservice-config", APPS)["data"]["deploy"]
        body = _with_runtime(oc, isvc("llm", mode="Knative", autoscaler=None, gpus=2, group="gpu-a100"))
        del body["metadata"]["annotations"]["serving.kserve.io/deploymentMode"]   # the platform's default
        oc.api(ISVC, "InferenceService").create(body=body, namespace=NS)
        wait_for(lambda: conditions(oc.get(ISVC, "InferenceService", "llm")).get("Ready", {}).get("status") == "True",
                 timeout=120, what="Knative InferenceService Ready")
        assert oc.get(ISVC, "InferenceService", "llm")["status"]["deploymentMode"] == "Knative"
        wait_for(lambda: not oc.pods("serving.knative.dev/revision=llm-predictor-00001"), what="scale to zero")
        requests(oc, "llm", 1)
        pod = wait_for(lambda: oc.pods("serving.knative.dev/revision=llm-predictor-00001"), what="scale from zero")[0]
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
