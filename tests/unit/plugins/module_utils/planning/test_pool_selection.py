# -*- coding: utf-8 -*-
"""Which nodes each pool takes: selectors, machinesets, GFD's renamed products, overlaps."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.selection import (
    machineset_of,
    pool_selects,
    resolve_pools,
    selector_matches,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError, parse_pools

from pool_builders import H100, L40S, MACHINE, by_label, node, raw_pool  # noqa: E402  pylint: disable=wrong-import-order


# ---------------------------------------------------------------------------------------------
# Selectors and machinesets
# ---------------------------------------------------------------------------------------------

LABELS = {"tier": "gpu", "zone": "a", "empty": ""}


@pytest.mark.parametrize("selector, expected", [
    ({"matchLabels": {"tier": "gpu"}}, True),
    ({"matchLabels": {"tier": "gpu", "zone": "b"}}, False),
    ({"matchLabels": {"empty": ""}}, True),
    ({"matchLabels": {"missing": ""}}, False),
    ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}, True),
    ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}, False),
    ({"matchExpressions": [{"key": "missing", "operator": "In", "values": ["a"]}]}, False),
    ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]}]}, True),
    ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, False),
    # Kubernetes: NotIn matches objects without the key.
    ({"matchExpressions": [{"key": "missing", "operator": "NotIn", "values": ["a"]}]}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists", "values": []}]}, True),
    ({"matchExpressions": [{"key": "missing", "operator": "Exists", "values": []}]}, False),
    ({"matchExpressions": [{"key": "missing", "operator": "DoesNotExist", "values": []}]}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist", "values": []}]}, False),
    ({"matchLabels": {"tier": "gpu"},
      "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                           {"key": "spot", "operator": "DoesNotExist", "values": []}]}, True),
    ({"matchLabels": {"tier": "gpu"},
      "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}, False),
])
def test_selector_matches(selector, expected):
    assert selector_matches(selector, LABELS) is expected


@pytest.mark.parametrize("annotation, expected", [
    ("openshift-machine-api/demo-gpu-h100-us-east-1a-x7k2p", "demo-gpu-h100-us-east-1a"),
    ("openshift-machine-api/demo-gpu-h100-us-east-1a-00001", "demo-gpu-h100-us-east-1a"),
    ("other-namespace/demo-gpu-h100-us-east-1a-x7k2p", None),
    ("openshift-machine-api/standalone", None),
    ("openshift-machine-api/trailing-", None),
    ("", None),
])
def test_machineset_of(annotation, expected):
    item = node("n")
    item["metadata"]["annotations"][MACHINE] = annotation
    assert machineset_of(item) == expected


def test_machineset_of_node_without_annotations():
    assert machineset_of({"metadata": {"name": "n"}}) is None


def test_machinesets_select_their_machines_only():
    nodes = [node("h1", machine="gpu-x1abc"), node("h2", machine="gpu-h100-x2abc"), node("h3", machine="gpu-h100-x3abc"),
             node("h4")]
    pools = parse_pools([{"name": "short", "machinesets": ["gpu"], "sharing": {"strategy": "none"}},
                         {"name": "long", "machinesets": ["gpu-h100"], "sharing": {"strategy": "none"}}])
    selected = resolve_pools(pools, nodes)
    assert [n["metadata"]["name"] for n in selected["short"]] == ["h1"]
    assert [n["metadata"]["name"] for n in selected["long"]] == ["h2", "h3"]


def test_selector_and_machinesets_must_both_match():
    nodes = [node("a", machine="ms-aaaaa", labels={"zone": "a"}), node("b", machine="ms-bbbbb", labels={"zone": "b"}),
             node("c", machine="other-ccccc", labels={"zone": "a"})]
    pools = parse_pools([{"name": "p", "selector": by_label("zone", "a"), "machinesets": ["ms"],
                          "sharing": {"strategy": "none"}}])
    assert [n["metadata"]["name"] for n in resolve_pools(pools, nodes)["p"]] == ["a"]


# ---------------------------------------------------------------------------------------------
# resolve_pools: overlaps
# ---------------------------------------------------------------------------------------------

def test_resolve_sorts_nodes_and_keeps_empty_pools():
    nodes = [node("b", labels={"t": "x"}), node("a", labels={"t": "x"}), node("c")]
    pools = parse_pools([raw_pool("x", by_label("t", "x")), raw_pool("y", by_label("t", "y"))])
    selected = resolve_pools(pools, nodes)
    assert list(selected) == ["x", "y"]
    assert [n["metadata"]["name"] for n in selected["x"]] == ["a", "b"]
    assert selected["y"] == []


@pytest.mark.parametrize("shared, message", [
    (["n1"], "pools 'wide' and 'narrow' both select node n1; a node belongs to one pool"),
    (["n3", "n1", "n2"], "pools 'wide' and 'narrow' both select nodes n1, n2, n3; a node belongs to one pool"),
    (["n%d" % i for i in range(1, 9)],
     "pools 'wide' and 'narrow' both select nodes n1, n2, n3, n4, n5 and 3 more; a node belongs to one pool"),
])
def test_overlap_names_both_pools_and_up_to_five_nodes(shared, message):
    nodes = [node(name, labels={"t": "gpu", "fast": "yes"}) for name in shared] + [node("only-wide", labels={"t": "gpu"})]
    pools = parse_pools([raw_pool("other", by_label("t", "none")), raw_pool("wide", by_label("t", "gpu")),
                         raw_pool("narrow", by_label("fast", "yes"))])
    with pytest.raises(PoolError) as err:
        resolve_pools(pools, nodes)
    assert message in str(err.value)
    assert "narrow one pool's selector or machinesets" in str(err.value)


@pytest.mark.parametrize("product", [L40S, L40S + "-SHARED"])
def test_selector_on_product_ignores_the_sharing_suffix(product):
    pool = parse_pools([raw_pool("embed", {"matchLabels": {"nvidia.com/gpu.product": L40S}})])[0]
    assert pool_selects(pool, node("l1", product=product))


@pytest.mark.parametrize("product", [H100 + "-MIG-1g.10gb", H100 + "-MIG-1g.10gb-SHARED"])
def test_selector_on_product_ignores_the_mig_suffix(product):
    pool = parse_pools([raw_pool("llm", {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                                                              "values": [H100]}]})])[0]
    assert pool_selects(pool, node("h1", product=product))


# ---------------------------------------------------------------------------------------------
# check_pool_nodes (issue 9): any GPU for time-slicing / MPS, every offending node named
# ---------------------------------------------------------------------------------------------

A40 = "NVIDIA-A40"
H200_NVL = "NVIDIA-H200-NVL"
TS = {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}
MPS = {"strategy": "mps", "mps": {"replicas": 8}}


def mig(layout):
    return {"strategy": "mig", "mig": {"layout": layout}}


def pool_of(sharing):
    return parse_pools([raw_pool("p", sharing=sharing)])[0]


def members(*specs):
    """Nodes labelled pool=p: (name, product[, count[, mig_capable]])."""
    out = []
    for spec in specs:
        name, product = spec[0], spec[1]
        count = spec[2] if len(spec) > 2 else 8
        capable = spec[3] if len(spec) > 3 else None
        out.append(node(name, product=product, count=count, labels={"pool": "p"}, mig_capable=capable))
    return out


@pytest.mark.parametrize("sharing, nodes", [
    # Any NVIDIA GPU shares with time-slicing or MPS, catalogued or not (issue 9's examples).
    (TS, members(("a", A40), ("b", "NVIDIA-A100-PCIE-40GB"), ("c", "Tesla-V100-SXM2-32GB", 8, False))),
    (MPS, members(("a", H200_NVL), ("b", "NVIDIA-H20"), ("c", "NVIDIA-RTX-A6000", 2, False))),
    (TS, members(("a", "NVIDIA-RTX-A6000-SHARED", 2, False))),
    ({"strategy": "none"}, members(("a", "NVIDIA-RTX-A6000", "0", False))),
    # MIG pools of several models that all take the layout.
    (mig("all-balanced"), members(("a", H100), ("b", "NVIDIA-H20"), ("c", H200_NVL), ("d", "NVIDIA-B300-SXM6-AC"))),
    (mig({"3g.40gb": 2}), members(("a", H100), ("b", "NVIDIA-H800"), ("c", "NVIDIA-A800-SXM4-80GB"))),
    # Under MIG single, gpu.count counts MIG devices.
    (TS, members(("a", H100 + "-MIG-1g.10gb", 56))),
])
def test_check_pool_nodes_accepts(sharing, nodes):
    pool = pool_of(sharing)
    assert resolve_pools([pool], nodes)["p"] == sorted(nodes, key=lambda n: n["metadata"]["name"])


@pytest.mark.parametrize("sharing, nodes, message", [
    # Mixed models: every offending node named, grouped by model, each group with its reason.
    (mig({"3g.40gb": 2}), members(("h1", H100), ("l2", L40S), ("l1", L40S), ("a1", A40, 8, False), ("h2", H100)),
     "pool 'p': node 'a1' has NVIDIA-A40, which is not MIG-capable; strategy mig needs MIG-capable GPUs; "
     "nodes 'l1', 'l2' have NVIDIA-L40S, which is not MIG-capable; strategy mig needs MIG-capable GPUs; "
     "the pool mixes 3 GPU models: narrow its selector to one model, or give it a layout every model takes"),
    (mig({"3g.40gb": 2}), members(("h1", H100), ("a1", "NVIDIA-A100-SXM4-40GB"), ("a2", "NVIDIA-A100-PCIE-40GB"),
                                  ("x1", "NVIDIA-X999", 8, True)),
     "pool 'p': nodes 'a1', 'a2' (NVIDIA-A100-SXM4-40GB): layout {3g.40gb: 2}: unknown MIG profile '3g.40gb' for "
     "NVIDIA-A100-SXM4-40GB (valid: 1g.5gb, "),
    (mig({"3g.40gb": 2}), members(("h1", H100), ("x1", "NVIDIA-X999", 8, True), ("x2", "NVIDIA-X999", 8, True)),
     "pool 'p': nodes 'x1', 'x2' (NVIDIA-X999): NVIDIA-X999 is not in the MIG catalog, so no MIG layout can be "
     "checked for it (known MIG models: NVIDIA-A30, "),
    (mig("all-balanced"), members(("x1", "NVIDIA-RTX-A6000", 2, False)),
     "pool 'p': node 'x1': NVIDIA-RTX-A6000 is not MIG-capable (GPU Feature Discovery: "
     "nvidia.com/mig.capable is not true); only all-disabled applies"),
    # One model, one node: the message the planner always gave.
    (mig({"3g.40gb": 3}), members(("h1", H100)),
     "pool 'p': node 'h1': layout {3g.40gb: 3} needs 12 memory slices, NVIDIA-H100-80GB-HBM3 has 8 "
     "(valid: up to 2 x 3g.40gb)"),
    (mig("all-balanced"), members(("l1", L40S)),
     "pool 'p': node 'l1' has NVIDIA-L40S, which is not MIG-capable; strategy mig needs MIG-capable GPUs"),
    # Odd GFD labels: the labels are named as the source, not an option the user never set.
    (TS, members(("a", A40, "0", False), ("b", A40), ("c", A40, "many", False)),
     "pool 'p': node 'a': GPU Feature Discovery labels nvidia.com/gpu.count='0', nvidia.com/gpu.product='NVIDIA-A40': "
     "expected a GPU count of 1 or more; node 'c': GPU Feature Discovery labels nvidia.com/gpu.count='many', "
     "nvidia.com/gpu.product='NVIDIA-A40': expected a GPU count of 1 or more; strategy time-slicing needs each "
     "node's GPU count from GPU Feature Discovery (check GFD on those nodes, or narrow the pool's selector)"),
    (mig("all-balanced"), members(("h", H100, "0")),
     "pool 'p': node 'h': GPU Feature Discovery labels nvidia.com/gpu.count='0'"),
])
def test_check_pool_nodes_refuses(sharing, nodes, message):
    with pytest.raises(PoolError) as err:
        resolve_pools([pool_of(sharing)], nodes)
    assert message in str(err.value)
    assert "gpus_per_node" not in str(err.value)


def test_mig_invalid_node_is_left_to_the_planner():
    # A roll-out stopped between the MIG step and the device-plugin step leaves -MIG-INVALID with
    # gpu.count 0: selection takes the node; the planner resumes it from its recorded GPU count.
    selected = resolve_pools([pool_of(mig("all-balanced"))], members(("h", H100 + "-MIG-INVALID", "0")))
    assert [n["metadata"]["name"] for n in selected["p"]] == ["h"]
