# -*- coding: utf-8 -*-
"""Node pools: label plans, batches, ConfigMap contents, idempotence, GPU pods in the way."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import hashlib
import re

import pytest
import yaml

from ansible_collections.kubegpu.platform.plugins.module_utils.planning import names
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools import plan as node_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import (
    check_gpu_pods,
    plan_pools,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError, parse_pools

POOL = names.POOL_LABEL
MIG = "nvidia.com/mig.config"
DP = "nvidia.com/device-plugin.config"
STATE = "nvidia.com/mig.config.state"

from pool_builders import A100, H100, L40S, by_label, node, raw_pool  # noqa: E402  pylint: disable=wrong-import-order


def member(name, pool_name="p", **kwargs):
    """A node the pool raw_pool(pool_name) selects."""
    labels = dict(kwargs.pop("labels", {}), pool=pool_name)
    return node(name, labels=labels, **kwargs)


def labelled(nodes, plan):
    """Return copies of nodes with the plan's label changes applied, as the access layer would, and the
    allocatable the plan predicts, as the device plugin would."""
    result = copy.deepcopy(nodes)
    changes = {}
    for entry in plan["pools"] + [plan["released"]]:
        changes.update(entry["node_changes"])
    for item in result:
        after = changes.get(item["metadata"]["name"], {}).get("allocatable_after")
        if after:
            item["status"]["allocatable"] = dict((name, str(value)) for name, value in after.items())
        for key, value in changes.get(item["metadata"]["name"], {}).get("labels", {}).items():
            if value is None:
                item["metadata"]["labels"].pop(key, None)
            else:
                item["metadata"]["labels"][key] = value
    return result


TS = {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}


# ---------------------------------------------------------------------------------------------
# Overlaps stop the plan
# ---------------------------------------------------------------------------------------------

def test_overlap_stops_the_plan():
    with pytest.raises(PoolError, match="pools 'a' and 'b' both select node n1"):
        plan_pools([raw_pool("a", by_label("t", "x")), raw_pool("b", by_label("t", "x"))], [node("n1", labels={"t": "x"})])


# ---------------------------------------------------------------------------------------------
# Label plans per strategy
# ---------------------------------------------------------------------------------------------

MIG_BALANCED = {"strategy": "mig", "mig": {"layout": "all-balanced"}}


class HashedName(str):
    """Equal to kubegpu-<pool>-<8 hex digits>: MIG and device plugin configs are named after their content."""

    def __eq__(self, other):
        return re.match(r"^%s-[0-9a-f]{8}$" % re.escape(str.__str__(self)), str(other)) is not None

    def __hash__(self):
        return str.__hash__(self)


HASHED_P = HashedName("kubegpu-p")


def content_name(pool_name, text):
    """kubegpu-<pool>-<first 8 hex digits of sha256 of text>, computed here from text the test writes out."""
    return "kubegpu-%s-%s" % (pool_name, hashlib.sha256(text.encode("utf-8")).hexdigest()[:8])


# The device plugin configs the plan renders for TS (replicas 4) and for all-balanced MIG, as written out.
TS_TEXT = ("version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n    renameByDefault: false\n"
           "    failRequestsGreaterThanOne: false\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n")
MIXED_TEXT = "version: v1\nflags:\n  migStrategy: mixed\n"
TS_P = content_name("p", TS_TEXT)


@pytest.mark.parametrize("sharing, the_node, labels, before", [
    (MIG_BALANCED, member("n"),
     {POOL: "p", DP: HASHED_P, MIG: HASHED_P}, {POOL: None, DP: None, MIG: "all-disabled"}),
    (TS, member("n"), {POOL: "p", DP: HASHED_P}, {POOL: None, DP: None}),
    (TS, member("n", product=L40S, count=4), {POOL: "p", DP: HASHED_P}, {POOL: None, DP: None}),
    # A node leaving a MIG pool gets its whole GPUs back.
    (TS, member("n", labels={POOL: "old", MIG: "kubegpu-old", DP: "kubegpu-old"}),
     {POOL: "p", DP: HASHED_P, MIG: "all-disabled"}, {POOL: "old", DP: "kubegpu-old", MIG: "kubegpu-old"}),
    ({"strategy": "mps", "mps": {"replicas": 4}}, member("n", labels={MIG: "all-1g.10gb"}),
     {POOL: "p", DP: HASHED_P, MIG: "all-disabled"}, {POOL: None, DP: None, MIG: "all-1g.10gb"}),
    # MIG-capable node on which mig-manager has not labelled anything yet.
    ({"strategy": "none"}, member("n", labels={MIG: None}),
     {POOL: "p", DP: HASHED_P, MIG: "all-disabled"}, {POOL: None, DP: None, MIG: None}),
    ({"strategy": "none"}, member("n", product=L40S), {POOL: "p", DP: HASHED_P}, {POOL: None, DP: None}),
    ({"strategy": "dra"}, member("n"), {POOL: "p"}, {POOL: None}),
    # A foreign device plugin config on a dra node is not ours to remove.
    ({"strategy": "dra"}, member("n", labels={DP: "site-default"}), {POOL: "p"}, {POOL: None}),
    ({"strategy": "dra"}, member("n", labels={POOL: "old", MIG: "kubegpu-old", DP: "kubegpu-old"}),
     {POOL: "p", DP: None, MIG: "all-disabled"}, {POOL: "old", DP: "kubegpu-old", MIG: "kubegpu-old"}),
])
def test_labels_per_strategy(sharing, the_node, labels, before):
    if the_node["metadata"]["labels"].get(MIG, "") is None:
        del the_node["metadata"]["labels"][MIG]
    plan = plan_pools([raw_pool(sharing=sharing)], [the_node])
    change = plan["pools"][0]["node_changes"]["n"]
    assert change["labels"] == labels
    assert change["before"] == before
    assert change["mig_change"] is (MIG in labels)


def test_node_already_at_its_labels_is_left_alone():
    done = member("n", labels={POOL: "p", DP: TS_P}, allocatable={"nvidia.com/gpu": "32"})
    plan = plan_pools([raw_pool(sharing=TS)], [done])
    assert plan["pools"][0]["node_changes"] == {}
    assert plan["pools"][0]["batches"] == []


def test_node_at_its_labels_whose_device_plugin_lags_is_waited_for_without_a_write():
    # a run stopped after its device plugin step: labels in place, allocatable not yet
    lagging = member("n", labels={POOL: "p", DP: TS_P}, allocatable={"nvidia.com/gpu": "8"})
    change = plan_pools([raw_pool(sharing=TS)], [lagging])["pools"][0]["node_changes"]["n"]
    assert change["labels"] == {} and change["mig_step"] == {} and change["device_plugin_step"] == {}
    assert change["resume"] == "allocatable nvidia.com/gpu 8 of 32"


@pytest.mark.parametrize("sharing, mig_config, device_plugin_config, mig_strategy, labels", [
    (MIG_BALANCED, HASHED_P, HASHED_P, "mixed", {POOL: "p", DP: HASHED_P, MIG: HASHED_P}),
    ({"strategy": "mig", "mig": {"layout": "all-3g.40gb"}}, HASHED_P, HASHED_P, "single",
     {POOL: "p", DP: HASHED_P, MIG: HASHED_P}),
    ({"strategy": "mig", "mig": {"layout": "all-3g.40gb", "strategy": "mixed"}}, HASHED_P, HASHED_P, "mixed",
     {POOL: "p", DP: HASHED_P, MIG: HASHED_P}),
    (TS, None, HASHED_P, None, {POOL: "p", DP: HASHED_P}),
    ({"strategy": "none"}, None, HASHED_P, None, {POOL: "p", DP: HASHED_P}),
    ({"strategy": "dra"}, None, None, None, {POOL: "p"}),
])
def test_pool_entry_names_its_configs(sharing, mig_config, device_plugin_config, mig_strategy, labels):
    entry = plan_pools([raw_pool(sharing=sharing)], [member("n2"), member("n1")])["pools"][0]
    assert (entry["name"], entry["strategy"], entry["nodes"]) == ("p", sharing["strategy"], ["n1", "n2"])
    assert (mig_config, device_plugin_config, mig_strategy) == (
        entry["mig_config"], entry["device_plugin_config"], entry["mig_strategy"])
    assert labels == entry["labels"]
    # New nodes are labelled with the names the plan renders under.
    assert (entry["labels"].get(MIG), entry["labels"].get(DP)) == (entry["mig_config"], entry["device_plugin_config"])


# ---------------------------------------------------------------------------------------------
# Allocatable before and after
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sharing, the_node, before, after", [
    # Reference: mixed all-balanced on 8 x H100 -> gpu 0, 1g.10gb 16, 2g.20gb 8, 3g.40gb 8.
    (MIG_BALANCED, member("n"), {"nvidia.com/gpu": 8},
     {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-3g.40gb": 8}),
    # Reference: single all-3g.40gb on 8 x H100 -> nvidia.com/gpu 16.
    ({"strategy": "mig", "mig": {"layout": "all-3g.40gb"}}, member("n"), {"nvidia.com/gpu": 8}, {"nvidia.com/gpu": 16}),
    ({"strategy": "mig", "mig": {"layout": {"3g.40gb": 1, "1g.10gb": 4}}}, member("n", count=2), {"nvidia.com/gpu": 2},
     {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 8, "nvidia.com/mig-3g.40gb": 2}),
    ({"strategy": "mig", "mig": {"layout": [{"devices": [0, 1], "profiles": {"7g.80gb": 1}},
                                            {"devices": [2, 3], "mig_enabled": False}]}},
     member("n", count=4), {"nvidia.com/gpu": 4}, {"nvidia.com/gpu": 2, "nvidia.com/mig-7g.80gb": 2}),
    # MIG devices time-sliced: every MIG resource times replicas.
    (dict(MIG_BALANCED, time_slicing={"replicas": 2}), member("n"), {"nvidia.com/gpu": 8},
     {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 32, "nvidia.com/mig-2g.20gb": 16, "nvidia.com/mig-3g.40gb": 16}),
    ({"strategy": "mig", "mig": {"layout": "all-1g.10gb"}, "time_slicing": {"replicas": 3, "rename_by_default": True}},
     member("n", count=1), {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 21}),
    # Reference: 4 x T4 with replicas 4 -> 16; renameByDefault -> gpu 0 and gpu.shared 16.
    ({"strategy": "time-slicing", "time_slicing": {"replicas": 4}}, member("n", product="Tesla-T4", count=4),
     {"nvidia.com/gpu": 4}, {"nvidia.com/gpu": 16}),
    ({"strategy": "time-slicing", "time_slicing": {"replicas": 4, "rename_by_default": True}},
     member("n", product="Tesla-T4", count=4), {"nvidia.com/gpu": 4}, {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 16}),
    ({"strategy": "mps", "mps": {"replicas": 20}}, member("n", product="NVIDIA-H100-NVL", count=2),
     {"nvidia.com/gpu": 2}, {"nvidia.com/gpu": 40}),
    # Leaving MIG mixed: gpu.count is physical; MIG resources stay advertised at 0.
    ({"strategy": "none"},
     member("n", labels={MIG: "all-1g.10gb"},
            allocatable={"cpu": "96", "nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"}),
     {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 56}, {"nvidia.com/gpu": 8, "nvidia.com/mig-1g.10gb": 0}),
    # Leaving MIG single: gpu.count counts MIG devices (56 = 8 GPUs x 7 of all-1g.10gb).
    ({"strategy": "none"},
     member("n", product=H100 + "-MIG-1g.10gb", count=56, labels={MIG: "all-1g.10gb"},
            allocatable={"nvidia.com/gpu": "56"}),
     {"nvidia.com/gpu": 56}, {"nvidia.com/gpu": 8}),
    ({"strategy": "dra"}, member("n"), {"nvidia.com/gpu": 8}, None),
])
def test_allocatable(sharing, the_node, before, after):
    change = plan_pools([raw_pool(sharing=sharing)], [the_node])["pools"][0]["node_changes"]["n"]
    assert change["allocatable_before"] == before
    assert change["allocatable_after"] == after


def test_physical_gpus_of_a_single_strategy_node_from_our_existing_config():
    existing = ("version: v1\nmig-configs:\n  kubegpu-old:\n  - devices: all\n    mig-enabled: true\n"
                "    mig-devices:\n      3g.40gb: 2\n")
    the_node = member("n", product=H100 + "-MIG-3g.40gb", count=8, labels={MIG: "kubegpu-old", POOL: "old"})
    plan = plan_pools([raw_pool(sharing=TS)], [the_node], existing)
    assert plan["pools"][0]["node_changes"]["n"]["allocatable_after"] == {"nvidia.com/gpu": 16}
    assert plan["warnings"] == []


def test_physical_gpus_of_per_gpu_entries_in_our_existing_config():
    existing = ("version: v1\nmig-configs:\n  kubegpu-old:\n  - devices: [0, 1]\n    mig-enabled: true\n"
                "    mig-devices:\n      1g.10gb: 7\n  - devices: [2]\n    mig-enabled: true\n    mig-devices:\n"
                "      1g.10gb: 2\n")
    the_node = member("n", product=H100 + "-MIG-1g.10gb", count=16, labels={MIG: "kubegpu-old"})
    plan = plan_pools([raw_pool(sharing={"strategy": "none"})], [the_node], existing)
    assert plan["pools"][0]["node_changes"]["n"]["allocatable_after"] == {"nvidia.com/gpu": 3}


def test_unknown_physical_gpus_warn_and_predict_nothing():
    the_node = member("n", product=H100 + "-MIG-1g.10gb", count=56, labels={MIG: "someone-elses"})
    plan = plan_pools([raw_pool(sharing=TS)], [the_node])
    assert plan["pools"][0]["node_changes"]["n"]["allocatable_after"] is None
    assert plan["warnings"] == [
        "pool 'p': node 'n': cannot tell its physical GPU count (nvidia.com/gpu.count='56', "
        "nvidia.com/gpu.product='NVIDIA-H100-80GB-HBM3-MIG-1g.10gb'); what it will advertise is not predicted"]


def test_unknown_physical_gpus_still_check_the_layout():
    the_node = member("n", product=H100 + "-MIG-1g.10gb", count=56, labels={MIG: "someone-elses"})
    sharing = {"strategy": "mig", "mig": {"layout": [{"devices": [0], "profiles": {"7g.80gb": 1}},
                                                     {"devices": [2], "mig_enabled": False}]}}
    with pytest.raises(PoolError, match=r"pool 'p': node 'n': layout has no entry for GPU 1 of the node's 3"):
        plan_pools([raw_pool(sharing=sharing)], [the_node])


# ---------------------------------------------------------------------------------------------
# Errors that need the nodes
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sharing, nodes, message", [
    (MIG_BALANCED, [member("gpu-l40s-1", product=L40S)],
     "pool 'p': node 'gpu-l40s-1' has NVIDIA-L40S, which is not MIG-capable; strategy mig needs MIG-capable GPUs"),
    ({"strategy": "mig", "mig": {"layout": {"3g.40gb": 3}}}, [member("h1")],
     "pool 'p': node 'h1': layout {3g.40gb: 3} needs 12 memory slices, NVIDIA-H100-80GB-HBM3 has 8 "
     "(valid: up to 2 x 3g.40gb)"),
    ({"strategy": "mig", "mig": {"layout": {"1g.5gb": 7}}}, [member("a1", product="NVIDIA-A100-SXM4-40GB")],
     None),
    ({"strategy": "mig", "mig": {"layout": {"1g.5gb": 7}}}, [member("a1", product=A100)],
     "pool 'p': node 'a1': layout {1g.5gb: 7}: unknown MIG profile '1g.5gb' for NVIDIA-A100-SXM4-80GB"),
    ({"strategy": "mig", "mig": {"layout": "all-balanced", "strategy": "single"}}, [member("h1")],
     "pool 'p': sharing.mig.strategy is single, but layout 'all-balanced' gives more than one kind of device per "
     "node on NVIDIA-H100-80GB-HBM3"),
    ({"strategy": "mig", "mig": {"layout": "all-enabled"}}, [member("h1")],
     "pool 'p': node 'h1': GPUs 0, 1, 2, 3, 4, 5, 6, 7: MIG on and no MIG devices"),
    ({"strategy": "mig", "mig": {"layout": [{"devices": [0, 8], "profiles": {"7g.80gb": 1}}]}}, [member("h1")],
     "pool 'p': node 'h1': layout[0].devices lists GPU 8, the node has 8 GPUs"),
    (TS, [member("cpu-1", product=None)],
     "pool 'p': node 'cpu-1' has no nvidia.com/gpu.product label, so its GPU is unknown; strategy time-slicing "
     "needs GPU Feature Discovery's labels"),
    (MIG_BALANCED, [member("cpu-1", product=None)], "pool 'p': node 'cpu-1' has no nvidia.com/gpu.product label"),
    ({"strategy": "mps", "mps": {"replicas": 2}}, [member("cpu-1", product=None)],
     "pool 'p': node 'cpu-1' has no nvidia.com/gpu.product label"),
])
def test_plan_refuses(sharing, nodes, message):
    if message is None:  # the valid neighbour of the next case
        plan_pools([raw_pool(sharing=sharing)], nodes)
        return
    with pytest.raises(PoolError) as err:
        plan_pools([raw_pool(sharing=sharing)], nodes)
    assert message in str(err.value)


def test_none_and_dra_accept_nodes_without_gpu_labels():
    nodes = [member("cpu-1", "a", product=None), member("cpu-2", "b", product=None)]
    plan = plan_pools([raw_pool("a"), raw_pool("b", sharing={"strategy": "dra"})], nodes)
    assert plan["pools"][0]["node_changes"]["cpu-1"]["labels"] == {POOL: "a", DP: HashedName("kubegpu-a")}
    assert plan["pools"][0]["node_changes"]["cpu-1"]["allocatable_after"] is None
    assert plan["pools"][1]["node_changes"]["cpu-2"]["labels"] == {POOL: "b"}
    assert plan["warnings"] == [
        "pool 'a': node 'cpu-1' has no nvidia.com/gpu.product label; it is labelled for the pool, what it will "
        "advertise is not predicted"]


def test_pool_without_nodes_is_a_warning():
    plan = plan_pools([raw_pool("empty", sharing=MIG_BALANCED)], [node("n")])
    entry = plan["pools"][0]
    assert (entry["nodes"], entry["mig_config"], entry["device_plugin_config"], entry["node_changes"]) == (
        [], None, None, {})
    # A node born into the pool waits for the next run to get configs that exist.
    assert entry["labels"] == {POOL: "empty"}
    message = ("pool 'empty' selects no node; no MIG or device plugin config is rendered for it (check its selector "
               "and machinesets)")
    assert entry["warnings"] == [message]
    assert plan["warnings"] == [message]
    assert plan["device_plugin_data"] == {}
    assert plan["mig_parted_config"] == "version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\n"


def test_empty_pools_refuses_a_pool_that_selects_nothing_unless_it_waits_for_machinesets():
    pools = parse_pools([raw_pool("typo", selector={"matchLabels": {"pool": "typ0"},
                                                    "matchExpressions": [{"key": "zone", "operator": "In",
                                                                          "values": ["a"]}]}),
                         raw_pool("scaled", machinesets=["gpu-h100-1a"]), raw_pool("n")])
    plan = plan_pools(pools, [member("n", "n"), member("m", "n")])
    assert node_pools.empty_pools(pools, plan, 2) == [
        "pool 'typo': selects no node: its selector {pool=typ0, zone In ['a']} matches none of the cluster's 2 nodes; "
        "correct the selector (node labels: kubectl get nodes --show-labels), or remove the pool"]


# ---------------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("max_unavailable, count, done, batch_size, batches", [
    (None, 3, [], 1, [["n0"], ["n1"], ["n2"]]),
    (2, 5, [], 2, [["n0", "n1"], ["n2", "n3"], ["n4"]]),
    (10, 3, [], 10, [["n0", "n1", "n2"]]),
    # 25% of 10 nodes is 2.5, rounded up to 3.
    ("25%", 10, [], 3, [["n0", "n1", "n2"], ["n3", "n4", "n5"], ["n6", "n7", "n8"], ["n9"]]),
    # 10% of 3 nodes rounds up to 1.
    ("10%", 3, [], 1, [["n0"], ["n1"], ["n2"]]),
    ("100%", 4, [], 4, [["n0", "n1", "n2", "n3"]]),
    # The percentage counts every node of the pool; only nodes that change are batched.
    ("50%", 4, ["n0", "n2"], 2, [["n1", "n3"]]),
    (2, 4, ["n0", "n1", "n2", "n3"], 2, []),
])
def test_batches(max_unavailable, count, done, batch_size, batches):
    nodes = [member("n%d" % index, labels={POOL: "p", DP: TS_P}, allocatable={"nvidia.com/gpu": "32"})
             if "n%d" % index in done else member("n%d" % index) for index in range(count)]
    extra = {} if max_unavailable is None else {"max_unavailable": max_unavailable}
    entry = plan_pools([raw_pool(sharing=TS, **extra)], list(reversed(nodes)))["pools"][0]
    assert entry["batch_size"] == batch_size
    assert entry["batches"] == batches
    assert sorted(entry["node_changes"]) == [name for batch in batches for name in batch]


# ---------------------------------------------------------------------------------------------
# ConfigMap contents
# ---------------------------------------------------------------------------------------------

FOREIGN_MIG = """\
version: v1
mig-configs:
  custom-half:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
    - devices: [2, 3]
      mig-enabled: false
  kubegpu-gone:
    - devices: all
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
"""


def test_mig_parted_config_keeps_foreign_configs_and_replaces_ours():
    plan = plan_pools([raw_pool("llm", sharing={"strategy": "mig", "mig": {"layout": {"3g.40gb": 2}}})],
                      [member("h1", "llm")], FOREIGN_MIG)
    name = plan["pools"][0]["mig_config"]
    assert name == HashedName("kubegpu-llm")
    assert plan["mig_parted_config"] == (
        "version: v1\n"
        "mig-configs:\n"
        "  custom-half:\n"
        "  - devices:\n"
        "    - 0\n"
        "    - 1\n"
        "    mig-enabled: true\n"
        "    mig-devices:\n"
        "      1g.10gb: 7\n"
        "  - devices:\n"
        "    - 2\n"
        "    - 3\n"
        "    mig-enabled: false\n"
        "  all-disabled:\n"
        "  - devices: all\n"
        "    mig-enabled: false\n"
        "  " + name + ":\n"
        "  - devices: all\n"
        "    mig-enabled: true\n"
        "    mig-devices:\n"
        "      3g.40gb: 2\n"
    )


def test_foreign_all_disabled_is_kept_as_written():
    existing = "version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\n    note: theirs\n"
    plan = plan_pools([raw_pool(sharing=TS)], [member("n")], existing)
    assert yaml.safe_load(plan["mig_parted_config"])["mig-configs"] == {
        "all-disabled": [{"devices": "all", "mig-enabled": False, "note": "theirs"}]}


def test_pool_over_two_gpu_models_filters_each_entry_by_device():
    nodes = [member("h1"), member("a1", product=A100)]
    plan = plan_pools([raw_pool(sharing=MIG_BALANCED)], nodes)
    assert yaml.safe_load(plan["mig_parted_config"])["mig-configs"][plan["pools"][0]["mig_config"]] == [
        {"device-filter": ["0x20B210DE", "0x20B510DE"], "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
        {"device-filter": ["0x233010DE", "0x233110DE"], "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
    ]


def our_device_plugin_text(plan):
    """Return the text of the single pool's device plugin config, checking the key is the name the pool's entry gives."""
    name = plan["pools"][0]["device_plugin_config"]
    assert name == HASHED_P
    assert sorted(plan["device_plugin_data"]) == [name]
    return plan["device_plugin_data"][name]


def test_time_sliced_mig_over_two_models_lists_every_resource():
    nodes = [member("h1"), member("g1", product="NVIDIA-H200")]
    plan = plan_pools([raw_pool(sharing={"strategy": "mig", "mig": {"layout": "all-3g.40gb"}, "time_slicing": {"replicas": 2}})],
                      [nodes[0]])
    assert yaml.safe_load(our_device_plugin_text(plan))["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 2}]
    plan = plan_pools([raw_pool(sharing={"strategy": "mig", "mig": {"layout": {"2g.20gb": 1}, "strategy": "mixed"},
                                         "time_slicing": {"replicas": 2}})], [nodes[0]])
    assert yaml.safe_load(our_device_plugin_text(plan))["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/mig-2g.20gb", "replicas": 2}]
    plan = plan_pools([raw_pool(sharing=dict(MIG_BALANCED, time_slicing={"replicas": 2}))], nodes)
    assert yaml.safe_load(our_device_plugin_text(plan))["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/mig-1g.10gb", "replicas": 2}, {"name": "nvidia.com/mig-1g.18gb", "replicas": 2},
        {"name": "nvidia.com/mig-2g.20gb", "replicas": 2}, {"name": "nvidia.com/mig-2g.35gb", "replicas": 2},
        {"name": "nvidia.com/mig-3g.40gb", "replicas": 2}, {"name": "nvidia.com/mig-3g.71gb", "replicas": 2}]


def test_time_sliced_mig_with_whole_gpus_shares_them_too():
    layout = [{"devices": [0], "profiles": {"1g.10gb": 7}}, {"devices": [1], "mig_enabled": False}]
    plan = plan_pools([raw_pool(sharing={"strategy": "mig", "mig": {"layout": layout}, "time_slicing": {"replicas": 2}})],
                      [member("h1", count=2)])
    assert our_device_plugin_text(plan) == (
        "version: v1\n"
        "flags:\n"
        "  migStrategy: mixed\n"
        "sharing:\n"
        "  timeSlicing:\n"
        "    renameByDefault: false\n"
        "    failRequestsGreaterThanOne: false\n"
        "    resources:\n"
        "    - name: nvidia.com/gpu\n"
        "      replicas: 2\n"
        "    - name: nvidia.com/mig-1g.10gb\n"
        "      replicas: 2\n"
    )
    assert plan["pools"][0]["node_changes"]["h1"]["allocatable_after"] == {
        "nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 14}


def test_device_plugin_data_keeps_foreign_keys_and_drops_our_old_ones():
    existing = {"site-default": "version: v1\nflags: {migStrategy: none}\n", "kubegpu-gone": "old", "kubegpu-p": "old",
                "kubegpu-p-0badc0de": "old"}
    plan = plan_pools([raw_pool(sharing=TS), raw_pool("q", sharing={"strategy": "dra"})], [member("n"), member("d", "q")],
                      None, existing)
    # No node names an old key: they go now, not only after the roll-out.
    assert plan["device_plugin_data"] == {
        "kubegpu-p-1992ef07": "version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n"
                              "    renameByDefault: false\n    failRequestsGreaterThanOne: false\n    resources:\n"
                              "    - name: nvidia.com/gpu\n      replicas: 4\n",
        "site-default": "version: v1\nflags: {migStrategy: none}\n",
    }
    assert plan["device_plugin_data_final"] == plan["device_plugin_data"]


def test_rename_by_default_never_under_flags():
    sharing = {"strategy": "time-slicing", "time_slicing": {"replicas": 4, "rename_by_default": True}}
    document = yaml.safe_load(our_device_plugin_text(plan_pools([raw_pool(sharing=sharing)], [member("n")])))
    assert document["flags"] == {"migStrategy": "none"}
    assert document["sharing"]["timeSlicing"]["renameByDefault"] is True


@pytest.mark.parametrize("text, message", [
    ("version: v1\nmig-configs: [oops", "the mig-parted ConfigMap's config.yaml is not valid YAML"),
    ("just text", "the mig-parted ConfigMap's config.yaml is not a mig-parted document"),
    ("version: v1\nmig-configs: [a, b]\n", "is not a mig-parted document"),
])
def test_bad_existing_mig_parted_config(text, message):
    with pytest.raises(PoolError) as err:
        plan_pools([raw_pool(sharing=TS)], [member("n")], text)
    assert message in str(err.value)


@pytest.mark.parametrize("text", [None, "", "\n", "version: v1\n"])
def test_no_existing_mig_parted_config(text):
    plan = plan_pools([raw_pool(sharing=TS)], [member("n")], text)
    assert plan["mig_parted_config"] == "version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\n"


# ---------------------------------------------------------------------------------------------
# Idempotence
# ---------------------------------------------------------------------------------------------

DEMO_POOLS = [
    raw_pool("llm", sharing={"strategy": "mig", "mig": {"layout": "all-balanced"}, "time_slicing": {"replicas": 2}},
             max_unavailable="50%"),
    raw_pool("single", sharing={"strategy": "mig", "mig": {"layout": "all-1g.10gb"}}),
    raw_pool("embed", sharing={"strategy": "time-slicing", "time_slicing": {"replicas": 8, "rename_by_default": True}}),
    raw_pool("batch", sharing={"strategy": "mps", "mps": {"replicas": 4}}),
    raw_pool("plain", sharing={"strategy": "none"}),
    raw_pool("dra", sharing={"strategy": "dra"}),
]
DEMO_NODES = [
    member("h1", "llm"), member("h2", "llm"), member("s1", "single"),
    member("l1", "embed", product=L40S, count=4), member("l2", "embed", product=L40S, count=4),
    member("a1", "batch", product=A100), member("t1", "plain", product="Tesla-T4", count=1),
    member("g1", "dra", product="NVIDIA-H200"), node("cpu-1", product=None),
]


def test_second_plan_over_applied_labels_changes_nothing():
    first = plan_pools(DEMO_POOLS, DEMO_NODES, FOREIGN_MIG, {"site-default": "version: v1\n"})
    assert sum(len(entry["node_changes"]) for entry in first["pools"]) == 8
    nodes = labelled(DEMO_NODES, first)
    # What GFD writes once mig-manager applied all-1g.10gb under strategy single: MIG devices counted.
    nodes[2]["metadata"]["labels"].update({"nvidia.com/gpu.product": H100 + "-MIG-1g.10gb", "nvidia.com/gpu.count": "56"})
    second = plan_pools(DEMO_POOLS, nodes, first["mig_parted_config"], first["device_plugin_data"])
    for entry in second["pools"]:
        assert (entry["name"], entry["node_changes"], entry["batches"]) == (entry["name"], {}, [])
    assert second["released"]["node_changes"] == {}
    assert second["mig_parted_config"] == first["mig_parted_config"]
    assert second["device_plugin_data"] == first["device_plugin_data"]
    # No node names an old config of ours: nothing is kept for a roll-out.
    assert second["mig_parted_config_final"] == second["mig_parted_config"]
    assert second["device_plugin_data_final"] == second["device_plugin_data"]
    assert second["warnings"] == []


def test_pool_order_does_not_change_the_texts():
    first = plan_pools(DEMO_POOLS, DEMO_NODES)
    second = plan_pools(list(reversed(DEMO_POOLS)), DEMO_NODES)
    assert second["mig_parted_config"] == first["mig_parted_config"]
    assert second["device_plugin_data"] == first["device_plugin_data"]


# ---------------------------------------------------------------------------------------------
# Changes the running agents do not see by themselves
# ---------------------------------------------------------------------------------------------

def test_layout_digest_is_stable_and_follows_the_content():
    balanced = plan_pools([raw_pool(sharing=MIG_BALANCED)], [member("h1")])["pools"][0]["mig_config"]
    again = plan_pools([raw_pool(sharing=MIG_BALANCED)], [member("h2"), member("h1")])["pools"][0]["mig_config"]
    other = plan_pools([raw_pool(sharing={"strategy": "mig", "mig": {"layout": "all-1g.10gb"}})],
                       [member("h1")])["pools"][0]["mig_config"]
    assert balanced == again and balanced != other
    # the digest is over the mig-parted entries as rendered: sha256 of that YAML, first 8 hex digits
    entries = "- devices: all\n  mig-enabled: true\n  mig-devices:\n    1g.10gb: 2\n    2g.20gb: 1\n    3g.40gb: 1\n"
    assert balanced == "kubegpu-p-" + hashlib.sha256(entries.encode()).hexdigest()[:8]


def test_changed_layout_relabels_nodes_and_keeps_the_old_config_until_they_moved():
    old = "kubegpu-p-0badc0de"
    existing = "version: v1\nmig-configs:\n  %s:\n  - devices: all\n    mig-enabled: true\n    mig-devices:\n      7g.80gb: 1\n" % old
    nodes = [member("h1", labels={POOL: "p", MIG: old, DP: content_name("p", MIXED_TEXT)}), member("h2")]
    plan = plan_pools([raw_pool(sharing=MIG_BALANCED)], nodes, existing)
    entry = plan["pools"][0]
    new = entry["mig_config"]
    assert sorted(entry["node_changes"]) == ["h1", "h2"]
    assert entry["node_changes"]["h1"]["labels"] == {MIG: new} and entry["node_changes"]["h1"]["mig_change"] is True
    assert sorted(yaml.safe_load(plan["mig_parted_config"])["mig-configs"]) == sorted(["all-disabled", old, new])
    assert sorted(yaml.safe_load(plan["mig_parted_config_final"])["mig-configs"]) == sorted(["all-disabled", new])


def test_device_plugin_key_is_stable_and_follows_the_content():
    first = plan_pools([raw_pool(sharing=TS)], [member("n1")])["pools"][0]["device_plugin_config"]
    again = plan_pools([raw_pool(sharing=TS)], [member("n2"), member("n1")])["pools"][0]["device_plugin_config"]
    more = plan_pools([raw_pool(sharing={"strategy": "time-slicing", "time_slicing": {"replicas": 8}})],
                      [member("n1")])["pools"][0]["device_plugin_config"]
    assert first == again and first != more
    # the digest is over the rendered device plugin config: sha256 of that YAML, first 8 hex digits
    assert first == content_name("p", TS_TEXT) == "kubegpu-p-1992ef07"
    assert more == content_name("p", TS_TEXT.replace("replicas: 4", "replicas: 8")) == "kubegpu-p-84d4024e"
    # The pool name is part of the key: two pools with equal configs do not share one.
    other = plan_pools([raw_pool("q", sharing=TS)], [member("m1", "q")])["pools"][0]["device_plugin_config"]
    assert other == content_name("q", TS_TEXT)


def test_changed_device_plugin_config_moves_nodes_to_a_new_key_and_keeps_the_old_one_until_they_moved():
    old = "kubegpu-p-0badc0de"
    old_text = "version: v1\nflags:\n  migStrategy: none\n"
    nodes = [member("n1", labels={POOL: "p", DP: old}), member("n2", labels={POOL: "p", DP: old}),
             member("m1", "q"), member("l1", "legacy", labels={POOL: "legacy", DP: "kubegpu-legacy"})]
    existing = {old: old_text, "kubegpu-q-0badc0de": "stale", "kubegpu-legacy": "legacy", "site-default": "theirs"}
    pools = [raw_pool(sharing=TS), raw_pool("q", sharing=TS), raw_pool("legacy", sharing={"strategy": "dra"})]
    plan = plan_pools(pools, nodes, None, existing)
    entry = plan["pools"][0]
    new = "kubegpu-p-1992ef07"
    assert entry["device_plugin_config"] == new and entry["labels"][DP] == new
    # The changed config is a label change, rolled out batch by batch like any other.
    assert entry["node_changes"]["n1"]["labels"] == {DP: new}
    assert entry["node_changes"]["n1"]["before"] == {DP: old}
    assert entry["node_changes"]["n1"]["labels"] == entry["node_changes"]["n2"]["labels"]
    assert entry["batches"] == [["n1"], ["n2"]]
    # Our old keys that nodes still name stay during the roll-out; the one no node names goes.
    assert plan["device_plugin_data"] == {
        "kubegpu-legacy": "legacy",
        old: old_text,
        new: TS_TEXT,
        "kubegpu-q-1992ef07": TS_TEXT,
        "site-default": "theirs",
    }
    assert plan["device_plugin_data_final"] == {
        new: TS_TEXT,
        "kubegpu-q-1992ef07": TS_TEXT,
        "site-default": "theirs",
    }
    assert plan["warnings"] == []
    # Once the nodes moved, the next plan drops the old keys too.
    second = plan_pools(pools, labelled(nodes, plan), None, plan["device_plugin_data"])
    assert [item["node_changes"] for item in second["pools"]] == [{}, {}, {}]
    assert second["device_plugin_data"] == second["device_plugin_data_final"] == plan["device_plugin_data_final"]


def test_released_nodes_give_back_our_labels():
    nodes = [node("gone-mig", labels={POOL: "old", MIG: "kubegpu-old", DP: "kubegpu-old"}),
             node("gone-ts", product=L40S, labels={POOL: "old2", DP: "kubegpu-old2"}),
             node("never", labels={DP: "site-default"}), member("kept")]
    plan = plan_pools([raw_pool(sharing=TS)], nodes)
    released = plan["released"]
    assert released["nodes"] == ["gone-mig", "gone-ts"]
    assert released["batches"] == [["gone-mig"], ["gone-ts"]]
    assert released["node_changes"] == {
        "gone-mig": {"labels": {POOL: None, DP: None, MIG: "all-disabled"},
                     "before": {POOL: "old", DP: "kubegpu-old", MIG: "kubegpu-old"}, "mig_change": True,
                     "allocatable_before": {"nvidia.com/gpu": 8}, "allocatable_after": None,
                     # the pool label goes with the last step: until then the node is still found as released
                     "mig_step": {MIG: "all-disabled", STATE: "pending"},
                     "device_plugin_step": {POOL: None, DP: None}, "annotations": {}, "wait_mig": True, "uncordon": False,
                     "resume": None},
        "gone-ts": {"labels": {POOL: None, DP: None}, "before": {POOL: "old2", DP: "kubegpu-old2"},
                    "mig_change": False, "allocatable_before": {"nvidia.com/gpu": 8}, "allocatable_after": None,
                    "mig_step": {}, "device_plugin_step": {POOL: None, DP: None}, "annotations": {},
                    "wait_mig": False, "uncordon": False, "resume": None},
    }
    assert plan["steps"] == [{"pool": "p", "batch": 1, "batches": 1, "nodes": ["kept"]},
                             {"pool": "(released)", "batch": 1, "batches": 2, "nodes": ["gone-mig"]},
                             {"pool": "(released)", "batch": 2, "batches": 2, "nodes": ["gone-ts"]}]
    assert plan["warnings"] == [
        "node 'gone-mig' was in pool 'old', which no pool selects any more; its pool labels are removed and MIG is "
        "disabled",
        "node 'gone-ts' was in pool 'old2', which no pool selects any more; its pool labels are removed"]


def test_plan_is_json_serialisable_and_accepts_parsed_pools():
    import json
    pools = parse_pools(DEMO_POOLS)
    assert json.loads(json.dumps(plan_pools(pools, DEMO_NODES))) == plan_pools(DEMO_POOLS, DEMO_NODES)


# ---------------------------------------------------------------------------------------------
# check_gpu_pods
# ---------------------------------------------------------------------------------------------

def pod(name, node_name, phase="Running", requests=None, limits=None, init=None, namespace="ml"):
    container = {"name": "main", "resources": {}}
    if requests:
        container["resources"]["requests"] = requests
    if limits:
        container["resources"]["limits"] = limits
    spec = {"nodeName": node_name, "containers": [container]}
    if init:
        spec["initContainers"] = [{"name": "init", "resources": {"limits": init}}]
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": {"phase": phase}}


def mig_plan():
    pools = [raw_pool(sharing=MIG_BALANCED), raw_pool("q", sharing=TS)]
    current = plan_pools(pools, [member("h3")])["pools"][0]
    nodes = [member("h1"), member("h2"),
             member("h3", labels={POOL: "p", MIG: current["mig_config"], DP: current["device_plugin_config"]}),
             member("t1", "q"), node("gone", labels={POOL: "old", MIG: "kubegpu-old"})]
    return plan_pools(pools, nodes)


@pytest.mark.parametrize("pods, expected", [
    ([], []),
    ([pod("llm-0", "h1", limits={"nvidia.com/gpu": "1"})], [{"node": "h1", "pods": ["ml/llm-0"]}]),
    ([pod("llm-0", "h1", requests={"nvidia.com/mig-1g.10gb": "1"}), pod("a", "h2", limits={"nvidia.com/gpu": "1"}),
      pod("b", "h2", phase="Pending", limits={"nvidia.com/gpu.shared": "1"}, namespace="batch")],
     [{"node": "h1", "pods": ["ml/llm-0"]}, {"node": "h2", "pods": ["batch/b", "ml/a"]}]),
    # Only the init container asks for a GPU; it still holds one while it runs.
    ([pod("warm", "h1", init={"nvidia.com/gpu": "1"})], [{"node": "h1", "pods": ["ml/warm"]}]),
    ([pod("web", "h1", requests={"cpu": "1"})], []),
    ([pod("done", "h1", phase="Succeeded", limits={"nvidia.com/gpu": "1"}),
      pod("crashed", "h2", phase="Failed", limits={"nvidia.com/gpu": "1"})], []),
    # h3 is already at its MIG config; t1 changes labels but not MIG.
    ([pod("x", "h3", limits={"nvidia.com/gpu": "1"}), pod("y", "t1", limits={"nvidia.com/gpu": "1"})], []),
    ([pod("z", "gone", limits={"nvidia.com/mig-7g.80gb": "1"})], [{"node": "gone", "pods": ["ml/z"]}]),
    ([pod("unscheduled", None, phase="Pending", limits={"nvidia.com/gpu": "1"})], []),
])
def test_check_gpu_pods(pods, expected):
    assert check_gpu_pods(mig_plan(), pods) == expected


def test_check_gpu_pods_counts_nodes_whose_layout_changes():
    existing = "version: v1\nmig-configs:\n  kubegpu-p:\n  - devices: all\n    mig-enabled: true\n    mig-devices:\n      7g.80gb: 1\n"
    plan = plan_pools([raw_pool(sharing=MIG_BALANCED)], [member("h3", labels={POOL: "p", MIG: "kubegpu-p", DP: "kubegpu-p"})],
                      existing)
    assert check_gpu_pods(plan, [pod("x", "h3", limits={"nvidia.com/mig-7g.80gb": "1"})]) == [
        {"node": "h3", "pods": ["ml/x"]}]


def test_selector_on_product_still_matches_once_gfd_renames_it():
    """GFD writes NVIDIA-L40S-SHARED under time-slicing: the pool must keep its nodes on the next run."""
    pool = raw_pool("embed", {"matchLabels": {"nvidia.com/gpu.product": L40S}}, sharing=TS)
    shared = node("l1", product=L40S + "-SHARED", labels={POOL: "embed", DP: "kubegpu-embed"})
    plan = plan_pools([pool], [shared])
    assert plan["pools"][0]["nodes"] == ["l1"]
    assert plan["released"]["nodes"] == []


@pytest.mark.parametrize("sharing", [TS, {"strategy": "none"}, {"strategy": "mps", "mps": {"replicas": 2}}])
def test_gpu_the_catalogue_lacks_serves_every_strategy_but_mig(sharing):
    # Only MIG depends on the model; its GFD labels give the rest (issue 9).
    plan = plan_pools([raw_pool(sharing=sharing)], [member("x1", product="NVIDIA-RTX-9000")])
    assert list(plan["pools"][0]["node_changes"]) == ["x1"]
