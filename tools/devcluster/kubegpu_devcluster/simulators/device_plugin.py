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
  gpu.sharing-strategy=time-slicing, gpu.product=<model>-SHARED; with renameByDefault (or `rename`):
  resource nvidia.com/gpu.shared (or the new name) = GPUs x N, nvidia.com/gpu 0, product unchanged.
  `devices` as a list of indices (or a number: the first n) shares only those GPUs, the others stay
  nvidia.com/gpu. gpu.count stays physical.
- MPS: likewise with gpu.sharing-strategy=mps and mps.capable=true; only nvidia.com/gpu can be shared; MPS
  with MIG devices: the plugin refuses to start (upstream), so every GPU resource is 0.
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
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field

import yaml

from .. import hardware
from .framework import KNOBS_CONFIGMAP, KNOBS_NAMESPACE, Simulator, log
from .gpu_operator import DEVICE_PLUGIN_DS, pod_configmap, pod_env
from .mig_manager import GPUS_ANNOTATION, STATE_LABEL, applied_geometry, node_model, physical_gpus

CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU = "nvidia.com/gpu"
MIG_LABEL = re.compile(r"^nvidia\.com/mig-.+\.(count|product|replicas|sharing-strategy)$")


class ConfigError(Exception):
    """A device-plugin config the plugin would refuse."""


@dataclass(frozen=True)
class PluginConfig:
    mig_strategy: str | None = None
    sharing: str | None = None          # "time-slicing" or "mps"
    rename_by_default: bool = False
    resources: tuple = field(default_factory=tuple)   # ({name, replicas, rename, devices}, ...)

    def replicated(self, name: str) -> dict | None:
        return next((r for r in self.resources if r["name"] == name), None)


def parse_config(text: str) -> PluginConfig:
    """One key of the device-plugin ConfigMap (k8s-device-plugin api/config/v1)."""
    try:
        doc = yaml.safe_load(text or "")
    except yaml.YAMLError as e:
        raise ConfigError(f"not YAML: {e}") from None
    if not isinstance(doc, dict):
        raise ConfigError("not a mapping")
    if doc.get("version", "v1") != "v1":
        raise ConfigError(f"unknown version {doc.get('version')!r}")
    flags = doc.get("flags") or {}
    strategy = flags.get("migStrategy")
    if strategy not in (None, "none", "single", "mixed"):
        raise ConfigError(f"unknown migStrategy {strategy!r}")
    sharing = doc.get("sharing") or {}
    blocks = [(kind, sharing.get(key)) for kind, key in (("time-slicing", "timeSlicing"), ("mps", "mps"))
              if sharing.get(key)]
    if len(blocks) > 1:
        raise ConfigError("timeSlicing and mps are exclusive")
    if not blocks:
        return PluginConfig(mig_strategy=strategy)
    kind, block = blocks[0]
    entries = block.get("resources") or []
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{kind}: resources must not be empty")
    resources = []
    for r in entries:
        name, replicas = (r or {}).get("name"), (r or {}).get("replicas")
        if not isinstance(name, str) or not (name == GPU or name.startswith("nvidia.com/mig-")):
            raise ConfigError(f"{kind}: unknown resource {name!r}")
        if kind == "mps" and name != GPU:
            raise ConfigError("mps: only nvidia.com/gpu can be shared")
        if not isinstance(replicas, int) or replicas < 2:
            raise ConfigError(f"{kind}: {name}: replicas must be an integer >= 2")
        resources.append({"name": name, "replicas": replicas, "rename": r.get("rename") or "",
                          "devices": r.get("devices", "all")})
    return PluginConfig(strategy, kind, bool(block.get("renameByDefault")), tuple(resources))


def _sanitise(value: str) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9-_. ]", "", value).split())


class PluginError(Exception):
    """The plugin would not start on the node (it crash-loops)."""


