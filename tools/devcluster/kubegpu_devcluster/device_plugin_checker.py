"""NVIDIA's own reading of a device-plugin config: the device-plugin-config tool (tools/devcluster/build/
device-plugin-config, built by build.sh from github.com/NVIDIA/k8s-device-plugin v0.17.4) loads a config with the
plugin's config API and says what the plugin advertises on a node's GPUs, or the plugin's own error.

check() runs it on a config text and a node's GPUs as the simulators describe them (a hardware model and the MIG
geometry mig-manager applied: per GPU None or {profile: count}), with the environment the plugin's pod has.
Answers are cached by their input, so a caller that asks again about the same config and node execs nothing.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
from dataclasses import dataclass

from . import hardware, paths

BINARY = "device-plugin-config"
# What the GPU Operator sets on the plugin's container besides MIG_STRATEGY: MPS_ROOT (gpu-operator
# controllers/object_controls.go, DefaultMPSRoot); the plugin refuses an MPS config without it.
OPERATOR_ENV = {"MPS_ROOT": "/run/nvidia/mps"}


class Refused(Exception):
    """The plugin refuses the config on this node: it does not start, and advertises nothing."""


@dataclass(frozen=True)
class Advertised:
    """What the plugin advertises: resources {name: devices} (the node's capacity), per_gpu (the same per physical
    GPU), and the settings it runs with."""
    resources: dict
    per_gpu: list
    mig_strategy: str
    sharing_strategy: str        # none, time-slicing or mps
    rename_by_default: bool
    fail_requests_greater_than_one: bool
    renamed: bool
    replicated: list
    warnings: list


def binary(build: bool = True) -> str:
    """The tool's path; build.sh builds it (and the local cluster's binaries) when the cache lacks it."""
    path = paths.bin_dir() / BINARY
    if build and not os.access(path, os.X_OK):
        subprocess.run([str(paths.DEVCLUSTER_ROOT / "build.sh")], check=True, stdout=subprocess.DEVNULL)
    return str(path)


def nvml_profile_order(model: str) -> list:
    """The model's MIG profiles in NVML's GPU-instance profile index order (go-nvml pkg/nvml/const.go
    GPU_INSTANCE_PROFILE_*: 1, 2, 3, 4, 7 slices = 0..4, 1_SLICE_REV1 (+me) = 7, 2_SLICE_REV1 (+me) = 8,
    1_SLICE_REV2 (one compute slice, two memory slices) = 9), the order the plugin names resources in."""
    profiles = hardware.MIG_PROFILES.get(model, {})

    def index(profile: str) -> int:
        compute = int(profile.split("g.")[0])
        if profile.endswith("+me"):
            return 7 if compute == 1 else 8
        if compute == 1 and profiles[profile][0] == 2:
            return 9
        return {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}[compute]
    return sorted(profiles, key=index)


def node_gpus(model: str, geometry: list) -> dict:
    """The tool's --node input for GPUs of `model` (a hardware key) with `geometry` (one entry per GPU)."""
    product = hardware.NVML_NAMES.get(model, hardware.gpu(model).product)
    order = nvml_profile_order(model) if hardware.gpu(model).mig_capable else []
    return {"gpus": [{"product": product, "mig": None if g is None else dict(g), "migProfiles": order}
                     for g in geometry]}


def check(config: str, model: str, geometry: list, env: dict | None = None) -> Advertised:
    """What the plugin advertises with `config` (one ConfigMap key's text) on a node; raises Refused with the
    plugin's error. env: the plugin container's environment besides OPERATOR_ENV (MIG_STRATEGY...)."""
    node = json.dumps(node_gpus(model, geometry), sort_keys=True)
    merged = dict(OPERATOR_ENV, **(env or {}))
    code, out = _run(config, node, tuple(sorted(merged.items())))
    answer = json.loads(out)
    if code != 0:
        raise Refused(answer.get("error") or out)
    return Advertised(answer["resources"], answer["perGPU"], answer["migStrategy"], answer["sharingStrategy"],
                      answer["renameByDefault"], answer["failRequestsGreaterThanOne"], answer["renamed"],
                      answer["replicated"], answer["warnings"])


@functools.lru_cache(maxsize=1024)
def _run(config: str, node: str, env: tuple) -> tuple:
    # Only the given environment: a MIG_STRATEGY of the caller's shell would override the config, as in the plugin.
    done = subprocess.run([binary(), "--config-file", "-", "--node", node], input=config, capture_output=True,
                          text=True, check=False, env=dict(env, PATH=os.environ.get("PATH", "")))
    if not done.stdout.strip():
        raise RuntimeError(f"{BINARY} gave no answer (exit {done.returncode}): {done.stderr.strip()}")
    return done.returncode, done.stdout
