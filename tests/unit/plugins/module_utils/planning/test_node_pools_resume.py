# -*- coding: utf-8 -*-
"""Nodes a stopped run left midway: recognised, driven on, or refused with what to do."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning import names
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import plan_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.rollout import began

from pool_builders import H100, MIXED, MIXED_ALLOCATABLE, node, raw_pool  # noqa: E402  pylint: disable=wrong-import-order

POOL = names.POOL_LABEL
MIG = names.MIG_CONFIG_LABEL
DP = names.DEVICE_PLUGIN_CONFIG_LABEL
STATE = names.MIG_STATE_LABEL
COUNT = names.GPU_COUNT_ANNOTATION
DRAINED = names.DRAINED_ANNOTATION


def first(**kwargs):
    """The plan (layout MIXED) for one fresh H100 node, and that node."""
    the_node = node("h1", labels={"pool": "p"}, **kwargs)
    return plan_pools([raw_pool(sharing=MIXED)], [the_node]), the_node


def test_first_change_records_the_physical_gpu_count_and_splits_the_steps():
    plan, dummy = first()
    change = plan["pools"][0]["node_changes"]["h1"]
    assert change["annotations"] == {COUNT: "8"}
    assert change["mig_step"] == {MIG: plan["pools"][0]["mig_config"], POOL: "p", STATE: "pending"}
    assert change["device_plugin_step"] == {DP: plan["pools"][0]["device_plugin_config"]}
    assert change["wait_mig"] is True and change["resume"] is None


def stopped_after_mig_step(state, product, count, annotations=None):
    """A node whose MIG label moved to the pool's config and whose device plugin config did not."""
    plan, the_node = first()
    entry = plan["pools"][0]
    labels = dict(the_node["metadata"]["labels"])
    labels.update({MIG: entry["mig_config"], POOL: "p", STATE: state, "nvidia.com/gpu.product": product,
                   "nvidia.com/gpu.count": count})
    the_node["metadata"]["labels"] = labels
    the_node["metadata"]["annotations"] = dict(annotations or {})
    return plan_pools([raw_pool(sharing=MIXED)], [the_node], plan["mig_parted_config"], plan["device_plugin_data"])


def test_mig_invalid_labels_left_by_a_stopped_run_use_the_recorded_gpu_count():
    # mixed geometry read with the old single strategy: GFD says MIG-INVALID, gpu.count 0
    plan = stopped_after_mig_step("success", H100 + "-MIG-INVALID", "0", {COUNT: "8"})
    change = plan["pools"][0]["node_changes"]["h1"]
    assert change["mig_change"] is False and change["mig_step"] == {}
    assert change["device_plugin_step"] == {DP: plan["pools"][0]["device_plugin_config"]}
    assert change["allocatable_after"]["nvidia.com/mig-1g.10gb"] == 16
    assert change["annotations"] == {}


def test_mig_invalid_without_a_record_is_not_refused_only_not_predicted():
    plan = stopped_after_mig_step("success", H100 + "-MIG-INVALID", "0")
    change = plan["pools"][0]["node_changes"]["h1"]
    assert change["allocatable_after"] is None
    assert "cannot tell its physical GPU count" in plan["warnings"][0]


def test_pending_mig_change_is_waited_for_then_the_device_plugin_step_follows():
    plan = stopped_after_mig_step("pending", H100, "8", {COUNT: "8"})
    change = plan["pools"][0]["node_changes"]["h1"]
    assert change["wait_mig"] is True and change["mig_step"] == {}
    assert change["resume"].startswith("MIG change to kubegpu-p-") and "still pending" in change["resume"]


def test_pending_node_with_every_label_in_place_is_still_waited_for():
    plan, the_node = first()
    entry = plan["pools"][0]
    the_node["metadata"]["labels"].update({MIG: entry["mig_config"], POOL: "p", DP: entry["device_plugin_config"],
                                           STATE: "pending"})
    again = plan_pools([raw_pool(sharing=MIXED)], [the_node], plan["mig_parted_config"], plan["device_plugin_data"])
    change = again["pools"][0]["node_changes"]["h1"]
    assert change["labels"] == {} and change["wait_mig"] is True
    assert again["steps"] == [{"pool": "p", "batch": 1, "batches": 1, "nodes": ["h1"]}]


