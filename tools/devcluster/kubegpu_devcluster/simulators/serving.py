"""What the serving simulators (kserve, keda, knative) share: the request knob, the idle-time knob, and how each
writes its children and statuses.

The request knob: annotation REQUESTS_ANNOTATION ("devcluster.kubegpu.io/requests") on the InferenceService, the
number of requests in flight for the model (the load a metrics backend would report). KServe copies an
InferenceService's annotations to the objects it creates (Deployment, ScaledObject, Knative Service), so KEDA
reads it from the ScaledObject and Knative from the Knative Service: the same annotation drives both modes,
and a ScaledObject or Knative Service written by hand can carry it too. 0 or absent: idle.

The idle-time knob: `serving.idle_seconds` in ConfigMap kubegpu-devcluster/simulator-knobs replaces the
upstream idle periods (KEDA's cooldownPeriod, default 300 s; Knative's stable window 60 s plus the
scale-to-zero pod retention period), so that tests see scale to zero within seconds.
"""
from __future__ import annotations

import math

from kubernetes.dynamic.exceptions import NotFoundError

from .framework import Knobs

REQUESTS_ANNOTATION = "devcluster.kubegpu.io/requests"
# Annotations of ours that are knobs, not configuration: never copied into a pod template (a change would roll
# the pods, and in Knative mode create a new Revision).
KNOB_PREFIX = "devcluster.kubegpu.io/"


def requests_of(obj: dict) -> int:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(REQUESTS_ANNOTATION, "0")
    try:
        return max(0, int(float(value)))
    except ValueError:
        return 0


def idle_seconds(dyn, default: float) -> float:
    return Knobs(dyn, "serving").seconds("idle_seconds", default)


def wanted_replicas(requests: int, per_replica: float, low: int, high: int | None) -> int:
    """Replicas for `requests` in flight at `per_replica` each, within [max(low, 1), high]."""
    n = max(1, math.ceil(requests / max(per_replica, 1e-9)), low)
    return min(n, high) if high else n


def contains(current, desired) -> bool:
    """Whether current has every field desired sets (the API server adds defaults of its own)."""
    if isinstance(desired, dict):
        return isinstance(current, dict) and all(contains(current.get(k), v) for k, v in desired.items())
    if isinstance(desired, list):
        return (isinstance(current, list) and len(current) == len(desired)
                and all(contains(c, d) for c, d in zip(current, desired)))
    if isinstance(desired, (int, float)) and isinstance(current, str):
        return str(desired) == current
    return current == desired


def apply(api, body: dict, current: dict | None, manager: str) -> bool:
    """Server-side apply `body` unless `current` already has every field it sets; True when written."""
    if current is not None and contains(current, body):
        return False
    api.server_side_apply(body=body, namespace=body["metadata"].get("namespace"), field_manager=manager,
                          force_conflicts=True)
    return True


def get(api, namespace: str | None, name: str) -> dict | None:
    try:
        return api.get(name=name, namespace=namespace).to_dict()
    except NotFoundError:
        return None


def same_conditions(old: list, new: list) -> bool:
    def strip(conds):
        return [{k: v for k, v in c.items() if k not in ("lastTransitionTime", "lastUpdateTime", "lastProbeTime")}
                for c in conds or []]
    return strip(old) == strip(new)


def condition(ctype: str, status: bool | None, reason: str = "", message: str = "", severity: str = "") -> dict:
    from .framework import now
    c = {"type": ctype, "status": {True: "True", False: "False", None: "Unknown"}[status],
         "lastTransitionTime": now()}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    if severity:
        c["severity"] = severity
    return c


def keep_times(old: list, new: list) -> list:
    """new conditions, with the transition time of those whose status did not change."""
    before = {c.get("type"): c for c in old or []}
    out = []
    for c in new:
        prev = before.get(c["type"])
        if prev and prev.get("status") == c["status"] and prev.get("lastTransitionTime"):
            c = dict(c, lastTransitionTime=prev["lastTransitionTime"])
        out.append(c)
    return out


def owner(obj: dict) -> list:
    meta = obj["metadata"]
    return [{"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}]


def scale(dyn, kind: str, api_version: str, namespace: str, name: str, replicas: int) -> None:
    """Set replicas through the scale subresource, as autoscalers do."""
    api = dyn.resources.get(api_version=api_version, kind=kind)
    api.scale.patch(name=name, namespace=namespace, body={"spec": {"replicas": replicas}},
                    content_type="application/merge-patch+json")
