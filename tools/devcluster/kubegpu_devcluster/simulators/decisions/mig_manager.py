"""mig-manager's decision: what a change of a node's nvidia.com/mig.config label leads to.

start() is mig-manager seeing the label (nothing, success or failed at once, or pending with the operands
paused and a job); finish() is the job falling due (success, failed, or still hanging). The behaviour, and
what follows upstream, is described in simulators/mig_manager.py; the cases are in
tools/devcluster/tests/cases/mig-manager/.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import yaml

from ... import hardware
from . import node_names
from .gpus import (APPLIED_ANNOTATION, GEOMETRY_ANNOTATION, GPUS_ANNOTATION, applied_geometry, node_model,
                   physical_gpus)

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
PAUSED = "paused-for-mig-change"
PAUSED_OPERANDS = tuple(f"nvidia.com/gpu.deploy.{o}" for o in
                        ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm", "client"))
# start()'s document when the DaemonSet names a ConfigMap that does not exist: the pod cannot start.
MISSING = "missing"


class MigConfigError(Exception):
    """A mig-parted config that cannot be applied to the node's GPUs."""


@dataclass(frozen=True)
class Step:
    """What mig-manager does now. outcome: none (leaves the node alone), wait (its pod cannot start yet),
    pending (a job runs: `job` is {config, geometry} or {config, error}), hang (the job stays pending),
    success or failed. labels and annotations: the merge patch to write (empty: write nothing)."""
    outcome: str
    labels: dict = field(default_factory=dict)
    annotations: dict = field(default_factory=dict)
    reason: str = ""
    job: dict | None = None
    unknown_config: bool = False   # failed because the document lacks the selected name


def mig_configs(text: str) -> dict:
    """The mig-configs of a mig-parted document (ConfigMap key config.yaml); {} when it does not parse."""
    try:
        doc = yaml.safe_load(text or "") or {}
        return doc.get("mig-configs") or {}
    except (yaml.YAMLError, AttributeError):
        return {}


