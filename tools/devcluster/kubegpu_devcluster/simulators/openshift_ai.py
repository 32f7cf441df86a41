"""The operators of OpenShift AI's serving stack: OpenShift AI (rhods-operator), OpenShift Serverless, Service
Mesh 2, the Custom Metrics Autoscaler (KEDA); Authorino only counts as installed.

Follows shared/reference/dra-kserve-openshift-ai.md ("OpenShift AI") and opendatahub-io/opendatahub-operator
where the reference is silent. Acts for CSVs the OLM simulator brought to Succeeded:

- CRDs, as OLM installs a CSV's owned CRDs once it succeeds: rhods-operator -> DataScienceCluster and
  DSCInitialization (shared/crds/opendatahub; for a 2.x CSV with v1 as the only served and stored version and
  v1's kserve given back the 2.x fields defaultDeploymentMode and serving, which the shipped 3.x CRD lacks),
  plus the dashboard/infrastructure profiles; serverless-operator -> KnativeServing; servicemeshoperator ->
  ServiceMeshControlPlane; custom-metrics-autoscaler -> KedaController (catalog/crds/, minimal stand-ins: none is
  shipped) and shared/crds/keda (ScaledObject, TriggerAuthentication).
- OpenShift AI, once its CSV has Succeeded (major version from the CSV: 2 serves v1, 3 serves v2):
  DSCInitialization `default-dsci` created if none exists, as the operator does at start (2.x: serviceMesh
  Managed, control plane data-science-smcp in istio-system; 3.x: no service mesh). 3.x refuses new
  AcceleratorProfiles (its webhook; here a ValidatingAdmissionPolicy, the local API server calls no webhooks)
  with a message pointing at HardwareProfile. DSCInitialization status: phase Ready,
  ReconcileComplete True, the applications namespace created; 2.x with serviceMesh Managed needs the Service
  Mesh operator: without it phase Error, CapabilityServiceMesh False reason MissingOperator; with it the
  ServiceMeshControlPlane is created and CapabilityServiceMesh True once it is Ready.
  DataScienceCluster: components.kserve.managementState Managed -> in 2.x the deployment mode is
  kserve.defaultDeploymentMode (default Serverless); Serverless with serving Managed needs OpenShift
  Serverless, Service Mesh and a Ready DSCInitialization, and creates KnativeServing knative-serving in
  namespace knative-serving; a missing one -> KserveReady False (ServerlessOperatorMissing /
  ServiceMeshOperatorMissing / DSCInitializationNotReady, message naming the operator's package), phase Not Ready.
  3.x: Standard (RawDeployment) only. Once ready: the KServe CRDs (shared/crds/kserve, less LLMInferenceService:
  kserve_crds), ConfigMap
  inferenceservice-config in the applications namespace (deploy.defaultDeploymentMode, ingress.ingressDomain
  apps.devcluster.example.com), Deployment kserve-controller-manager there; the kserve simulator then acts on
  InferenceServices. Status: phase Ready, conditions Ready/KserveReady True, installedComponents (v1),
  components.kserve.managementState, release {name, version}. Authorino missing in 2.x Serverless: a
  condition AuthorinoReady False (MissingOperator), not blocking, as KServe's auth is optional.
- Serverless: a KnativeServing becomes Ready (DependenciesInstalled, DeploymentsAvailable, InstallSucceeded) and
  its install runs: the Knative Serving CRDs (shared/crds/knative), ConfigMaps config-autoscaler
  (enable-scale-to-zero true, stable-window 60s, scale-to-zero-grace-period 30s, allow-zero-initial-scale
  false) and config-domain in knative-serving; the knative simulator then acts.
- Service Mesh: a ServiceMeshControlPlane becomes Ready (Installed, Reconciled, Ready).
- Custom Metrics Autoscaler: KedaController `keda` in openshift-keda -> Deployment keda-operator there (the keda
  simulator then acts); status.phase "Installation Succeeded"; another name or namespace -> "Installation
  Failed" (the operator only reconciles keda/openshift-keda).
Knobs (ConfigMap kubegpu-devcluster/simulator-knobs):
  openshift-ai.ready_seconds   time each object takes to become ready (default 1)
  openshift-ai.never_ready     a reason (e.g. KserveDeploymentFailed): a DataScienceCluster with KServe Managed
                               stays phase Not Ready, Ready/KserveReady False with that reason
"""
from __future__ import annotations

import copy
import json
import time

