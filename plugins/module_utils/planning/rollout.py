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

DONE, PENDING, FAILED = "done", "pending", "failed"


def node_progress(node, change):
    """(state, detail) of one node against its planned change ({labels, mig_change, allocatable_after})."""
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
            return PENDING, detail
    have = gpu_allocatable(node)
    missing = ["{0} {1} of {2}".format(res, have.get(res, 0), want)
               for res, want in sorted((change.get("allocatable_after") or {}).items()) if have.get(res, 0) != want]
    if missing:
        return PENDING, "allocatable " + ", ".join(missing)
    return DONE, "ready"
