"""KEDA's operator (v2.20): ScaledObject -> replicas of its target, 0 <-> 1 itself, conditions Ready/Active.

Follows kedacore/keda v2.20 (controllers/keda/scaledobject_controller.go, pkg/scaling/executor/scale_scaledobjects.go,
apis/keda/v1alpha1 condition_types.go) where shared/reference is silent. Runs while KEDA is installed: a
Deployment named `keda-operator` exists (the keda chart's, or the one the Custom Metrics Autoscaler operator
runs in openshift-keda once its KedaController exists).

Per ScaledObject:
- Checks as KEDA does before scaling: the target (spec.scaleTargetRef, default apps/v1 Deployment) must exist,
  else Ready False ScaledObjectCheckFailed ("ScaledObject doesn't have correct scaleTargetRef specification");
  triggers must not be empty, else Ready False ScaledObjectCheckFailed ("ScaledObject doesn't have correct
  triggers specification"). Otherwise Ready True ScaledObjectReady.
- Activity comes from the request knob (serving.REQUESTS_ANNOTATION on the ScaledObject; KServe copies it
  from the InferenceService), standing in for the triggers' metrics. Active (requests > 0): replicas =
  ceil(requests / threshold of the first trigger, default 1), within [max(minReplicaCount, 1),
  maxReplicaCount (default 100)]; status.lastActiveTime = now; condition Active True ScalerActive. Idle: once
  the cooldown has passed since lastActiveTime (or since creation + initialCooldownPeriod when never
  active), replicas = idleReplicaCount if set, else minReplicaCount (default 0); Active False
  ScalerNotActive. The cooldown is spec.cooldownPeriod (default 300 s) unless the knob serving.idle_seconds
  is set. Replicas are written through the target's scale subresource, as KEDA does for 0 <-> 1 (the
  1 <-> N part is KEDA's HPA `keda-hpa-<name>` upstream; it is not created here: its metrics would come from
  KEDA's metrics server, which does not run, so the simulator scales within the range itself). Polling is
  immediate: a change of the knob acts at once, not after pollingInterval.
- Knob keda.fail_scaledobjects: comma-separated ScaledObject names that stay Ready False
  (ScaledObjectCheckFailed) and never scale, as when a trigger's metrics cannot be read.
- Status: scaleTargetKind, scaleTargetGVKR, originalReplicaCount, hpaName, lastActiveTime, conditions
  Ready, Active, Fallback (False NoFallbackFound), Paused (False). Annotation autoscaling.keda.sh/paused:
  "true" leaves the target alone (Paused True).
"""
from __future__ import annotations

import time
from datetime import datetime, timezone

from kubernetes.dynamic.exceptions import ResourceNotFoundError

from . import serving
from .framework import Simulator, log, now

KEDA = "keda.sh/v1alpha1"
OPERATOR = "keda-operator"
DEFAULT_COOLDOWN = 300.0
DEFAULT_MAX = 100
PAUSED = "autoscaling.keda.sh/paused"


