# -*- coding: utf-8 -*-
"""The roll-out's step decisions (planning/node_pools/steps.py) without a cluster: a fleet of plain Node dicts plays
the cluster, the tests play mig-manager and the device plugin, and the decisions are judged on the steps they send.

The resume cases are those of tests/integration/test_node_pools_rollout.py (KILL_POINTS: after-configmaps,
mig-pending, between-mig-and-device-plugin, cordoned-by-drain, device-plugin-step), test_gpu_node_pools.py (a failed
node, a drain) and a round that runs out (RoundOver) with its next call."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.kubegpu.platform.plugins.module_utils.planning import names
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import RELEASED, plan_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.rollout import node_progress
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.steps import (
    BOTH_STEPS,
    DEVICE_PLUGIN_STEP,
    MIG_STEP,
    PoolRollout,
    first_batch,
    halted_left,
    last_call,
    not_started,
    pool_runs,
    pool_title,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.states import FAILED, READY, WAITING

from pool_builders import H100, L40S, MIXED, MIXED_ALLOCATABLE, node, raw_pool  # noqa: E402  pylint: disable=wrong-import-order

POOL = names.POOL_LABEL
MIG = names.MIG_CONFIG_LABEL
DP = names.DEVICE_PLUGIN_CONFIG_LABEL
STATE = names.MIG_STATE_LABEL
COUNT = names.GPU_COUNT_ANNOTATION
DRAINED = names.DRAINED_ANNOTATION
SLICED = {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}


class Fleet(object):
    """The cluster's Nodes as plain dicts: steps patch them, the tests move their MIG state and allocatable."""

    def __init__(self, nodes):
        self.nodes = dict((n["metadata"]["name"], n) for n in nodes)
        self.sent = []      # (step name, node) in the order sent
        self.version = 0

    def send(self, waves):
        for wave in waves:
            for step in wave:
                self.sent.append((step.name, step.node))
                meta = self.nodes[step.node]["metadata"]
                self._bump(step.node)
                for key, value in step.labels.items():
                    if value is None:
                        meta["labels"].pop(key, None)
                    else:
                        meta["labels"][key] = value
                meta["annotations"].update(step.annotations)

    def _bump(self, name):
        self.version += 1
        self.nodes[name]["metadata"]["resourceVersion"] = str(self.version)

    def mig(self, name, state, allocatable=None):
        """mig-manager's verdict on a node (and, on success, the device plugin's allocatable)."""
        self._bump(name)
        self.nodes[name]["metadata"]["labels"][STATE] = state
        if allocatable is not None:
            self.nodes[name]["status"]["allocatable"] = dict(allocatable)

    def allocate(self, name, allocatable):
        self._bump(name)
        self.nodes[name]["status"]["allocatable"] = dict(allocatable)

    def observed(self):
        return [copy.deepcopy(n) for n in self.nodes.values()]


def poll(pool, fleet):
    """One poll of the wait as the driver runs it: the waiter judges the nodes started so far, then the device
    plugin steps due and the next nodes go out. Returns the items the wait judges."""
    observed = fleet.observed()
    by_name = dict((n["metadata"]["name"], n) for n in observed)
    items = dict((n, node_progress(by_name[n], change) if n in by_name else (FAILED, "node is gone"))
                 for n, change in pool.expectations.items())
    fleet.send([pool.mig_done(observed, items)])
    fleet.send(pool.refill(items))
    return items


def h100s(count, **labels):
    return [node("h%d" % i, labels=dict({"pool": "p"}, **labels)) for i in range(count)]


def entry_for(nodes, sharing=None, max_unavailable=1):
    plan = plan_pools([raw_pool(sharing=sharing or MIXED, max_unavailable=max_unavailable)], nodes)
    return plan, plan["pools"][0]


def rollout(entry, start=None, carried=(), wait=True, check=False, return_when="done", busy=None):
    """PoolRollout as roll_pool builds it."""
    order = [n for batch in entry["batches"] for n in batch]
    waiting = wait and not check
    return PoolRollout(entry, [n for n in (start or order) if n not in carried], list(carried), waiting,
                       one_patch=not wait, until_started=waiting and return_when == "started",
                       drains={} if check else busy)


def steps_of(waves):
    return [(s.name, s.node) for wave in waves for s in wave]


# -- a fresh start -------------------------------------------------------------------------------------------------

