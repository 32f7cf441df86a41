# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a node is in its sharing change, read from its labels and allocatable.

mig-manager reports through `nvidia.com/mig.config.state` (pending -> success | failed) and pauses operands
with `gpu.deploy.*=paused-for-mig-change`; it sets `success` before the device plugin re-registers, so a node
is done only when its allocatable also matches the plan (shared/reference/gpu-operator.md, Timing).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    MIG_MANAGER_DAEMONSET,
    MIG_STATE_FAILED,
    MIG_STATE_LABEL,
    MIG_STATE_SUCCESS,
    PAUSED_FOR_MIG_CHANGE,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_state import (
    gpu_allocatable,
    mig_config,
    mig_state,
    node_labels,
    paused_operands,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.states import FAILED, READY, WAITING


def node_progress(node, change):
    """(READY | WAITING | FAILED, detail) of one node against its planned change ({mig_change, allocatable_after})."""
    labels = node_labels(node)
    if change.get("mig_change"):
        state = mig_state(labels, "unknown")
        paused = paused_operands(labels)
        if state == MIG_STATE_FAILED:
            return FAILED, "{0}={1} (mig-manager could not apply {2}; see the {3} pod log)".format(
                MIG_STATE_LABEL, MIG_STATE_FAILED, mig_config(labels), MIG_MANAGER_DAEMONSET)
        if state != MIG_STATE_SUCCESS:
            detail = "{0}={1}".format(MIG_STATE_LABEL, state)
            if paused:
                detail += ", operands {0}: {1}".format(PAUSED_FOR_MIG_CHANGE, ", ".join(paused))
            return WAITING, detail
    have = gpu_allocatable(node)
    missing = ["{0} {1} of {2}".format(res, have.get(res, 0), want)
               for res, want in sorted((change.get("allocatable_after") or {}).items()) if have.get(res, 0) != want]
    if missing:
        return WAITING, "allocatable " + ", ".join(missing)
    return READY, "ready"


class Progress(object):
    """node_progress for one wait, worked out again for a node only once it changed (a new resourceVersion).

    A roll-out's wait judges every node in flight at each burst of events, several times a second with hundreds of
    nodes in flight, while only the few the burst touched have changed: the others' judgements are kept. `change`
    must stay the same for a node (the plan's, for the whole wait). An object without a resourceVersion is judged
    each time."""

    def __init__(self):
        self._judged = {}

    def __call__(self, node, change):
        meta = node.get("metadata") or {}
        version = meta.get("resourceVersion")
        if not version:
            return node_progress(node, change)
        kept = self._judged.get(meta.get("name"))
        if kept is not None and kept[0] == version:
            return kept[1]
        judged = node_progress(node, change)
        self._judged[meta.get("name")] = (version, judged)
        return judged


def began(change, mig_pool):
    """Whether an earlier call began this node's change, so that it counts against max_unavailable at once.

    Midway (change["resume"]): MIG change pending, cordoned by our drain, or allocatable not caught up. And in a MIG
    pool a node whose geometry is in place while its device plugin config is not: an earlier call's MIG step
    succeeded and its device plugin step is due now (a node that changes nothing but its device plugin config looks
    the same, and a MIG node leaving for a pool without MIG cannot be told from a node whose time-slicing changes:
    those start as fresh nodes do, when a slot is free).
    """
    if change.get("resume"):
        return True
    return bool(mig_pool and not change.get("mig_step") and change.get("device_plugin_step"))


class Window(object):
    """A pool's nodes in flight, at most `size` at once (max_unavailable), as a DaemonSet's rolling update keeps them:
    the next node starts as soon as one in flight is done, not once the slowest node of a batch is.

    in_flight: started (by an earlier call, or by this one) and not judged done yet; queue: not started, in the order
    they start. Once halted (a node failed) nothing more starts.
    """

    def __init__(self, size, in_flight, queue):
        self.size = max(1, int(size))
        self.in_flight = list(in_flight)
        self.queue = [n for n in queue if n not in self.in_flight]
        self.halted = False

    def settle(self, done, failed=()):
        """Nodes judged done leave the window; a failed node halts it (it stays in flight: its GPUs are not back)."""
        done = set(done)
        self.in_flight = [n for n in self.in_flight if n not in done]
        if failed:
            self.halted = True

    def take(self):
        """The nodes to start now, moved in flight: as many as there are free slots, none once halted."""
        if self.halted:
            return []
        free = max(0, self.size - len(self.in_flight))
        start, self.queue = self.queue[:free], self.queue[free:]
        self.in_flight.extend(start)
        return start