def test_node_left_cordoned_by_our_drain_is_uncordoned():
    plan, the_node = first()
    entry = plan["pools"][0]
    the_node["metadata"]["labels"].update({MIG: entry["mig_config"], POOL: "p", DP: entry["device_plugin_config"],
                                           STATE: "success"})
    the_node["metadata"]["annotations"] = {DRAINED: "true", COUNT: "8"}
    the_node["status"]["allocatable"] = MIXED_ALLOCATABLE
    again = plan_pools([raw_pool(sharing=MIXED)], [the_node], plan["mig_parted_config"], plan["device_plugin_data"])
    change = again["pools"][0]["node_changes"]["h1"]
    assert change["uncordon"] is True and change["labels"] == {} and change["wait_mig"] is False
    assert change["resume"] == "cordoned by an earlier run's drain"


def test_finished_node_is_not_touched_again():
    plan, the_node = first()
    entry = plan["pools"][0]
    the_node["metadata"]["labels"].update({MIG: entry["mig_config"], POOL: "p", DP: entry["device_plugin_config"],
                                           STATE: "success"})
    the_node["metadata"]["annotations"] = {COUNT: "8"}
    the_node["status"]["allocatable"] = MIXED_ALLOCATABLE
    again = plan_pools([raw_pool(sharing=MIXED)], [the_node], plan["mig_parted_config"], plan["device_plugin_data"])
    assert again["pools"][0]["node_changes"] == {} and again["steps"] == []


def test_failed_on_the_config_wanted_again_is_refused_with_what_to_do():
    plan, the_node = first()
    the_node["metadata"]["labels"].update({MIG: plan["pools"][0]["mig_config"], POOL: "p", STATE: "failed"})
    with pytest.raises(PoolError) as err:
        plan_pools([raw_pool(sharing=MIXED)], [the_node], plan["mig_parted_config"], plan["device_plugin_data"])
    message = str(err.value)
    assert "pool 'p': node 'h1': mig-manager failed to apply kubegpu-p-" in message
    assert "restart that pod" in message and "spec.nodeName=h1" in message


def test_failed_on_another_config_is_simply_relabelled():
    plan, the_node = first()
    the_node["metadata"]["labels"].update({MIG: "kubegpu-p-0badc0de", POOL: "p", STATE: "failed"})
    again = plan_pools([raw_pool(sharing=MIXED)], [the_node])
    assert again["pools"][0]["node_changes"]["h1"]["mig_change"] is True


def test_labels_of_the_old_geometry_during_a_pending_change_do_not_mislead():
    # GFD is paused: product and count still say single all-1g.10gb (56 devices) while mig.config is the new
    # mixed config (4 devices per GPU): 56 / 4 would be 14 GPUs. The record says 8.
    plan = stopped_after_mig_step("pending", H100 + "-MIG-1g.10gb", "56", {COUNT: "8"})
    assert plan["pools"][0]["node_changes"]["h1"]["allocatable_after"]["nvidia.com/mig-3g.40gb"] == 8
    unrecorded = stopped_after_mig_step("pending", H100 + "-MIG-1g.10gb", "56")
    assert unrecorded["pools"][0]["node_changes"]["h1"]["allocatable_after"] is None


def test_what_an_earlier_call_began_counts_against_max_unavailable_at_once():
    fresh, dummy = first()
    assert began(fresh["pools"][0]["node_changes"]["h1"], mig_pool=True) is False
    # its MIG step done, its device plugin step due: in flight, whatever mig-manager said
    for state in ("pending", "success"):
        midway = stopped_after_mig_step(state, H100, "8", {COUNT: "8"})
        assert began(midway["pools"][0]["node_changes"]["h1"], mig_pool=True) is True, state
    # a device plugin config change alone, outside a MIG pool, is a fresh start (time-slicing replicas)
    success = stopped_after_mig_step("success", H100, "8", {COUNT: "8"})
    assert began(success["pools"][0]["node_changes"]["h1"], mig_pool=False) is False


def test_a_node_this_roll_out_started_that_failed_is_held_not_refused():
    # failed on the very config the plan wants: refused before a run, held (waited for, judged failed) within it
    plan, the_node = first()
    entry = plan["pools"][0]
    the_node["metadata"]["labels"].update({MIG: entry["mig_config"], POOL: "p", STATE: "failed"})
    the_node["metadata"]["annotations"] = {COUNT: "8"}
    with pytest.raises(PoolError, match="failed to apply"):
        plan_pools([raw_pool(sharing=MIXED)], [the_node], plan["mig_parted_config"], plan["device_plugin_data"])
    again = plan_pools([raw_pool(sharing=MIXED)], [the_node], plan["mig_parted_config"], plan["device_plugin_data"],
                       rolling={"h1"})
    change = again["pools"][0]["node_changes"]["h1"]
    assert change["mig_step"] == {} and change["wait_mig"] is True and change["device_plugin_step"]