def test_fresh_start_sends_the_first_nodes_mig_step_and_holds_its_device_plugin_step():
    nodes = h100s(3)
    dummy, entry = entry_for(nodes)
    pool = rollout(entry)
    waves = pool.begin()
    assert steps_of(waves) == [(MIG_STEP, "h0")]
    (step,) = [s for wave in waves for s in wave]
    change = entry["node_changes"]["h0"]
    assert step.labels == change["mig_step"] and step.labels[STATE] == "pending"
    assert step.annotations == {COUNT: "8"} and step.drain is None
    assert pool.held == {"h0"} and sorted(pool.expectations) == ["h0"] and pool.unstarted == ["h1", "h2"]


def test_a_mig_node_is_held_until_its_mig_state_is_success_then_its_device_plugin_step_goes():
    nodes = h100s(1)
    dummy, entry = entry_for(nodes)
    fleet = Fleet(nodes)
    pool = rollout(entry)
    fleet.send(pool.begin())
    items = poll(pool, fleet)
    assert items["h0"] == (WAITING, "nvidia.com/mig.config.state=pending") and fleet.sent == [(MIG_STEP, "h0")]
    fleet.mig("h0", "success")                      # success before the device plugin re-registers
    items = poll(pool, fleet)
    assert fleet.sent[-1] == (DEVICE_PLUGIN_STEP, "h0") and items["h0"] == (WAITING, "device plugin config set")
    assert fleet.nodes["h0"]["metadata"]["labels"][DP] == entry["device_plugin_config"]
    assert pool.held == set()
    fleet.allocate("h0", MIXED_ALLOCATABLE)
    assert poll(pool, fleet)["h0"] == (READY, "ready")
    assert fleet.sent == [(MIG_STEP, "h0"), (DEVICE_PLUGIN_STEP, "h0")]     # each step once


def test_a_held_node_whose_mig_change_failed_never_gets_its_device_plugin_step():
    nodes = h100s(1)
    dummy, entry = entry_for(nodes)
    fleet = Fleet(nodes)
    pool = rollout(entry)
    fleet.send(pool.begin())
    fleet.mig("h0", "failed")
    items = poll(pool, fleet)
    assert items["h0"][0] == FAILED and "could not apply" in items["h0"][1]
    assert fleet.sent == [(MIG_STEP, "h0")] and pool.window.halted


# -- the window ----------------------------------------------------------------------------------------------------

def test_the_window_fills_as_nodes_finish_not_when_a_batch_is_done():
    nodes = h100s(4)
    dummy, entry = entry_for(nodes, max_unavailable=2)
    fleet = Fleet(nodes)
    pool = rollout(entry)
    fleet.send(pool.begin())
    assert fleet.sent == [(MIG_STEP, "h0"), (MIG_STEP, "h1")]
    fleet.mig("h1", "success", MIXED_ALLOCATABLE)   # h1 fast, h0 slow
    poll(pool, fleet)                                # h1's device plugin step
    fleet.allocate("h1", MIXED_ALLOCATABLE)
    poll(pool, fleet)                                # h1 done: h2 starts in its slot, h0 still pending
    assert fleet.sent[2:] == [(DEVICE_PLUGIN_STEP, "h1"), (MIG_STEP, "h2")]
    assert pool.window.in_flight == ["h0", "h2"] and pool.unstarted == ["h3"]


def test_nodes_without_a_mig_change_take_their_device_plugin_step_at_once():
    nodes = [node("l%d" % i, product=L40S, labels={"pool": "p"}) for i in range(3)]
    dummy, entry = entry_for(nodes, sharing=SLICED, max_unavailable=2)
    fleet = Fleet(nodes)
    pool = rollout(entry)
    fleet.send(pool.begin())
    assert fleet.sent == [(DEVICE_PLUGIN_STEP, "l0"), (DEVICE_PLUGIN_STEP, "l1")]
    fleet.allocate("l0", {"nvidia.com/gpu": "32"})
    items = poll(pool, fleet)
    assert items["l0"] == (READY, "ready") and items["l2"] == (WAITING, "started")
    assert fleet.sent[-1] == (DEVICE_PLUGIN_STEP, "l2")


def test_without_a_wait_each_node_is_one_patch_all_at_once():
    nodes = h100s(3)
    dummy, entry = entry_for(nodes)
    pool = rollout(entry, wait=False)
    waves = pool.begin()
    assert steps_of(waves) == [(BOTH_STEPS, "h0"), (BOTH_STEPS, "h1"), (BOTH_STEPS, "h2")]
    step = waves[-2][0]
    change = entry["node_changes"]["h0"]
    assert step.labels == dict(change["mig_step"], **change["device_plugin_step"])
    assert pool.held == set() and pool.unstarted == []