def advertise(model: str, count: int, geometry: list, conf: PluginConfig, strategy: str) -> tuple:
    """(resources {name: int}, labels {name: value or None to remove}) GFD and the plugin publish."""
    product = hardware.gpu(model).product
    full = [i for i, g in enumerate(geometry) if g is None]
    migs = [g for g in geometry if g is not None]
    resources, labels = {}, {}

    def share(name: str, devices: int, indices=None) -> tuple:
        """Advertise `devices` devices of resource `name`: (replicas, renamed)."""
        r = conf.replicated(name) if conf.sharing else None
        if r is None:
            resources[name] = resources.get(name, 0) + devices
            return 1, False
        wanted = r["devices"]
        if isinstance(wanted, int):
            shared = min(wanted, devices)
        elif isinstance(wanted, list) and indices is not None:
            shared = len([i for i in indices if i in wanted])
        else:
            shared = devices
        target = r["rename"] or (f"{name}.shared" if conf.rename_by_default else name)
        resources[target] = resources.get(target, 0) + shared * r["replicas"]
        resources[name] = resources.get(name, 0) + devices - shared
        return r["replicas"], target != name

    def base(resource: str, prod: str, devices: int, replicas: int, renamed: bool, sharing: bool = True) -> None:
        shared = sharing and replicas > 1
        labels[f"{resource}.product"] = _sanitise(prod + ("-SHARED" if shared and not renamed else ""))
        labels[f"{resource}.count"] = str(devices)
        labels[f"{resource}.replicas"] = str(replicas if sharing else 0)
        labels[f"{resource}.sharing-strategy"] = conf.sharing if shared else "none"

    labels[f"{GPU}.memory"] = str(hardware.gpu(model).memory_mib)
    labels["nvidia.com/mps.capable"] = str(conf.sharing == "mps").lower()
    labels["nvidia.com/mig.strategy"] = None if strategy == "none" else strategy
    if conf.sharing == "mps" and migs and strategy != "none":
        raise PluginError("MPS sharing is not supported with MIG devices")
    if strategy == "none" or not migs:
        replicas, renamed = share(GPU, count, range(count))
        base(GPU, product, count, replicas, renamed)
    elif strategy == "single":
        profiles = {p for g in migs for p in g}
        if full or any(not g for g in migs) or len(profiles) != 1:
            resources[GPU] = 0
            labels.update({f"{GPU}.product": _sanitise(f"{product}-MIG-INVALID"), f"{GPU}.count": "0",
                           f"{GPU}.replicas": "0", f"{GPU}.memory": "0", f"{GPU}.sharing-strategy": "none"})
        else:
            profile = profiles.pop()
            devices = sum(g[profile] for g in migs)
            replicas, renamed = share(GPU, devices)
            base(GPU, f"{product}-MIG-{profile}", devices, replicas, renamed)
    else:  # mixed
        replicas, renamed = share(GPU, len(full), full)
        base(GPU, product, count, replicas, renamed, sharing=bool(full))
        totals = {}
        for g in migs:
            for profile, n in g.items():
                totals[profile] = totals.get(profile, 0) + n
        for profile, n in sorted(totals.items()):
            name = f"nvidia.com/mig-{profile.replace('+', '.')}"
            replicas, renamed = share(name, n)
            base(name, f"{product}-MIG-{profile}", n, replicas, renamed)
    return resources, labels


def _names(value: str) -> set:
    return {n.strip() for n in value.split(",") if n.strip()}


def _lost_gpus(value: str) -> dict:
    """device-plugin.lost_gpus "node-a=1,node-b=2" -> {node: GPUs lost}; a bare name loses one."""
    lost = {}
    for item in _names(value):
        name, n = (item.split("=", 1) + [""])[:2]
        lost[name.strip()] = int(n) if n.strip().isdigit() else 1
    return lost


