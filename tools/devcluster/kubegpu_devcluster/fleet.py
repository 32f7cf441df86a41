"""Simulated fleets: a YAML file of node groups becomes Node objects (plus OpenShift's identity objects).

Fleet file::

    platform: openshift            # or kubernetes
    version: "4.20.3"              # OpenShift release (ClusterVersion), or the distribution's label
    node_groups:
      - name: h100                 # nodes are named <name>-000, <name>-001, ...
        count: 2
        gpu: H100-80GB             # a key of hardware.GPUS; omit for CPU-only nodes
        gpus_per_node: 8
        instance_type: p5.48xlarge
        machineset: demo-h100      # OpenShift: the MachineSet the nodes belong to
        labels: {}                 # extra node labels
    without_crds: [kserve, keda]   # folders of shared/crds this fleet starts without: its platform installs
                                   # them (operators through OLM, charts with helm); default: none, every CRD

Nodes carry what NFD and GPU Feature Discovery would publish once the GPU Operator runs
(shared/reference/gpu-node-labels.md), capacity and allocatable included.
"""
from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .hardware import gpu as lookup_gpu

DRIVER = ("580", "105", "08")   # driver 580.105.08 -> CUDA 13.0 (reference: cuda.runtime.*)
MACHINE_API_NS = "openshift-machine-api"
OPENSHIFT_NAMESPACES = (MACHINE_API_NS, "openshift-marketplace", "openshift-operators", "openshift-config-managed",
                        "openshift-monitoring")
FLEET_LABEL = "devcluster.kubegpu.io/node-group"


@dataclass
class NodeGroup:
    name: str
    count: int
    gpu: str | None = None
    gpus_per_node: int = 0
    instance_type: str = "m5.2xlarge"
    machineset: str | None = None
    labels: dict = field(default_factory=dict)
    cpu: str = "96"
    memory: str = "1024Gi"


@dataclass
class Fleet:
    platform: str
    version: str
    groups: list
    without_crds: list = field(default_factory=list)

    @property
    def openshift(self) -> bool:
        return self.platform == "openshift"


def load(path: Path) -> Fleet:
    data = yaml.safe_load(Path(path).read_text())
    platform = data.get("platform", "kubernetes")
    if platform not in ("openshift", "kubernetes"):
        raise ValueError(f"{path}: platform {platform!r} is not one of openshift, kubernetes")
    groups = []
    for g in data.get("node_groups", []):
        group = NodeGroup(**g)
        if group.gpu:
            lookup_gpu(group.gpu)  # fail early on an unknown model
            if group.gpus_per_node < 1:
                raise ValueError(f"{path}: node group {group.name}: gpus_per_node must be >= 1 for a GPU group")
        groups.append(group)
    return Fleet(platform, str(data.get("version", "")), groups, list(data.get("without_crds") or []))


def node_name(group: NodeGroup, index: int) -> str:
    return f"{group.name}-{index:03d}"


def gpu_labels(model_key: str, count: int) -> dict:
    """Labels GFD and the GPU Operator put on a node with `count` GPUs of one model, nothing shared."""
    g = lookup_gpu(model_key)
    major, minor, rev = DRIVER
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": g.product,
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.memory": str(g.memory_mib),
        "nvidia.com/gpu.family": g.family,
        "nvidia.com/gpu.compute.major": str(g.compute[0]),
        "nvidia.com/gpu.compute.minor": str(g.compute[1]),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/mig.capable": str(g.mig_capable).lower(),
        "nvidia.com/mps.capable": "false",
        "nvidia.com/vgpu.present": "false",
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        "nvidia.com/cuda.driver-version.full": f"{major}.{minor}.{rev}",
        "nvidia.com/cuda.runtime-version.major": "13",
        "nvidia.com/cuda.runtime-version.minor": "0",
        "nvidia.com/cuda.runtime-version.full": "13.0",
        "feature.node.kubernetes.io/pci-10de.present": "true",
    }
    for operand in ("driver", "gpu-feature-discovery", "container-toolkit", "device-plugin", "dcgm",
                    "dcgm-exporter", "node-status-exporter", "operator-validator", "client"):
        labels[f"nvidia.com/gpu.deploy.{operand}"] = "true"
    # GFD writes its MIG strategy (the operator's default, single) on every GPU node, MIG-capable or not, as the
    # device-plugin simulator does once it runs: a node starts as it will look after the simulator's first pass.
    labels["nvidia.com/mig.strategy"] = "single"
    if g.mig_capable:
        labels.update({
            "nvidia.com/gpu.deploy.mig-manager": "true",
            "nvidia.com/mig.config": "all-disabled",
            "nvidia.com/mig.config.state": "success",
        })
    return labels


