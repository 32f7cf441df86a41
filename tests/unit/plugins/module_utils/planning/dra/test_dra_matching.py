# -*- coding: utf-8 -*-
"""Which nodes' devices satisfy each claim template, from ResourceSlices."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import (
    parse_claim_templates,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.matching import (
    match_templates,
    node_devices,
)


def gpu(name, product, memory, root):
    return {"name": name, "attributes": {"type": {"string": "gpu"}, "productName": {"string": product},
                                         "resource.kubernetes.io/pcieRoot": {"string": root}},
            "capacity": {"memory": {"value": memory}}}


def mig(name, profile, memory):
    return {"name": name, "attributes": {"type": {"string": "mig"}, "profile": {"string": profile},
                                         "productName": {"string": "NVIDIA H100 80GB HBM3"}},
            "capacity": {"memory": {"value": memory}}}


def resource_slice(node, devices, generation=1, driver="gpu.nvidia.com"):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": node + "-" + driver},
            "spec": {"driver": driver, "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": generation, "resourceSliceCount": 1}}}


H100 = "NVIDIA H100 80GB HBM3"
SLICES = [
    # h100-a: four H100, two per PCIe root.
    resource_slice("h100-a", [gpu("gpu-%d" % i, H100, "81559Mi", "pci0000:%02x" % (i // 2 * 32)) for i in range(4)]),
    # h100-b: one whole H100 and a MIG-enabled one.
    resource_slice("h100-b", [gpu("gpu-0", H100, "81559Mi", "pci0000:00"),
                              mig("gpu-1-mig-3g40gb-0", "3g.40gb", "40320Mi"),
                              mig("gpu-1-mig-1g10gb-0", "1g.10gb", "9984Mi")]),
    # l40s: two L40S, each under its own root.
    resource_slice("l40s", [gpu("gpu-0", "NVIDIA L40S", "46068Mi", "pci0000:00"),
                            gpu("gpu-1", "NVIDIA L40S", "46068Mi", "pci0000:80")]),
    # Another driver's slice on the same node is not ours.
    resource_slice("l40s", [gpu("nic-0", "NVIDIA L40S", "46068Mi", "pci0000:00")], driver="net.example.com"),
    # A stale generation of l4's pool, then the current one.
    resource_slice("l4", [gpu("gpu-0", "NVIDIA L4", "23034Mi", "pci0000:00")] * 2, generation=1),
    resource_slice("l4", [gpu("gpu-0", "NVIDIA L4", "23034Mi", "pci0000:00")], generation=2),
    # Network-attached devices have no node: not counted.
    {"spec": {"driver": "gpu.nvidia.com", "pool": {"name": "fabric", "generation": 1}, "allNodes": True,
              "devices": [gpu("gpu-9", H100, "81559Mi", "pci0000:00")]}},
]


def templates(*entries):
    return parse_claim_templates([dict(entry, namespaces=["llm"]) for entry in entries])


@pytest.mark.parametrize("entry, devices, nodes", [
    ({"name": "any"}, {"h100-a": ["gpu-0", "gpu-1", "gpu-2", "gpu-3"], "h100-b": ["gpu-0"],
                       "l40s": ["gpu-0", "gpu-1"], "l4": ["gpu-0"]}, ["h100-a", "h100-b", "l4", "l40s"]),
    ({"name": "gpu-40g", "min_memory": "40Gi"}, {"h100-a": ["gpu-0", "gpu-1", "gpu-2", "gpu-3"], "h100-b": ["gpu-0"],
                                                 "l40s": ["gpu-0", "gpu-1"]}, ["h100-a", "h100-b", "l40s"]),
    ({"name": "gpu-80g", "min_memory": "80Gi"}, {}, []),
    ({"name": "h100", "products": ["H100-80GB"]},
     {"h100-a": ["gpu-0", "gpu-1", "gpu-2", "gpu-3"], "h100-b": ["gpu-0"]}, ["h100-a", "h100-b"]),
    ({"name": "mig-3g", "device": "mig", "mig_profile": "3g.40gb"}, {"h100-b": ["gpu-1-mig-3g40gb-0"]}, ["h100-b"]),
    ({"name": "mig-small", "device": "mig", "mig_profile": "1g.10gb", "min_memory": "9Gi"},
     {"h100-b": ["gpu-1-mig-1g10gb-0"]}, ["h100-b"]),
    # Two devices: h100-b has only one whole GPU; l40s has two.
    ({"name": "pair", "count": 2}, {"h100-a": ["gpu-0", "gpu-1", "gpu-2", "gpu-3"], "h100-b": ["gpu-0"],
                                    "l40s": ["gpu-0", "gpu-1"], "l4": ["gpu-0"]}, ["h100-a", "l40s"]),
    # Two under one PCIe root: l40s's GPUs sit under different roots.
    ({"name": "pair-root", "count": 2, "same_pcie_root": True},
     {"h100-a": ["gpu-0", "gpu-1", "gpu-2", "gpu-3"], "h100-b": ["gpu-0"], "l40s": ["gpu-0", "gpu-1"],
      "l4": ["gpu-0"]}, ["h100-a"]),
    ({"name": "four-root", "count": 4, "same_pcie_root": True},
     {"h100-a": ["gpu-0", "gpu-1", "gpu-2", "gpu-3"], "h100-b": ["gpu-0"], "l40s": ["gpu-0", "gpu-1"],
      "l4": ["gpu-0"]}, []),
])
def test_match_templates(entry, devices, nodes):
    report = match_templates(templates(entry), SLICES)
    assert report == {entry["name"]: {"devices": devices, "nodes": nodes, "exact": True}}


def test_match_reports_every_template():
    report = match_templates(templates({"name": "a"}, {"name": "b", "products": "T4"}), SLICES)
    assert list(report) == ["a", "b"]
    assert report["b"] == {"devices": {}, "nodes": [], "exact": True}


def test_no_slices():
    assert match_templates(templates({"name": "a"}), []) == {"a": {"devices": {}, "nodes": [], "exact": True}}


def test_node_devices_keeps_the_newest_generation_only():
    per_node = node_devices(SLICES)
    assert [device["name"] for dummy, device in per_node["l4"]] == ["gpu-0"]
    assert [driver for driver, dummy in per_node["l40s"]] == ["gpu.nvidia.com"] * 2 + ["net.example.com"]
    assert "fabric" not in per_node


def test_a_cel_condition_of_the_users_makes_the_report_inexact():
    slices = [resource_slice("n1", [gpu("gpu-0", "NVIDIA H100 80GB HBM3", "80Gi", "pci0")])]
    [template] = parse_claim_templates([{"name": "a", "namespaces": ["llm"], "cel": "device.attributes['x'].y == 1"}])
    assert match_templates([template], slices)["a"] == {"devices": {"n1": ["gpu-0"]}, "nodes": ["n1"], "exact": False}
