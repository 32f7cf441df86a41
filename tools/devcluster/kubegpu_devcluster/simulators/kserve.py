"""KServe's InferenceService controller (v0.20): InferenceService v1beta1 -> predictor workload and status.

Follows shared/reference/dra-kserve-openshift-ai.md ("KServe v0.20.0"); where it is silent, kserve/kserve v0.20
(pkg/controller/v1beta1/inferenceservice: components/predictor.go, reconcilers/{deployment,service,hpa,keda,
knative}, apis/serving/v1beta1/inference_service_status.go).

Runs once KServe is installed: a ConfigMap `inferenceservice-config` exists (the kserve-resources chart puts it
in `kserve`; the OpenShift AI simulator in `redhat-ods-applications` once KServe is Managed). Its `deploy` key
gives defaultDeploymentMode, its `ingress` key ingressDomain (default example.com).

Per InferenceService (predictor only; transformers, explainers, multi-node workerSpec are not simulated):
- Deployment mode: annotation serving.kserve.io/deploymentMode (Standard or legacy RawDeployment; Knative or
  legacy Serverless), else the config's defaultDeploymentMode, else Standard. Written to status.deploymentMode.
- Runtime: spec.predictor.model.runtime names a ServingRuntime in the namespace, else a ClusterServingRuntime;
  none -> RuntimeNotRecognized ("Waiting for runtime to become available"); disabled -> RuntimeDisabled; its
  supportedModelFormats lacking the model's format -> NoSupportingRuntime. Without a name, the runtimes with
  autoSelect for that format (namespace first, then cluster, highest priority first); none ->
  NoSupportingRuntime. A refusal is status.modelStatus {transitionStatus: InvalidSpec, lastFailureInfo} and
  PredictorReady/Ready False with that reason; nothing is created. spec.predictor.containers (a custom
  predictor) needs no runtime.
- Pod spec: the runtime's containers with the `kserve-container` (else the first) merged with the model's
  fields (image, command, env by name, resources key by key, the model's args after the runtime's;
  {{.Name}} in args -> the InferenceService's name); the runtime's annotations and labels on the pod template
  (e.g. prometheus.kserve.io/port); the runtime's nodeSelector, tolerations, affinity,
  volumes, imagePullSecrets, hostIPC, schedulerName, then every PodSpec field of spec.predictor over them
  (resourceClaims, nodeSelector, tolerations, affinity, serviceAccountName, ...). Not simulated: the storage
  initializer (a pod webhook upstream), the agent/logger/batcher sidecars.
- Standard mode: Deployment `<name>-predictor` (labels app=isvc.<name>-predictor, component=predictor,
  serving.kserve.io/inferenceservice, plus the InferenceService's and predictor's labels/annotations; owned by
  the InferenceService, RollingUpdate 25%/25%, progressDeadlineSeconds 600). Replicas are left to the
  autoscaler (not set, so 1 at creation) except with autoscalerClass external (minReplicas). Service
  `<name>-predictor` (port 80 -> the container's first port or 8080). Autoscaler from annotation
  serving.kserve.io/autoscalerClass: hpa (default: HorizontalPodAutoscaler, min clamped to 1, cpu 80% unless
  scaleMetric/scaleTarget), keda (ScaledObject `<name>-predictor`: minReplicaCount = minReplicas, default 1,
  0 allowed; maxReplicaCount = max(maxReplicas, min); triggers from spec.predictor.autoScaling.metrics as
  KServe maps them), external/none (nothing). PredictorReady is the Deployment's Available condition (its
  reason and message: MinimumReplicasUnavailable while a pod cannot be scheduled); a Deployment scaled to
  zero is Available, so the InferenceService stays Ready at zero.
- Knative mode: Knative Service `<name>-predictor` (serving.knative.dev/v1) whose template carries the pod
  spec and the autoscaling annotations: autoscaling.knative.dev/class kpa.autoscaling.knative.dev,
  min-scale (minReplicas, default 1), max-scale (maxReplicas when set), target (scaleTarget), metric
  (scaleMetric); containerConcurrency and timeoutSeconds from the predictor. PredictorReady follows the Knative
  Service's Ready condition. DRA claims (spec.predictor.resourceClaims or resources.claims) are refused as
  Knative's admission webhook refuses them (knative/serving#15332): the Knative Service is never created and
  PredictorReady is False with the webhook's message.
- Status: conditions PredictorReady, IngressReady (True once the predictor's Service / Knative route exists),
  Ready (both); url http://<name>-<namespace>.<ingressDomain>, address.url
  http://<name>-predictor.<namespace>.svc.cluster.local, components.predictor {url, latestCreatedRevision...},
  modelStatus {states, transitionStatus, copies}.
The request knob (serving.REQUESTS_ANNOTATION) is copied to the children's metadata, never into pod templates.
"""
from __future__ import annotations

