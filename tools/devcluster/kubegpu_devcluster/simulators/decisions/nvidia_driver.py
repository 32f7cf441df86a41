"""The GPU Operator's NVIDIADriver controller and its driver upgrade controller, as one pure step.

Upstream behaviour followed (sources in docs/gpu-operator.md, "NVIDIADriver in the local cluster"):
- NVIDIADriver (nvidia.com/v1alpha1) is read only while the ClusterPolicy has driver.useNvidiaDriverCRD true.
- A node belongs to the non-default NVIDIADriver whose spec.nodeSelector (a plain map, every pair on the node)
  matches it; a node no non-default one selects belongs to the default one (spec.default: true: "the fallback
  driver daemon set manager for GPU nodes that do not match any non-default NVIDIADriver nodeSelector", the CRD).
  A node that two non-default NVIDIADrivers select gets no driver from either, and both report state notReady with
  reason ConflictingNodeSelector (GPU Operator v26.7.0; shared/reference/gpu-operator.md); so do two defaults.
- The upgrade controller moves each node through the label nvidia.com/gpu-driver-upgrade-state: upgrade-required
  (the node's driver is not its NVIDIADriver's version), cordon-required, pod-restart-required (the driver pod is
  restarted with the new version), validation-required, uncordon-required, upgrade-done; upgrade-failed on a failure
  (NVIDIA/cloud-native-docs, gpu-operator/archive/22.9.2/gpu-driver-upgrades.rst, "Upgrade State Machine"). It
  starts a node only while the NVIDIADriver's nodes in progress number fewer than spec.upgradePolicy.maxUnavailable
  (a number, or a percentage of its nodes rounded up) and maxParallelUpgrades (0: no limit); with autoUpgrade false
  the nodes stay at upgrade-required.
Simplified: the driver a node runs is GFD's nvidia.com/cuda.driver-version.* labels (what the fleet starts with),
rewritten when the pod restarts; wait-for-jobs, pod deletion and drain pass at once (no GPU pods to wait for here),
and the cordon is the state label only (spec.unschedulable is left alone). Each call advances every node in progress
by one state; the simulator calls it every step_seconds.

Knobs: fail_nodes (node names, comma-separated): their pod restart fails (upgrade-failed).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import node_names

UPGRADE_STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
VERSION_LABEL = "nvidia.com/cuda.driver-version.full"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
REQUIRED, DONE, FAILED = "upgrade-required", "upgrade-done", "upgrade-failed"
# The path a node takes once started, each state followed by the next.
PATH = ("cordon-required", "pod-restart-required", "validation-required", "uncordon-required", DONE)
IN_PROGRESS = frozenset(PATH[:-1])
# A precompiled driver is named by its branch; the image of a branch carries one version. From the reference:
# 580.173.02 (what NVIDIA's recipes hold GB200/GB300 nodes on), 595.91.07 (GPU Operator v26.7.0's default).
BRANCH_VERSIONS = {"580": "580.173.02", "595": "595.91.07"}
# The newest CUDA each driver branch supports (shared/reference/gpu-node-labels.md, cuda.runtime.*).
CUDA_OF_BRANCH = {"550": "12.4", "580": "13.0", "595": "13.2"}


@dataclass
class Step:
    """What the controllers write now: labels per node (merge patch; None removes), status per NVIDIADriver
    ({state, reason, message}), and whether a node is still on its way (the simulator looks again)."""
    labels: dict = field(default_factory=dict)
    statuses: dict = field(default_factory=dict)
    busy: bool = False


def _name(obj: dict) -> str:
    return obj["metadata"]["name"]


def _labels(obj: dict) -> dict:
    return (obj.get("metadata") or {}).get("labels") or {}


def _spec(obj: dict) -> dict:
    return obj.get("spec") or {}


def owners(drivers: list, nodes: list) -> tuple:
    """({node: NVIDIADriver name}, {node: [the NVIDIADrivers that clash over it]}) for every GPU node."""
    selecting = [d for d in drivers if not _spec(d).get("default")]
    defaults = sorted(_name(d) for d in drivers if _spec(d).get("default"))
    owner, clashes = {}, {}
    for node in nodes:
        labels = _labels(node)
        matched = sorted(_name(d) for d in selecting
                         if all(labels.get(k) == v for k, v in (_spec(d).get("nodeSelector") or {}).items()))
        if len(matched) > 1:
            clashes[_name(node)] = matched
        elif matched:
            owner[_name(node)] = matched[0]
        elif len(defaults) > 1:
            clashes[_name(node)] = defaults
        elif defaults:
            owner[_name(node)] = defaults[0]
    return owner, clashes


def wanted_version(spec: dict) -> str:
    """The full version a node of this NVIDIADriver should run; "" when the spec names none."""
    version = str(spec.get("version") or "")
    return BRANCH_VERSIONS.get(version, version + ".0.0" if version.isdigit() else version)


def version_labels(version: str) -> dict:
    """GFD's driver (and CUDA) labels for a driver version."""
    parts = (version.split(".") + ["", "", ""])[:3]
    out = {VERSION_LABEL: version, "nvidia.com/cuda.driver-version.major": parts[0],
           "nvidia.com/cuda.driver-version.minor": parts[1], "nvidia.com/cuda.driver-version.revision": parts[2]}
    cuda = CUDA_OF_BRANCH.get(parts[0])
    if cuda:
        major, minor = cuda.split(".")
        out.update({"nvidia.com/cuda.runtime-version.full": cuda, "nvidia.com/cuda.runtime-version.major": major,
                    "nvidia.com/cuda.runtime-version.minor": minor})
    return out


