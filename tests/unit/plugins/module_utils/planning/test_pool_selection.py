# -*- coding: utf-8 -*-
"""Which nodes each pool takes: selectors, machinesets, GFD's renamed products, overlaps."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.pool_selection import (
    machineset_of,
    pool_selects,
    resolve_pools,
    selector_matches,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.pool_spec import PoolError, parse_pools

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
