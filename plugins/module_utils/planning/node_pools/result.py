# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What gpu_node_pools returns of its plan and roll-out, pure: the plan as shown, and the roll-out report of a wait
spread over rounds."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type


# What a node's entry in the returned plan says: its labels before and after, whether its MIG changes, its
# allocatable before and after. The rest of a node_changes entry is the roll-out's own bookkeeping (its steps, waits
# and resume point), left out of the result: Ansible carries, scrubs and prints every byte of a result
# (docs/performance.md, "A result carries what users read, once").
SHOWN_NODE_FIELDS = ("labels", "before", "mig_change", "allocatable_before", "allocatable_after")


def shown(plan, params):
    """The plan as the module returns it (SHOWN_NODE_FIELDS per node); None stays None. A call limited to a batch
    shows the changes of its own nodes (limit_nodes, carry_nodes): the role's batch calls would otherwise each return
    the whole fleet's again, carried by Ansible and by AWX as a job event (docs/performance.md)."""
    if plan is None:
        return None
    only = set(params.get("limit_nodes") or []) | set(params.get("carry_nodes") or []) \
        if params.get("limit_nodes") else None

    def nodes(entry):
        return dict(entry, node_changes=dict(
            (name, dict((k, change.get(k)) for k in SHOWN_NODE_FIELDS))
            for name, change in (entry.get("node_changes") or {}).items() if only is None or name in only))
    out = dict(plan)
    out["pools"] = [nodes(p) for p in plan.get("pools") or []]
    if plan.get("released"):
        out["released"] = nodes(plan["released"])
    return out


def settle_between_rounds(earlier, rollout, nodes):
    """The nodes an earlier round of this wait left in flight that this round did not roll: the plan found nothing
    left to do for them, so they finished between the two rounds (the task's delay, the next call's start). They
    are reported done, not dropped from the last round's report; a node no longer in the cluster is left as it was."""
    for pool, states in (earlier or {}).items():
        for node, state in states.items():
            if state.get("state") not in ("done", "failed") and node not in rollout.get(pool, {}) and node in nodes:
                rollout.setdefault(pool, {})[node] = dict(state, state="done", detail="done between two rounds")