def _parse_time(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def threshold(triggers: list) -> float:
    for t in triggers or []:
        meta = t.get("metadata") or {}
        for key in ("threshold", "value", "targetValue", "activationThreshold"):
            try:
                value = float(meta.get(key, ""))
            except ValueError:
                continue
            if value > 0:
                return value
    return 1.0


class KedaSimulator(Simulator):
    name = "keda"
    watches = {"ScaledObject": KEDA, "Deployment": "apps/v1"}

    def reconcile(self, kind, key, obj):
        if kind == "Deployment":
            if key[2] == OPERATOR:   # KEDA installed or removed: look at every ScaledObject
                try:
                    for so in self.api("ScaledObject").get().items:
                        self.requeue("ScaledObject", so.metadata.namespace, so.metadata.name)
                except ResourceNotFoundError:
                    pass
            return
        if obj is not None:
            self._scaled_object(obj.to_dict())

    def _installed(self) -> bool:
        return bool(self.api("Deployment").get(field_selector=f"metadata.name={OPERATOR}").items)

    def _scaled_object(self, so: dict) -> None:
        if so["metadata"].get("deletionTimestamp") or not self._installed():
            return
        meta, spec = so["metadata"], so.get("spec") or {}
        ns, name = meta["namespace"], meta["name"]
        ref = spec.get("scaleTargetRef") or {}
        api_version, kind = ref.get("apiVersion") or "apps/v1", ref.get("kind") or "Deployment"
        group, dummy, version = api_version.rpartition("/")
        status = {"scaleTargetKind": f"{api_version}.{kind}",
                  "scaleTargetGVKR": {"group": group, "version": version, "kind": kind,
                                      "resource": kind.lower() + "s"},
                  "hpaName": f"keda-hpa-{name}"}
        cond = serving.condition
        try:
            target = self.dyn.resources.get(api_version=api_version, kind=kind).get(
                name=ref.get("name", ""), namespace=ns).to_dict()
        except Exception:  # missing kind or object: KEDA's check fails the same way
            target = None
        problem = None
        failing = {n.strip() for n in self.knobs.get("fail_scaledobjects").split(",") if n.strip()}
        if name in failing:
            problem = "simulated failure (knob keda.fail_scaledobjects): the scaler cannot reach its metrics"
        elif target is None:
            problem = "ScaledObject doesn't have correct scaleTargetRef specification"
        elif not spec.get("triggers"):
            problem = "ScaledObject doesn't have correct triggers specification"
        if problem:
            status["conditions"] = [cond("Ready", False, "ScaledObjectCheckFailed", problem),
                                    cond("Active", None), cond("Fallback", None), cond("Paused", None)]
            return self._write(so, status)
        replicas = (target.get("spec") or {}).get("replicas", 1)
        old = so.get("status") or {}
        status["originalReplicaCount"] = old.get("originalReplicaCount", replicas)
        low = spec.get("minReplicaCount", 0)
        high = spec.get("maxReplicaCount", DEFAULT_MAX)
        requests = serving.requests_of(so)
        paused = (meta.get("annotations") or {}).get(PAUSED) == "true"
        ready = cond("Ready", True, "ScaledObjectReady", "ScaledObject is defined correctly and is ready for scaling")
        fallback = cond("Fallback", False, "NoFallbackFound", "No fallbacks are active on this scaled object")
        if paused:
            status["conditions"] = [ready, cond("Active", False, "ScalerNotActive", "Scaling is paused"), fallback,
                                    cond("Paused", True, "ScaledObjectPaused", "ScaledObject is paused")]
            return self._write(so, status)
        pause_cond = cond("Paused", False, "ScaledObjectUnpaused", "pause annotation removed for ScaledObject")
        if requests > 0:
            wanted = serving.wanted_replicas(requests, threshold(spec.get("triggers")), low, high)
            status["lastActiveTime"] = now()
            status["conditions"] = [ready, cond("Active", True, "ScalerActive",
                                                "Scaling is performed because triggers are active"),
                                    fallback, pause_cond]
            if replicas != wanted:
                log.info("keda: %s/%s: %d requests -> %d replicas", ns, name, requests, wanted)
                self._scale(api_version, kind, ns, ref["name"], wanted)
            return self._write(so, status)
        status["conditions"] = [ready, cond("Active", False, "ScalerNotActive",
                                            "Scaling is not performed because triggers are not active"),
                                fallback, pause_cond]
        was_active = any(c.get("type") == "Active" and c.get("status") == "True" for c in old.get("conditions") or [])
        if was_active:   # the last requests just ended: KEDA saw the trigger active at its previous poll
            status["lastActiveTime"] = now()
        elif old.get("lastActiveTime"):
            status["lastActiveTime"] = old["lastActiveTime"]
        since = _parse_time(status.get("lastActiveTime")) or (
            (_parse_time(meta.get("creationTimestamp")) or time.time()) + float(spec.get("initialCooldownPeriod") or 0))
        cooldown = serving.idle_seconds(self.dyn, float(spec.get("cooldownPeriod") or DEFAULT_COOLDOWN))
        idle = spec.get("idleReplicaCount")
        floor = idle if idle is not None else low
        self._write(so, status)
        if replicas <= floor:
            if replicas < floor:
                self._scale(api_version, kind, ns, ref["name"], floor)
            return
        left = since + cooldown - time.time()
        if left > 0:
            return self.requeue("ScaledObject", ns, name, after=min(left + 0.05, 30))
        log.info("keda: %s/%s idle for %.0f s: %d -> %d replicas", ns, name, cooldown, replicas, floor)
        self._scale(api_version, kind, ns, ref["name"], floor)

    def _scale(self, api_version: str, kind: str, ns: str, name: str, replicas: int) -> None:
        serving.scale(self.dyn, kind, api_version, ns, name, replicas)

    def _write(self, so: dict, status: dict) -> None:
        old = so.get("status") or {}
        if serving.same_conditions(old.get("conditions"), status.get("conditions")) and all(
                old.get(k) == v for k, v in status.items() if k != "conditions"):
            return
        body = {"apiVersion": KEDA, "kind": "ScaledObject",
                "metadata": {"name": so["metadata"]["name"], "namespace": so["metadata"]["namespace"]},
                "status": status}
        self.api("ScaledObject").status.patch(body=body, namespace=so["metadata"]["namespace"],
                                              content_type="application/merge-patch+json")
