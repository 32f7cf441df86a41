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

What it decides is in decisions/dra_plugin.py, pure functions with their cases in
tools/devcluster/tests/cases/dra-plugin/; this controller reads the objects, keeps the time a change takes and
writes what the decision returns.
"""
from __future__ import annotations

from kubernetes.dynamic.exceptions import NotFoundError

from .decisions import dra_plugin as decide
from .decisions.dra_plugin import API_VERSION, PLUGIN_LABEL, SLICE_SUFFIX, DRIVER, slice_name
from .framework import KNOBS_CONFIGMAP, KNOBS_NAMESPACE, Simulator, log


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
        desired = decide.desired_slice(name, node, self.knobs)
        if desired is None and name not in self._slices:
            return   # no plugin here and no slice of ours (a slice's own event requeues its node)
        current = self.get("ResourceSlice", None, slice_name(name))
        current = current.to_dict() if current is not None else None
        action = decide.change(name, desired, current)
        api = self.api("ResourceSlice")
        if action.verb == "delete":
            log.info("dra-plugin: %s: slice removed", name)
            try:
                api.delete(name=slice_name(name))
            except NotFoundError:
                pass
        elif action.verb == "create":
            log.info("dra-plugin: %s: slice published (%d devices)", name, len(action.body["spec"]["devices"]))
            api.create(body=action.body)
        elif action.verb == "replace":
            body = dict(action.body, metadata=dict(action.body["metadata"],
                                                   resourceVersion=current["metadata"]["resourceVersion"]))
            log.info("dra-plugin: %s: slice republished, generation %d", name, body["spec"]["pool"]["generation"])
            api.replace(body=body)