def node_object(fleet: Fleet, group: NodeGroup, index: int) -> dict:
    name = node_name(group, index)
    arch = lookup_gpu(group.gpu).arch if group.gpu else "amd64"
    labels = {
        "kubernetes.io/arch": arch, "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
        "node-role.kubernetes.io/worker": "", "node.kubernetes.io/instance-type": group.instance_type,
        FLEET_LABEL: group.name,
        "feature.node.kubernetes.io/kernel-version.full":
            "5.14.0-570.el9_6.x86_64" if fleet.openshift else "6.8.0-60-generic",
        "feature.node.kubernetes.io/system-os_release.ID": "rhcos" if fleet.openshift else "ubuntu",
    }
    annotations = {}
    if fleet.openshift:
        labels["node.openshift.io/os_id"] = "rhcos"
        if group.machineset:
            annotations["machine.openshift.io/machine"] = f"{MACHINE_API_NS}/{group.machineset}-{index:05d}"
    capacity = {"cpu": group.cpu, "memory": group.memory, "pods": "250", "ephemeral-storage": "500Gi"}
    if group.gpu:
        labels.update(gpu_labels(group.gpu, group.gpus_per_node))
        labels["nvidia.com/gpu.machine"] = group.instance_type
        capacity["nvidia.com/gpu"] = str(group.gpus_per_node)
    labels.update(group.labels)
    now = "2026-01-01T00:00:00Z"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"providerID": f"sim://{name}"},
        "status": {
            "capacity": capacity, "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "simulated node", "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "nodeInfo": {"architecture": arch, "operatingSystem": "linux", "kubeletVersion": "v1.34.4",
                         "kubeProxyVersion": "", "containerRuntimeVersion":
                             "cri-o://1.34.1" if fleet.openshift else "containerd://2.1.4",
                         "kernelVersion": labels["feature.node.kubernetes.io/kernel-version.full"],
                         "osImage": "Red Hat Enterprise Linux CoreOS" if fleet.openshift else "Ubuntu 24.04 LTS",
                         "machineID": "", "systemUUID": "", "bootID": ""},
        },
    }


def machineset_object(group: NodeGroup) -> dict:
    """A MachineSet whose template carries the group's labels, as new machines of the group would."""
    selector = {"machine.openshift.io/cluster-api-machineset": group.machineset}
    return {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": group.machineset, "namespace": MACHINE_API_NS,
                     "labels": {"machine.openshift.io/cluster-api-cluster": "devcluster"}},
        "spec": {
            "replicas": group.count,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {"metadata": {"labels": {FLEET_LABEL: group.name}},
                         "providerSpec": {"value": {"instanceType": group.instance_type}}},
            },
        },
    }