def generated_configs(model: str) -> dict:
    """The per-node configs the operator generates (v26.3+, mig-parted builder) for GPUs of one model."""
    configs = {"all-disabled": [{"devices": "all", "mig-enabled": False}],
               "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}]}
    for profile, (_slices, most) in sorted(hardware.MIG_PROFILES.get(model, {}).items()):
        configs[f"all-{profile.replace('+', '.')}"] = [{"devices": "all", "mig-enabled": True,
                                                        "mig-devices": {profile: most}}]
    if model in hardware.MIG_BALANCED:
        configs["all-balanced"] = [{"devices": "all", "mig-enabled": True,
                                    "mig-devices": dict(hardware.MIG_BALANCED[model])}]
    return configs


def check_geometry(model: str, devices: dict) -> None:
    profiles = hardware.MIG_PROFILES.get(model, {})
    memory_total, compute_total = hardware.mig_slices(model)
    memory = compute = 0
    for profile, count in devices.items():
        if profile not in profiles:
            raise MigConfigError(f"MIG profile {profile} is not supported on {model}")
        if not isinstance(count, int) or count < 0:
            raise MigConfigError(f"invalid count {count!r} for MIG profile {profile}")
        slices, most = profiles[profile]
        if count > most:
            raise MigConfigError(f"at most {most} x {profile} fit on {model}, asked for {count}")
        memory += slices * count
        compute += int(profile.split("g.")[0]) * count
    if memory > memory_total or compute > compute_total:
        raise MigConfigError(f"geometry {devices} does not fit on {model}: {memory}/{memory_total} memory "
                             f"slices, {compute}/{compute_total} compute slices")


def plan(model: str, current: list, entries) -> list:
    """The geometry after applying a mig-parted config (a list of entries) to GPUs now in `current`."""
    if not isinstance(entries, list) or not entries:
        raise MigConfigError("the selected mig-config is not a list of entries")
    result = list(current)
    matched = False
    for entry in entries:
        if not isinstance(entry, dict):
            raise MigConfigError("a mig-config entry is not a mapping")
        wanted_filter = entry.get("device-filter")
        if isinstance(wanted_filter, str):
            wanted_filter = [wanted_filter]
        if wanted_filter and hardware.device_id(model).lower() not in [str(f).lower() for f in wanted_filter]:
            continue
        devices = entry.get("devices", "all")
        indices = range(len(current)) if devices == "all" else \
            [i for i in (devices if isinstance(devices, list) else []) if isinstance(i, int) and 0 <= i < len(current)]
        enabled = bool(entry.get("mig-enabled"))
        mig_devices = entry.get("mig-devices") or {}
        if not isinstance(mig_devices, dict):
            raise MigConfigError("mig-devices is not a mapping")
        if not enabled and mig_devices:
            raise MigConfigError("mig-devices given with mig-enabled false")
        if enabled:
            check_geometry(model, mig_devices)
        for i in indices:
            matched = True
            result[i] = {p: c for p, c in mig_devices.items() if c} if enabled else None
    if not matched:
        raise MigConfigError(f"no entry of the config applies to this node's GPUs ({hardware.device_id(model)})")
    return result


def _meta(node: dict) -> tuple:
    meta = node["metadata"]
    return meta.get("name", ""), meta.get("labels") or {}, meta.get("annotations") or {}


def _restored(labels: dict) -> dict:
    return {k: "true" for k in PAUSED_OPERANDS if labels.get(k) == PAUSED}


def _failed(labels: dict, reason: str, unknown_config: bool = False) -> Step:
    return Step("failed", dict(_restored(labels), **{STATE_LABEL: "failed"}), reason=reason,
                unknown_config=unknown_config)


def acts_on(node: dict, failed: str | None = None) -> str | None:
    """The config name mig-manager reconfigures the node to; None when it leaves the node alone. `failed`: the
    label value whose reconfiguration failed last on this node (tried again only after a label change or a
    restart of the pods)."""
    _name, labels, annotations = _meta(node)
    if labels.get("nvidia.com/mig.capable") != "true" or labels.get("nvidia.com/gpu.deploy.mig-manager") != "true":
        return None
    wanted = labels.get(CONFIG_LABEL)
    applied = annotations.get(APPLIED_ANNOTATION, "all-disabled")
    state = labels.get(STATE_LABEL)
    if not wanted or (wanted == applied and state == "success") or (state == "failed" and failed == wanted):
        return None
    return wanted


def start(node: dict, document, failed: str | None = None) -> Step:
    """mig-manager sees the node's label. document: the mig-configs of the ConfigMap its pod mounts, None when
    the DaemonSet names none (the operator's generated configs), MISSING when it names one that does not exist."""
    wanted = acts_on(node, failed)
    if wanted is None:
        return Step("none")
    _name, labels, annotations = _meta(node)
    if wanted == annotations.get(APPLIED_ANNOTATION, "all-disabled"):   # e.g. set back after a failure
        return Step("success", dict(_restored(labels), **{STATE_LABEL: "success"}), reason="already applied")
    model = node_model(labels)
    if model is None or model not in hardware.MIG_PROFILES:
        return _failed(labels, f"GPU {labels.get('nvidia.com/gpu.product')} is not MIG capable")
    if document == MISSING:
        return Step("wait", reason="the mig-manager pod cannot start: its ConfigMap is missing")
    configs = generated_configs(model) if document is None else document
    if wanted not in configs:
        return _failed(labels, f"selected mig-config not present: {wanted}", unknown_config=True)
    current = applied_geometry(annotations, physical_gpus(labels, annotations))
    job = {"config": wanted}
    try:
        job["geometry"] = plan(model, current, configs[wanted])
    except MigConfigError as e:
        job["error"] = str(e)
    if job.get("geometry") == current:
        return Step("success", dict(_restored(labels), **{STATE_LABEL: "success"}),
                    {APPLIED_ANNOTATION: wanted, GEOMETRY_ANNOTATION: json.dumps(current)}, reason="already applied")
    paused = {k: PAUSED for k in PAUSED_OPERANDS if labels.get(k) == "true"}
    return Step("pending", dict(paused, **{STATE_LABEL: "pending"}), job=job)


def finish(node: dict, job: dict, knobs) -> Step:
    """The job start() returned falls due on the node (as it is now). knobs: hang_nodes, fail_nodes."""
    name, labels, annotations = _meta(node)
    if name in node_names(knobs.get("hang_nodes", "")):
        return Step("hang", reason="gpu-operator#2833 (mig-manager.hang_nodes)")
    if "error" in job:
        return _failed(labels, job["error"])
    if name in node_names(knobs.get("fail_nodes", "")):
        return _failed(labels, "simulated failure (mig-manager.fail_nodes)")
    extra = {} if GPUS_ANNOTATION in annotations else {GPUS_ANNOTATION: str(physical_gpus(labels, annotations))}
    return Step("success", dict(_restored(labels), **{STATE_LABEL: "success"}),
                dict(extra, **{APPLIED_ANNOTATION: job["config"], GEOMETRY_ANNOTATION: json.dumps(job["geometry"])}))
