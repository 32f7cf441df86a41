"""The NVIDIA DRA driver's GPU kubelet plugin: one ResourceSlice per node it runs on.

Follows shared/reference/dra-kserve-openshift-ai.md ("NVIDIA DRA driver"); where it is silent,
kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 (cmd/gpu-kubelet-plugin deviceinfo.go, mig.go). Acts on
nodes labelled nvidia.com/dra-kubelet-plugin=true (the chart's kubeletPlugin.nodeSelector as the collection
sets it) that have GPUs (nvidia.com/gpu.present=true and a known gpu.product). Each gets one slice, driver
gpu.nvidia.com, pool = the node's name, one slice in the pool, named <node>-gpu.nvidia.com and owned by the
Node. A node that loses the label (or is deleted, or is listed in fail_nodes) loses its slice: there is no
garbage collector here, so the simulator deletes it. A changed device list replaces the slice with the pool's
generation + 1, as the driver republishes.

Devices, from the node's labels and the simulated hardware (kubegpu_devcluster.hardware):
- per GPU with MIG disabled: gpu-<index>, attributes type=gpu, uuid, productName (the NVML name), brand
  (Nvidia), architecture (from nvidia.com/gpu.family: Turing, Ampere, Ada Lovelace, Hopper, Blackwell),
  cudaComputeCapability (gpu.compute.major/minor), driverVersion (cuda.driver-version.full),
  cudaDriverVersion (cuda.runtime-version.full, the CUDA version the driver supports), all versions as
  semver; resource.kubernetes.io/pciBusID and resource.kubernetes.io/pcieRoot; capacity memory (the
  model's MiB). Not simulated: addressingMode, NUMA attributes.
- per MIG device of a GPU with MIG enabled (the geometry the mig-manager simulator applied, annotation
  devcluster.kubegpu.io/mig-geometry): gpu-<index>-mig-<profile>-<n>, type=mig, uuid, parentUUID, profile,
  the parent's productName, brand, architecture, versions and PCI attributes; capacity memory,
  multiprocessors, copyEngines, decoders, encoders, jpegEngines, ofaEngines. A MIG-enabled GPU is not
  published itself, and one without MIG devices publishes nothing. The real driver's MIG names carry the
  GI profile id and placement start; here an ordinal stands in for them.
Capacities of a MIG profile come from GFD's per-profile labels (nvidia.com/mig-<profile>.memory,
.multiprocessors, .engines.*) when the node has them, else from the reference's table (H100 80GB and A100
40GB profiles), else memory alone from the profile's name (<n>gb -> n x 1024 MiB).

Topology: GPU i sits at PCI bus 0000:<0x18 + 0x10 i>:00.0 under root complex pci0000:<0x20 (i // 2)>, so
two GPUs share a PCIe root, as on common 8-GPU servers.

Knobs (ConfigMap kubegpu-devcluster/simulator-knobs):
  dra-plugin.fail_nodes   comma-separated node names where the plugin crash-loops: no slice
"""
from __future__ import annotations

import uuid

from kubernetes.dynamic.exceptions import NotFoundError

from .. import hardware
from .framework import KNOBS_CONFIGMAP, KNOBS_NAMESPACE, Simulator, log
from .mig_manager import applied_geometry, node_model, physical_gpus

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


def _uuid(prefix: str, *parts) -> str:
    return f"{prefix}-{uuid.uuid5(uuid.NAMESPACE_URL, '/'.join(str(p) for p in parts))}"