def openshift_identity(fleet: Fleet, server: str) -> list:
    """ClusterVersion, Infrastructure and FeatureGate as a default OpenShift cluster has them: (object, status)."""
    version = fleet.version or "4.20.3"
    minor = ".".join(version.split(".")[:2])
    image = f"quay.io/openshift-release-dev/ocp-release@sha256:{'0' * 64}"
    return [
        ({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"},
          "spec": {"clusterID": str(uuid.uuid4()), "channel": f"stable-{minor}"}},
         {"desired": {"version": version, "image": image}, "observedGeneration": 1, "versionHash": "sim",
          "availableUpdates": None,
          "history": [{"state": "Completed", "version": version, "image": image, "verified": False,
                       "startedTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:30:00Z"}]}),
        ({"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
          "spec": {"platformSpec": {"type": "AWS"}}},
         {"platform": "AWS", "platformStatus": {"type": "AWS", "aws": {"region": "us-east-1"}},
          "infrastructureName": "devcluster-sim", "apiServerURL": server, "apiServerInternalURI": server,
          "controlPlaneTopology": "HighlyAvailable", "infrastructureTopology": "HighlyAvailable",
          "etcdDiscoveryDomain": ""}),
        ({"apiVersion": "config.openshift.io/v1", "kind": "FeatureGate", "metadata": {"name": "cluster"},
          "spec": {}}, None),
        # The console operator's configuration, as the operator creates it; spec.plugins lists the console's plugins.
        ({"apiVersion": "operator.openshift.io/v1", "kind": "Console", "metadata": {"name": "cluster"},
          "spec": {"managementState": "Managed", "logLevel": "Normal", "operatorLogLevel": "Normal"}}, None),
    ]


def apply(fleet: Fleet, dyn, server: str, workers: int = 8) -> int:
    """Create the fleet's objects with a dynamic client (the fleet simulator's user). Returns nodes created."""
    nodes_api = dyn.resources.get(api_version="v1", kind="Node")
    objects = [node_object(fleet, g, i) for g in fleet.groups for i in range(g.count)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda body: nodes_api.create(body=body), objects))
    if fleet.openshift:
        ns_api = dyn.resources.get(api_version="v1", kind="Namespace")
        # The platform's own namespaces the stages write into: every OpenShift cluster has them from its install,
        # so a stage never creates them there (and an uninstall never takes them away).
        for ns in OPENSHIFT_NAMESPACES:
            ns_api.server_side_apply(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                                     field_manager="devcluster-fleet")
        ms_api = dyn.resources.get(api_version="machine.openshift.io/v1beta1", kind="MachineSet")
        for g in fleet.groups:
            if g.machineset:
                ms_api.create(body=machineset_object(g), namespace=MACHINE_API_NS)
        for obj, status in openshift_identity(fleet, server):
            api = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            created = api.create(body=obj)
            if status is not None:
                body = dict(obj, status=status)
                body["metadata"] = dict(obj["metadata"], resourceVersion=created.metadata.resourceVersion)
                api.status.replace(body=body)
    return len(objects)


def reset(dyn) -> None:
    """Remove a fleet's objects (nodes and the pods bound to them, MachineSets, OpenShift identity, catalog) so
    another can be loaded."""
    from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

    nodes_api = dyn.resources.get(api_version="v1", kind="Node")
    gone = {n.metadata.name for n in nodes_api.get(label_selector=FLEET_LABEL).items}
    nodes_api.delete(label_selector=FLEET_LABEL)
    # Pods bound to a removed machine: no kubelet will confirm they stopped, and the controller-manager's pod
    # garbage collector would take a minute or more. A cloud's node removal ends them; so does the switch.
    pods_api = dyn.resources.get(api_version="v1", kind="Pod")
    for pod in pods_api.get().items:
        if pod.spec.nodeName in gone:
            try:
                pods_api.delete(name=pod.metadata.name, namespace=pod.metadata.namespace,
                                body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
            except NotFoundError:
                pass
    for api_version, kind, namespace in (("machine.openshift.io/v1beta1", "MachineSet", MACHINE_API_NS),
                                         ("packages.operators.coreos.com/v1", "PackageManifest",
                                          "openshift-marketplace")):
        try:
            api = dyn.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            continue
        for item in api.get(namespace=namespace).items:
            try:
                api.delete(name=item.metadata.name, namespace=namespace)
            except NotFoundError:
                pass
    for api_version, kind, name in (("config.openshift.io/v1", "ClusterVersion", "version"),
                                    ("config.openshift.io/v1", "Infrastructure", "cluster"),
                                    ("config.openshift.io/v1", "FeatureGate", "cluster"),
                                    ("operator.openshift.io/v1", "Console", "cluster")):
        try:
            dyn.resources.get(api_version=api_version, kind=kind).delete(name=name)
        except (NotFoundError, ResourceNotFoundError):
            pass
