# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roll-out's decisions, pure: given the nodes' states and the window, which steps go out next.

A node's change is two named steps, each waited for: its MIG geometry (MIG_STEP, after a drain when pods hold its
GPUs), then its device plugin config (DEVICE_PLUGIN_STEP). The second waits for the node's own MIG state success,
not the slowest node's: a node whose MIG change fails keeps its old, consistent configuration instead of advertising
an invalid one (gpu-operator#460). At most max_unavailable nodes of a pool are in flight (rollout.Window); the next
starts as soon as one is done. Without a wait (wait: false) nothing comes between the two steps: one patch
(BOTH_STEPS), every node at once.

PoolRollout holds one pool's decisions; the driver (cluster/rollout.py) sends the steps it returns, wave by wave
(the steps of a wave are independent and go side by side), and feeds back what the waiter sees. Everything here
reads the waiter's vocabulary (planning/states.py).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import namedtuple

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.device_plugin_config import MIG
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import RELEASED
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.rollout import (
    Progress,
    Window,
    began,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.states import FAILED, READY, WAITING

MIG_STEP = "set the MIG geometry"
DEVICE_PLUGIN_STEP = "set the device plugin config"
BOTH_STEPS = "set the MIG geometry and the device plugin config"
# What a held node's device plugin step waits for: its MIG state, whatever else its change holds.
MIG_ONLY = {"mig_change": True}


class Step(namedtuple("Step", "name node labels annotations drain")):
    """One write to one node: `labels` and `annotations` in one patch (value, or None to remove); `drain`: the GPU
    pods ("namespace/name") to evict first, the node cordoned, or None."""


class PoolRollout(object):
    """One pool's roll-out as decisions: begin() gives the first waves; at each poll of the wait, mig_done() the
    device plugin steps now due, then refill() the next nodes into the slots freed.

    start: the nodes this call starts, in order; carried: nodes an earlier call started (the role's batch before),
    counted in flight at once, as is a node an earlier call began (rollout.began). waiting: the call waits for the
    nodes (wait and not check mode); one_patch: wait is false (both steps in one patch); until_started: the call
    ends once every node of `start` has started and every carried node is done (return_when=started), handing the
    started ones on. drains: {node: GPU pods} to evict before the node's MIG step (none in check mode).
    """

    def __init__(self, entry, start, carried, waiting, one_patch, until_started=False, drains=None):
        self.changes = entry["node_changes"]
        self.start, self.carried = list(start), list(carried)
        self.waiting, self.one_patch, self.until_started = waiting, one_patch, until_started
        self.drains = drains or {}
        mig_pool = entry.get("strategy") == MIG
        self.window = Window(entry["batch_size"] if waiting else len(self.start) + len(self.carried),
                             self.carried + [n for n in self.start if began(self.changes[n], mig_pool)], self.start)
        self.expectations = {}   # the nodes started (or carried on): what the wait judges, growing as nodes start
        self.held = set()        # the nodes whose device plugin step waits for their MIG state success
        self.handed_on = set()   # started nodes this call leaves in flight for the next (until_started)
        self._mig = Progress()   # a held node's MIG state, judged again only once the node changed

    @property
    def cordoned(self):
        """The nodes an earlier run's drain left cordoned: uncordoned when this call ends."""
        return [n for n in self.start + self.carried if self.changes[n]["uncordon"]]

    @property
    def unstarted(self):
        """The nodes of `start` not started (yet, or ever once halted)."""
        return list(self.window.queue)

    def begin(self):
        """The first waves: the nodes already in flight take their next steps, then the window's first nodes."""
        return self._launch(list(self.window.in_flight)) + self._launch(self.window.take())

    def _launch(self, nodes):
        """Two waves: the nodes' first steps (drain and MIG step; with one_patch both steps), then the device plugin
        step of each node that does not wait for its MIG state."""
        first = []
        for node in nodes:
            change = self.changes[node]
            if self.one_patch:
                first.append(Step(BOTH_STEPS, node, dict(change["mig_step"], **change["device_plugin_step"]),
                                  change["annotations"], self.drains.get(node)))
            elif change["mig_step"]:
                first.append(Step(MIG_STEP, node, change["mig_step"], change["annotations"], self.drains.get(node)))
        if self.waiting:
            self.held.update(n for n in nodes if self.changes[n]["wait_mig"])
        second = [] if self.one_patch else [self._device_plugin_step(n) for n in nodes if n not in self.held]
        self.expectations.update((n, self.changes[n]) for n in nodes)
        return [first, second]

    def _device_plugin_step(self, node):
        change = self.changes[node]
        return Step(DEVICE_PLUGIN_STEP, node, change["device_plugin_step"],
                    {} if change["mig_step"] else change["annotations"], None)

    def mig_done(self, observed, items):
        """The device plugin steps due now: of each held node whose MIG geometry `observed` shows in place. The
        other held nodes are judged on their MIG state alone in `items` (the waiter's {node: (state, detail)}); a node
        absent from `observed` keeps the waiter's verdict (gone)."""
        by_name = dict((n["metadata"]["name"], n) for n in observed or [])
        due = []
        for node in sorted(self.held):
            if node not in by_name:
                continue
            state, detail = self._mig(by_name[node], MIG_ONLY)
            if state == READY:
                due.append(node)
            else:
                items[node] = (state, detail)
        self.held.difference_update(due)
        for node in due:
            # Judged from a read before its device plugin step: the verdict waits for the next poll.
            items[node] = (WAITING, "device plugin config set")
        return [self._device_plugin_step(n) for n in due]

    def refill(self, items):
        """The waves that start the next nodes into the slots of those `items` shows done (none once a node
        failed); then, with until_started and nothing left to start, the started nodes handed on (READY in `items`:
        the wait does not wait for them)."""
        self.window.settle([n for n, (s, _d) in items.items() if s == READY],
                           [n for n, (s, _d) in items.items() if s == FAILED])
        begin = self.window.take()
        waves = self._launch(begin) if begin else []
        for node in begin:
            items[node] = (WAITING, "started")
        self.handed_on.clear()
        if self.until_started and not self.window.halted and not self.window.queue:
            for node in self.start:
                if items.get(node, (None,))[0] == WAITING:
                    items[node] = (READY, "started, carried on by the next batch: " + items[node][1])
                    self.handed_on.add(node)
        return waves


def pool_runs(plan, limit_nodes=None, carry_nodes=None):
    """[(entry, start, carried)] in roll-out order (pools, then the released nodes as pool RELEASED), each entry's
    nodes in its batches' order: `start` the nodes this call starts (limit_nodes, when given), `carried` those of
    carry_nodes. An entry with neither is listed too (halted_left names its nodes)."""
    limit, carry = set(limit_nodes or []), set(carry_nodes or [])
    runs = []
    for entry in list(plan["pools"]) + [dict(plan["released"], name=RELEASED)]:
        order = [n for batch in entry["batches"] for n in batch]
        runs.append((entry, [n for n in order if (not limit or n in limit) and n not in carry],
                     [n for n in order if n in carry]))
    return runs


def halted_left(runs, index, unstarted):
    """[(pool, nodes)] a roll-out halted in runs[index] leaves as they were: that pool's nodes not started (by this
    call, or outside its limit_nodes), and every node of the pools after it."""
    entry, start, carried = runs[index]
    order = [n for batch in entry["batches"] for n in batch]
    left = [(entry["name"], list(unstarted) + [n for n in order if n not in start and n not in carried])]
    return left + [(e["name"], [n for batch in e["batches"] for n in batch]) for e, _s, _c in runs[index + 1:]]


def not_started(by_pool):
    """What a halted roll-out leaves as it was: [(pool, nodes)] in roll-out order."""
    by_pool = [(pool, nodes) for pool, nodes in by_pool if nodes]
    if not by_pool:
        return "No node was left to start."
    return "Not started, their labels left as they were: {0}. Run again once the cause is fixed: nodes already " \
        "done are not changed again.".format("; ".join(
            "pool {0}: {1}".format(pool, ", ".join(nodes)) for pool, nodes in by_pool))


def few(names, named=8):
    """Names for a title: every one of a few, else the first ones and how many more (a batch of 250 nodes)."""
    if len(names) <= named:
        return ", ".join(names)
    return "{0} and {1} more".format(", ".join(names[:3]), len(names) - 3)


def pool_title(entry, start, carried, limited):
    """How the wait and its errors name a pool's roll-out: a batch (limited: limit_nodes) by its nodes."""
    if limited:
        return "pool '{0}' ({1}{2})".format(entry["name"], few(start),
                                            "; carried on: " + few(carried) if carried else "")
    return "pool '{0}' ({1} nodes, {2} at a time)".format(entry["name"], len(start) + len(carried),
                                                          entry["batch_size"])


def first_batch(params, plan, check):
    """start_first_batch: the parameters of the call that would start the plan's first batch (limit_nodes, to be
    carried on by the next call), or None when this call labels nothing."""
    if check or params["label_nodes"] or not params["start_first_batch"] or not params["wait"] or not plan["steps"]:
        return None
    return dict(params, limit_nodes=plan["steps"][0]["nodes"], carry_nodes=[], return_when="started")


def last_call(params, plan):
    """Whether this call takes every node left to change to its end: a whole run, or the role's last batch (every
    node the plan still changes is one it starts or carries on, and it waits until they are done). Such a call
    finishes the roll-out: the configs no node names any more go, and the role needs no call after it."""
    if not params["limit_nodes"]:
        return True
    ours = set(params["limit_nodes"]) | set(params["carry_nodes"] or [])
    return params["return_when"] == "done" and all(
        n in ours for e in plan["pools"] + [plan["released"]] for batch in e["batches"] for n in batch)
