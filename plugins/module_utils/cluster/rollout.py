# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-pool roll-out driver: sends the steps the pure decisions (planning/node_pools/steps.py) choose, as named
steps, and waits for the nodes through the one waiter.

roll_pool reads as the procedure: send the first steps, wait (sending each step as soon as a poll shows it due),
uncordon. A step that fails says so as mig-parted's reconfigure does: "failed to <step>: <cause>".
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import patch_metadata
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.drain import drain_node, uncordon_node
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.parallel import done, run_bounded
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.retry import ClusterError
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import (
    RoundOver,
    Target,
    WaitTimeout,
    node_changes,
    wait_for,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import POOL_LABEL
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import RELEASED
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.steps import (
    PoolRollout,
    halted_left,
    not_started,
    pool_runs,
    pool_title,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.states import FAILED, READY

# How the result's `rollout` names the waiter's states.
REPORTED = {READY: "done", FAILED: "failed"}


def side_by_side(module, changes, calls):
    """Run independent writes with at most parallel_writes in flight (cluster/parallel.py); append what each
    returned to `changes` in call order, then raise the first error. Check mode sends them one at a time: its
    label dry runs are sent once per distinct patch, which a shared record decides."""
    limit = 1 if module.check_mode else module.params["parallel_writes"]
    results, error = run_bounded(calls, limit)
    changes.extend(r for r in done(results) if r is not None)
    if error is not None:
        raise error


def named(step, call):
    """call(), its ClusterError told as the failure of `step`."""
    try:
        return call()
    except ClusterError as err:
        raise ClusterError("failed to {0}: {1}".format(step, err))


def current_metadata(nodes):
    """{node: {labels, annotations}}: what the roll-out's patches are diffed against, kept current as they go."""
    return dict((n["metadata"]["name"], {"labels": dict(n["metadata"].get("labels") or {}),
                                         "annotations": dict(n["metadata"].get("annotations") or {})})
                for n in nodes)


def patch_node(module, name, labels, annotations, current, target=None):
    """Set (value) or remove (None) labels and annotations of one node in one merge patch, only those that differ.
    The node as written goes into the wait's watched list (`target`), which judges it next."""
    have_labels, have_notes = current["labels"], current["annotations"]
    change = patch_metadata(module.cluster, "v1", "Node", name, labels, annotations, module.check_mode, have_labels,
                            have_notes)
    if target is not None:
        target.remember(change.written)
    after = (change.after or {}).get("metadata") or {}
    for key, value in (after.get("labels") or {}).items():
        if value is None:
            have_labels.pop(key, None)
        else:
            have_labels[key] = value
    have_notes.update(after.get("annotations") or {})
    return change


def roll_out(module, nodes, plan, busy, changes, params, rollout):
    """Roll the plan out pool by pool (pools in order, then released nodes); stop at the first failed node. With
    limit_nodes only those start (the role's batch), and carry_nodes (the role's batch before) are carried on first.
    Each node's state goes into `rollout` ({pool: {node: state}}), a round that runs out (RoundOver) included.
    Returns the failure message or None."""
    current = current_metadata(nodes)
    runs = pool_runs(plan, params["limit_nodes"], params["carry_nodes"])
    for index, (entry, start, carried) in enumerate(runs):
        if not start and not carried:
            continue
        failure, unstarted = roll_pool(module, params, entry, start, carried, current, busy, changes, rollout)
        if failure:
            return failure + " " + not_started(halted_left(runs, index, unstarted))
    return None


def roll_pool(module, params, entry, start, carried, current, busy, changes, rollout):
    """One pool's roll-out (PoolRollout decides, this sends): its first steps, then the wait, which sends each
    node's next steps as soon as a poll shows them due; the first failed node halts the window, the nodes in flight
    are still waited for, and every node this call cordoned (or an earlier run's drain left cordoned) is uncordoned.
    Returns (failure message or None, the nodes of `start` never started)."""
    check = module.check_mode
    waiting = params["wait"] and not check
    pool = PoolRollout(entry, start, carried, waiting, one_patch=not params["wait"],
                       until_started=waiting and params["return_when"] == "started", drains={} if check else busy)
    steps = Steps(module, current, changes, params["timeout"], pool.cordoned)
    title = pool_title(entry, start, carried, params["limit_nodes"])
    failure = None
    try:
        steps.send(pool.begin())
        if waiting:
            failure = wait_pool(module, pool, steps, entry["name"], title, params, rollout)
    except ClusterError as err:
        failure = "{0}: {1}".format(title, err)
    except RoundOver:
        # The round ran out mid-change: the nodes stay cordoned (marked) until the call that finishes them.
        steps.cordoned = []
        raise
    finally:
        cordoned = sorted(set(steps.cordoned))
        if cordoned and not check:
            side_by_side(module, [], [(lambda n=n: named("uncordon node " + n, lambda: uncordon_node(
                module.cluster, n))) for n in cordoned])
            if failure:
                failure += " Uncordoned again: {0}.".format(", ".join(cordoned))
    return failure, pool.unstarted


class Steps(object):
    """Sends a pool's steps (planning/node_pools/steps.Step), wave by wave, each wave's side by side; records the
    nodes it cordons. `target`: the wait's, once it waits (what the written nodes go into)."""

    def __init__(self, module, current, changes, timeout, cordoned):
        self.module, self.current, self.changes, self.timeout = module, current, changes, timeout
        self.cordoned = list(cordoned)
        self.target = None

    def send(self, waves):
        for wave in waves:
            side_by_side(self.module, self.changes, [(lambda s=s: self.perform(s)) for s in wave])

    def perform(self, step):
        if step.drain:
            self.cordoned.append(step.node)
            named("drain node " + step.node, lambda: drain_node(
                self.module.cluster, step.node, step.drain, self.timeout, **self.module.wait_policy()))
        return named("{0} of node {1}".format(step.name, step.node), lambda: patch_node(
            self.module, step.node, step.labels, step.annotations, self.current[step.node], self.target))


def wait_pool(module, pool, steps, name, title, params, rollout):
    """Wait for the pool's nodes in flight (one watched Node list), sending between polls the steps that fall due.
    Returns the failure message or None; raises RoundOver when this call's round ran out first."""
    nodes = pool.start + pool.carried
    # Listed by pool label once every node carries it (a MIG node gets it with its first step).
    labelled = name != RELEASED and all(steps.current[n]["labels"].get(POOL_LABEL) == name for n in nodes)
    # A call limited to a batch waits `timeout`; a whole pool, `timeout` per batch of max_unavailable nodes.
    batches = 1 if params["limit_nodes"] else -(-len(nodes) // pool.window.size)
    # Watched: a node's next step goes out as soon as an event shows it due, not a poll later.
    steps.target = Target("v1", "Node", label_selector="{0}={1}".format(POOL_LABEL, name) if labelled else None,
                          names=sorted(pool.expectations), title=title, watch=True)

    def on_poll(observed, items):
        steps.send([pool.mig_done(observed, items)])
        steps.send(pool.refill(items))
        return items

    failure = wait_nodes(module, steps.target, pool.expectations, rollout, name, params["timeout"] * batches,
                         on_poll)
    for node in pool.handed_on:
        if node in rollout.get(name, {}):
            rollout[name][node]["state"] = "started"
    # Handed on mid-change: a drained node stays cordoned (marked) until the call that finishes it.
    steps.cordoned = [n for n in steps.cordoned if n not in pool.handed_on]
    return failure


def wait_nodes(module, target, expectations, rollout, pool, timeout, on_poll=None):
    """Wait for the nodes of `target` (the one waiter); record their states in rollout. `expectations` may grow
    between polls (on_poll starts nodes): the predicate judges what it holds at each poll.

    Returns a failure message or None; raises RoundOver when this call's round ran out first."""
    try:
        outcome = wait_for(module.cluster, target, node_changes(expectations), timeout, interval=1.0,
                           raise_on_failure=False, on_poll=on_poll, **module.wait_policy())
    except WaitTimeout as err:
        return str(err)
    module.progress = outcome.progress
    # Recorded for a round that runs out too: the rounds of one wait are merged (Rounds.MERGED), so the last one
    # lists every node the wait changed, those that finished between two rounds included (settle_between_rounds).
    rollout.setdefault(pool, {}).update(
        (n, {"state": REPORTED.get(s, s), "detail": d, "seconds": outcome.since.get(n, 0.0)})
        for n, (s, d) in outcome.items.items())
    if not outcome.ready:
        raise RoundOver(outcome.progress)
    failed = outcome.failed
    if not failed:
        return None
    done_nodes = sorted(n for n in outcome.items if n not in failed)
    return "{0}: node {1} failed: {2}. Its device plugin config was left as it was.{3}".format(
        target.title, ", ".join(failed), "; ".join(outcome.items[n][1] for n in failed),
        " Done: {0}.".format(", ".join(done_nodes)) if done_nodes else "")
