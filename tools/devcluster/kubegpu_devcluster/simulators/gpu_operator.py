"""GPU Operator status: a ClusterPolicy goes notReady -> ready once the operator runs (shared/reference/gpu-operator.md).

The operator "runs" when a gpu-operator-certified CSV has Succeeded (OLM) or a Deployment labelled
app.kubernetes.io/component=gpu-operator exists (Helm). Before that nobody writes ClusterPolicy status, as
on a real cluster. A second ClusterPolicy gets state `ignored`. Every spec change (new generation) passes
through notReady (OperandNotReady) again, as the operator rolls its operands.

Knobs (ConfigMap kubegpu-devcluster/simulator-knobs):
  gpu-operator.ready_seconds   time from a new generation to ready (default 1)
  gpu-operator.never_ready     a condition reason (e.g. DriverNotReady): the policy stays notReady with it
"""
from __future__ import annotations

import time

from .framework import Simulator, now

CP = "nvidia.com/v1"


def _conditions(ready: bool, reason: str, message: str) -> list:
    t = now()
    return [
        {"type": "Ready", "status": "True" if ready else "False", "reason": reason, "message": message,
         "lastTransitionTime": t},
        {"type": "Error", "status": "False" if ready else "True", "reason": reason,
         "message": "" if ready else message, "lastTransitionTime": t},
    ]


class GpuOperatorSimulator(Simulator):
    name = "gpu-operator"
    watches = {"ClusterPolicy": CP, "ClusterServiceVersion": "operators.coreos.com/v1alpha1",
               "Deployment": "apps/v1"}
    extra_kinds = {"Node": "v1"}

    def __init__(self, kubeconfig: str):
        super().__init__(kubeconfig)
        self._rollouts = {}   # uid -> (generation, monotonic time at which it is ready)

    def _operator_running(self) -> bool:
        csvs = self.api("ClusterServiceVersion").get().items
        if any(c.metadata.name.startswith("gpu-operator-certified.") and (c.status or {}).get("phase") == "Succeeded"
               for c in csvs):
            return True
        return bool(self.api("Deployment").get(label_selector="app.kubernetes.io/component=gpu-operator").items)

    def reconcile(self, kind, key, obj):
        if kind != "ClusterPolicy":
            for cp in self.api("ClusterPolicy").get().items:
                self.requeue("ClusterPolicy", None, cp.metadata.name)
            return
        if obj is None or not self._operator_running():
            return
        cp = obj.to_dict()
        meta, status = cp["metadata"], cp.get("status") or {}
        policies = sorted(self.api("ClusterPolicy").get().items,
                          key=lambda p: (p.metadata.creationTimestamp, p.metadata.name))
        if policies and policies[0].metadata.name != meta["name"]:
            return self._write(cp, "ignored", _conditions(False, "ReconcileFailed",
                                                          "duplicate ClusterPolicy: only one is reconciled"))
        never = self.knobs.get("never_ready")
        if never:
            return self._write(cp, "notReady", _conditions(False, never, f"{never}: simulated failure"))
        gpu_nodes = self.api("Node").get(label_selector="feature.node.kubernetes.io/pci-10de.present=true").items
        if not gpu_nodes:
            return self._write(cp, "notReady", _conditions(False, "NoGPUNodes", "no GPU nodes in the cluster"))
        generation = meta.get("generation", 1)
        rollout = self._rollouts.get(meta["uid"])
        if rollout is None or rollout[0] != generation:
            rollout = (generation, time.monotonic() + self.knobs.seconds("ready_seconds", 1.0))
            self._rollouts[meta["uid"]] = rollout
            self._write(cp, "notReady", _conditions(False, "OperandNotReady", "operands are rolling out"))
        if time.monotonic() < rollout[1]:
            return self.requeue("ClusterPolicy", None, meta["name"], after=rollout[1] - time.monotonic())
        self._write(cp, "ready", _conditions(True, "Reconciled", "ClusterPolicy is ready"))

    def _write(self, cp: dict, state: str, conditions: list) -> None:
        old = cp.get("status") or {}
        if old.get("state") == state and [c.get("reason") for c in old.get("conditions", [])] == \
                [c["reason"] for c in conditions]:
            return
        cp["status"] = dict(old, state=state, conditions=conditions, namespace=old.get("namespace", ""))
        self.api("ClusterPolicy").status.replace(body=cp)
