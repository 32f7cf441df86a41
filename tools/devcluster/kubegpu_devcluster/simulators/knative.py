"""Knative Serving (v1.x) with its KPA autoscaler: Service -> Configuration -> Revision -> Deployment, scale to
zero when idle, back on a request.

Follows knative/serving (pkg/reconciler/{service,configuration,revision,autoscaling/kpa}, pkg/apis/serving/v1
condition sets) where shared/reference is silent. Runs while Knative Serving is installed: ConfigMap
`config-autoscaler` exists in namespace `knative-serving` (the serverless-operator simulator writes it for a
KnativeServing; on Kubernetes, Knative's own install). Its keys are read as upstream: enable-scale-to-zero
(default true), stable-window (60s), scale-to-zero-pod-retention-period (0s), allow-zero-initial-scale
(false); config-domain's first key is the domain (default example.com).

- Service -> Configuration and Route of the same name, owned by it (traffic: 100% to the latest revision).
- Configuration -> one Revision per generation (`<name>-00001`, ...), labelled serving.knative.dev/
  configuration, service, configurationGeneration, with the template's annotations and spec.
- Revision -> Deployment `<revision>-deployment` (labels serving.knative.dev/revision, app=<revision>): the
  user's containers (an unnamed first container becomes `user-container`) and the `queue-proxy` sidecar.
  Old revisions keep their Deployment at zero replicas, as upstream (no traffic).
- KPA, per revision: annotations autoscaling.knative.dev/min-scale (0), max-scale (none), target
  (containerConcurrency, else 100), initial-scale (1; 0 only with allow-zero-initial-scale). Activity is the
  request knob (serving.REQUESTS_ANNOTATION) on the Knative Service (KServe copies it from the
  InferenceService). Requests > 0: replicas = ceil(requests / target) within [max(min-scale, 1), max-scale].
  Idle: after the stable window plus the retention period (the knob serving.idle_seconds replaces both) since
  the last activity (or the revision's first readiness), replicas = min-scale, 0 with scale to zero enabled.
  Replicas go through the scale subresource, as the autoscaler's.
- Status: Revision ResourcesAvailable, ContainerHealthy, Ready, Active (False NoTraffic at zero; a revision
  at zero stays Ready); a pod that cannot be scheduled makes ResourcesAvailable and Ready False with reason
  Unschedulable and the scheduler's message. Configuration Ready follows its latest revision
  (latestCreatedRevisionName, latestReadyRevisionName). Service ConfigurationsReady, RoutesReady, Ready; a
  failed latest revision: ConfigurationsReady/Ready False, reason RevisionFailed, 'Revision "<name>" failed
  with message: <message>.'; url http://<name>.<namespace>.<domain>, address, traffic.
Knob knative.fail_revisions: comma-separated Revision names that report ResourcesAvailable/Ready False (ExitCode1),
as a crash-looping user container does; the Service shows RevisionFailed.
DRA claims never reach here from KServe: Knative's webhook refuses them (knative/serving#15332), which the
kserve simulator reproduces; a Service written with them directly loses them to the CRD's pruning.
"""
from __future__ import annotations

import copy
import time

from kubernetes.dynamic.exceptions import ResourceNotFoundError

from . import serving
from .framework import Simulator, log

KSVC = "serving.knative.dev/v1"
NAMESPACE = "knative-serving"
AUTOSCALER_CONFIG = "config-autoscaler"
QUEUE_PROXY = {"name": "queue-proxy", "image": "gcr.io/knative-releases/knative.dev/serving/cmd/queue:simulated",
               "ports": [{"name": "http-queueadm", "containerPort": 8022}, {"name": "queue-port", "containerPort": 8012}],
               "resources": {"requests": {"cpu": "25m"}}}
MANAGER = "knative-serving"
A = "autoscaling.knative.dev/"


