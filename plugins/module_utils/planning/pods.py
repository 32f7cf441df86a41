# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a Pod asks of the GPUs: the nvidia.com/* units the scheduler counts for it, and whether it waits for them.

Pure functions over a Pod as the access layer returns it (a plain dict), read by the capacity report and the
doctor, so that "how many GPU units does this pod hold" is computed once, the way kube-scheduler computes it.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import NVIDIA_PREFIX

PENDING = "Pending"
FINISHED_PHASES = ("Succeeded", "Failed")


def _spec(pod):
    return pod.get("spec") or {}


def _container_units(container):
    """nvidia.com/* units one container asks for. Extended resources cannot be overcommitted: a request, when
    given, equals the limit, and a limit alone stands for the request (the API server defaults it so)."""
    resources = container.get("resources") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    units = {}
    for name, value in merged.items():
        if name.startswith(NVIDIA_PREFIX) and str(value).isdigit() and int(value):
            units[name] = int(value)
    return units


def _add(total, units):
    for name, value in units.items():
        total[name] = total.get(name, 0) + value


def _at_least(total, units):
    for name, value in units.items():
        total[name] = max(total.get(name, 0), value)


def gpu_requests(pod):
    """Effective nvidia.com/* requests of a pod, as the scheduler counts them ({resource: units}, zeros left out).

    Per resource: the larger of (the sum over the app containers plus the restartable init containers, i.e.
    sidecars) and each init container's own request plus the sidecars started before it; then the pod's
    overhead (spec.overhead, set from its RuntimeClass) is added on top.
    """
    spec = _spec(pod)
    sidecars = {}
    init_peak = {}
    for container in spec.get("initContainers") or []:
        units = _container_units(container)
        if container.get("restartPolicy") == "Always":
            # A sidecar keeps running: it holds its units while later init containers and the app run.
            _add(sidecars, units)
            _at_least(init_peak, sidecars)
        else:
            step = dict(sidecars)
            _add(step, units)
            _at_least(init_peak, step)
    total = dict(sidecars)
    for container in spec.get("containers") or []:
        _add(total, _container_units(container))
    _at_least(total, init_peak)
    _add(total, _container_units({"resources": {"requests": spec.get("overhead") or {}}}))
    return dict(sorted((name, value) for name, value in total.items() if value))


def is_finished(pod):
    """A pod that ran to its end (Succeeded or Failed): it holds no units any more."""
    return (pod.get("status") or {}).get("phase") in FINISHED_PHASES


def is_pending_for_gpu(pod):
    """A pod that asks for nvidia.com/* units and has not been bound to a node yet (not deleted, not finished)."""
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase") or PENDING
    return (phase == PENDING and not _spec(pod).get("nodeName") and not meta.get("deletionTimestamp")
            and bool(gpu_requests(pod)))


def is_unschedulable(pod):
    """The scheduler has looked at the pod and found no node for it (PodScheduled False). The doctor waits for
    this verdict, so that a pod created a moment ago is not reported as a fault."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return condition.get("status") == "False"
    return False