import copy
import json

from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from . import serving
from .framework import Simulator, log

V1B1 = "serving.kserve.io/v1beta1"
V1A1 = "serving.kserve.io/v1alpha1"
KSVC = "serving.knative.dev/v1"
KEDA = "keda.sh/v1alpha1"
CONFIG_NAME = "inferenceservice-config"
ISVC_LABEL = "serving.kserve.io/inferenceservice"
MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
AUTOSCALER_ANNOTATION = "serving.kserve.io/autoscalerClass"
CONTAINER = "kserve-container"
MANAGER = "kserve"
# spec.predictor fields that are KServe's own (ComponentExtensionSpec and the model frameworks), not PodSpec.
COMPONENT_FIELDS = {"minReplicas", "maxReplicas", "scaleTarget", "scaleMetric", "scaleMetricType",
                    "containerConcurrency", "timeout", "canaryTrafficPercent", "logger", "batcher", "labels",
                    "annotations", "deploymentStrategy", "autoScaling", "workerSpec", "model", "containers",
                    "storageUris", "storageContainerName", "name", "sklearn", "xgboost", "tensorflow", "pytorch",
                    "triton", "onnx", "pmml", "lightgbm", "paddle", "huggingface"}
# Annotations KServe does not pass on to what it creates.
DROPPED_ANNOTATIONS = {"kubectl.kubernetes.io/last-applied-configuration"}
KNATIVE_CLAIMS_MESSAGE = ('admission webhook "validation.webhook.serving.knative.dev" denied the request: '
                          "validation failed: must not set the field(s): {fields}")


def deployment_mode(isvc: dict, config: dict) -> str:
    mode = ((isvc["metadata"].get("annotations") or {}).get(MODE_ANNOTATION)
            or config.get("defaultDeploymentMode") or "Standard")
    return "Knative" if mode in ("Knative", "Serverless") else "Standard"


def _config(cm: dict | None) -> tuple:
    """(deploy config, ingress config) from inferenceservice-config."""
    data = (cm or {}).get("data") or {}
    out = []
    for key in ("deploy", "ingress"):
        try:
            out.append(json.loads(data.get(key) or "{}"))
        except ValueError:
            out.append({})
    return tuple(out)


def _supports(runtime_spec: dict, fmt: str, auto: bool) -> int | None:
    """The priority with which a runtime serves model format fmt (auto: only autoSelect entries), else None."""
    if runtime_spec.get("disabled"):
        return None
    for f in runtime_spec.get("supportedModelFormats") or []:
        if (f.get("name") or "").lower() == fmt.lower() and (not auto or f.get("autoSelect")):
            return int(f.get("priority") or 0)
    return None


def _merge_env(base: list, extra: list) -> list:
    out = {e["name"]: e for e in base or []}
    for e in extra or []:
        out[e["name"]] = e
    return list(out.values())


