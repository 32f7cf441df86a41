"""NVIDIA k8s-device-plugin and GPU Feature Discovery: what each GPU node advertises and how it is labelled.

Follows shared/reference/gpu-operator.md ("Time-slicing / MPS", "MIG", "Pain points", "Timing") and
gpu-node-labels.md ("MIG capacity and labels", "Labels during changes"); where they are silent,
NVIDIA/k8s-device-plugin internal/lm (GFD's labelers). Acts only where the plugin's pods would run: while
DaemonSet `nvidia-device-plugin-daemonset` exists (the gpu-operator simulator keeps it for the reconciled
ClusterPolicy), on nodes labelled nvidia.com/gpu.present=true.

Inputs per node:
- the hardware: gpu.product without GFD's suffixes -> kubegpu_devcluster.hardware; the physical GPU count
  is the fleet's nvidia.com/gpu.count, kept in the annotation devcluster.kubegpu.io/gpus with the first
  write (GFD rewrites gpu.count under MIG single);
- the MIG geometry the mig-manager simulator applied (annotation devcluster.kubegpu.io/mig-geometry);
- the plugin config: the DaemonSet's `config` volume names the ConfigMap (ClusterPolicy
  spec.devicePlugin.config.name) in the DaemonSet's namespace, DEFAULT_CONFIG the default key
  (spec.devicePlugin.config.default), MIG_STRATEGY the strategy (spec.mig.strategy); the node label
  nvidia.com/device-plugin.config picks a key, else the default key; no key or no ConfigMap name: no config.
  As upstream (gpu-operator#1144), the ConfigMap's content is read when the pods start: once, the first time
  it is needed, and again only when the DaemonSet's pod template changes (a rollout restart, i.e. the
  kubectl.kubernetes.io/restartedAt annotation, or the operator rewriting it). Editing the ConfigMap alone
  changes nothing. A label naming another key of what was read applies at once (config-manager); an unknown
  key, or a config that does not parse or validate, is skipped: the node keeps what it ran (resources
  unchanged; with nothing run yet, the default key). A named ConfigMap that does not exist: the pods cannot
  start, nothing changes.

Outputs, written only when they differ: status.capacity and status.allocatable (nodes/status), and GFD's
labels. Resources once advertised and now gone stay at 0. While mig.config.state is pending, or the node's
nvidia.com/gpu.deploy.device-plugin is not "true" (paused-for-mig-change), every GPU resource is 0 and
labels are left as they are (GFD is paused too); they are recomputed once mig-manager restores the labels,
so allocatable catches up only after mig.config.state=success, as upstream.
- No sharing: nvidia.com/gpu = GPUs; gpu.replicas=1, gpu.sharing-strategy=none, mps.capable=false.
- Time-slicing replicas N on nvidia.com/gpu: nvidia.com/gpu = GPUs x N, gpu.replicas=N,
  gpu.sharing-strategy=time-slicing, gpu.product=<model>-SHARED; with renameByDefault: resource
  nvidia.com/gpu.shared = GPUs x N, nvidia.com/gpu 0, product unchanged. A resource's own `rename` and
  `devices` are ignored, every device shared, as k8s-device-plugin v0.17.4 does (DisableResourceNamingInConfig).
  gpu.count stays physical.
- MPS: likewise with gpu.sharing-strategy=mps and mps.capable=true; a config with both sections runs its mps
  one. MPS under mixed, or on MIG devices under single: the plugin refuses to start (upstream), so every GPU
  resource is 0.
- What a config makes the plugin advertise is checked against NVIDIA's own code, case by case
  (tools/devcluster/tests/test_decisions.py, kubegpu_devcluster/device_plugin_checker.py); a config it refuses
  to load is one the simulator skips.
- MIG, strategy from the config's flags.migStrategy, else MIG_STRATEGY (default single); label
  nvidia.com/mig.strategy=<strategy> on every GPU node, removed for `none` (GFD writes it only then).
  none: MIG ignored, GPUs advertised whole. single: nvidia.com/gpu = MIG devices (x replicas when
  time-sliced), gpu.product=<model>-MIG-<profile> (GFD removes '+'), gpu.count = MIG devices; an empty
  MIG-enabled GPU, MIG on some GPUs only, or more than one profile -> <model>-MIG-INVALID, gpu.count,
  gpu.replicas and gpu.memory 0, nvidia.com/gpu 0. mixed: nvidia.com/mig-<profile> ('+me' -> '.me') per
  profile, nvidia.com/gpu = GPUs with MIG disabled; labels nvidia.com/mig-<profile>.{count,product,replicas,
  sharing-strategy}; gpu.count stays physical, gpu.replicas 0 when every GPU has MIG on. The per-profile
  attribute labels (memory, multiprocessors, slices, engines) and gpu.memory under single are not simulated.

Knobs (ConfigMap kubegpu-devcluster/simulator-knobs):
  device-plugin.seconds      time from a change (label, restart, MIG success) to the node showing it: the
                             plugin's re-registration plus kubelet's status update (default 0.5)
  device-plugin.fail_nodes   comma-separated node names where the plugin crash-loops: every GPU resource 0
                             (e.g. k8s-device-plugin#364), labels left as they are
  device-plugin.lost_gpus    "node=n,..." (a bare name: 1): n GPUs of the node fell off the bus (Xid 79): the plugin
                             reports their devices unhealthy, so allocatable drops by their share of every GPU
                             resource while capacity stays; GFD relabels gpu.count (physical count) without them
  device-plugin.restart_seconds  time a restart (a new pod template) takes to reach the pods: until then they
                             keep the ConfigMap content they read before, as during a real DaemonSet rollout
                             (default 0)

What it decides is in decisions/device_plugin.py, pure functions with their cases in
tools/devcluster/tests/cases/device-plugin/; this controller reads the objects, keeps the time a change takes and
writes what the decision returns.
"""
from __future__ import annotations

