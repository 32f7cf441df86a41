# -*- coding: utf-8 -*-
"""The plan as gpu_node_pools returns it: per node only what a reader needs, a batch's call only its own nodes."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import plan_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.result import (
    SHOWN_NODE_FIELDS,
    shown,
)

from pool_builders import node, raw_pool  # noqa: E402  pylint: disable=wrong-import-order

MIXED = {"strategy": "mig", "mig": {"layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}}


def plan_of(count):
    return plan_pools([raw_pool(sharing=MIXED)], [node("h%d" % i, labels={"pool": "p"}) for i in range(count)])


def test_a_node_shows_its_labels_and_resources_not_the_roll_outs_bookkeeping():
    plan = plan_of(1)
    out = shown(plan, {"limit_nodes": None})
    (entry,) = out["pools"]
    assert sorted(entry["node_changes"]["h0"]) == sorted(SHOWN_NODE_FIELDS)
    assert entry["node_changes"]["h0"]["labels"] == plan["pools"][0]["node_changes"]["h0"]["labels"]
    assert "mig_step" in plan["pools"][0]["node_changes"]["h0"]      # the plan itself is left whole


def test_a_batch_call_shows_only_its_own_and_its_carried_nodes():
    plan = plan_of(3)
    out = shown(plan, {"limit_nodes": ["h2"], "carry_nodes": ["h1"]})
    assert sorted(out["pools"][0]["node_changes"]) == ["h1", "h2"]
    assert sorted(shown(plan, {})["pools"][0]["node_changes"]) == ["h0", "h1", "h2"]


def test_no_plan_shows_none():
    assert shown(None, {}) is None