def _seconds(text: str | None, default: float) -> float:
    if not text:
        return default
    text = text.strip()
    try:
        if text.endswith("ms"):
            return float(text[:-2]) / 1000
        if text.endswith("s"):
            return float(text[:-1])
        if text.endswith("m"):
            return float(text[:-1]) * 60
        if text.endswith("h"):
            return float(text[:-1]) * 3600
        return float(text)
    except ValueError:
        return default


def _cond(conditions: list, ctype: str) -> dict:
    return next((c for c in conditions or [] if c.get("type") == ctype), {})


class KnativeSimulator(Simulator):
    name = "knative"
    watches = {"Service": KSVC, "Configuration": KSVC, "Revision": KSVC, "Deployment": "apps/v1", "ConfigMap": "v1"}
    extra_kinds = {"Route": KSVC, "Pod": "v1"}

    def __init__(self, kubeconfig: str):
        super().__init__(kubeconfig)
        self._active = {}   # revision uid -> wall time of its last activity (or first readiness)
        self._busy = set()  # revisions with requests at their last look

    def _config(self) -> dict | None:
        cm = self.get("ConfigMap", NAMESPACE, AUTOSCALER_CONFIG)
        return ((cm.to_dict().get("data") or {}) if cm is not None else None)

    def _domain(self) -> str:
        cm = self.get("ConfigMap", NAMESPACE, "config-domain")
        data = (cm.to_dict().get("data") or {}) if cm is not None else {}
        names = [k for k in data if not k.startswith("_")]
        return names[0] if names else "example.com"

    def reconcile(self, kind, key, obj):
        if kind == "ConfigMap":
            if key[1] == NAMESPACE:
                for k in ("Service", "Revision"):
                    try:
                        for o in self.api(k).get().items:
                            self.requeue(k, o.metadata.namespace, o.metadata.name)
                    except ResourceNotFoundError:
                        pass
            return
        if kind == "Deployment":
            rev = ((obj.metadata.labels or {}) if obj is not None else {}).get("serving.knative.dev/revision")
            if rev:
                self.requeue("Revision", key[1], rev)
            return
        if obj is None or obj.metadata.deletionTimestamp:
            return
        config = self._config()
        if config is None:
            return
        getattr(self, "_" + kind.lower())(obj.to_dict(), config)

    def _owned(self, parent: dict, kind: str, name: str, labels: dict) -> dict:
        meta = parent["metadata"]
        return {"name": name, "namespace": meta["namespace"], "labels": labels,
                "ownerReferences": serving.owner(parent)}

    def _patch_status(self, kind: str, obj: dict, status: dict) -> None:
        old = obj.get("status") or {}
        status["conditions"] = serving.keep_times(old.get("conditions"), status.get("conditions") or [])
        if serving.same_conditions(old.get("conditions"), status["conditions"]) and all(
                old.get(k) == v for k, v in status.items() if k != "conditions"):
            return
        meta = obj["metadata"]
        body = {"apiVersion": KSVC, "kind": kind, "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                "status": status}
        self.api(kind).status.patch(body=body, namespace=meta["namespace"], content_type="application/merge-patch+json")

    # -- Service
    def _service(self, ksvc: dict, config: dict) -> None:
        meta = ksvc["metadata"]
        name, ns = meta["name"], meta["namespace"]
        labels = dict(meta.get("labels") or {}, **{"serving.knative.dev/service": name})
        cfg = {"apiVersion": KSVC, "kind": "Configuration",
               "metadata": self._owned(ksvc, "Configuration", name, labels),
               "spec": {"template": copy.deepcopy((ksvc.get("spec") or {}).get("template") or {})}}
        capi = self.api("Configuration")
        serving.apply(capi, cfg, serving.get(capi, ns, name), MANAGER)
        route = {"apiVersion": KSVC, "kind": "Route", "metadata": self._owned(ksvc, "Route", name, labels),
                 "spec": {"traffic": [{"configurationName": name, "latestRevision": True, "percent": 100}]}}
        rapi = self.api("Route")
        serving.apply(rapi, route, serving.get(rapi, ns, name), MANAGER)
        current = serving.get(capi, ns, name) or {}
        cstatus = current.get("status") or {}
        ready = _cond(cstatus.get("conditions"), "Ready")
        latest_ready = cstatus.get("latestReadyRevisionName")
        cond = serving.condition
        domain = self._domain()
        if ready.get("status") == "True":
            configs = cond("ConfigurationsReady", True)
        elif ready.get("status") == "False":
            configs = cond("ConfigurationsReady", False, ready.get("reason", ""), ready.get("message", ""))
        else:
            configs = cond("ConfigurationsReady", None, "OutOfDate",
                           "The Configuration is still working to reflect the latest desired specification.")
        routes = cond("RoutesReady", True) if latest_ready else cond(
            "RoutesReady", None, "RevisionMissing", f'Configuration "{name}" does not have any ready Revision.')
        both = configs["status"] == "True" and routes["status"] == "True"
        bad = configs if configs["status"] != "True" else routes
        status = {"observedGeneration": meta.get("generation", 1),
                  "conditions": [configs, routes, cond("Ready", True) if both else cond(
                      "Ready", False if bad["status"] == "False" else None, bad.get("reason", ""),
                      bad.get("message", ""))],
                  "latestCreatedRevisionName": cstatus.get("latestCreatedRevisionName"),
                  "latestReadyRevisionName": latest_ready}
        if latest_ready:
            status.update(url=f"http://{name}.{ns}.{domain}",
                          address={"url": f"http://{name}.{ns}.svc.cluster.local"},
                          traffic=[{"revisionName": latest_ready, "latestRevision": True, "percent": 100}])
        self._patch_status("Service", ksvc, status)
        if cstatus.get("latestCreatedRevisionName"):   # the request knob lives here: the autoscaler looks again
            self.requeue("Revision", ns, cstatus["latestCreatedRevisionName"])

    # -- Configuration
    def _configuration(self, cfg: dict, config: dict) -> None:
        meta = cfg["metadata"]
        name, ns, generation = meta["name"], meta["namespace"], meta.get("generation", 1)
        rev_name = f"{name}-{generation:05d}"
        template = (cfg.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        labels = dict(tmeta.get("labels") or {}, **{
            "serving.knative.dev/configuration": name, "serving.knative.dev/configurationGeneration": str(generation),
            "serving.knative.dev/configurationUID": meta["uid"]})
        if (meta.get("labels") or {}).get("serving.knative.dev/service"):
            labels["serving.knative.dev/service"] = meta["labels"]["serving.knative.dev/service"]
        rapi = self.api("Revision")
        revision = serving.get(rapi, ns, rev_name)
        if revision is None:
            body = {"apiVersion": KSVC, "kind": "Revision",
                    "metadata": dict(self._owned(cfg, "Revision", rev_name, labels),
                                     annotations=dict(tmeta.get("annotations") or {})),
                    "spec": copy.deepcopy(template.get("spec") or {})}
            rapi.create(body=body, namespace=ns)
            log.info("knative: %s/%s: revision %s created", ns, name, rev_name)
            revision = serving.get(rapi, ns, rev_name) or {}
        rstatus = revision.get("status") or {}
        rready = _cond(rstatus.get("conditions"), "Ready")
        cond = serving.condition
        old = cfg.get("status") or {}
        latest_ready = rev_name if rready.get("status") == "True" else old.get("latestReadyRevisionName")
        if rready.get("status") == "True":
            ready = cond("Ready", True)
        elif rready.get("status") == "False":
            ready = cond("Ready", False, "RevisionFailed",
                         f'Revision "{rev_name}" failed with message: {rready.get("message", "")}.')
        else:
            ready = cond("Ready", None)
        status = {"observedGeneration": generation, "latestCreatedRevisionName": rev_name,
                  "latestReadyRevisionName": latest_ready, "conditions": [ready]}
        self._patch_status("Configuration", cfg, status)
        if latest_ready and meta.get("labels", {}).get("serving.knative.dev/service"):
            self.requeue("Service", ns, meta["labels"]["serving.knative.dev/service"])
        elif meta.get("labels", {}).get("serving.knative.dev/service"):
            self.requeue("Service", ns, meta["labels"]["serving.knative.dev/service"])

    # -- Revision and its autoscaler
    def _revision(self, rev: dict, config: dict) -> None:
        meta = rev["metadata"]
        name, ns = meta["name"], meta["namespace"]
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        spec = copy.deepcopy(rev.get("spec") or {})
        containers = spec.get("containers") or []
        if containers and not containers[0].get("name"):
            containers[0]["name"] = "user-container"
        knative_only = ("containerConcurrency", "timeoutSeconds", "idleTimeoutSeconds", "responseStartTimeoutSeconds")
        pod_spec = {k: v for k, v in spec.items() if k not in knative_only}
        pod_spec["containers"] = containers + [copy.deepcopy(QUEUE_PROXY)]
        pod_labels = dict(labels, **{"serving.knative.dev/revision": name, "serving.knative.dev/revisionUID": meta["uid"],
                                     "app": name})
        dep_name = f"{name}-deployment"
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                      "metadata": self._owned(rev, "Deployment", dep_name, pod_labels),
                      "spec": {"selector": {"matchLabels": {"serving.knative.dev/revisionUID": meta["uid"]}},
                               "progressDeadlineSeconds": int(_seconds(
                                   annotations.get("serving.knative.dev/progress-deadline"), 600)),
                               "template": {"metadata": {"labels": pod_labels, "annotations": annotations},
                                            "spec": pod_spec}}}
        dapi = self.api("Deployment")
        current = serving.get(dapi, ns, dep_name)
        created = current is None
        serving.apply(dapi, deployment, current, MANAGER)
        current = serving.get(dapi, ns, dep_name) or {}
        self._status_and_scale(rev, current, config, created)

    def _ksvc_requests(self, rev: dict) -> int:
        svc = (rev["metadata"].get("labels") or {}).get("serving.knative.dev/service")
        if not svc:
            return serving.requests_of(rev)
        ksvc = serving.get(self.api("Service"), rev["metadata"]["namespace"], svc)
        return serving.requests_of(ksvc) if ksvc else 0

    def _is_latest(self, rev: dict) -> bool:
        cfg_name = (rev["metadata"].get("labels") or {}).get("serving.knative.dev/configuration")
        cfg = serving.get(self.api("Configuration"), rev["metadata"]["namespace"], cfg_name) if cfg_name else None
        if not cfg:
            return True
        return f"{cfg_name}-{cfg['metadata'].get('generation', 1):05d}" == rev["metadata"]["name"]

    def _status_and_scale(self, rev: dict, dep: dict, config: dict, created: bool) -> None:
        meta = rev["metadata"]
        name, ns, uid = meta["name"], meta["namespace"], meta["uid"]
        ann = meta.get("annotations") or {}
        spec, dstatus = rev.get("spec") or {}, dep.get("status") or {}
        cond = serving.condition
        replicas = (dep.get("spec") or {}).get("replicas", 1)
        ready_pods = dstatus.get("readyReplicas") or 0
        old = rev.get("status") or {}
        was_ready = _cond(old.get("conditions"), "Ready").get("status") == "True"
        # Pods the scheduler cannot place: Knative reports the first one's reason.
        problem = None
        if replicas > 0 and ready_pods == 0:
            pods = self.api("Pod").get(namespace=ns, label_selector=f"serving.knative.dev/revisionUID={uid}").items
            for p in pods:
                sched = _cond([c.to_dict() for c in (p.status.conditions or [])], "PodScheduled")
                if sched.get("status") == "False" and sched.get("reason") == "Unschedulable":
                    problem = ("Unschedulable", sched.get("message", ""))
                    break
        failing = {n.strip() for n in self.knobs.get("fail_revisions").split(",") if n.strip()}
        if name in failing:
            problem = ("ExitCode1", "Container failed with: simulated failure (knob knative.fail_revisions)")
        if problem:
            resources = cond("ResourcesAvailable", False, *problem)
            ready = cond("Ready", False, *problem)
        elif ready_pods > 0 or was_ready:
            resources = cond("ResourcesAvailable", True)
            ready = cond("Ready", True)
        else:
            resources = cond("ResourcesAvailable", None, "Deploying")
            ready = cond("Ready", None, "Deploying")
        active = cond("Active", True) if replicas > 0 and ready_pods > 0 else cond(
            "Active", False, "NoTraffic", "The target is not receiving traffic.")
        status = {"observedGeneration": meta.get("generation", 1), "actualReplicas": ready_pods,
                  "desiredReplicas": replicas,
                  "conditions": [active, cond("ContainerHealthy", False, *problem) if name in failing else
                                 cond("ContainerHealthy", True) if ready_pods or was_ready else
                                 cond("ContainerHealthy", None), ready, resources]}
        self._patch_status("Revision", rev, status)
        cfg_name = (meta.get("labels") or {}).get("serving.knative.dev/configuration")
        if cfg_name:
            self.requeue("Configuration", ns, cfg_name)
        # -- KPA
        now = time.time()
        if ready["status"] == "True" and uid not in self._active:
            self._active[uid] = now
        low = int(ann.get(A + "min-scale") or ann.get(A + "minScale") or 0)
        high = int(ann.get(A + "max-scale") or ann.get(A + "maxScale") or 0) or None
        target = float(ann.get(A + "target") or spec.get("containerConcurrency") or 100)
        to_zero = config.get("enable-scale-to-zero", "true") != "false"
        floor = low if (low > 0 or to_zero) else 1
        dep_name = dep["metadata"]["name"]
        if created:
            initial = int(ann.get(A + "initial-scale") or ann.get(A + "initialScale") or 1)
            if initial == 0 and config.get("allow-zero-initial-scale", "false") != "true":
                initial = 1
            initial = max(initial, low)
            if initial != replicas:
                serving.scale(self.dyn, "Deployment", "apps/v1", ns, dep_name, initial)
            return
        if not self._is_latest(rev):
            if replicas:
                serving.scale(self.dyn, "Deployment", "apps/v1", ns, dep_name, 0)
            return
        requests = self._ksvc_requests(rev)
        if requests > 0:
            self._active[uid] = now
            wanted = serving.wanted_replicas(requests, target, low, high)
            if wanted != replicas:
                log.info("knative: %s/%s: %d requests -> %d replicas", ns, name, requests, wanted)
                serving.scale(self.dyn, "Deployment", "apps/v1", ns, dep_name, wanted)
            self._busy.add(uid)
            return
        if uid in self._busy:   # the last requests just ended: the idle period starts now
            self._busy.discard(uid)
            self._active[uid] = now
        if replicas <= floor or uid not in self._active:
            return
        idle = serving.idle_seconds(self.dyn, _seconds(config.get("stable-window"), 60.0) + _seconds(
            ann.get(A + "scale-to-zero-pod-retention-period") or config.get("scale-to-zero-pod-retention-period"), 0))
        left = self._active[uid] + idle - now
        if left > 0:
            return self.requeue("Revision", ns, name, after=min(left + 0.05, 30))
        log.info("knative: %s/%s idle for %.0f s: %d -> %d replicas", ns, name, idle, replicas, floor)
        serving.scale(self.dyn, "Deployment", "apps/v1", ns, dep_name, floor)
