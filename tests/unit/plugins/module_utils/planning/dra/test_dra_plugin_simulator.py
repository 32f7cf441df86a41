# -*- coding: utf-8 -*-
"""The DRA kubelet plugin simulator's pure part: node labels -> ResourceSlice body (no cluster)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest
from kubegpu_devcluster import fleet  # pylint: disable=import-error
from kubegpu_devcluster.simulators.decisions import dra_plugin  # pylint: disable=import-error

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import (
    parse_claim_templates,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.driver_values import driver_values
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.matching import match_templates
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DRA_PLUGIN_LABEL, DRA_PLUGIN_LABEL_VALUE

GEOMETRY = "devcluster.kubegpu.io/mig-geometry"


def gpu_node(name, model="H100-80GB", gpus=2, plugin=True, geometry=None, extra=None):
    labels = fleet.gpu_labels(model, gpus)
    if plugin:
        labels[DRA_PLUGIN_LABEL] = DRA_PLUGIN_LABEL_VALUE
    labels.update(extra or {})
    annotations = {GEOMETRY: json.dumps(geometry)} if geometry is not None else {}
    return {"metadata": {"name": name, "uid": "uid-" + name, "labels": labels, "annotations": annotations}}


def attrs(device):
    return dict((name, list(value.values())[0]) for name, value in device["attributes"].items())


def test_slice_of_a_whole_gpu_node():
    body = dra_plugin.resource_slice(gpu_node("gpu-h100-0"))
    assert body["apiVersion"] == "resource.k8s.io/v1" and body["kind"] == "ResourceSlice"
    assert body["metadata"]["name"] == "gpu-h100-0-gpu.nvidia.com"
    assert body["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "gpu-h100-0",
                                                    "uid": "uid-gpu-h100-0", "controller": True}]
    spec = body["spec"]
    assert (spec["driver"], spec["nodeName"]) == ("gpu.nvidia.com", "gpu-h100-0")
    assert spec["pool"] == {"name": "gpu-h100-0", "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1"]
    first = attrs(spec["devices"][0])
    assert first["type"] == "gpu" and first["uuid"].startswith("GPU-")
    assert first["productName"] == "NVIDIA H100 80GB HBM3"
    assert (first["brand"], first["architecture"], first["cudaComputeCapability"]) == ("Nvidia", "Hopper", "9.0.0")
    assert first["resource.kubernetes.io/pciBusID"] == "0000:18:00.0"
    assert first["resource.kubernetes.io/pcieRoot"] == "pci0000:00"
    assert spec["devices"][0]["capacity"] == {"memory": {"value": "81559Mi"}}
    # Attributes typed as the driver types them: versions as semver, the rest strings.
    kinds = dict((name, list(value)[0]) for name, value in spec["devices"][0]["attributes"].items())
    assert kinds["driverVersion"] == kinds["cudaDriverVersion"] == kinds["cudaComputeCapability"] == "version"
    assert kinds["productName"] == kinds["resource.kubernetes.io/pcieRoot"] == "string"
    assert attrs(spec["devices"][1])["uuid"] != first["uuid"]


@pytest.mark.parametrize("extra, driver, cuda", [
    ({"nvidia.com/cuda.driver-version.full": "580.105.08", "nvidia.com/cuda.runtime-version.full": "13.0"},
     "580.105.8", "13.0.0"),
    ({"nvidia.com/cuda.driver-version.full": "550.54.15", "nvidia.com/cuda.runtime-version.full": "12.4"},
     "550.54.15", "12.4.0"),
])
def test_versions_from_gfd_labels(extra, driver, cuda):
    device = dra_plugin.resource_slice(gpu_node("n", extra=extra))["spec"]["devices"][0]
    assert (attrs(device)["driverVersion"], attrs(device)["cudaDriverVersion"]) == (driver, cuda)


def test_versions_from_older_gfd_labels():
    node = gpu_node("n")
    labels = node["metadata"]["labels"]
    for key in [k for k in labels if k.startswith("nvidia.com/cuda.")]:
        del labels[key]
    labels.update({"nvidia.com/cuda.driver.major": "535", "nvidia.com/cuda.driver.minor": "104",
                   "nvidia.com/cuda.driver.rev": "05", "nvidia.com/cuda.runtime.major": "12",
                   "nvidia.com/cuda.runtime.minor": "2"})
    device = dra_plugin.resource_slice(node)["spec"]["devices"][0]
    assert (attrs(device)["driverVersion"], attrs(device)["cudaDriverVersion"]) == ("535.104.5", "12.2.0")


@pytest.mark.parametrize("model, product, architecture, memory", [
    ("H200", "NVIDIA H200", "Hopper", "143771Mi"),
    ("L40S", "NVIDIA L40S", "Ada Lovelace", "46068Mi"),
    ("T4", "Tesla T4", "Turing", "15360Mi"),
    ("A100-40GB", "NVIDIA A100-SXM4-40GB", "Ampere", "40960Mi"),
    ("B200", "NVIDIA B200", "Blackwell", "183359Mi"),
])
def test_models(model, product, architecture, memory):
    device = dra_plugin.resource_slice(gpu_node("n", model=model, gpus=1))["spec"]["devices"][0]
    assert (attrs(device)["productName"], attrs(device)["architecture"]) == (product, architecture)
    assert device["capacity"]["memory"]["value"] == memory


def test_mig_devices():
    geometry = [None, {"3g.40gb": 1, "1g.10gb": 2}, {}]
    spec = dra_plugin.resource_slice(gpu_node("n", gpus=3, geometry=geometry))["spec"]
    names = [d["name"] for d in spec["devices"]]
    # GPU 1 is published as its MIG devices only; GPU 2 has MIG on and no devices: nothing.
    assert names == ["gpu-0", "gpu-1-mig-1g10gb-0", "gpu-1-mig-1g10gb-1", "gpu-1-mig-3g40gb-0"]
    parent = dra_plugin.resource_slice(gpu_node("n", gpus=3))["spec"]["devices"][1]
    big = spec["devices"][3]
    assert attrs(big)["type"] == "mig" and attrs(big)["profile"] == "3g.40gb"
    assert attrs(big)["parentUUID"] == attrs(parent)["uuid"]
    assert attrs(big)["uuid"].startswith("MIG-")
    assert attrs(big)["productName"] == "NVIDIA H100 80GB HBM3"
    assert big["capacity"] == {"memory": {"value": "40320Mi"}, "multiprocessors": {"value": "60"},
                               "copyEngines": {"value": "3"}, "decoders": {"value": "3"}, "encoders": {"value": "0"},
                               "jpegEngines": {"value": "3"}, "ofaEngines": {"value": "0"}}


def test_mig_capacities_from_gfd_profile_labels_first():
    extra = {"nvidia.com/mig-1g.18gb.memory": "16384", "nvidia.com/mig-1g.18gb.multiprocessors": "16",
             "nvidia.com/mig-1g.18gb.engines.copy": "1"}
    spec = dra_plugin.resource_slice(gpu_node("n", model="H200", gpus=1, geometry=[{"1g.18gb": 1}],
                                              extra=extra))["spec"]
    assert spec["devices"][0]["capacity"] == {"memory": {"value": "16384Mi"}, "multiprocessors": {"value": "16"},
                                              "copyEngines": {"value": "1"}}


def test_mig_capacity_of_an_unlisted_profile_is_memory_from_its_name():
    spec = dra_plugin.resource_slice(gpu_node("n", model="H200", gpus=1, geometry=[{"3g.71gb": 1}]))["spec"]
    assert spec["devices"][0]["capacity"] == {"memory": {"value": "72704Mi"}}


@pytest.mark.parametrize("node", [
    gpu_node("n", plugin=False),
    gpu_node("n", extra={"nvidia.com/dra-kubelet-plugin": "false"}),
    gpu_node("n", extra={"nvidia.com/gpu.present": "false"}),
    gpu_node("n", extra={"nvidia.com/gpu.product": "NVIDIA-Unknown"}),
    {"metadata": {"name": "cpu", "labels": {"nvidia.com/dra-kubelet-plugin": "true"}}},
    None,
])
def test_no_slice(node):
    assert dra_plugin.resource_slice(node) is None


def test_generation_and_no_owner_without_uid():
    node = gpu_node("n")
    del node["metadata"]["uid"]
    body = dra_plugin.resource_slice(node, generation=3)
    assert body["spec"]["pool"]["generation"] == 3
    assert "ownerReferences" not in body["metadata"]


def test_topology_two_gpus_per_pcie_root():
    devices = dra_plugin.resource_slice(gpu_node("n", gpus=8))["spec"]["devices"]
    roots = [attrs(d)["resource.kubernetes.io/pcieRoot"] for d in devices]
    assert roots == ["pci0000:00", "pci0000:00", "pci0000:20", "pci0000:20", "pci0000:40", "pci0000:40",
                     "pci0000:60", "pci0000:60"]
    assert len(set(attrs(d)["resource.kubernetes.io/pciBusID"] for d in devices)) == 8


def test_contains_ignores_fields_the_api_server_adds():
    desired = [{"name": "gpu-0", "capacity": {"memory": {"value": "1Mi"}}}]
    assert dra_plugin.contains([{"name": "gpu-0", "capacity": {"memory": {"value": "1Mi"}}, "x": 1}], desired)
    assert not dra_plugin.contains([{"name": "gpu-0", "capacity": {"memory": {"value": "2Mi"}}}], desired)
    assert not dra_plugin.contains([], desired)


def test_claim_templates_match_what_the_simulator_publishes():
    """The planner's selectors and the simulator's slices agree: each form finds the devices it should."""
    slices = [dra_plugin.resource_slice(gpu_node("h100", gpus=4, geometry=[None, None, None, {"3g.40gb": 2}])),
              dra_plugin.resource_slice(gpu_node("l40s", model="L40S", gpus=2)),
              dra_plugin.resource_slice(gpu_node("h200", model="H200", gpus=8))]
    templates = parse_claim_templates([
        {"name": "gpu-40g", "namespaces": ["llm"], "min_memory": "40Gi"},
        {"name": "gpu-80g", "namespaces": ["llm"], "min_memory": "80Gi"},
        {"name": "h200", "namespaces": ["llm"], "products": ["NVIDIA-H200"]},
        {"name": "mig-3g", "namespaces": ["llm"], "device": "mig", "mig_profile": "3g.40gb"},
        {"name": "h100-pair", "namespaces": ["llm"], "products": ["H100-80GB"], "count": 2, "same_pcie_root": True},
        {"name": "h100-trio", "namespaces": ["llm"], "products": ["H100-80GB"], "count": 3, "same_pcie_root": True},
    ])
    report = match_templates(templates, slices)
    assert report["gpu-40g"]["nodes"] == ["h100", "h200", "l40s"]
    assert report["gpu-80g"]["nodes"] == ["h200"]          # 81559Mi H100 < 80Gi; H200 143771Mi
    assert report["h200"]["devices"] == {"h200": ["gpu-%d" % i for i in range(8)]}
    assert report["mig-3g"]["devices"] == {"h100": ["gpu-3-mig-3g40gb-0", "gpu-3-mig-3g40gb-1"]}
    assert report["h100-pair"]["nodes"] == ["h100"]        # gpu-0 and gpu-1 share pci0000:00
    assert report["h100-trio"]["nodes"] == []              # never three under one root


def test_the_simulator_acts_on_the_label_the_chart_values_select():
    assert (dra_plugin.PLUGIN_LABEL, "true") == (DRA_PLUGIN_LABEL, DRA_PLUGIN_LABEL_VALUE)
    selector = driver_values({"driver_owner": "host"})["values"]["kubeletPlugin"]["nodeSelector"]
    assert selector == {dra_plugin.PLUGIN_LABEL: "true"}
