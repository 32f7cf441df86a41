"""The NVIDIA DRA driver's GPU kubelet plugin's decision: the ResourceSlice a node gets and the write to get it there.

resource_slice() is the slice the plugin publishes for a Node; decide() compares it with the slice there is
(create, replace with the pool's next generation, delete, or nothing). The behaviour, and what follows
upstream, is described in simulators/dra_plugin.py; the cases are in tools/devcluster/tests/cases/dra-plugin/.
"""
from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass

from ... import hardware
from . import node_names
from .gpus import applied_geometry, node_model, physical_gpus

DRIVER = "gpu.nvidia.com"
PLUGIN_LABEL = "nvidia.com/dra-kubelet-plugin"
API_VERSION = "resource.k8s.io/v1"
SLICE_SUFFIX = "-" + DRIVER
ARCHITECTURES = {"turing": "Turing", "ampere": "Ampere", "ada-lovelace": "Ada Lovelace", "hopper": "Hopper",
                 "blackwell": "Blackwell"}
BRAND = "Nvidia"
# MIG profile -> (memory MiB, multiprocessors, copy, decoders, encoders, jpeg, ofa): gpu-node-labels.md.
MIG_CAPACITIES = {
    ("H100-80GB", "1g.10gb"): (9984, 16, 1, 1, 0, 1, 0),
    ("H100-80GB", "2g.20gb"): (20096, 32, 2, 2, 0, 2, 0),
    ("H100-80GB", "3g.40gb"): (40320, 60, 3, 3, 0, 3, 0),
    ("A100-40GB", "1g.5gb"): (4864, 14, 1, 0, 0, 0, 0),
    ("A100-40GB", "2g.10gb"): (9984, 28, 2, 1, 0, 0, 0),
    ("A100-40GB", "3g.20gb"): (20096, 42, 3, 2, 0, 0, 0),
    ("A100-40GB", "7g.40gb"): (40192, 98, 7, 5, 0, 1, 1),
}
_ENGINES = (("copyEngines", "copy"), ("decoders", "decoder"), ("encoders", "encoder"), ("jpegEngines", "jpeg"),
            ("ofaEngines", "ofa"))


def slice_name(node: str) -> str:
    return node + SLICE_SUFFIX


def _semver(text: str | None) -> str | None:
    """"580.105.08" -> "580.105.8", "13.0" -> "13.0.0": semver, as the driver publishes versions."""
    if not text:
        return None
    try:
        parts = [int(p) for p in text.split(".")]
    except ValueError:
        return None
    return ".".join(str(p) for p in (parts + [0, 0])[:3])


def _label_version(labels: dict, full: str, parts: tuple) -> str | None:
    return _semver(labels.get(full) or ".".join(labels[p] for p in parts if labels.get(p)))


def _string(value: str) -> dict:
    return {"string": value}


def device_uuid(prefix: str, *parts) -> str:
    """A stable UUID for a device of a node ("GPU", node, index): the same at every run, as the hardware's."""
    return f"{prefix}-{uuid.uuid5(uuid.NAMESPACE_URL, '/'.join(str(p) for p in parts))}"


