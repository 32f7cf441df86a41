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

DONE, PENDING, FAILED = "done", "pending", "failed"
MIG_STATE = "nvidia.com/mig.config.state"


def _allocatable(node):
    alloc = ((node.get("status") or {}).get("allocatable")) or {}
    return dict((k, int(v)) for k, v in alloc.items() if k.startswith("nvidia.com/") and str(v).isdigit())


def node_progress(node, change):
    """(state, detail) of one node against its planned change ({labels, mig_change, allocatable_after})."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if change.get("mig_change"):
        state = labels.get(MIG_STATE, "unknown")
        paused = sorted(k.split("nvidia.com/gpu.deploy.", 1)[1] for k, v in labels.items()
                        if k.startswith("nvidia.com/gpu.deploy.") and v == "paused-for-mig-change")
        if state == "failed":
            return FAILED, "{0}=failed (mig-manager could not apply {1}; see the nvidia-mig-manager pod log)".format(
                MIG_STATE, labels.get("nvidia.com/mig.config"))
        if state != "success":
            detail = "{0}={1}".format(MIG_STATE, state)
            if paused:
                detail += ", operands paused-for-mig-change: " + ", ".join(paused)
            return PENDING, detail
    have = _allocatable(node)
    missing = ["{0} {1} of {2}".format(res, have.get(res, 0), want)
               for res, want in sorted((change.get("allocatable_after") or {}).items()) if have.get(res, 0) != want]
    if missing:
        return PENDING, "allocatable " + ", ".join(missing)
    return DONE, "ready"