from kubernetes.dynamic.exceptions import ResourceNotFoundError

from .. import crds, paths
from . import serving
from .framework import Simulator, log
from .olm import olm_owner_labels

CSV = "operators.coreos.com/v1alpha1"
DSC_GROUP = "datasciencecluster.opendatahub.io"
DSCI_GROUP = "dscinitialization.opendatahub.io"
KNATIVE_OP = "operator.knative.dev/v1beta1"
KEDA = "keda.sh/v1alpha1"
SMCP = "maistra.io/v2"
OWN_CRDS = paths.DEVCLUSTER_ROOT / "catalog" / "crds"
APPS_NS = "redhat-ods-applications"
ACCELERATOR_POLICY = "kubegpu-devcluster-odh-acceleratorprofile-webhook"
MANAGER = "openshift-ai"
PACKAGES = {"rhods-operator": "rhods-operator.", "serverless-operator": "serverless-operator.",
            "servicemeshoperator": "servicemeshoperator.", "authorino-operator": "authorino-operator.",
            "custom-metrics-autoscaler": "custom-metrics-autoscaler."}
KSERVE_V1_FIELDS = {
    "defaultDeploymentMode": {"type": "string", "enum": ["Serverless", "RawDeployment"]},
    "serving": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}


def kserve_crds() -> list:
    """The KServe CRDs the operator makes available: those of the upstream kserve-crd chart (InferenceService,
    ServingRuntime, ClusterServingRuntime, InferenceGraph, TrainedModel). LLMInferenceService and its config are
    left out: the serving stage does not use them, and each (2.6 MB) takes 20-30 s to create on a loaded 2-core
    machine."""
    return sorted(p for p in (paths.crds_dir() / "kserve").glob("*.yaml") if "llminferenceservice" not in p.name)


def rhoai_2x(doc: dict) -> dict:
    """The shipped (3.x) DSC/DSCI CRD as a 2.x operator installs it: v1 only, with 2.x's kserve fields."""
    if doc["spec"]["group"] not in (DSC_GROUP, DSCI_GROUP):
        return doc
    doc = copy.deepcopy(doc)
    versions = []
    for v in doc["spec"]["versions"]:
        if v["name"] != "v1":
            continue
        v["served"], v["storage"] = True, True
        v.pop("deprecated", None)
        v.pop("deprecationWarning", None)
        kserve = (v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].get("components", {})
                  .get("properties", {}).get("kserve"))
        if kserve is not None:
            kserve.setdefault("properties", {}).update(copy.deepcopy(KSERVE_V1_FIELDS))
        versions.append(v)
    doc["spec"]["versions"] = versions
    return doc