def test_check_mode_sends_both_steps_of_every_node_at_once_and_drains_nothing():
    nodes = h100s(2)
    dummy, entry = entry_for(nodes)
    pool = rollout(entry, check=True, busy={"h0": ["default/vllm"]})
    assert steps_of(pool.begin()) == [(MIG_STEP, "h0"), (MIG_STEP, "h1"), (DEVICE_PLUGIN_STEP, "h0"),
                                      (DEVICE_PLUGIN_STEP, "h1")]


def test_a_failed_node_halts_the_window_the_nodes_in_flight_are_still_awaited():
    nodes = h100s(4)
    dummy, entry = entry_for(nodes, max_unavailable=2)
    fleet = Fleet(nodes)
    pool = rollout(entry)
    fleet.send(pool.begin())
    fleet.mig("h0", "failed")
    items = poll(pool, fleet)
    assert items["h0"][0] == FAILED and items["h1"][0] == WAITING      # h1 still waited for
    assert pool.window.halted and pool.unstarted == ["h2", "h3"]
    fleet.mig("h1", "success", MIXED_ALLOCATABLE)
    poll(pool, fleet)
    fleet.allocate("h1", MIXED_ALLOCATABLE)
    items = poll(pool, fleet)
    assert items["h1"] == (READY, "ready")
    assert fleet.sent == [(MIG_STEP, "h0"), (MIG_STEP, "h1"), (DEVICE_PLUGIN_STEP, "h1")]   # nothing more started
    runs = pool_runs({"pools": [entry], "released": {"batches": [], "node_changes": {}}})
    assert not_started(halted_left(runs, 0, pool.unstarted)) == (
        "Not started, their labels left as they were: pool p: h2, h3. Run again once the cause is fixed: nodes "
        "already done are not changed again.")


def test_a_node_gone_from_the_cluster_halts_the_window():
    nodes = h100s(2)
    dummy, entry = entry_for(nodes)
    fleet = Fleet(nodes)
    pool = rollout(entry)
    fleet.send(pool.begin())
    del fleet.nodes["h0"]
    assert poll(pool, fleet)["h0"] == (FAILED, "node is gone") and pool.window.halted


def test_drained_nodes_are_drained_before_their_mig_step():
    nodes = h100s(2)
    dummy, entry = entry_for(nodes, max_unavailable=2)
    pool = rollout(entry, busy={"h1": ["default/vllm"]})
    first = pool.begin()[2]
    assert [(s.node, s.drain) for s in first] == [("h0", None), ("h1", ["default/vllm"])]


# -- batches of the role: return_when=started, carry_nodes ----------------------------------------------------------

def test_return_when_started_hands_the_started_nodes_on_once_nothing_is_left_to_start():
    nodes = h100s(3)
    dummy, entry = entry_for(nodes, max_unavailable=2)
    fleet = Fleet(nodes)
    pool = rollout(entry, start=["h0", "h1"], return_when="started")
    fleet.send(pool.begin())
    items = poll(pool, fleet)
    assert items["h0"] == (READY, "started, carried on by the next batch: nvidia.com/mig.config.state=pending")
    assert items["h1"][0] == READY and pool.handed_on == {"h0", "h1"}
    assert fleet.sent == [(MIG_STEP, "h0"), (MIG_STEP, "h1")]


def test_return_when_started_hands_nothing_on_once_a_node_failed():
    nodes = h100s(2)
    dummy, entry = entry_for(nodes, max_unavailable=2)
    fleet = Fleet(nodes)
    pool = rollout(entry, start=["h0", "h1"], return_when="started")
    fleet.send(pool.begin())
    fleet.mig("h0", "failed")
    items = poll(pool, fleet)
    assert items["h0"][0] == FAILED and items["h1"] == (WAITING, "nvidia.com/mig.config.state=pending")
    assert pool.handed_on == set()


def test_return_when_started_waits_while_a_node_of_the_batch_has_no_slot():
    nodes = h100s(3)
    dummy, entry = entry_for(nodes, max_unavailable=1)
    fleet = Fleet(nodes)
    pool = rollout(entry, start=["h0", "h1"], return_when="started")
    fleet.send(pool.begin())
    items = poll(pool, fleet)
    assert items["h0"][0] == WAITING and pool.handed_on == set() and pool.unstarted == ["h1"]