import json
import time

from .decisions import device_plugin as decide
from .framework import KNOBS_CONFIGMAP, KNOBS_NAMESPACE, Simulator, log
from .gpu_operator import DEVICE_PLUGIN_DS, pod_configmap, pod_env


class DevicePluginSimulator(Simulator):
    name = "device-plugin"
    watches = {"Node": "v1", "DaemonSet": "apps/v1", "ConfigMap": "v1"}
    # Read once per second at most (three knobs per node, hundreds of nodes per batch); the knobs ConfigMap's own
    # events drop what was read, so a changed knob reaches the nodes it requeues.
    knobs_ttl = 1.0
    workers = 16
    cached = frozenset({"Node"})
    status_blind = frozenset({"DaemonSet"})

    def __init__(self, kubeconfig: str):
        super().__init__(kubeconfig)
        self._ctx = None         # what the running pods see; None: not computed yet
        self._active = {}        # node name -> {"uid", "sig", "choice"}: the config each node's plugin runs
        self._due = {}           # node name -> (change, monotonic time at which it shows)
        self._restart_sig, self._restart_due = None, 0.0   # a pod template change on its way to the pods

    # -- the DaemonSet and the config its pods read when they start
    def _context(self, refresh: bool = False) -> dict:
        if self._ctx is not None and not refresh:
            return self._ctx
        items = self.api("DaemonSet").get(field_selector=f"metadata.name={DEVICE_PLUGIN_DS}").items
        if not items:
            self._ctx = {"running": False, "sig": None}
            return self._ctx
        ds = sorted((d.to_dict() for d in items), key=lambda d: d["metadata"]["namespace"])[0]
        namespace = ds["metadata"]["namespace"]
        sig = json.dumps([ds["metadata"]["uid"], ds["spec"].get("template")], sort_keys=True)
        old = self._ctx or {}
        if old.get("sig") == sig and not old.get("waiting"):
            return old   # the pods have not restarted: what they read stays, whatever the ConfigMap says now
        delay = self.knobs.seconds("restart_seconds", 0.0)
        if old.get("running") and delay > 0:
            due = self._restart_due if self._restart_sig == sig else None
            if due is None:
                self._restart_sig, self._restart_due = sig, time.monotonic() + delay
                due = self._restart_due
            if time.monotonic() < due:   # the rollout has not reached the pods yet: the old ones run on
                self.requeue("DaemonSet", ds["metadata"]["namespace"], DEVICE_PLUGIN_DS, after=due - time.monotonic())
                return old
        env = pod_env(ds)
        cm_name = pod_configmap(ds, "config")
        configs, waiting = None, False
        if cm_name:
            cm = self.get("ConfigMap", namespace, cm_name)
            if cm is None:
                waiting = True
                log.info("device-plugin: ConfigMap %s/%s missing: the plugin pods cannot start", namespace, cm_name)
            else:
                configs = (cm.data and cm.data.to_dict()) or {}
        self._ctx = {"running": not waiting, "waiting": waiting, "sig": sig, "namespace": namespace, "cm": cm_name,
                     "pods": decide.Pods(configs, env.get("DEFAULT_CONFIG", ""), env.get("MIG_STRATEGY") or "single")}
        return self._ctx

    def _requeue_nodes(self) -> None:
        for node in self.api("Node").get(label_selector="nvidia.com/gpu.present=true").items:
            self.requeue("Node", None, node.metadata.name)

    def reconcile(self, kind, key, obj):
        if kind == "DaemonSet" and key[2] != DEVICE_PLUGIN_DS:
            return
        if kind == "ConfigMap":
            if (key[1], key[2]) == (KNOBS_NAMESPACE, KNOBS_CONFIGMAP):   # fail_nodes may have changed
                self.knobs.invalidate()
                return self._requeue_nodes()
            ctx = self._ctx or {}
            if not (ctx.get("waiting") and (key[1], key[2]) == (ctx.get("namespace"), ctx.get("cm"))):
                return   # content edits are not watched by the plugin (gpu-operator#1144)
        if kind != "Node":
            before = (self._ctx or {}).get("sig"), (self._ctx or {}).get("running")
            ctx = self._context(refresh=True)
            if (ctx.get("sig"), ctx.get("running")) != before:
                self._requeue_nodes()
            return
        if obj is None:
            self._active.pop(key[2], None)
            self._due.pop(key[2], None)
            return
        ctx = self._context()
        if ctx["running"]:
            self._node(obj.to_dict(), ctx)

    def _node(self, node: dict, ctx: dict) -> None:
        meta = node["metadata"]
        name = meta["name"]
        running = self._active.get(name)
        if running is not None and (running["uid"], running["sig"]) != (meta["uid"], ctx["sig"]):
            running = None   # another node of the same name, or the pods restarted
        choice, update = decide.decide(node, ctx["pods"], running and running["choice"], self.knobs)
        if update is None:
            return
        for key, why in choice.skipped:
            log.info("device-plugin: %s: config %s (ConfigMap %s) skipped: %s", name, key, ctx["cm"], why)
        if choice.key is not None:
            self._active[name] = {"uid": meta["uid"], "sig": ctx["sig"], "choice": choice}
        if update.reason:
            log.info("device-plugin: %s: %s", name, update.reason)
        if update.empty():
            self._due.pop(name, None)
            return
        change = json.dumps([update.labels, update.capacity, update.allocatable], sort_keys=True)
        due = self._due.get(name)
        if due is None or due[0] != change:
            due = (change, self.observed_at() + self.knobs.seconds("seconds", 0.5))   # the node's own plugin
            self._due[name] = due
        if time.monotonic() < due[1]:
            return self.requeue("Node", None, name, after=due[1] - time.monotonic())
        del self._due[name]
        api = self.api("Node")
        if update.labels:
            body = {"metadata": {"labels": update.labels}}
            if update.annotations:
                body["metadata"]["annotations"] = update.annotations
            self.remember("Node", api.patch(name=name, body=body, content_type="application/merge-patch+json"))
        if update.capacity or update.allocatable:
            self.remember("Node", api.status.patch(
                name=name, body={"status": {"capacity": update.capacity, "allocatable": update.allocatable}},
                content_type="application/merge-patch+json"))