class OpenShiftAISimulator(Simulator):
    name = "openshift-ai"
    watches = {"ClusterServiceVersion": CSV, "DSCInitialization": f"{DSCI_GROUP}/v1",
               "DataScienceCluster": f"{DSC_GROUP}/v1", "KnativeServing": KNATIVE_OP, "KedaController": KEDA,
               "ServiceMeshControlPlane": SMCP}
    extra_kinds = {"Namespace": "v1", "ConfigMap": "v1", "Deployment": "apps/v1"}

    def __init__(self, kubeconfig: str):
        super().__init__(kubeconfig)
        self._first_seen = {}   # uid -> monotonic time first reconciled (ready_seconds)
        self._started = set()   # uids of the rhods-operator CSVs whose start was played (default DSCInitialization)

    # -- helpers
    def _installed(self, package: str) -> dict | None:
        """The Succeeded CSV of a package (its prefix), newest name first, as a dict."""
        prefix = PACKAGES[package]
        found = [c.to_dict() for c in self.api("ClusterServiceVersion").get().items
                 if c.metadata.name.startswith(prefix) and (c.status or {}).get("phase") == "Succeeded"]
        return sorted(found, key=lambda c: c["metadata"]["name"])[-1] if found else None

    def _major(self) -> int | None:
        csv = self._installed("rhods-operator")
        return int(csv["spec"]["version"].split(".")[0]) if csv else None

    def _waited(self, obj: dict, kind: str) -> bool:
        """Whether ready_seconds have passed since the object was first seen (requeues it otherwise)."""
        uid = obj["metadata"]["uid"]
        first = self._first_seen.setdefault(uid, time.monotonic())
        left = first + self.knobs.seconds("ready_seconds", 1.0) - time.monotonic()
        if left > 0:
            self.requeue(kind, obj["metadata"].get("namespace"), obj["metadata"]["name"], after=left + 0.05)
            return False
        return True

    def _api_for(self, kind: str, version: str):
        group = DSC_GROUP if kind == "DataScienceCluster" else DSCI_GROUP
        return self.dyn.resources.get(api_version=f"{group}/{version}", kind=kind)

    def _status(self, api, obj: dict, status: dict) -> None:
        old = obj.get("status") or {}
        if "conditions" in status:
            status["conditions"] = serving.keep_times(old.get("conditions"), status["conditions"])
        if serving.same_conditions(old.get("conditions"), status.get("conditions")) and all(
                old.get(k) == v for k, v in status.items() if k != "conditions"):
            return
        meta = obj["metadata"]
        body = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": {"name": meta["name"]},
                "status": status}
        if meta.get("namespace"):
            body["metadata"]["namespace"] = meta["namespace"]
        api.status.patch(body=body, namespace=meta.get("namespace"), content_type="application/merge-patch+json")

    def _namespace(self, name: str) -> None:
        self.api("Namespace").server_side_apply(body={"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": name}}, field_manager=MANAGER)

    def _requeue_all(self, kind: str) -> None:
        try:
            for o in self.api(kind).get().items:
                self.requeue(kind, o.metadata.namespace, o.metadata.name)
        except (ResourceNotFoundError, Exception):  # noqa: B014 - the CRD may not exist yet
            pass

    # -- reconcile
    def reconcile(self, kind, key, obj):
        if kind == "ClusterServiceVersion":
            if obj is not None and (obj.status or {}).get("phase") == "Succeeded":
                self._csv(obj.to_dict())
            for k in ("DSCInitialization", "DataScienceCluster", "KnativeServing", "KedaController",
                      "ServiceMeshControlPlane"):
                self._requeue_all(k)
            return
        if obj is None or obj.metadata.deletionTimestamp:
            return
        getattr(self, "_" + kind.lower())(obj.to_dict())

    def _csv(self, csv: dict) -> None:
        name = csv["metadata"]["name"]
        if name.startswith(PACKAGES["rhods-operator"]):
            major = int(csv["spec"]["version"].split(".")[0])
            folder = paths.crds_dir() / "opendatahub"
            files = sorted(folder.glob("*.yaml"))
            created = crds.ensure(self.dyn, files, transform=rhoai_2x if major == 2 else None)
            self.dyn.resources.invalidate_cache()
            if created:
                log.info("openshift-ai: %s: CRDs %s", name, ", ".join(created))
            if csv["metadata"]["uid"] not in self._started:
                # As the operator does when it starts, once: a DSCInitialization deleted later stays deleted
                # (the uninstall deletes it before the operator).
                self._started.add(csv["metadata"]["uid"])
                self._default_dsci(major)
            self._accelerator_profiles(major)
        elif name.startswith(PACKAGES["serverless-operator"]):
            crds.ensure(self.dyn, [OWN_CRDS / "operator.knative.dev_knativeservings.yaml"])
        elif name.startswith(PACKAGES["servicemeshoperator"]):
            crds.ensure(self.dyn, [OWN_CRDS / "maistra.io_servicemeshcontrolplanes.yaml"])
        elif name.startswith(PACKAGES["custom-metrics-autoscaler"]):
            crds.ensure(self.dyn, [OWN_CRDS / "keda.sh_kedacontrollers.yaml"]
                        + sorted((paths.crds_dir() / "keda").glob("*.yaml")))
        self.dyn.resources.invalidate_cache()

    def _accelerator_profiles(self, major: int) -> None:
        """OpenShift AI 3.x's webhook refuses new AcceleratorProfiles (HardwareProfile replaces them). The local API
        server calls no webhooks, so an in-process ValidatingAdmissionPolicy plays it: the refusal is real.
        OLM creates an operator's webhooks from its CSV, labelled with the CSV as owner (olm.owner...), and deletes
        them with the CSV: the policy and its binding carry the same labels (of the newest installed CSV), and the
        OLM simulator deletes them when that CSV goes."""
        vap = self.dyn.resources.get(api_version="admissionregistration.k8s.io/v1", kind="ValidatingAdmissionPolicy")
        binding = self.dyn.resources.get(api_version="admissionregistration.k8s.io/v1",
                                         kind="ValidatingAdmissionPolicyBinding")
        if major < 3:
            for api in (binding, vap):
                if serving.get(api, None, ACCELERATOR_POLICY):
                    api.delete(name=ACCELERATOR_POLICY)
            return
        owner = self._installed("rhods-operator")
        if owner is None:
            return
        labels = olm_owner_labels(owner)
        vap.server_side_apply(field_manager=MANAGER, force_conflicts=True, body={
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": ACCELERATOR_POLICY, "labels": labels},
            "spec": {"failurePolicy": "Fail",
                     "matchConstraints": {"resourceRules": [{"apiGroups": ["dashboard.opendatahub.io"],
                                                             "apiVersions": ["*"], "operations": ["CREATE"],
                                                             "resources": ["acceleratorprofiles"]}]},
                     "validations": [{"expression": "false", "reason": "Forbidden",
                                      "message": "AcceleratorProfile is no longer supported in OpenShift AI 3.x: "
                                                 "create a HardwareProfile (infrastructure.opendatahub.io/v1)"}]}})
        binding.server_side_apply(field_manager=MANAGER, force_conflicts=True, body={
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": ACCELERATOR_POLICY, "labels": labels},
            "spec": {"policyName": ACCELERATOR_POLICY, "validationActions": ["Deny"]}})

    def _default_dsci(self, major: int) -> None:
        version = "v1" if major == 2 else "v2"
        api = self._api_for("DSCInitialization", version)
        if api.get().items:
            return
        spec = {"applicationsNamespace": APPS_NS,
                "monitoring": {"managementState": "Managed", "namespace": "redhat-ods-monitoring"},
                "trustedCABundle": {"managementState": "Managed", "customCABundle": ""}}
        if major == 2:
            spec["serviceMesh"] = {"managementState": "Managed",
                                   "controlPlane": {"name": "data-science-smcp", "namespace": "istio-system",
                                                    "metricsCollection": "Istio"}}
        api.create(body={"apiVersion": f"{DSCI_GROUP}/{version}", "kind": "DSCInitialization",
                         "metadata": {"name": "default-dsci"}, "spec": spec})
        log.info("openshift-ai: created DSCInitialization default-dsci (%s)", version)

    # -- DSCInitialization
    def _dscinitialization(self, dsci: dict) -> None:
        major = self._major()
        if major is None or not self._waited(dsci, "DSCInitialization"):
            return
        version = "v1" if major == 2 else "v2"
        api = self._api_for("DSCInitialization", version)
        dsci = api.get(name=dsci["metadata"]["name"]).to_dict()
        spec = dsci.get("spec") or {}
        cond = serving.condition
        self._namespace(spec.get("applicationsNamespace") or APPS_NS)
        conditions = []
        phase = "Ready"
        mesh = spec.get("serviceMesh") or {}
        if major == 2 and mesh.get("managementState", "Managed") == "Managed":
            if self._installed("servicemeshoperator") is None:
                phase = "Error"
                conditions.append(cond("CapabilityServiceMesh", False, "MissingOperator",
                                       "ServiceMesh operator must be installed for this component's configuration "
                                       "(package servicemeshoperator)"))
            else:
                plane = mesh.get("controlPlane") or {}
                ns, name = plane.get("namespace", "istio-system"), plane.get("name", "data-science-smcp")
                self._namespace(ns)
                sapi = self.dyn.resources.get(api_version=SMCP, kind="ServiceMeshControlPlane")
                smcp = serving.get(sapi, ns, name)
                if smcp is None:
                    sapi.create(namespace=ns, body={"apiVersion": SMCP, "kind": "ServiceMeshControlPlane",
                                                    "metadata": {"name": name, "namespace": ns},
                                                    "spec": {"version": "v2.6", "tracing": {"type": "None"}}})
                    smcp = {}
                ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                            for c in (smcp.get("status") or {}).get("conditions") or [])
                if ready:
                    conditions.append(cond("CapabilityServiceMesh", True, "ServiceMeshReady", "Service Mesh is ready"))
                else:
                    phase = "Progressing"
                    conditions.append(cond("CapabilityServiceMesh", False, "ServiceMeshNotReady",
                                           f"ServiceMeshControlPlane {ns}/{name} is not ready yet"))
                    self.requeue("DSCInitialization", None, dsci["metadata"]["name"], after=1.0)
        complete = phase == "Ready"
        conditions.insert(0, cond("ReconcileComplete", complete, "ReconcileCompleted" if complete else phase,
                                  "DSCInitialization reconciled successfully" if complete else
                                  "; ".join(c.get("message", "") for c in conditions if c["status"] != "True")))
        if major == 3:
            conditions.append(cond("Ready", complete, "Ready" if complete else phase))
        self._status(api, dsci, {"phase": phase, "conditions": conditions,
                                 "release": {"name": "OpenShift AI Self-Managed", "version": self._release()}})
        self._requeue_all("DataScienceCluster")

    def _release(self) -> str:
        csv = self._installed("rhods-operator")
        return csv["spec"]["version"] if csv else ""

    # -- DataScienceCluster
    def _datasciencecluster(self, dsc: dict) -> None:
        major = self._major()
        if major is None or not self._waited(dsc, "DataScienceCluster"):
            return
        version = "v1" if major == 2 else "v2"
        api = self._api_for("DataScienceCluster", version)
        dsc = api.get(name=dsc["metadata"]["name"]).to_dict()
        kserve = ((dsc.get("spec") or {}).get("components") or {}).get("kserve") or {}
        cond = serving.condition
        state = kserve.get("managementState", "Removed")
        dscis = self._api_for("DSCInitialization", version).get().items
        dsci = dscis[0].to_dict() if dscis else None
        apps = ((dsci or {}).get("spec") or {}).get("applicationsNamespace") or APPS_NS
        status = {"release": {"name": "OpenShift AI Self-Managed", "version": self._release()},
                  "components": {"kserve": {"managementState": state}}}
        if major == 2:
            status["installedComponents"] = {"kserve": state == "Managed"}
        if state != "Managed":
            status.update(phase="Ready", conditions=[
                cond("Ready", True, "Ready"),
                cond("KserveReady", False, "Removed", "Component ManagementState is set to Removed")])
            return self._status(api, dsc, status)
        mode = "RawDeployment"
        problems = []
        if major == 2:
            mode = kserve.get("defaultDeploymentMode") or "Serverless"
            serving_state = (kserve.get("serving") or {}).get("managementState", "Managed")
            if mode == "Serverless" and serving_state == "Managed":
                if self._installed("serverless-operator") is None:
                    problems.append(("ServerlessOperatorMissing", "failed to find the pre-requisite operator "
                                     "subscription \"serverless-operator\", please ensure operator is installed"))
                if self._installed("servicemeshoperator") is None:
                    problems.append(("ServiceMeshOperatorMissing", "failed to find the pre-requisite operator "
                                     "subscription \"servicemeshoperator\", please ensure operator is installed"))
                if not problems and (dsci is None or (dsci.get("status") or {}).get("phase") != "Ready"):
                    problems.append(("DSCInitializationNotReady", "DSCInitialization is not Ready: Serverless "
                                     "mode needs its service mesh"))
                if not problems and not self._knative_ready(kserve):
                    problems.append(("KnativeServingNotReady", "KnativeServing knative-serving/knative-serving "
                                     "is not ready yet"))
        extra = []
        if major == 2 and mode == "Serverless" and self._installed("authorino-operator") is None:
            extra.append(cond("AuthorinoReady", False, "MissingOperator", "Authorino operator is not installed: "
                              "KServe endpoints cannot be protected with authentication (package authorino-operator)"))
        never = self.knobs.get("never_ready")
        if never and not problems:
            problems.append((never, f"{never}: simulated failure of the kserve component (knob openshift-ai.never_ready)"))
        if problems:
            reason, message = problems[0]
            status.update(phase="Not Ready", conditions=[
                cond("Ready", False, reason, message), cond("KserveReady", False, reason, message)] + extra)
            if reason == "KnativeServingNotReady":
                self.requeue("DataScienceCluster", None, dsc["metadata"]["name"], after=1.0)
            return self._status(api, dsc, status)
        self._install_kserve(apps, mode)
        status.update(phase="Ready", conditions=[cond("Ready", True, "Ready"), cond("KserveReady", True, "Ready")]
                      + extra)
        self._status(api, dsc, status)

    def _knative_ready(self, kserve: dict) -> bool:
        name = (kserve.get("serving") or {}).get("name") or "knative-serving"
        self._namespace(name)
        try:
            api = self.dyn.resources.get(api_version=KNATIVE_OP, kind="KnativeServing")
        except ResourceNotFoundError:
            return False
        ks = serving.get(api, name, "knative-serving")
        if ks is None:
            api.create(namespace=name, body={"apiVersion": KNATIVE_OP, "kind": "KnativeServing",
                                             "metadata": {"name": "knative-serving", "namespace": name},
                                             "spec": {"config": {"autoscaler": {"enable-scale-to-zero": "true"}}}})
            return False
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (ks.get("status") or {}).get("conditions") or [])

    def _install_kserve(self, apps: str, mode: str) -> None:
        created = crds.ensure(self.dyn, kserve_crds())
        if created:
            log.info("openshift-ai: KServe CRDs %s", ", ".join(created))
            self.dyn.resources.invalidate_cache()
        self._namespace(apps)
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "inferenceservice-config", "namespace": apps},
              "data": {"deploy": json.dumps({"defaultDeploymentMode": mode}),
                       "ingress": json.dumps({"ingressDomain": "apps.devcluster.example.com",
                                              "ingressClassName": "openshift-default"})}}
        capi = self.api("ConfigMap")
        serving.apply(capi, cm, serving.get(capi, apps, "inferenceservice-config"), MANAGER)
        self._deployment(apps, "kserve-controller-manager", {"control-plane": "kserve-controller-manager"})

    def _deployment(self, ns: str, name: str, labels: dict) -> None:
        dapi = self.api("Deployment")
        body = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": ns, "labels": labels},
                "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels},
                                      "spec": {"containers": [{"name": "manager", "image": f"{name}:simulated"}]}}}}
        serving.apply(dapi, body, serving.get(dapi, ns, name), MANAGER)

    # -- dependencies' operators
    def _knativeserving(self, ks: dict) -> None:
        if self._installed("serverless-operator") is None or not self._waited(ks, "KnativeServing"):
            return
        ns = ks["metadata"]["namespace"]
        crds.ensure(self.dyn, sorted((paths.crds_dir() / "knative").glob("*.yaml")))
        capi = self.api("ConfigMap")
        autoscaler = {"enable-scale-to-zero": "true", "stable-window": "60s", "scale-to-zero-grace-period": "30s",
                      "allow-zero-initial-scale": "false"}
        overrides = ((ks.get("spec") or {}).get("config") or {}).get("autoscaler") or {}
        autoscaler.update({k: str(v) for k, v in overrides.items()})
        for name, data in (("config-autoscaler", autoscaler), ("config-domain", {"apps.devcluster.example.com": ""})):
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}
            serving.apply(capi, body, serving.get(capi, ns, name), MANAGER)
        cond = serving.condition
        api = self.dyn.resources.get(api_version=KNATIVE_OP, kind="KnativeServing")
        self._status(api, ks, {"version": "1.17.0", "observedGeneration": ks["metadata"].get("generation", 1),
                               "conditions": [cond("DependenciesInstalled", True), cond("DeploymentsAvailable", True),
                                              cond("InstallSucceeded", True), cond("Ready", True),
                                              cond("VersionMigrationEligible", True)]})
        self._requeue_all("DataScienceCluster")

    def _servicemeshcontrolplane(self, smcp: dict) -> None:
        if self._installed("servicemeshoperator") is None or not self._waited(smcp, "ServiceMeshControlPlane"):
            return
        cond = serving.condition
        api = self.dyn.resources.get(api_version=SMCP, kind="ServiceMeshControlPlane")
        self._status(api, smcp, {"chartVersion": "2.6.11", "observedGeneration": smcp["metadata"].get("generation", 1),
                                 "conditions": [cond("Installed", True, "InstallSuccessful"),
                                                cond("Reconciled", True, "InstallSuccessful"),
                                                cond("Ready", True, "ComponentsReady",
                                                     "All component deployments are Available")]})
        self._requeue_all("DSCInitialization")

    def _kedacontroller(self, kc: dict) -> None:
        csv = self._installed("custom-metrics-autoscaler")
        if csv is None or not self._waited(kc, "KedaController"):
            return
        meta = kc["metadata"]
        api = self.dyn.resources.get(api_version=KEDA, kind="KedaController")
        if (meta["name"], meta["namespace"]) != ("keda", "openshift-keda"):
            return self._status(api, kc, {"phase": "Installation Failed",
                                          "reason": "KedaController is only reconciled as keda in openshift-keda"})
        self._deployment(meta["namespace"], "keda-operator", {"app": "keda-operator"})
        self._deployment(meta["namespace"], "keda-metrics-apiserver", {"app": "keda-metrics-apiserver"})
        self._status(api, kc, {"phase": "Installation Succeeded", "reason": "KEDA v" + csv["spec"]["version"]
                               + " is installed in namespace " + meta["namespace"],
                               "version": csv["spec"]["version"]})
