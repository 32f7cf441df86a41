# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a pod asks of GPU resources, counted as the kube-scheduler counts it.

The scheduler's effective request of a resource is the larger of the sum over the app containers and the
largest single init container (init containers run one after another, before the app containers), plus the
pod's overhead (spec.overhead, set by a RuntimeClass). Sidecars (init containers with restartPolicy Always) are
not modelled apart: they count as init containers, which is what the scheduler did before 1.29 and an upper
bound since. Limits stand in for requests where only a limit is given, as the API server defaults them for
extended resources (which must have request == limit).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import NVIDIA_PREFIX


def _units(value):
    """An extended resource quantity as an int ("2" -> 2). Extended resources are whole numbers."""
    try:
        return int(str(value))
    except ValueError:
        return 0


def _container_requests(container):
    resources = container.get("resources") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return dict((k, _units(v)) for k, v in merged.items() if k.startswith(NVIDIA_PREFIX))


def gpu_requests(pod):
    """{resource: units} of every nvidia.com/* resource the pod requests (units > 0 only)."""
    spec = pod.get("spec") or {}
    total = {}
    for container in spec.get("containers") or []:
        for res, units in _container_requests(container).items():
            total[res] = total.get(res, 0) + units
    for container in spec.get("initContainers") or []:
        for res, units in _container_requests(container).items():
            total[res] = max(total.get(res, 0), units)
    for res, value in (spec.get("overhead") or {}).items():
        if res.startswith(NVIDIA_PREFIX):
            total[res] = total.get(res, 0) + _units(value)
    return dict((k, v) for k, v in total.items() if v > 0)


def is_pending_for_gpu(pod):
    """True for a pod that asks for GPU resources and that the scheduler could not place (yet)."""
    status = pod.get("status") or {}
    if status.get("phase") not in (None, "Pending") or (pod.get("spec") or {}).get("nodeName"):
        return False
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if not gpu_requests(pod):
        return False
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return condition.get("status") == "False"
    return False
