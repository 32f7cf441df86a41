"""The device plugin's and GPU Feature Discovery's decision: what a GPU node advertises and how it is labelled.

decide() takes the node (labels, annotations, status), what the plugin's pods read when they started (Pods),
the config the node's plugin runs now and the knobs, and returns the config the node's plugin runs next
(config-manager's choice) and the patches: GFD's labels, status.capacity and status.allocatable. The behaviour,
and what follows upstream, is described in simulators/device_plugin.py; the cases are in
tools/devcluster/tests/cases/device-plugin/.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from ... import hardware
from . import node_names
from .gpus import GPUS_ANNOTATION, applied_geometry, node_model, physical_gpus
from .mig_manager import STATE_LABEL

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
    resources: tuple = field(default_factory=tuple)   # ({name, replicas}, ...)

    def replicated(self, name: str) -> dict | None:
        return next((r for r in self.resources if r["name"] == name), None)


# k8s-device-plugin v0.17.4 api/config/v1 (resources.go NewResourceName): a resource name is nvidia.com/<name>, the
# prefix added when missing, 63 characters at most, <name> a DNS subdomain.
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _resource_name(raw) -> str:
    if not isinstance(raw, str):
        raise ConfigError(f"resource name {raw!r} is not a string")
    name = raw if raw.startswith("nvidia.com/") else "nvidia.com/" + raw
    if len(name) > 63:
        raise ConfigError(f"fully-qualified resource name must be 63 characters or less: {name}")
    if len(name.split("/", 1)[1]) > 253 or not _DNS_SUBDOMAIN.match(name.split("/", 1)[1]):
        raise ConfigError(f"incorrect format for resource name '{name}'")
    return name


def _replicated(kind: str, block) -> tuple:
    """One sharing section as api/config/v1 replicas.go reads it: resources required, each with a name and
    replicas >= 2. `devices` and `rename` are read but not used: v0.17.4 replaces them with "all" and the default
    rename (DisableResourceNamingInConfig, config.go), warning that they are not supported yet."""
    if not isinstance(block, dict):
        raise ConfigError(f"{kind}: not a mapping")
    entries = block.get("resources")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{kind}: resources must not be empty")
    resources = []
    for r in entries:
        if not isinstance(r, dict) or "name" not in r:
            raise ConfigError(f"{kind}: no resource name specified")
        name, replicas = _resource_name(r["name"]), r.get("replicas")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 2:
            raise ConfigError(f"{kind}: {name}: replicas must be an integer >= 2")
        resources.append({"name": name, "replicas": replicas})
    return bool(block.get("renameByDefault")), tuple(resources)


def parse_config(text: str) -> PluginConfig:
    """One key of the device-plugin ConfigMap, as k8s-device-plugin v0.17.4 reads it (api/config/v1; the MIG
    strategy checked as cmd/nvidia-device-plugin validateFlags does). What depends on the node's strategy and
    devices (MPS with MIG) is advertise()'s PluginError."""
    try:
        doc = yaml.safe_load(text or "")
    except yaml.YAMLError as e:
        raise ConfigError(f"not YAML: {e}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError("not a mapping")
    if (doc.get("version") or "v1") != "v1":
        raise ConfigError(f"unknown version {doc.get('version')!r}")
    flags = doc.get("flags") or {}
    strategy = flags.get("migStrategy")
    if strategy not in (None, "none", "single", "mixed"):
        raise ConfigError(f"unknown migStrategy {strategy!r}")
    sharing = doc.get("sharing") or {}
    blocks = {kind: _replicated(kind, sharing[key]) for kind, key in (("time-slicing", "timeSlicing"), ("mps", "mps"))
              if sharing.get(key) is not None}
    # With both sections the plugin runs the MPS one (api/config/v1 sharing.go ReplicatedResources).
    kind = "mps" if "mps" in blocks else "time-slicing" if blocks else None
    if kind is None:
        return PluginConfig(mig_strategy=strategy)
    return PluginConfig(strategy, kind, *blocks[kind])


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

    def share(name: str, devices: int) -> tuple:
        """Advertise `devices` devices of resource `name`: (replicas, renamed). Every device of a shared resource
        is shared, under <name>.shared with renameByDefault (internal/rm/device_map.go updateDeviceMapWithReplicas,
        after DisableResourceNamingInConfig)."""
        r = conf.replicated(name) if conf.sharing else None
        if r is None or not devices:
            resources[name] = resources.get(name, 0) + devices
            return 1, False
        target = f"{name}.shared" if conf.rename_by_default else name
        resources[target] = resources.get(target, 0) + devices * r["replicas"]
        resources.setdefault(name, 0)
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
    # cmd/nvidia-device-plugin/main.go validateFlags, then internal/plugin/mps.go getMPSOptions.
    if conf.sharing == "mps" and strategy == "mixed":
        raise PluginError("using --mig-strategy=mixed is not supported with MPS")
    if conf.sharing == "mps" and migs and strategy == "single":
        raise PluginError("MPS sharing is not supported with MIG devices")
    if strategy == "none" or not migs:
        replicas, renamed = share(GPU, count)
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
        replicas, renamed = share(GPU, len(full))
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


def lost_gpus(value: str) -> dict:
    """device-plugin.lost_gpus "node-a=1,node-b=2" -> {node: GPUs lost}; a bare name loses one."""
    lost = {}
    for item in node_names(value):
        name, n = (item.split("=", 1) + [""])[:2]
        lost[name.strip()] = int(n) if n.strip().isdigit() else 1
    return lost


def _managed_resource(name: str) -> bool:
    """A resource the plugin owns: once advertised, it stays (at 0) when no longer advertised."""
    return name.startswith(GPU) or name.startswith("nvidia.com/mig-")


@dataclass(frozen=True)
class Pods:
    """What the plugin's pods read when they started: the ConfigMap's data (key -> config text; None when the
    DaemonSet names no ConfigMap), DEFAULT_CONFIG and MIG_STRATEGY."""
    configs: dict | None = None
    default: str = ""
    strategy: str = "single"


@dataclass(frozen=True)
class Choice:
    """The config a node's plugin runs: its key ("" runs without a config; None: nothing run, nothing to remember)
    and the keys config-manager skipped on the way, with why."""
    key: str | None
    conf: PluginConfig
    skipped: tuple = ()


@dataclass(frozen=True)
class Update:
    """What the node shows next: merge patches of GFD's labels (None removes one), status.capacity,
    status.allocatable and the annotations; reason: why the plugin publishes nothing (it refuses to start)."""
    labels: dict = field(default_factory=dict)
    capacity: dict = field(default_factory=dict)
    allocatable: dict = field(default_factory=dict)
    annotations: dict = field(default_factory=dict)
    reason: str = ""

    def empty(self) -> bool:
        return not (self.labels or self.capacity or self.allocatable)


def choose_config(key: str | None, pods: Pods, running: Choice | None = None) -> Choice:
    """config-manager: the config for the node label's key (else the default key). A key not in the ConfigMap, or a
    config that does not parse or validate, is skipped: the node keeps what it runs; with nothing run yet, the
    default key is tried next."""
    if pods.configs is None:
        return Choice(None, PluginConfig())
    key = key or pods.default
    if running is not None and running.key == key:
        return running
    if not key:   # no label and no default: the plugin runs without a config (fallback "empty")
        return Choice("", PluginConfig())
    skipped = []
    for candidate in (key,) if running is not None else (key, pods.default):
        if candidate and candidate in pods.configs:
            try:
                return Choice(candidate, parse_config(pods.configs[candidate]), tuple(skipped))
            except ConfigError as e:
                skipped.append((candidate, str(e)))
                continue
        if candidate:
            skipped.append((candidate, "not in the ConfigMap"))
    if running is not None:
        return Choice(running.key, running.conf, tuple(skipped))
    return Choice(None, PluginConfig(), tuple(skipped))


def publish(node: dict, model: str, conf: PluginConfig, strategy: str, knobs) -> Update:
    """The patches that bring the node to what the plugin and GFD publish with `conf`. knobs: fail_nodes,
    lost_gpus."""
    meta, status = node["metadata"], node.get("status") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    name = meta.get("name", "")
    count = physical_gpus(labels, annotations)
    geometry = applied_geometry(annotations, count) if hardware.gpu(model).mig_capable else [None] * count
    pending = labels.get(STATE_LABEL) == "pending"
    plugin_up = labels.get("nvidia.com/gpu.deploy.device-plugin") == "true" and not pending \
        and name not in node_names(knobs.get("fail_nodes", ""))
    gfd_up = labels.get("nvidia.com/gpu.deploy.gpu-feature-discovery") == "true" and not pending
    reason = ""
    try:
        resources, wanted_labels = advertise(model, count, geometry, conf, strategy)
    except PluginError as e:
        reason = str(e)
        resources, wanted_labels, gfd_up = {}, {}, False
    if not plugin_up:
        resources = {}
    lost = min(count, lost_gpus(knobs.get("lost_gpus", "")).get(name, 0))
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
    label_patch = {}
    if gfd_up:
        for label in labels:
            if MIG_LABEL.match(label) and label not in wanted_labels:
                wanted_labels[label] = None
        label_patch = {k: v for k, v in wanted_labels.items() if labels.get(k) != v and (v is not None or k in labels)}
    annotations_patch = {GPUS_ANNOTATION: str(count)} if label_patch and GPUS_ANNOTATION not in annotations else {}
    return Update(label_patch, cap_patch, alloc_patch, annotations_patch, reason)


def decide(node: dict, pods: Pods, running: Choice | None = None, knobs=None) -> tuple:
    """(Choice, Update) for a node; (None, None) where the plugin does not act: not a GPU node, or GPUs of a model
    the hardware table does not know."""
    labels = node["metadata"].get("labels") or {}
    model = node_model(labels)
    if labels.get("nvidia.com/gpu.present") != "true" or model is None:
        return None, None
    choice = choose_config(labels.get(CONFIG_LABEL), pods, running)
    return choice, publish(node, model, choice.conf, choice.conf.mig_strategy or pods.strategy, knobs or {})