def test_carried_nodes_count_in_flight_and_the_batch_starts_as_they_finish():
    nodes = h100s(2)
    plan, entry = entry_for(nodes)
    fleet = Fleet(nodes)
    fleet.send(rollout(entry, start=["h0"], return_when="started").begin())     # the batch before: h0 started
    # The next call plans again from the nodes as they are, h0 carried on (rolling).
    again = plan_pools([raw_pool(sharing=MIXED)], fleet.observed(), plan["mig_parted_config"],
                       plan["device_plugin_data"], rolling={"h0", "h1"})["pools"][0]
    fleet.sent = []
    pool = rollout(again, start=["h1"], carried=["h0"])
    fleet.send(pool.begin())
    assert fleet.sent == [] and pool.held == {"h0"} and pool.unstarted == ["h1"]    # no slot for h1 yet
    fleet.mig("h0", "success")
    poll(pool, fleet)
    fleet.allocate("h0", MIXED_ALLOCATABLE)
    poll(pool, fleet)
    assert fleet.sent == [(DEVICE_PLUGIN_STEP, "h0"), (MIG_STEP, "h1")]


def test_pool_runs_split_each_pool_into_the_nodes_started_and_carried():
    nodes = h100s(3)
    plan, dummy = entry_for(nodes)
    runs = pool_runs(plan, limit_nodes=["h1"], carry_nodes=["h0"])
    assert [(e["name"], s, c) for e, s, c in runs] == [("p", ["h1"], ["h0"]), (RELEASED, [], [])]
    assert halted_left(runs, 0, []) == [("p", ["h2"]), (RELEASED, [])]
    assert pool_title(runs[0][0], ["h1"], ["h0"], limited=True) == "pool 'p' (h1; carried on: h0)"
    assert pool_title(runs[0][0], ["h0", "h1", "h2"], [], limited=False) == "pool 'p' (3 nodes, 1 at a time)"


def test_first_batch_and_last_call():
    nodes = h100s(2)
    plan, dummy = entry_for(nodes)
    params = {"label_nodes": False, "start_first_batch": True, "wait": True, "limit_nodes": None,
              "carry_nodes": None, "return_when": "done"}
    assert first_batch(params, plan, check=False) == dict(params, limit_nodes=["h0"], carry_nodes=[],
                                                          return_when="started")
    assert first_batch(params, plan, check=True) is None
    assert first_batch(dict(params, wait=False), plan, check=False) is None
    assert last_call(params, plan) is True
    assert last_call(dict(params, limit_nodes=["h1"], carry_nodes=["h0"]), plan) is True
    assert last_call(dict(params, limit_nodes=["h0"]), plan) is False
    assert last_call(dict(params, limit_nodes=["h0", "h1"], return_when="started"), plan) is False


# -- resume after a killed run (KILL_POINTS of test_node_pools_rollout.py) ------------------------------------------

def killed(point):
    """The plan of the next run after a run killed at `point`, over one H100 node of a MIXED pool."""
    nodes = [node("h0", labels={"pool": "p"})]
    plan, entry = entry_for(nodes)
    labels = nodes[0]["metadata"]["labels"]
    notes = nodes[0]["metadata"]["annotations"]
    if point == "after-configmaps":
        pass
    elif point == "mig-pending":
        labels.update({MIG: entry["mig_config"], POOL: "p", STATE: "pending"})
        notes[COUNT] = "8"
    elif point == "between-mig-and-device-plugin":
        # mig-manager finished with nobody watching: mixed geometry read with the old single strategy
        labels.update({MIG: entry["mig_config"], POOL: "p", STATE: "success",
                       "nvidia.com/gpu.product": H100 + "-MIG-INVALID", "nvidia.com/gpu.count": "0"})
        notes[COUNT] = "8"
    elif point == "cordoned-by-drain":
        notes[DRAINED] = "true"
        nodes[0]["spec"] = {"unschedulable": True}
    elif point == "device-plugin-step":
        labels.update({MIG: entry["mig_config"], POOL: "p", STATE: "success", DP: entry["device_plugin_config"]})
        notes[COUNT] = "8"
    return nodes, plan_pools([raw_pool(sharing=MIXED)], nodes, plan["mig_parted_config"],
                             plan["device_plugin_data"])["pools"][0]


