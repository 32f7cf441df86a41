"""GPU Operator, NVIDIADriver mode: which NVIDIADriver drives each GPU node, their status, and driver upgrades.

What it decides is decisions/nvidia_driver.py (upstream behaviour and sources there); this file reads and writes.
While the ClusterPolicy has driver.useNvidiaDriverCRD true and an NVIDIADriver exists, it looks every step_seconds:
it lists the NVIDIADrivers and the GPU nodes, writes each node's nvidia.com/gpu-driver-upgrade-state (and, when a
node's driver pod restarts, GFD's driver version labels) and each NVIDIADriver's status (state, a Ready
condition, namespace). Without an NVIDIADriver it only waits for one (no node is listed), so fleets that do not use
them cost nothing.

Knobs (ConfigMap kubegpu-devcluster/simulator-knobs):
  nvidia-driver.step_seconds   time a node spends in each upgrade state (default 0.5)
  nvidia-driver.fail_nodes     nodes whose driver pod restart fails (upgrade-failed)
"""
from __future__ import annotations

from .decisions import nvidia_driver
from .framework import Simulator, now

CP = "nvidia.com/v1"
DRIVER_API = "nvidia.com/v1alpha1"
# The one key every event leads to: a pass reads everything itself.
TICK = ("Tick", None, "all")


class NvidiaDriverSimulator(Simulator):
    name = "nvidia-driver"
    watches = {"NVIDIADriver": DRIVER_API, "ClusterPolicy": CP}
    extra_kinds = {"Node": "v1"}

    def _current(self, key: tuple):
        return None if key == TICK else super()._current(key)

    def reconcile(self, kind, key, obj):
        # Every event leads to one pass over everything: which NVIDIADriver a node belongs to depends on all of them.
        if key != TICK:
            return self.requeue(*TICK)
        policies = sorted(self.api("ClusterPolicy").get().items,
                          key=lambda p: (p.metadata.creationTimestamp, p.metadata.name))
        crd_mode = bool(policies) and bool(((policies[0].to_dict().get("spec") or {}).get("driver") or {})
                                           .get("useNvidiaDriverCRD"))
        drivers = [d.to_dict() for d in self.api("NVIDIADriver").get().items]
        if not crd_mode or not drivers:
            return
        namespace = (policies[0].to_dict().get("status") or {}).get("namespace") or ""
        gpu_nodes = self.api("Node").get(label_selector=nvidia_driver.GPU_PRESENT_LABEL + "=true")
        nodes = [n.to_dict() for n in gpu_nodes.items]
        step = nvidia_driver.step(True, drivers, nodes, self.knobs)
        for name, labels in sorted(step.labels.items()):
            self.api("Node").patch(name=name, body={"metadata": {"labels": labels}},
                                   content_type="application/merge-patch+json")
        for driver in drivers:
            status = step.statuses.get(driver["metadata"]["name"])
            if status is not None:
                self._write_status(driver, status, namespace)
        # Nodes join and leave pools by their labels, which no watch here follows: look again while drivers exist.
        self.requeue(*TICK, after=self.knobs.seconds("step_seconds", 0.5))

    def _write_status(self, driver: dict, status: dict, namespace: str) -> None:
        old = driver.get("status") or {}
        reasons = [c.get("reason") for c in old.get("conditions") or []]
        if old.get("state") == status["state"] and reasons == [status["reason"]] and \
                [c.get("message") for c in old.get("conditions") or []] == [status["message"]]:
            return
        ready = status["state"] == "ready"
        driver["status"] = {"state": status["state"], "namespace": namespace, "conditions": [
            {"type": "Ready", "status": "True" if ready else "False", "reason": status["reason"],
             "message": status["message"], "lastTransitionTime": now(),
             "observedGeneration": driver["metadata"].get("generation", 1)}]}
        self.api("NVIDIADriver").status.replace(body=driver)