def _managed_resource(name: str) -> bool:
    return name.startswith(GPU) or name.startswith("nvidia.com/mig-")


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
        self._active = {}        # node name -> {"uid", "sig", "key", "conf"}: the config each node's plugin runs
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
        self._ctx = {"running": not waiting, "waiting": waiting, "sig": sig, "namespace": namespace,
                     "cm": cm_name, "configs": configs, "default": env.get("DEFAULT_CONFIG", ""),
                     "strategy": env.get("MIG_STRATEGY") or "single"}
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

    def _node_config(self, node: dict, ctx: dict) -> PluginConfig:
        meta = node["metadata"]
        configs = ctx["configs"]
        if configs is None:
            return PluginConfig()
        key = (meta.get("labels") or {}).get(CONFIG_LABEL) or ctx["default"]
        active = self._active.get(meta["name"])
        if active is not None and (active["uid"], active["sig"]) != (meta["uid"], ctx["sig"]):
            active = None   # another node of the same name, or the pods restarted
        if active is not None and active["key"] == key:
            return active["conf"]
        if not key:   # no label and no default: the plugin runs without a config (fallback "empty")
            self._active[meta["name"]] = {"uid": meta["uid"], "sig": ctx["sig"], "key": "", "conf": PluginConfig()}
            return PluginConfig()
        for candidate in (key,) if active is not None else (key, ctx["default"]):
            if candidate and candidate in configs:
                try:
                    conf = parse_config(configs[candidate])
                except ConfigError as e:
                    log.info("device-plugin: %s: config %s skipped: %s", meta["name"], candidate, e)
                    continue
                self._active[meta["name"]] = {"uid": meta["uid"], "sig": ctx["sig"], "key": candidate, "conf": conf}
                return conf
            if candidate:
                log.info("device-plugin: %s: config %s not in ConfigMap %s: skipped", meta["name"], candidate, ctx["cm"])
        if active is not None:
            return active["conf"]
        return PluginConfig()

    def _node(self, node: dict, ctx: dict) -> None:
        meta, status = node["metadata"], node.get("status") or {}
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        name = meta["name"]
        model = node_model(labels)
        if labels.get("nvidia.com/gpu.present") != "true" or model is None:
            return
        count = physical_gpus(labels, annotations)
        geometry = applied_geometry(annotations, count) if hardware.gpu(model).mig_capable else [None] * count
        conf = self._node_config(node, ctx)
        strategy = conf.mig_strategy or ctx["strategy"]
        pending = labels.get(STATE_LABEL) == "pending"
        plugin_up = labels.get("nvidia.com/gpu.deploy.device-plugin") == "true" and not pending \
            and name not in _names(self.knobs.get("fail_nodes"))
        gfd_up = labels.get("nvidia.com/gpu.deploy.gpu-feature-discovery") == "true" and not pending
        try:
            resources, wanted_labels = advertise(model, count, geometry, conf, strategy)
        except PluginError as e:
            log.info("device-plugin: %s: %s", name, e)
            resources, wanted_labels, gfd_up = {}, {}, False
        if not plugin_up:
            resources = {}
        lost = min(count, _lost_gpus(self.knobs.get("lost_gpus")).get(name, 0))
        healthy = dict(resources)
        if lost and count:
            # The plugin reports the lost GPUs' devices unhealthy: the kubelet keeps them in capacity and takes them
            # out of allocatable; GFD, relabelling, counts the GPUs NVML still sees.
            healthy = {r: v - lost * (v // count) for r, v in resources.items()}
            if gfd_up and wanted_labels.get(f"{GPU}.count") == str(count):
                wanted_labels[f"{GPU}.count"] = str(count - lost)
        capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
        cap_patch, alloc_patch = {}, {}
        for res in sorted({r for r in list(capacity) + list(allocatable) if _managed_resource(r)} | set(resources)):
            if capacity.get(res) != str(resources.get(res, 0)):
                cap_patch[res] = str(resources.get(res, 0))
            if allocatable.get(res) != str(healthy.get(res, 0)):
                alloc_patch[res] = str(healthy.get(res, 0))
        res_patch = cap_patch or alloc_patch
        label_patch = {}
        if gfd_up:
            for label in labels:
                if MIG_LABEL.match(label) and label not in wanted_labels:
                    wanted_labels[label] = None
            label_patch = {k: v for k, v in wanted_labels.items() if labels.get(k) != v and (v is not None or k in labels)}
        if not res_patch and not label_patch:
            self._due.pop(name, None)
            return
        change = json.dumps([label_patch, cap_patch, alloc_patch], sort_keys=True)
        due = self._due.get(name)
        if due is None or due[0] != change:
            due = (change, self.observed_at() + self.knobs.seconds("seconds", 0.5))   # the node's own plugin
            self._due[name] = due
        if time.monotonic() < due[1]:
            return self.requeue("Node", None, name, after=due[1] - time.monotonic())
        del self._due[name]
        api = self.api("Node")
        if label_patch:
            body = {"metadata": {"labels": label_patch}}
            if GPUS_ANNOTATION not in annotations:
                body["metadata"]["annotations"] = {GPUS_ANNOTATION: str(count)}
            self.remember("Node", api.patch(name=name, body=body, content_type="application/merge-patch+json"))
        if res_patch:
            self.remember("Node", api.status.patch(
                name=name, body={"status": {"capacity": cap_patch, "allocatable": alloc_patch}},
                content_type="application/merge-patch+json"))