def _common(labels: dict, model: str, index: int) -> dict:
    """The attributes a GPU and its MIG devices share."""
    g = hardware.gpu(model)
    attrs = {"productName": _string(hardware.NVML_NAMES.get(model, g.product.replace("-", " "))),
             "brand": _string(BRAND),
             "architecture": _string(ARCHITECTURES.get(labels.get("nvidia.com/gpu.family", g.family), "Unknown")),
             "cudaComputeCapability": {"version": _semver(f"{g.compute[0]}.{g.compute[1]}")}}
    driver = _label_version(labels, "nvidia.com/cuda.driver-version.full",
                            ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"))
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
        gpu_uuid = _uuid("GPU", meta["name"], index)
        common = _common(labels, model, index)
        if mig is None:
            attrs = {"type": _string("gpu"), "uuid": _string(gpu_uuid), **common}
            found.append({"name": f"gpu-{index}", "attributes": attrs,
                          "capacity": {"memory": {"value": f"{hardware.gpu(model).memory_mib}Mi"}}})
            continue
        for profile, n in sorted(mig.items()):
            for ordinal in range(n):
                attrs = {"type": _string("mig"), "uuid": _string(_uuid("MIG", meta["name"], index, profile, ordinal)),
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


def _contains(current, desired) -> bool:
    """Whether current has every field desired sets (the API server may add defaults of its own)."""
    if isinstance(desired, dict):
        return isinstance(current, dict) and all(_contains(current.get(k), v) for k, v in desired.items())
    if isinstance(desired, list):
        return (isinstance(current, list) and len(current) == len(desired)
                and all(_contains(c, d) for c, d in zip(current, desired)))
    return current == desired


class DraPluginSimulator(Simulator):
    name = "dra-plugin"
    watches = {"Node": "v1", "ResourceSlice": API_VERSION, "ConfigMap": "v1"}
    # Every node event reads fail_nodes: once a second at most; the knobs ConfigMap's events drop what was read.
    knobs_ttl = 1.0
    cached = frozenset({"Node"})   # nodes are only read here

    def __init__(self, kubeconfig: str):
        super().__init__(kubeconfig)
        self._slices = set()   # nodes with a slice of ours, from the ResourceSlice watch: others need no GET

    def reconcile(self, kind, key, obj):
        if kind == "ConfigMap":
            if (key[1], key[2]) == (KNOBS_NAMESPACE, KNOBS_CONFIGMAP):   # fail_nodes may have changed
                self.knobs.invalidate()
                for node in self.api("Node").get(label_selector=f"{PLUGIN_LABEL}=true").items:
                    self.requeue("Node", None, node.metadata.name)
            return
        if kind == "ResourceSlice":
            spec = (obj.to_dict().get("spec") or {}) if obj is not None else {}
            node = spec.get("nodeName") or (key[2][:-len(SLICE_SUFFIX)] if key[2].endswith(SLICE_SUFFIX) else None)
            if node and spec.get("driver", DRIVER) == DRIVER:
                if obj is None:
                    self._slices.discard(node)
                else:
                    self._slices.add(node)
                self.requeue("Node", None, node)
            return
        self._node(key[2], obj.to_dict() if obj is not None else None)

    def _node(self, name: str, node: dict | None) -> None:
        failing = name in {n.strip() for n in self.knobs.get("fail_nodes").split(",") if n.strip()}
        desired = None if failing else resource_slice(node) if node is not None else None
        if desired is None and name not in self._slices:
            return   # no plugin here and no slice of ours (a slice's own event requeues its node)
        api = self.api("ResourceSlice")
        current = self.get("ResourceSlice", None, slice_name(name))
        current = current.to_dict() if current is not None else None
        if desired is None:
            if current is not None:
                log.info("dra-plugin: %s: slice removed", name)
                try:
                    api.delete(name=slice_name(name))
                except NotFoundError:
                    pass
            return
        if current is None:
            log.info("dra-plugin: %s: slice published (%d devices)", name, len(desired["spec"]["devices"]))
            api.create(body=desired)
            return
        spec = current.get("spec") or {}
        if _contains(spec.get("devices"), desired["spec"]["devices"]) and spec.get("nodeName") == name:
            return
        generation = ((spec.get("pool") or {}).get("generation") or 0) + 1
        desired = resource_slice(node, generation)
        desired["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        log.info("dra-plugin: %s: slice republished, generation %d", name, generation)
        api.replace(body=desired)