def limit(policy: dict, count: int) -> int:
    """How many of an NVIDIADriver's `count` nodes may be in progress at once."""
    raw = policy.get("maxUnavailable", "25%")
    if isinstance(raw, str) and raw.endswith("%"):
        most = math.ceil(count * int(raw[:-1]) / 100.0)
    else:
        most = int(raw)
    most = max(most, 1)
    parallel = int(policy.get("maxParallelUpgrades", 1))
    return min(most, parallel) if parallel > 0 else most


def step(crd_mode: bool, drivers: list, nodes: list, knobs) -> Step:
    """One pass of both controllers over the NVIDIADrivers and the GPU nodes (their labels as read)."""
    out = Step()
    if not crd_mode:
        return out
    nodes = [n for n in nodes if _labels(n).get(GPU_PRESENT_LABEL) == "true"]
    owner, clashes = owners(drivers, nodes)
    failing = node_names(knobs.get("fail_nodes", ""))
    by_driver = {}
    for node in sorted(nodes, key=_name):
        if _name(node) in owner:
            by_driver.setdefault(owner[_name(node)], []).append(node)
    for driver in sorted(drivers, key=_name):
        name = _name(driver)
        clashing = sorted(n for n, names in clashes.items() if name in names)
        if clashing:
            out.statuses[name] = {"state": "notReady", "reason": "ConflictingNodeSelector",
                                  "message": "node %s is selected by NVIDIADrivers %s" % (
                                      clashing[0], ", ".join(clashes[clashing[0]]))}
            continue
        mine = by_driver.get(name, [])
        pending = _upgrade(driver, mine, failing, out.labels)
        out.busy = out.busy or pending > 0
        failed = sorted(_name(n) for n in mine if _state_after(n, out.labels) == FAILED)
        if failed:
            out.statuses[name] = {"state": "notReady", "reason": "UpgradeFailed",
                                  "message": "driver upgrade failed on node %s" % ", ".join(failed)}
        elif pending:
            out.statuses[name] = {"state": "notReady", "reason": "DriverNotReady",
                                  "message": "%d of %d nodes not on driver %s yet" % (
                                      pending, len(mine), wanted_version(_spec(driver)))}
        else:
            out.statuses[name] = {"state": "ready", "reason": "Reconciled", "message": "%d nodes on driver %s" % (
                len(mine), wanted_version(_spec(driver)) or "as installed")}
    return out


def _state_after(node: dict, labels: dict) -> str:
    change = labels.get(_name(node)) or {}
    return change.get(UPGRADE_STATE_LABEL, _labels(node).get(UPGRADE_STATE_LABEL) or "")


def _upgrade(driver: dict, nodes: list, failing: set, writes: dict) -> int:
    """Advance the NVIDIADriver's nodes one state; returns how many are not on its version (and done) yet."""
    spec = _spec(driver)
    policy = spec.get("upgradePolicy") or {}
    version = wanted_version(spec)
    candidates, in_progress = [], 0
    for node in nodes:
        labels, name = _labels(node), _name(node)
        state = labels.get(UPGRADE_STATE_LABEL) or ""
        current = not version or labels.get(VERSION_LABEL) == version
        if state in IN_PROGRESS:
            following = PATH[PATH.index(state) + 1]
            change = {UPGRADE_STATE_LABEL: following}
            if state == "pod-restart-required":
                if name in failing:
                    change = {UPGRADE_STATE_LABEL: FAILED}
                else:
                    change.update(version_labels(version))
            writes[name] = change
            if change[UPGRADE_STATE_LABEL] in IN_PROGRESS:
                in_progress += 1
        elif state == FAILED:
            continue   # until someone sets upgrade-required again, as upstream
        elif current:
            if state != DONE:
                writes[name] = {UPGRADE_STATE_LABEL: DONE}
        elif state != REQUIRED:
            writes[name] = {UPGRADE_STATE_LABEL: REQUIRED}
            candidates.append(name)
        else:
            candidates.append(name)
    if policy.get("autoUpgrade", True):
        room = limit(policy, len(nodes)) - in_progress
        for name in candidates[:max(room, 0)]:
            writes[name] = {UPGRADE_STATE_LABEL: PATH[0]}

    def running(node):
        return (writes.get(_name(node)) or {}).get(VERSION_LABEL, _labels(node).get(VERSION_LABEL))
    return sum(1 for n in nodes if _state_after(n, writes) != DONE or (version and running(n) != version))
