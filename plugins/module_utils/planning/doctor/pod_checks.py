# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The doctor's checks of one GPU pod: CUDA the image needs vs the node's driver, OOMKilled, Pending for GPUs.

Each check takes the pod (a plain dict) and a context ({nodes: {name: Node}, pools: free_units_by_pool(...)})
and returns a list of findings.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.findings import (
    FAILING,
    finding,
    obj_ref,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    CUDA_RUNTIME_VERSION_LABEL,
    DRIVER_VERSION_LABEL,
    POOL_LABEL,
    REQUIRE_CUDA_ENV,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_state import gpu_allocatable, node_labels
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.pods import gpu_requests, is_pending_for_gpu, is_unschedulable

# NVIDIA_REQUIRE_CUDA="cuda>=12.4 brand=tesla,driver>=470,driver<471 ...": the cuda constraint applies to every
# container; the brand/driver alternatives are the compatibility packages' and are left to the toolkit.
_CUDA_NEED = re.compile(r"(?:^|\s)cuda>=(\d+)(?:\.(\d+))?")
TERMINAL = ("Succeeded", "Failed")


def _version(text):
    parts = [p for p in str(text or "").split(".") if p.isdigit()]
    return tuple(int(p) for p in parts[:2]) if parts else None


def required_cuda(container):
    """(major, minor) a container's image requires (env NVIDIA_REQUIRE_CUDA cuda>=X.Y), None when not declared."""
    for env in container.get("env") or []:
        if env.get("name") == REQUIRE_CUDA_ENV:
            match = _CUDA_NEED.search(str(env.get("value") or ""))
            if match:
                return int(match.group(1)), int(match.group(2) or 0)
    return None


def check_cuda_mismatch(pod, ctx):
    node = ctx["nodes"].get((pod.get("spec") or {}).get("nodeName"))
    if node is None:
        return []
    labels = node_labels(node)
    supported = _version(labels.get(CUDA_RUNTIME_VERSION_LABEL))
    if supported is None:
        return []
    found = []
    for i, container in enumerate((pod.get("spec") or {}).get("containers") or []):
        need = required_cuda(container)
        if need is None or need <= supported:
            continue
        found.append(finding(
            "cuda_mismatch", obj_ref(pod, "Pod"), "spec.containers[%d].env[%s]" % (i, REQUIRE_CUDA_ENV),
            "cuda>=%d.%d" % need,
            "container %s needs CUDA %d.%d; node %s has driver %s, which supports CUDA up to %s"
            % (container.get("name"), need[0], need[1], node["metadata"]["name"],
               labels.get(DRIVER_VERSION_LABEL, "?"), labels.get(CUDA_RUNTIME_VERSION_LABEL)),
            "Use an image built for CUDA <= %s, or upgrade the driver of the node's pool (kubegpu_gpu_operator "
            "driver version, or the pool's NVIDIADriver) to one that supports CUDA %d.%d"
            % (labels.get(CUDA_RUNTIME_VERSION_LABEL), need[0], need[1])))
    return found


def check_oom_killed(pod, ctx):
    found = []
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        for where in ("state", "lastState"):
            terminated = (status.get(where) or {}).get("terminated") or {}
            if terminated.get("reason") == "OOMKilled":
                found.append(finding(
                    "oom_killed", obj_ref(pod, "Pod"),
                    "status.containerStatuses[%s].%s.terminated.reason" % (status.get("name"), where), "OOMKilled",
                    "container %s was OOMKilled (restarts: %s, finished %s)"
                    % (status.get("name"), status.get("restartCount", 0), terminated.get("finishedAt", "?")),
                    "Raise the container's memory limit (host memory: model loading and the KV-cache swap space "
                    "live there), or shrink what it loads (smaller --max-model-len / --max-num-seqs, a quantised "
                    "model)"))
                break
    return found


def free_units(nodes, pods):
    """{node name: {resource: units free}}: GPU allocatable minus what the pods placed there request."""
    free = dict((n["metadata"]["name"], dict(gpu_allocatable(n))) for n in nodes)
    for pod in pods:
        name = (pod.get("spec") or {}).get("nodeName")
        if name not in free or (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        for res, units in gpu_requests(pod).items():
            free[name][res] = free[name].get(res, 0) - units
    return free


def pools_offering(nodes, free):
    """{pool: {resource: {"free": units free on the pool's nodes, "largest": most free on one node}}}."""
    pools = {}
    for node in nodes:
        pool = node_labels(node).get(POOL_LABEL)
        if not pool:
            continue
        entry = pools.setdefault(pool, {})
        for res, units in gpu_allocatable(node).items():
            if units <= 0:
                continue
            left = max(0, free[node["metadata"]["name"]].get(res, 0))
            slot = entry.setdefault(res, {"free": 0, "largest": 0})
            slot["free"] += left
            slot["largest"] = max(slot["largest"], left)
    return pools


def _scheduler_message(pod):
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return condition.get("message") or condition.get("reason") or ""
    return ""


def check_pending_for_gpu(pod, ctx):
    if not (is_pending_for_gpu(pod) and is_unschedulable(pod)):
        return []
    wants = gpu_requests(pod)
    pools = ctx["pools"]
    offering = sorted(p for p, res in pools.items() if all(r in res for r in wants))
    room = sorted(p for p in offering if all(pools[p][r]["largest"] >= u for r, u in wants.items()))
    asked = ", ".join("%s: %d" % item for item in sorted(wants.items()))
    if room:
        where = ", ".join("%s (%s)" % (p, ", ".join("%d %s free" % (pools[p][r]["free"], r) for r in sorted(wants)))
                          for p in room)
        return [finding(
            "pending_for_gpu", obj_ref(pod, "Pod"), "spec.containers[*].resources", wants,
            "pod asks for %s and is Pending (%s); pools that could host it now: %s"
            % (asked, _scheduler_message(pod), where),
            "Let it land on one of these pools: nodeSelector %s=<pool> and the pool's tolerations, or remove "
            "the selector/affinity that excludes them" % POOL_LABEL)]
    if offering:
        return [finding(
            "pending_for_gpu", obj_ref(pod, "Pod"), "spec.containers[*].resources", wants,
            "pod asks for %s and is Pending (%s); pools offering it are full: %s"
            % (asked, _scheduler_message(pod), ", ".join(offering)),
            "Free units in these pools (scale down other workloads), add nodes to a pool (its MachineSet), or "
            "ask for fewer units per pod")]
    offered = sorted(set(r for res in pools.values() for r in res))
    return [finding(
        "pending_for_gpu", obj_ref(pod, "Pod"), "spec.containers[*].resources", wants,
        "pod asks for %s and is Pending (%s); no pool offers %s (offered: %s)"
        % (asked, _scheduler_message(pod), ", ".join(sorted(wants)), ", ".join(offered) or "none"),
        "Request a resource a pool offers, or add a pool whose sharing offers it to kubegpu_node_pools and run "
        "ansible-playbook kubegpu.platform.node_pools", severity=FAILING)]


POD_CHECKS = (check_cuda_mismatch, check_oom_killed, check_pending_for_gpu)