def _merge_resources(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base or {})
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = dict(out[key], **value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merged_container(runtime_container: dict, model: dict, name: str) -> dict:
    c = copy.deepcopy(runtime_container)
    c["name"] = CONTAINER
    for key in ("image", "command", "imagePullPolicy", "workingDir", "ports", "livenessProbe", "readinessProbe",
                "startupProbe", "securityContext", "volumeMounts"):
        if model.get(key):
            c[key] = copy.deepcopy(model[key])
    c["args"] = [a.replace("{{.Name}}", name) for a in (c.get("args") or []) + (model.get("args") or [])]
    if not c["args"]:
        del c["args"]
    env = _merge_env(c.get("env"), model.get("env"))
    if env:
        c["env"] = env
    resources = _merge_resources(c.get("resources"), model.get("resources"))
    if resources:
        c["resources"] = resources
    return c


def _copy_meta(isvc: dict, predictor: dict) -> tuple:
    meta = isvc["metadata"]
    labels = dict(meta.get("labels") or {}, **(predictor.get("labels") or {}))
    annotations = {k: v for k, v in dict(meta.get("annotations") or {}, **(predictor.get("annotations") or {})).items()
                   if k not in DROPPED_ANNOTATIONS}
    return labels, annotations


def _template_annotations(annotations: dict) -> dict:
    return {k: v for k, v in annotations.items() if not k.startswith(serving.KNOB_PREFIX)}


def claims_in(pod_spec: dict) -> list:
    """Fields of a pod spec that use DRA claims (what Knative's webhook refuses)."""
    fields = []
    if pod_spec.get("resourceClaims"):
        fields.append("spec.template.spec.resourceClaims")
    for i, c in enumerate(pod_spec.get("containers") or []):
        if ((c.get("resources") or {}).get("claims")):
            fields.append(f"spec.template.spec.containers[{i}].resources.claims")
    return fields


def _keda_triggers(predictor: dict) -> list:
    triggers = []
    for metric in ((predictor.get("autoScaling") or {}).get("metrics") or []):
        kind = metric.get("type")
        if kind == "Resource":
            res = metric.get("resource") or {}
            target = res.get("target") or {}
            mtype = target.get("type") or "Utilization"
            if mtype == "Utilization":
                value = target.get("averageUtilization")
                if value is None and res.get("name") == "cpu":
                    value = 80
                value = str(value if value is not None else 0)
            elif mtype == "AverageValue":
                value = str(target.get("averageValue", "0"))
            else:
                value = str(target.get("value", "0"))
            triggers.append({"type": res.get("name", "cpu"), "metricType": mtype, "metadata": {"value": value}})
        elif kind == "External":
            ext = metric.get("external") or {}
            m = ext.get("metric") or {}
            target = ext.get("target") or {}
            trig = {"type": m.get("backend", "prometheus"),
                    "metadata": {"serverAddress": m.get("serverAddress", ""), "query": m.get("query", ""),
                                 "threshold": f"{float(target.get('value', 0)):f}"}}
            if m.get("namespace") and trig["type"] == "prometheus":
                trig["metadata"]["namespace"] = m["namespace"]
            auth = ext.get("authentication") or {}
            if auth.get("authModes"):
                trig["metadata"]["authModes"] = auth["authModes"]
            if (auth.get("authenticationRef") or {}).get("name"):
                trig["authenticationRef"] = {"name": auth["authenticationRef"]["name"]}
            triggers.append(trig)
        elif kind == "PodMetric":
            pm = metric.get("podmetric") or metric.get("podMetric") or {}
            m = pm.get("metric") or {}
            target = pm.get("target") or {}
            triggers.append({"type": "external", "metadata": {
                "metricQuery": m.get("query", ""), "targetValue": f"{float(target.get('value', 0)):f}",
                "scalerAddress": m.get("serverAddress", "")}})
    return triggers


class KServeSimulator(Simulator):
    name = "kserve"
    watches = {"InferenceService": V1B1, "Deployment": "apps/v1", "ConfigMap": "v1",
               "ServingRuntime": V1A1, "ClusterServingRuntime": V1A1, "Service": KSVC}
    extra_kinds = {"CoreService": "v1", "HorizontalPodAutoscaler": "autoscaling/v2", "ScaledObject": KEDA}

    def api(self, kind: str):
        if kind == "CoreService":
            return self.dyn.resources.get(api_version="v1", kind="Service")
        return super().api(kind)

    def reconcile(self, kind, key, obj):
        if kind == "InferenceService":
            return self._isvc(key, obj.to_dict() if obj is not None else None)
        if kind == "Deployment" or kind == "Service":
            labels = (obj.metadata.labels or {}) if obj is not None else {}
            if labels.get(ISVC_LABEL):
                self.requeue("InferenceService", key[1], labels[ISVC_LABEL])
            return
        if kind == "ConfigMap" and key[2] != CONFIG_NAME:
            return
        # A runtime or the config changed: look at every InferenceService again.
        try:
            for isvc in self.api("InferenceService").get().items:
                self.requeue("InferenceService", isvc.metadata.namespace, isvc.metadata.name)
        except (ResourceNotFoundError, NotFoundError):
            pass

    # -- inputs
    def _installed_config(self) -> dict | None:
        items = self.api("ConfigMap").get(field_selector=f"metadata.name={CONFIG_NAME}").items
        return items[0].to_dict() if items else None

    def _runtime(self, isvc: dict, model: dict) -> tuple:
        """(kind, name, spec) of the runtime, or (None, reason, message) when there is none."""
        ns = isvc["metadata"]["namespace"]
        fmt = (model.get("modelFormat") or {}).get("name", "")
        named = model.get("runtime")
        if named:
            for kind, namespace in (("ServingRuntime", ns), ("ClusterServingRuntime", None)):
                try:
                    found = self.get(kind, namespace, named)
                except ResourceNotFoundError:
                    found = None
                if found is not None:
                    spec = found.to_dict().get("spec") or {}
                    if spec.get("disabled"):
                        return None, "RuntimeDisabled", "Specified runtime is disabled"
                    if _supports(spec, fmt, auto=False) is None:
                        return None, "NoSupportingRuntime", "Specified runtime does not support specified framework/version"
                    return kind, named, spec
            return None, "RuntimeNotRecognized", "Waiting for runtime to become available"
        candidates = []
        for order, (kind, namespace) in enumerate((("ServingRuntime", ns), ("ClusterServingRuntime", None))):
            try:
                items = self.api(kind).get(namespace=namespace).items
            except ResourceNotFoundError:
                items = []
            for rt in items:
                spec = rt.to_dict().get("spec") or {}
                prio = _supports(spec, fmt, auto=True)
                if prio is not None:
                    candidates.append((order, -prio, rt.metadata.name, kind, spec))
        if not candidates:
            return None, "NoSupportingRuntime", "No runtime found to support specified framework/version"
        order, prio, name, kind, spec = sorted(candidates)[0]
        return kind, name, spec

    def _pod_spec(self, isvc: dict) -> tuple:
        """(pod spec, runtime kind, runtime name) or (None, reason, message)."""
        predictor = isvc["spec"].get("predictor") or {}
        name = isvc["metadata"]["name"]
        base = {}
        kind = runtime = None
        if predictor.get("model"):
            kind, runtime, spec = self._runtime(isvc, predictor["model"])
            if kind is None:
                return None, runtime, spec
            containers = spec.get("containers") or []
            if not containers:
                return None, "InvalidPredictorSpec", "No container configuration found in selected serving runtime"
            main = next((i for i, c in enumerate(containers) if c.get("name") == CONTAINER), 0)
            merged = merged_container(containers[main], predictor["model"], name)
            runtime_pod = ("nodeSelector", "tolerations", "affinity", "volumes", "imagePullSecrets", "hostIPC",
                           "schedulerName")
            base = {k: copy.deepcopy(spec[k]) for k in runtime_pod if spec.get(k)}
            base["containers"] = [merged] + [copy.deepcopy(c) for i, c in enumerate(containers) if i != main]
            self._runtime_meta = {"annotations": dict(spec.get("annotations") or {}),
                                  "labels": dict(spec.get("labels") or {})}
        elif predictor.get("containers"):
            base["containers"] = copy.deepcopy(predictor["containers"])
            base["containers"][0].setdefault("name", CONTAINER)
        else:
            return None, "InvalidPredictorSpec", "the predictor names neither a model nor containers"
        for key, value in predictor.items():
            if key not in COMPONENT_FIELDS and value not in (None, [], {}):
                base[key] = copy.deepcopy(value)
        return base, kind, runtime

    # -- reconcile
    def _isvc(self, key, isvc: dict | None) -> None:
        if isvc is None or isvc["metadata"].get("deletionTimestamp"):
            return  # children are owned by it: the garbage collector removes them
        cm = self._installed_config()
        if cm is None:
            return  # KServe is not installed: nobody acts on InferenceServices
        deploy, ingress = _config(cm)
        mode = deployment_mode(isvc, deploy)
        self._runtime_meta = {"annotations": {}, "labels": {}}
        pod_spec, kind, runtime = self._pod_spec(isvc)
        if pod_spec is None:
            return self._refuse(isvc, mode, kind, runtime)
        if mode == "Knative":
            fields = claims_in(pod_spec)
            if fields:
                return self._refuse(isvc, mode, "ReconcileFailed",
                                    "fails to reconcile predictor: " +
                                    KNATIVE_CLAIMS_MESSAGE.format(fields=", ".join(fields)), knative=True)
            component = self._knative(isvc, pod_spec)
        else:
            component = self._standard(isvc, pod_spec)
        self._status(isvc, mode, ingress, kind, runtime, component)

    def _meta(self, isvc: dict, suffix: str = "-predictor") -> dict:
        predictor = isvc["spec"].get("predictor") or {}
        labels, annotations = _copy_meta(isvc, predictor)
        name = isvc["metadata"]["name"]
        labels.update({ISVC_LABEL: name, "component": "predictor"})
        return {"name": name + suffix, "namespace": isvc["metadata"]["namespace"], "labels": labels,
                "annotations": annotations, "ownerReferences": serving.owner(isvc)}

    def _standard(self, isvc: dict, pod_spec: dict) -> dict:
        predictor = isvc["spec"].get("predictor") or {}
        meta = self._meta(isvc)
        name, ns = meta["name"], meta["namespace"]
        app = f"isvc.{name}"
        meta["labels"]["app"] = app
        autoscaler = meta["annotations"].get(AUTOSCALER_ANNOTATION, "hpa")
        pod_spec = copy.deepcopy(pod_spec)
        for c in pod_spec["containers"]:
            if c["name"] == CONTAINER and not c.get("readinessProbe"):
                port = ((c.get("ports") or [{}])[0]).get("containerPort", 8080)
                c["readinessProbe"] = {"tcpSocket": {"port": port}, "timeoutSeconds": 1, "periodSeconds": 10,
                                       "successThreshold": 1, "failureThreshold": 3}
        deployment = {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": copy.deepcopy(meta),
            "spec": {"selector": {"matchLabels": {"app": app}},
                     "strategy": predictor.get("deploymentStrategy") or {
                         "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                     "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                     "template": {"metadata": {"labels": dict(self._runtime_meta["labels"], **meta["labels"]),
                                               "annotations": _template_annotations(
                                                   dict(self._runtime_meta["annotations"], **meta["annotations"]))},
                                  "spec": pod_spec}},
        }
        if autoscaler == "external" and predictor.get("minReplicas") is not None:
            deployment["spec"]["replicas"] = predictor["minReplicas"]
        dapi = self.api("Deployment")
        current = serving.get(dapi, ns, name)
        serving.apply(dapi, deployment, current, MANAGER)
        main = next(c for c in pod_spec["containers"] if c["name"] == CONTAINER) \
            if any(c["name"] == CONTAINER for c in pod_spec["containers"]) else pod_spec["containers"][0]
        port = ((main.get("ports") or [{}])[0]).get("containerPort", 8080)
        service = {"apiVersion": "v1", "kind": "Service", "metadata": copy.deepcopy(meta),
                   "spec": {"selector": {"app": app},
                            "ports": [{"name": "http", "port": 80, "targetPort": port, "protocol": "TCP"}]}}
        sapi = self.api("CoreService")
        serving.apply(sapi, service, serving.get(sapi, ns, name), MANAGER)
        self._autoscaler(isvc, meta, autoscaler)
        current = serving.get(dapi, ns, name) or {}
        return {"deployment": current}

    def _autoscaler(self, isvc: dict, meta: dict, autoscaler: str) -> None:
        predictor = isvc["spec"].get("predictor") or {}
        name, ns = meta["name"], meta["namespace"]
        minimum = predictor.get("minReplicas")
        maximum = predictor.get("maxReplicas") or 0
        if autoscaler == "keda":
            low = 1 if minimum is None else minimum
            so = {"apiVersion": KEDA, "kind": "ScaledObject", "metadata": copy.deepcopy(meta),
                  "spec": {"scaleTargetRef": {"name": name}, "minReplicaCount": low,
                           "maxReplicaCount": max(maximum, low), "triggers": _keda_triggers(predictor)}}
            try:
                api = self.api("ScaledObject")
            except ResourceNotFoundError:
                log.info("kserve: %s/%s: no ScaledObject CRD (KEDA not installed)", ns, name)
                return
            serving.apply(api, so, serving.get(api, ns, name), MANAGER)
        elif autoscaler == "hpa":
            low = max(1, minimum if minimum is not None else 1)
            metric = predictor.get("scaleMetric") or "cpu"
            target = predictor.get("scaleTarget") or 80
            metrics = [{"type": "Resource", "resource": {"name": metric if metric in ("cpu", "memory") else "cpu",
                                                         "target": {"type": "Utilization",
                                                                    "averageUtilization": target}}}]
            hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": copy.deepcopy(meta),
                   "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                            "minReplicas": low, "maxReplicas": max(maximum, low), "metrics": metrics}}
            api = self.api("HorizontalPodAutoscaler")
            serving.apply(api, hpa, serving.get(api, ns, name), MANAGER)

    def _knative(self, isvc: dict, pod_spec: dict) -> dict:
        predictor = isvc["spec"].get("predictor") or {}
        meta = self._meta(isvc)
        name, ns = meta["name"], meta["namespace"]
        annotations = _template_annotations(dict(self._runtime_meta["annotations"], **meta["annotations"]))
        annotations.setdefault("autoscaling.knative.dev/class", "kpa.autoscaling.knative.dev")
        minimum = predictor.get("minReplicas")
        annotations["autoscaling.knative.dev/min-scale"] = str(1 if minimum is None else minimum)
        if predictor.get("maxReplicas"):
            annotations["autoscaling.knative.dev/max-scale"] = str(predictor["maxReplicas"])
        if predictor.get("scaleTarget"):
            annotations["autoscaling.knative.dev/target"] = str(predictor["scaleTarget"])
        if predictor.get("scaleMetric"):
            annotations["autoscaling.knative.dev/metric"] = predictor["scaleMetric"]
        spec = copy.deepcopy(pod_spec)
        if predictor.get("containerConcurrency") is not None:
            spec["containerConcurrency"] = predictor["containerConcurrency"]
        if predictor.get("timeout") is not None:
            spec["timeoutSeconds"] = predictor["timeout"]
        labels = dict(self._runtime_meta["labels"], **meta["labels"])
        ksvc = {"apiVersion": KSVC, "kind": "Service", "metadata": copy.deepcopy(meta),
                "spec": {"template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec}}}
        try:
            api = self.api("Service")
        except ResourceNotFoundError:
            return {"knative_missing": True}
        serving.apply(api, ksvc, serving.get(api, ns, name), MANAGER)
        return {"ksvc": serving.get(api, ns, name) or {}}

    # -- status
    def _write_status(self, isvc: dict, status: dict) -> None:
        old = isvc.get("status") or {}
        status["conditions"] = serving.keep_times(old.get("conditions"), status.get("conditions") or [])
        comparable = dict(status, conditions=None)
        old_comparable = dict(old, conditions=None)
        if serving.same_conditions(old.get("conditions"), status["conditions"]) and \
                all(old_comparable.get(k) == v for k, v in comparable.items() if k != "conditions"):
            return
        body = {"apiVersion": V1B1, "kind": "InferenceService",
                "metadata": {"name": isvc["metadata"]["name"], "namespace": isvc["metadata"]["namespace"]},
                "status": status}
        self.api("InferenceService").status.patch(body=body, namespace=isvc["metadata"]["namespace"],
                                                  content_type="application/merge-patch+json")

    def _refuse(self, isvc: dict, mode: str, reason: str, message: str, knative: bool = False) -> None:
        cond = serving.condition
        status = {"deploymentMode": mode, "observedGeneration": isvc["metadata"].get("generation", 1),
                  "conditions": [cond("IngressReady", None),
                                 cond("PredictorReady", False, reason, message),
                                 cond("Ready", False, reason, message)],
                  "modelStatus": {"transitionStatus": "InvalidSpec" if not knative else "BlockedByFailedLoad",
                                  "states": {"activeModelState": "", "targetModelState": "FailedToLoad"},
                                  "lastFailureInfo": {"reason": reason if not knative else "InvalidPredictorSpec",
                                                      "message": message}}}
        log.info("kserve: %s/%s: %s: %s", isvc["metadata"]["namespace"], isvc["metadata"]["name"], reason, message)
        self._write_status(isvc, status)

    def _status(self, isvc: dict, mode: str, ingress: dict, kind, runtime, component: dict) -> None:
        cond = serving.condition
        meta = isvc["metadata"]
        name, ns = meta["name"], meta["namespace"]
        domain = ingress.get("ingressDomain") or "example.com"
        url = f"http://{name}-{ns}.{domain}"
        address = f"http://{name}-predictor.{ns}.svc.cluster.local"
        comp = {}
        if "deployment" in component:
            d = component["deployment"]
            available = next((c for c in ((d.get("status") or {}).get("conditions") or [])
                              if c.get("type") == "Available"), None)
            ready = available is not None and available.get("status") == "True"
            predictor = cond("PredictorReady", ready if available else None,
                             (available or {}).get("reason", ""), (available or {}).get("message", ""))
            ingress_ready = cond("IngressReady", True)
            revision = ((d.get("metadata") or {}).get("annotations") or {}).get("deployment.kubernetes.io/revision")
            if revision:
                comp["latestCreatedRevision"] = revision
            if ready:
                comp["url"] = f"http://{name}-predictor-{ns}.{domain}"
            replicas = (d.get("status") or {}).get("readyReplicas") or 0
        elif component.get("knative_missing"):
            msg = "the resolved deployment mode is Knative, but Knative Serving is not available"
            predictor = cond("PredictorReady", False, "ServerlessModeRejected", msg)
            ingress_ready = cond("IngressReady", None)
            replicas = 0
        else:
            k = component["ksvc"]
            kstatus = k.get("status") or {}
            kready = next((c for c in kstatus.get("conditions") or [] if c.get("type") == "Ready"), None)
            ready = kready is not None and kready.get("status") == "True"
            predictor = cond("PredictorReady", ready if kready else None, (kready or {}).get("reason", ""),
                             (kready or {}).get("message", ""))
            routes = next((c for c in kstatus.get("conditions") or [] if c.get("type") == "RoutesReady"), None)
            ingress_ready = cond("IngressReady", (routes or {}).get("status") == "True" if routes else None)
            for src, dst in (("latestCreatedRevisionName", "latestCreatedRevision"),
                             ("latestReadyRevisionName", "latestReadyRevision")):
                if kstatus.get(src):
                    comp[dst] = kstatus[src]
            if kstatus.get("url"):
                comp["url"] = kstatus["url"]
            if kstatus.get("traffic"):
                comp["traffic"] = kstatus["traffic"]
            if ready and kstatus.get("latestReadyRevisionName"):
                comp["latestRolledoutRevision"] = kstatus["latestReadyRevisionName"]
            replicas = 1 if ready else 0
        all_ready = predictor["status"] == "True" and ingress_ready["status"] == "True"
        bad = predictor if predictor["status"] != "True" else ingress_ready
        status = {
            "deploymentMode": mode, "observedGeneration": meta.get("generation", 1),
            "conditions": [ingress_ready, predictor,
                           cond("Ready", True) if all_ready else
                           cond("Ready", False if bad["status"] == "False" else None, bad.get("reason", ""),
                                bad.get("message", ""))],
            "url": url if all_ready else None,
            "address": {"url": address} if all_ready else None,
            "components": {"predictor": comp},
            "modelStatus": {"transitionStatus": "UpToDate" if all_ready else "InProgress",
                            "states": {"activeModelState": "Loaded" if all_ready else "Pending",
                                       "targetModelState": "Loaded" if all_ready else "Pending"},
                            "copies": {"failedCopies": 0, "totalCopies": replicas},
                            "lastFailureInfo": None},
        }
        if kind == "ServingRuntime":
            status["servingRuntimeName"] = runtime
        elif kind == "ClusterServingRuntime":
            status["clusterServingRuntimeName"] = runtime
        self._write_status(isvc, status)