def _common(labels: dict, model: str, index: int) -> dict:
    """The attributes a GPU and its MIG devices share."""
    g = hardware.gpu(model)
    attrs = {"productName": _string(hardware.NVML_NAMES.get(model, g.product.replace("-", " "))),
             "brand": _string(BRAND),
             "architecture": _string(ARCHITECTURES.get(labels.get("nvidia.com/gpu.family", g.family), "Unknown")),
             "cudaComputeCapability": {"version": _semver(f"{g.compute[0]}.{g.compute[1]}")}}
    driver = _label_version(labels, "nvidia.com/cuda.driver-version.full",
                            ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor",
                             "nvidia.com/cuda.driver.rev"))
    cuda = _label_version(labels, "nvidia.com/cuda.runtime-version.full",
                          ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor"))
    if driver:
        attrs["driverVersion"] = {"version": driver}
    if cuda:
        attrs["cudaDriverVersion"] = {"version": cuda}
    attrs["resource.kubernetes.io/pciBusID"] = _string(f"0000:{0x18 + 0x10 * index:02x}:00.0")
    attrs["resource.kubernetes.io/pcieRoot"] = _string(f"pci0000:{0x20 * (index // 2):02x}")
    return attrs


def _mig_capacity(labels: dict, model: str, profile: str) -> dict:
    prefix = f"nvidia.com/mig-{profile.replace('+', '.')}"
    if labels.get(f"{prefix}.memory"):
        capacity = {"memory": {"value": f"{labels[f'{prefix}.memory']}Mi"}}
        if labels.get(f"{prefix}.multiprocessors"):
            capacity["multiprocessors"] = {"value": labels[f"{prefix}.multiprocessors"]}
        for name, label in _ENGINES:
            if labels.get(f"{prefix}.engines.{label}"):
                capacity[name] = {"value": labels[f"{prefix}.engines.{label}"]}
        return capacity
    known = MIG_CAPACITIES.get((model, profile))
    if known:
        names = ("memory", "multiprocessors") + tuple(name for name, dummy in _ENGINES)
        values = (f"{known[0]}Mi",) + tuple(str(v) for v in known[1:])
        return {name: {"value": value} for name, value in zip(names, values)}
    gigabytes = int(profile.split("g.", 1)[1].split("gb", 1)[0])
    return {"memory": {"value": f"{gigabytes * 1024}Mi"}}


def devices(node: dict) -> list:
    """The devices the plugin publishes for a node (no label or GPU check here)."""
    meta = node["metadata"]
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    model = node_model(labels)
    if model is None:
        return []
    count = physical_gpus(labels, annotations)
    geometry = applied_geometry(annotations, count) if hardware.gpu(model).mig_capable else [None] * count
    found = []
    for index, mig in enumerate(geometry):
        gpu_uuid = device_uuid("GPU", meta["name"], index)
        common = _common(labels, model, index)
        if mig is None:
            attrs = {"type": _string("gpu"), "uuid": _string(gpu_uuid), **common}
            found.append({"name": f"gpu-{index}", "attributes": attrs,
                          "capacity": {"memory": {"value": f"{hardware.gpu(model).memory_mib}Mi"}}})
            continue
        for profile, n in sorted(mig.items()):
            for ordinal in range(n):
                mig_uuid = device_uuid("MIG", meta["name"], index, profile, ordinal)
                attrs = {"type": _string("mig"), "uuid": _string(mig_uuid),
                         "parentUUID": _string(gpu_uuid), "profile": _string(profile), **common}
                tag = profile.replace(".", "").replace("+", "-")
                found.append({"name": f"gpu-{index}-mig-{tag}-{ordinal}", "attributes": attrs,
                              "capacity": _mig_capacity(labels, model, profile)})
    return found


def publishes(node: dict | None) -> bool:
    """Whether the plugin runs on the node and has GPUs to publish."""
    if node is None:
        return False
    labels = node["metadata"].get("labels") or {}
    return (labels.get(PLUGIN_LABEL) == "true" and labels.get("nvidia.com/gpu.present") == "true"
            and node_model(labels) is not None)


def resource_slice(node: dict, generation: int = 1) -> dict | None:
    """The ResourceSlice the plugin publishes for a Node (a plain dict), None where it publishes none."""
    if not publishes(node):
        return None
    meta = node["metadata"]
    metadata = {"name": slice_name(meta["name"]), "labels": {"devcluster.kubegpu.io/simulator": "dra-plugin"}}
    if meta.get("uid"):
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"],
                                        "controller": True}]
    return {"apiVersion": API_VERSION, "kind": "ResourceSlice", "metadata": metadata,
            "spec": {"driver": DRIVER, "nodeName": meta["name"],
                     "pool": {"name": meta["name"], "generation": generation, "resourceSliceCount": 1},
                     "devices": devices(node)}}


def contains(current, desired) -> bool:
    """Whether current has every field desired sets (the API server may add defaults of its own)."""
    if isinstance(desired, dict):
        return isinstance(current, dict) and all(contains(current.get(k), v) for k, v in desired.items())
    if isinstance(desired, list):
        return (isinstance(current, list) and len(current) == len(desired)
                and all(contains(c, d) for c, d in zip(current, desired)))
    return current == desired


@dataclass(frozen=True)
class Action:
    """The write that brings a node's slice to what the plugin publishes. verb: none, create, replace (body has the
    pool's next generation) or delete."""
    verb: str
    body: dict | None = None


def desired_slice(name: str, node: dict | None, knobs) -> dict | None:
    """The slice the node `name` should have: none where the plugin does not run, where the node is gone (no garbage
    collector here), or where it crash-loops (knob fail_nodes)."""
    if node is None or name in node_names(knobs.get("fail_nodes", "")):
        return None
    return resource_slice(node)


def change(name: str, desired: dict | None, current: dict | None) -> Action:
    """From the slice there is (`current`, as read) to the one there should be."""
    if desired is None:
        return Action("delete") if current is not None else Action("none")
    if current is None:
        return Action("create", desired)
    spec = current.get("spec") or {}
    if contains(spec.get("devices"), desired["spec"]["devices"]) and spec.get("nodeName") == name:
        return Action("none")
    body = copy.deepcopy(desired)
    body["spec"]["pool"]["generation"] = ((spec.get("pool") or {}).get("generation") or 0) + 1
    return Action("replace", body)


def decide(name: str, node: dict | None, current: dict | None, knobs) -> Action:
    """The write for node `name` (node: the Node, None once deleted) given its slice now (None: none)."""
    return change(name, desired_slice(name, node, knobs), current)
