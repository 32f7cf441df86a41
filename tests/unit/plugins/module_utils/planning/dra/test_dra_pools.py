# -*- coding: utf-8 -*-
"""A dra pool never shares a node with a device-plugin pool (none, mig, time-slicing, mps)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.pools import (
    check_dra_overlap,
    check_resolved_pools,
    dra_pool_nodes,
    plan_node_labels,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError, parse_pools


def node(name):
    return {"metadata": {"name": name, "labels": {}}}


@pytest.mark.parametrize("pool_nodes, labelled, expected", [
    ({}, (), {}),
    ({"dra-h200": ("dra", ["h200-0", "h200-1"]), "llm-h100": ("mig", ["h100-0"]),
      "embed": ("time-slicing", [node("l40s-0")])}, (), {"dra-h200": ["h200-0", "h200-1"]}),
    # Two dra pools may share nodes as far as this check goes (pool_selection refuses any overlap).
    ({"a": ("dra", ["n1"]), "b": ("dra", ["n1"])}, (), {"a": ["n1"], "b": ["n1"]}),
    # Device-plugin pools among themselves are not this check's business.
    ({"a": ("mig", ["n1"]), "b": ("mps", ["n1"])}, (), {}),
    # A labelled node inside the dra pool is as it should be.
    ({"dra-h200": ("dra", [node("h200-0")]), "llm": ("mig", ["h100-0"])}, ["h200-0"], {"dra-h200": ["h200-0"]}),
    ({"dra-h200": ("dra", [])}, [node("spare")], {"dra-h200": []}),
])
def test_accepted(pool_nodes, labelled, expected):
    assert check_dra_overlap(pool_nodes, labelled) == expected


@pytest.mark.parametrize("strategy", ["none", "mig", "time-slicing", "mps"])
def test_dra_and_device_plugin_pool_overlap_is_refused(strategy):
    with pytest.raises(PoolError) as caught:
        check_dra_overlap({"dra-h200": ("dra", ["h200-0", "h200-1"]), "other": (strategy, ["h200-1", "x"])})
    message = str(caught.value)
    assert "pool 'dra-h200' (strategy dra) and pool 'other' (strategy %s) both take node h200-1;" % strategy in message
    assert "DRA driver and the device plugin cannot serve the same node" in message


def test_overlap_names_five_nodes_and_counts_the_rest():
    nodes = ["n%d" % i for i in range(8)]
    with pytest.raises(PoolError, match=r"nodes n0, n1, n2, n3, n4 and 3 more;"):
        check_dra_overlap({"a": ("dra", nodes), "b": ("mig", nodes)})


def test_labelled_node_in_a_device_plugin_pool_is_refused():
    with pytest.raises(PoolError) as caught:
        check_dra_overlap({"llm": ("mig", ["h100-0", "h100-1"])}, ["h100-1"])
    message = str(caught.value)
    assert "pool 'llm' (strategy mig) takes node h100-1, which carries nvidia.com/dra-kubelet-plugin=true" in message


def test_bad_shape():
    with pytest.raises(PoolError, match="expected {pool: \\(strategy, nodes\\)}"):
        check_dra_overlap([("a", "dra", [])])


def test_check_resolved_pools_takes_parse_pools_and_resolve_pools_output():
    pools = parse_pools([
        {"name": "dra-h200", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H200"}},
         "sharing": {"strategy": "dra"}},
        {"name": "llm", "selector": {"matchLabels": {"pool": "llm"}},
         "sharing": {"strategy": "mig", "mig": {"layout": "all-balanced"}}},
    ])
    selected = {"dra-h200": [node("h200-0")], "llm": [node("h100-0")]}
    assert check_resolved_pools(pools, selected) == {"dra-h200": ["h200-0"]}
    with pytest.raises(PoolError, match="pool 'dra-h200' \\(strategy dra\\) and pool 'llm'"):
        check_resolved_pools(pools, {"dra-h200": [node("h200-0")], "llm": [node("h200-0")]})


PLUGIN = "nvidia.com/dra-kubelet-plugin"
DEPLOY = "nvidia.com/gpu.deploy.device-plugin"
H200 = {"name": "dra-h200", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H200"}},
        "sharing": {"strategy": "dra"}}


def gpu_node(name, product, **labels):
    return {"metadata": {"name": name, "labels": dict({"nvidia.com/gpu.product": product}, **labels)}}


def test_dra_pool_nodes_resolves_dra_pools_only():
    nodes = [gpu_node("h200-1", "NVIDIA-H200"), gpu_node("h200-0", "NVIDIA-H200"), gpu_node("h100-0", "NVIDIA-H100")]
    mig = {"name": "llm", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H100"}},
           "sharing": {"strategy": "mig", "mig": {"layout": "all-1g.10gb"}}}
    assert dra_pool_nodes([H200, mig], nodes) == {"dra-h200": ["h200-0", "h200-1"]}
    assert dra_pool_nodes(None, nodes) == {}


def test_dra_pool_nodes_refuses_a_device_plugin_pool_on_dra_nodes():
    nodes = [gpu_node("h200-0", "NVIDIA-H200")]
    ts = {"name": "shared", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H200"}},
          "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 2}}}
    with pytest.raises(PoolError, match="pool 'dra-h200' .strategy dra. and pool 'shared' .strategy time-slicing."):
        dra_pool_nodes([H200, ts], nodes)
    # The label left from an earlier dra pool counts too.
    with pytest.raises(PoolError, match="carries nvidia.com/dra-kubelet-plugin=true"):
        dra_pool_nodes([ts], [gpu_node("h200-0", "NVIDIA-H200", **{PLUGIN: "true"})])


def test_plan_node_labels():
    nodes = [
        gpu_node("new", "NVIDIA-H200", **{DEPLOY: "true"}),
        gpu_node("done", "NVIDIA-H200", **{PLUGIN: "true", DEPLOY: "false"}),
        gpu_node("left", "NVIDIA-H200", **{PLUGIN: "true", DEPLOY: "false"}),
        gpu_node("left-by-hand", "NVIDIA-H200", **{PLUGIN: "true", DEPLOY: "true"}),
        gpu_node("other", "NVIDIA-H100", **{DEPLOY: "false"}),
    ]
    assert plan_node_labels({"dra-h200": ["new", "done"]}, nodes) == {
        "new": {PLUGIN: "true", DEPLOY: "false"},
        "left": {PLUGIN: None, DEPLOY: None},
        "left-by-hand": {PLUGIN: None},
    }
    assert plan_node_labels({}, [gpu_node("other", "NVIDIA-H100", **{DEPLOY: "false"})]) == {}
