# -*- coding: utf-8 -*-
"""What node pools and claim templates offer a model server: slices."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import model_for_key
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import (
    LayoutError,
    profile_memory_mib,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import physical_gpus
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import MIB, SizingError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.slices import (
    Slice,
    claim_template_slices,
    parse_slices,
    pool_slices,
)

H100 = 81559 * MIB
L40S = 46068 * MIB
SELECTOR = {"matchLabels": {"kubegpu.io/test": "yes"}}


def pool(name, sharing, selector=None):
    return {"name": name, "selector": selector or SELECTOR, "sharing": sharing}


def slices_of(sharing, gpu="H100-80GB", gpus_per_node=8):
    return [item.to_dict() for item in pool_slices([pool("p", sharing)],
                                                   hardware={"p": {"gpu": gpu, "gpus_per_node": gpus_per_node}})]


def short(items):
    return [(item["kind"], item["resource_name"], item["memory_bytes"], item["device_memory_bytes"],
             item["units_per_node"], item["max_units_per_pod"], item["profile"], item["replicas"]) for item in items]


@pytest.mark.parametrize("sharing, gpu, expected", [
    ({"strategy": "none"}, "H100-80GB",
     [("gpu", "nvidia.com/gpu", H100, H100, 8, 8, None, None)]),
    ({"strategy": "mig", "mig": {"layout": {"3g.40gb": 2}, "strategy": "mixed"}}, "H100-80GB",
     [("mig", "nvidia.com/mig-3g.40gb", 40320 * MIB, 40320 * MIB, 16, 1, "3g.40gb", None)]),
    # Single strategy: the MIG devices are advertised as nvidia.com/gpu, and keep their memory.
    ({"strategy": "mig", "mig": {"layout": "all-3g.40gb"}}, "H100-80GB",
     [("mig", "nvidia.com/gpu", 40320 * MIB, 40320 * MIB, 16, 1, "3g.40gb", None)]),
    ({"strategy": "mig", "mig": {"layout": "all-balanced"}}, "H100-80GB", [
        ("mig", "nvidia.com/mig-1g.10gb", 9984 * MIB, 9984 * MIB, 16, 1, "1g.10gb", None),
        ("mig", "nvidia.com/mig-2g.20gb", 20096 * MIB, 20096 * MIB, 8, 1, "2g.20gb", None),
        ("mig", "nvidia.com/mig-3g.40gb", 40320 * MIB, 40320 * MIB, 8, 1, "3g.40gb", None)]),
    # Time-sliced MIG devices: the device's memory over the replicas; the replica sees the whole device.
    ({"strategy": "mig", "mig": {"layout": {"3g.40gb": 2}, "strategy": "mixed"}, "time_slicing": {"replicas": 2}},
     "H100-80GB", [("time-slicing", "nvidia.com/mig-3g.40gb", 20160 * MIB, 40320 * MIB, 32, 1, "3g.40gb", 2)]),
    ({"strategy": "time-slicing", "time_slicing": {"replicas": 8}}, "L40S",
     [("time-slicing", "nvidia.com/gpu", L40S // 8, L40S, 64, 1, None, 8)]),
    # Renamed: the device plugin advertises nvidia.com/gpu.shared and keeps nvidia.com/gpu at 0.
    ({"strategy": "time-slicing", "time_slicing": {"replicas": 4, "rename_by_default": True}}, "L40S",
     [("time-slicing", "nvidia.com/gpu.shared", L40S // 4, L40S, 32, 1, None, 4)]),
    # MPS pins each client's memory limit: the share is all the device CUDA reports.
    ({"strategy": "mps", "mps": {"replicas": 4}}, "A100-80GB",
     [("mps", "nvidia.com/gpu", 81920 * MIB // 4, 81920 * MIB // 4, 32, 1, None, 4)]),
])
def test_pool_slices(sharing, gpu, expected):
    assert short(slices_of(sharing, gpu)) == expected


def test_mig_pool_with_whole_gpus_beside_mig_devices():
    sharing = {"strategy": "mig", "mig": {"layout": [{"devices": [0, 1], "profiles": {"7g.80gb": 1}},
                                                     {"devices": [2, 3], "mig_enabled": False}]}}
    assert short(slices_of(sharing, "A100-80GB", 4)) == [
        ("gpu", "nvidia.com/gpu", 81920 * MIB, 81920 * MIB, 2, 2, None, None),
        ("mig", "nvidia.com/mig-7g.80gb", profile_memory_mib(model_for_key("A100-80GB"), "7g.80gb") * MIB,
         profile_memory_mib(model_for_key("A100-80GB"), "7g.80gb") * MIB, 2, 1, "7g.80gb", None)]


def test_slice_to_dict_and_label():
    item = pool_slices([pool("llm-h100", {"strategy": "mig", "mig": {"layout": {"3g.40gb": 2}}})],
                       hardware={"llm-h100": {"gpu": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8}})[0]
    assert item.label() == "pool 'llm-h100' nvidia.com/gpu (H100-80GB, 3g.40gb, 39.4 GiB)"
    data = item.to_dict()
    assert (data["pool"], data["gpu"], data["memory_gib"], data["device_memory_gib"]) == ("llm-h100", "H100-80GB",
                                                                                          39.38, 39.38)


def test_dra_pools_offer_their_claim_templates_not_slices():
    assert pool_slices([pool("dra-h200", {"strategy": "dra"})]) == []


def node(name, product, count, extra=None):
    labels = {"kubegpu.io/test": "yes", "nvidia.com/gpu.product": product, "nvidia.com/gpu.count": count}
    labels.update(extra or {})
    return {"metadata": {"name": name, "labels": labels}}


def test_hardware_from_nodes_groups_by_model_and_count():
    nodes = [node("a", "NVIDIA-H100-80GB-HBM3", "8"), node("b", "NVIDIA-H100-80GB-HBM3", "8"),
             node("c", "NVIDIA-L40S", "4"), {"metadata": {"name": "cpu", "labels": {"kubegpu.io/test": "yes"}}}]
    items = pool_slices([pool("mixed", {"strategy": "none"})], nodes=nodes)
    assert [(item.gpu, item.units_per_node, item.nodes) for item in items] == [("H100-80GB", 8, 2), ("L40S", 4, 1)]


def test_hardware_from_the_selector():
    selector = {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-L40S", "nvidia.com/gpu.count": "4"}}
    items = pool_slices([pool("embed", {"strategy": "time-slicing", "time_slicing": {"replicas": 2}}, selector)])
    assert [(item.gpu, item.units_per_node) for item in items] == [("L40S", 8)]
    selector = {"matchExpressions": [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-L4", "NVIDIA-A10G"]},
        {"key": "nvidia.com/gpu.count", "operator": "In", "values": ["1"]}]}
    items = pool_slices([pool("small", {"strategy": "none"}, selector)])
    assert [(item.gpu, item.memory_bytes) for item in items] == [("L4", 23034 * MIB), ("A10G", 23028 * MIB)]


@pytest.mark.parametrize("pools, hardware, error, message", [
    ([pool("p", {"strategy": "none"})], None, SizingError,
     "pool 'p': its GPU model and GPUs per node are unknown: no nodes of it were given, and its selector names no "
     "nvidia.com/gpu.product; give hardware {p: {gpu: <model, e.g. H100-80GB>, gpus_per_node: <N>}}"),
    ([pool("p", {"strategy": "none"}, {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-L4"}})], None, SizingError,
     "its selector names no nvidia.com/gpu.count"),
    ([pool("p", {"strategy": "none"})], {"q": {"gpu": "L4", "gpus_per_node": 1}}, SizingError,
     "hardware names pool 'q', which is not among the pools (p)"),
    ([pool("p", {"strategy": "none"})], {"p": {"gpu": "RTX-9000", "gpus_per_node": 1}}, SizingError,
     "hardware['p'].gpu is 'RTX-9000'; expected a GPU model key (A30-24GB, "),
    ([pool("p", {"strategy": "none"})], {"p": {"gpu": "L4", "gpus_per_node": 0}}, SizingError,
     "hardware['p'].gpus_per_node is 0"),
    ([pool("p", {"strategy": "none"})], {"p": {"gpu": "L4"}}, SizingError,
     "hardware['p'] is {'gpu': 'L4'}; expected {gpu: <model key or gpu.product>, gpus_per_node: N}"),
    ([pool("p", {"strategy": "mig", "mig": {"layout": {"3g.40gb": 3}}})],
     {"p": {"gpu": "H100-80GB", "gpus_per_node": 1}},
     SizingError, "pool 'p': H100-80GB: layout {3g.40gb: 3} needs 12 memory slices"),
    ([pool("p", {"strategy": "none"})], {"p": {"gpu": "A40", "gpus_per_node": 1}}, SizingError,
     "pool 'p': the memory of A40 is not in the collection's GPU table"),
    ([{"name": "p", "sharing": {"strategy": "none"}}], None, PoolError, "pool 'p': selects nothing"),
])
def test_pool_slice_refusals(pools, hardware, error, message):
    with pytest.raises(error) as err:
        pool_slices(pools, hardware=hardware)
    assert message in str(err.value)


def test_claim_template_slices():
    templates = [
        {"name": "gpu-40g", "namespaces": ["llm"], "min_memory": "40Gi"},
        {"name": "h100x2", "namespaces": ["llm"], "products": ["H100-80GB", "H200-141GB"], "count": 2,
         "same_pcie_root": True},
        {"name": "mig-3g", "namespaces": ["llm"], "device": "mig", "mig_profile": "3g.40gb"},
        {"name": "mps-10g", "namespaces": ["llm"], "products": ["L40S"],
         "sharing": {"strategy": "mps", "mps": {"default_pinned_device_memory_limit": "10Gi"}}, "claim": "shared"},
        {"name": "any", "namespaces": ["llm"]},
    ]
    items = claim_template_slices(templates)
    assert [(item.claim_template, item.resource_name, item.memory_bytes, item.min_units_per_pod,
             item.max_units_per_pod, item.kind) for item in items] == [
        ("gpu-40g", "kubegpu-gpu-40g", 40 * 2 ** 30, 1, 1, "dra"),
        ("h100x2", "kubegpu-h100x2", H100, 2, 2, "dra"),
        # The smallest 3g.40gb the catalog knows: A100-80GB's, 40 GB read as 10^9 bytes.
        ("mig-3g", "kubegpu-mig-3g", 40 * 10 ** 9 // MIB * MIB, 1, 1, "dra"),
        ("mps-10g", "kubegpu-mps-10g", 10 * 2 ** 30, 1, 1, "dra"),
        ("any", "kubegpu-any", None, 1, 1, "dra"),
    ]
    assert items[0].label() == "claim template 'gpu-40g' (40.0 GiB)"
    assert items[4].label() == "claim template 'any' (memory unknown)"


def test_claim_template_refusal_is_a_sizing_error():
    with pytest.raises(SizingError) as err:
        claim_template_slices([{"name": "x"}])
    assert "claim template 'x': namespaces is None" in str(err.value)


def test_parse_slices():
    items = parse_slices([{"pool": "p", "resource_name": "nvidia.com/gpu", "memory": "80Gi", "max_units_per_pod": 8},
                          {"resource_name": "example.com/gpu", "memory_bytes": 1000, "kind": "mps",
                           "device_memory": "4000"}])
    assert items[0] == Slice(pool="p", kind="gpu", resource_name="nvidia.com/gpu", memory_bytes=80 * 2 ** 30,
                             units_per_node=None, max_units_per_pod=8)
    assert (items[1].memory_bytes, items[1].device_memory, items[1].kind) == (1000, 4000, "mps")
    assert parse_slices(None) == []


@pytest.mark.parametrize("raw, message", [
    ("x", "slices is 'x'; expected a list"),
    ([{"resource_name": "r"}], "slices[0]: memory is None; expected bytes or a quantity such as 40Gi"),
    ([{"memory": "1Gi"}], "slices[0]: resource_name is None"),
    ([{"resource_name": "r", "memory": "1Gi", "kind": "vgpu"}], "slices[0]: kind is 'vgpu'; expected one of gpu, mig"),
    ([{"resource_name": "r", "memory": "1Gi", "colour": "red"}], "slices[0]: unknown keys colour"),
    ([{"resource_name": "r", "memory": "1Gi", "max_units_per_pod": 0}], "slices[0]: max_units_per_pod is 0"),
    ([{"resource_name": "r", "memory": "1Gi", "min_units_per_pod": 2}], "min_units_per_pod 2 is above"),
])
def test_parse_slices_refusals(raw, message):
    with pytest.raises(SizingError) as err:
        parse_slices(raw)
    assert message in str(err.value)


@pytest.mark.parametrize("key, profile, mib", [
    ("H100-80GB", "3g.40gb", 40320),
    ("H100-80GB", "1g.10gb+me", 9984),
    ("A100-40GB", "1g.5gb", 4864),
    ("H200-141GB", "3g.71gb", 71 * 10 ** 9 // MIB),
    ("RTX-PRO-6000-96GB", "1g.24gb-me", 24 * 10 ** 9 // MIB),
])
def test_profile_memory(key, profile, mib):
    assert profile_memory_mib(model_for_key(key), profile) == mib


def test_profile_memory_refuses_unknown_profiles():
    with pytest.raises(LayoutError):
        profile_memory_mib(model_for_key("H100-80GB"), "3g.20gb")


@pytest.mark.parametrize("labels, annotations, gpus", [
    ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}, {}, 8),
    # MIG strategy single: gpu.count counts MIG devices; all-3g.40gb puts two on each GPU.
    ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", "nvidia.com/gpu.count": "16",
      "nvidia.com/mig.config": "all-3g.40gb"}, {}, 8),
    ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-INVALID", "nvidia.com/gpu.count": "0"},
     {"kubegpu.io/gpu-count": "4"}, 4),
    ({"nvidia.com/gpu.count": "8"}, {}, None),
])
def test_physical_gpus_of_a_node(labels, annotations, gpus):
    the_node = {"metadata": {"name": "n", "labels": labels, "annotations": annotations}}
    assert physical_gpus(the_node) == gpus