def test_resume_after_the_configmaps_is_a_fresh_start():
    dummy, entry = killed("after-configmaps")
    assert steps_of(rollout(entry).begin()) == [(MIG_STEP, "h0")]


def test_resume_with_the_mig_change_pending_waits_for_it_then_sends_the_device_plugin_step():
    nodes, entry = killed("mig-pending")
    fleet = Fleet(nodes)
    pool = rollout(entry)
    fleet.send(pool.begin())
    assert fleet.sent == [] and pool.held == {"h0"} and pool.window.in_flight == ["h0"]   # no MIG step again
    fleet.mig("h0", "success")
    poll(pool, fleet)
    assert fleet.sent == [(DEVICE_PLUGIN_STEP, "h0")]


def test_resume_between_the_steps_with_mig_invalid_labels_sends_the_device_plugin_step_at_once():
    dummy, entry = killed("between-mig-and-device-plugin")
    pool = rollout(entry)
    waves = pool.begin()
    assert steps_of(waves) == [(DEVICE_PLUGIN_STEP, "h0")]
    assert waves[1][0].labels == {DP: entry["device_plugin_config"]} and pool.held == set()
    assert entry["node_changes"]["h0"]["allocatable_after"]["nvidia.com/mig-1g.10gb"] == 16   # the recorded count


def test_resume_of_a_node_cordoned_by_our_drain_carries_it_on_and_uncordons_it():
    dummy, entry = killed("cordoned-by-drain")
    pool = rollout(entry)
    assert pool.cordoned == ["h0"]
    assert steps_of(pool.begin()) == [(MIG_STEP, "h0")]
    assert pool.window.in_flight == ["h0"]


def test_resume_after_the_device_plugin_step_only_waits_for_the_allocatable():
    nodes, entry = killed("device-plugin-step")
    assert entry["node_changes"]["h0"]["resume"].startswith("allocatable")
    fleet = Fleet(nodes)
    pool = rollout(entry)
    waves = pool.begin()
    # Its device plugin step again, a patch of nothing: patch_metadata writes nothing when the labels are in place.
    assert [(s.name, s.labels) for wave in waves for s in wave] == [(DEVICE_PLUGIN_STEP, {})]
    assert pool.window.in_flight == ["h0"] and pool.held == set()
    fleet.send(waves)
    assert poll(pool, fleet)["h0"][0] == WAITING
    fleet.allocate("h0", MIXED_ALLOCATABLE)
    assert poll(pool, fleet)["h0"] == (READY, "ready")


def test_a_resumed_node_takes_its_slot_before_a_fresh_one_starts():
    nodes, dummy = killed("mig-pending")
    nodes.append(node("h1", labels={"pool": "p"}))
    plan = plan_pools([raw_pool(sharing=MIXED)], [nodes[0]])
    entry = plan_pools([raw_pool(sharing=MIXED)], nodes, plan["mig_parted_config"],
                       plan["device_plugin_data"])["pools"][0]
    pool = rollout(entry)
    assert steps_of(pool.begin()) == [] and pool.window.in_flight == ["h0"] and pool.unstarted == ["h1"]


# -- a round that runs out ------------------------------------------------------------------------------------------

def test_a_round_that_runs_out_is_carried_on_by_the_next_call():
    """The waiter's round ends (RoundOver) with h0 mid-change and h1 not started: the next call plans from the nodes
    as they are, puts h0 in flight at once without a second MIG step, and starts h1 in its slot once h0 is done."""
    nodes = h100s(2)
    plan, entry = entry_for(nodes)
    fleet = Fleet(nodes)
    first = rollout(entry)
    fleet.send(first.begin())
    poll(first, fleet)
    assert first.unstarted == ["h1"]                 # the round ran out here
    again = plan_pools([raw_pool(sharing=MIXED)], fleet.observed(), plan["mig_parted_config"],
                       plan["device_plugin_data"])["pools"][0]
    fleet.sent = []
    pool = rollout(again)
    fleet.send(pool.begin())
    assert fleet.sent == [] and pool.window.in_flight == ["h0"]
    fleet.mig("h0", "success")
    poll(pool, fleet)
    fleet.allocate("h0", MIXED_ALLOCATABLE)
    poll(pool, fleet)
    assert fleet.sent == [(DEVICE_PLUGIN_STEP, "h0"), (MIG_STEP, "h1")]
