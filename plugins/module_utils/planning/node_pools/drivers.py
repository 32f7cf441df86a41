# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A driver per node pool: the pool's `driver` key, its NVIDIADriver, and what is refused before any write.

A pool may name its driver::

    driver:
      version: "580.173.02"     # a full version, or a branch ("580") with precompiled: true
      type: gpu                 # gpu | vgpu | vgpu-host-manager (NVIDIADriver spec.driverType)
      precompiled: false        # spec.usePrecompiled
      kernel_module_type: auto  # auto | open | proprietary
      auto_upgrade: true        # spec.upgradePolicy.autoUpgrade
      repository: nvcr.io/nvidia
      image: driver

The node_pools stage renders one NVIDIADriver per such pool, named kubegpu-pool-<pool>, whose spec.nodeSelector is
the pool label (kubegpu.io/node-pool: <pool>) that the same stage puts on each of the pool's nodes and on its
MachineSet templates: one label key, one value per pool, so no two of our selectors can match one node. The rest of
the GPU nodes take the default NVIDIADriver (spec.default: true, no nodeSelector), which GPU Operator v26.7.0 applies
to "GPU nodes that do not match any non-default NVIDIADriver nodeSelector" (the CRD's description of spec.default);
the gpu_operator stage owns it (the chart's `default` CR, driver.per_node_pool: true). The pool's
`max_unavailable` becomes spec.upgradePolicy.maxUnavailable, so the operator's upgrade controller rolls a version
change over that pool's nodes only, that many at a time (maxParallelUpgrades 0: no other limit).

Refused before any write (plan_drivers): a pool driver while the ClusterPolicy is not in NVIDIADriver mode (the
operator would ignore it), a change of an immutable field (driverType, usePrecompiled: the CRD's
x-kubernetes-validations `self == oldSelf`), a node that two non-default NVIDIADrivers would select (the operator
marks both notReady, ConflictingNodeSelector) and a second default NVIDIADriver. Pure: plain dicts in, plain dicts
out.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.cluster_policy import (
    NVIDIA_DRIVER_API,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    COLLECTION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    NAME_PREFIX,
    POOL_LABEL,
)

# kubegpu-pool-<pool>: never the name of the gpu_operator stage's default NVIDIADriver, whatever the pool's name.
DRIVER_NAME_PREFIX = NAME_PREFIX + "pool-"
DRIVER_TYPES = ("gpu", "vgpu", "vgpu-host-manager")
KERNEL_MODULE_TYPES = ("auto", "open", "proprietary")

# The shape of a pool's `driver` key in Ansible argument-spec terms (spec.py's POOL_OPTIONS holds it).
DRIVER_OPTIONS = {
    "version": {"type": "str", "required": True},
    "type": {"type": "str", "default": "gpu", "choices": list(DRIVER_TYPES)},
    "precompiled": {"type": "bool", "default": False},
    "kernel_module_type": {"type": "str", "default": "auto", "choices": list(KERNEL_MODULE_TYPES)},
    "auto_upgrade": {"type": "bool", "default": True},
    "repository": {"type": "str", "default": "nvcr.io/nvidia"},
    "image": {"type": "str", "default": "driver"},
}
_DRIVER_KEYS = tuple(DRIVER_OPTIONS)
# The NVIDIADriver fields the CRD declares immutable, their spec names and the pool keys they come from.
IMMUTABLE = (("driverType", "type", "gpu"), ("usePrecompiled", "precompiled", False))

_BRANCH = re.compile(r"^[0-9]+$")
_VERSION = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9]+)?$")


class DriverError(ValueError):
    """A pool driver that cannot be applied; the message names the pool or object, the field, the value and what
    is valid."""


@dataclass(frozen=True)
class PoolDriver:
    """The driver a pool names (its `driver` key), checked."""

    version: str
    type: str = "gpu"
    precompiled: bool = False
    kernel_module_type: str = "auto"
    auto_upgrade: bool = True
    repository: str = "nvcr.io/nvidia"
    image: str = "driver"


def parse_driver(subject, raw):
    """Return the PoolDriver of a pool's `driver` key (subject: "pool 'x'"), or None when absent.

    Raises DriverError naming subject, the field, the value and what is valid.
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise DriverError("%s: driver is %r; expected a mapping with keys %s" % (subject, raw, ", ".join(_DRIVER_KEYS)))
    unknown = sorted(str(key) for key in raw if key not in _DRIVER_KEYS)
    if unknown:
        raise DriverError("%s: unknown key%s %s in driver (valid: %s)" % (
            subject, "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(_DRIVER_KEYS)))
    values = dict((key, raw[key] if raw.get(key) is not None else option.get("default"))
                  for key, option in DRIVER_OPTIONS.items())
    version = values["version"]
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        version = str(version)
    if not isinstance(version, str) or not (_BRANCH.match(version) or _VERSION.match(version)):
        raise DriverError("%s: driver.version is %r; expected a driver version such as '580.173.02', or a branch "
                          "such as '580' with driver.precompiled: true" % (subject, values["version"]))
    for key in ("precompiled", "auto_upgrade"):
        if not isinstance(values[key], bool):
            raise DriverError("%s: driver.%s is %r; expected true or false" % (subject, key, values[key]))
    for key, valid in (("type", DRIVER_TYPES), ("kernel_module_type", KERNEL_MODULE_TYPES)):
        if values[key] not in valid:
            raise DriverError("%s: driver.%s is %r; expected one of %s" % (subject, key, values[key], ", ".join(valid)))
    for key in ("repository", "image"):
        if not isinstance(values[key], str) or not values[key]:
            raise DriverError("%s: driver.%s is %r; expected a non-empty string" % (subject, key, values[key]))
    # Precompiled driver images are tagged by branch and kernel; the others by full version (NVIDIADriver
    # spec.version: "NVIDIA Driver version (or just branch for precompiled drivers)").
    if _BRANCH.match(version) and not values["precompiled"]:
        raise DriverError("%s: driver.version is %r, a branch; a branch needs driver.precompiled: true (precompiled "
                          "images are tagged by branch), otherwise give the full version, e.g. '%s.173.02'"
                          % (subject, version, version))
    values["version"] = version
    return PoolDriver(**values)


def driver_name(pool_name):
    """The NVIDIADriver of a pool: kubegpu-pool-<pool> (pool names have at most 40 characters)."""
    return DRIVER_NAME_PREFIX + pool_name


def render_driver(pool_name, driver, max_unavailable):
    """The NVIDIADriver object of a pool with a driver; max_unavailable as the pool has it (2 or "25%")."""
    return {
        "apiVersion": NVIDIA_DRIVER_API,
        "kind": "NVIDIADriver",
        "metadata": {"name": driver_name(pool_name), "labels": dict(MANAGED_BY, **{POOL_LABEL: pool_name})},
        "spec": {
            "default": False,
            "driverType": driver.type,
            "usePrecompiled": driver.precompiled,
            "kernelModuleType": driver.kernel_module_type,
            "repository": driver.repository,
            "image": driver.image,
            "version": driver.version,
            "nodeSelector": {POOL_LABEL: pool_name},
            # maxParallelUpgrades 0 is "no limit" upstream: maxUnavailable, the pool's, is the one bound.
            "upgradePolicy": {"autoUpgrade": driver.auto_upgrade, "maxParallelUpgrades": 0,
                              "maxUnavailable": max_unavailable},
        },
    }


def ours(obj):
    """Whether an NVIDIADriver is a pool driver this stage wrote (its managed-by label and its name)."""
    meta = obj.get("metadata") or {}
    return (meta.get("labels") or {}).get(MANAGED_BY_LABEL) == COLLECTION \
        and (meta.get("name") or "").startswith(DRIVER_NAME_PREFIX)


def is_default(obj):
    return bool((obj.get("spec") or {}).get("default"))


def selects(obj, labels):
    """Whether a non-default NVIDIADriver's nodeSelector (a plain map: every pair must be on the node) matches labels.
    An empty or absent nodeSelector on a non-default NVIDIADriver matches every node."""
    selector = (obj.get("spec") or {}).get("nodeSelector") or {}
    return all(labels.get(key) == value for key, value in selector.items())


def immutable_problems(desired, live):
    """Each immutable field a desired pool NVIDIADriver would change on the live one, as a sentence."""
    if live is None:
        return []
    name = desired["metadata"]["name"]
    pool = desired["metadata"]["labels"][POOL_LABEL]
    problems = []
    for field, key, default in IMMUTABLE:
        was = (live.get("spec") or {}).get(field, default)
        wanted = desired["spec"][field]
        if was != wanted:
            problems.append(
                "pool '%s': driver.%s %r needs a new NVIDIADriver: NVIDIADriver %s has spec.%s %r, which the CRD "
                "declares immutable; deleting and re-creating it would take the driver off all the pool's nodes at "
                "once. Keep driver.%s: %r, or move the nodes to a new pool with that driver (they move "
                "max_unavailable at a time)" % (pool, key, wanted, name, field, was, key, was))
    return problems


def nodes_after(nodes, plan):
    """{node name: labels} once the plan's label changes are made (a node joining or leaving a pool included)."""
    after = dict((n["metadata"]["name"], dict((n["metadata"].get("labels") or {}))) for n in nodes)
    for entry in list(plan["pools"]) + [plan["released"]]:
        for name, change in entry["node_changes"].items():
            labels = after.setdefault(name, {})
            for key, value in change["labels"].items():
                if value is None:
                    labels.pop(key, None)
                else:
                    labels[key] = value
    return after


def overlap_problems(drivers, labels_by_node):
    """Nodes that two non-default NVIDIADrivers would select, and default NVIDIADrivers beyond the first.

    drivers: every NVIDIADriver there will be (ours as rendered, the others as live). labels_by_node: {node: labels}.
    """
    problems = []
    defaults = sorted(d["metadata"]["name"] for d in drivers if is_default(d))
    if len(defaults) > 1:
        problems.append("NVIDIADrivers %s are all spec.default: true; the GPU Operator takes one default NVIDIADriver "
                        "for the nodes no other selects: keep one" % ", ".join(defaults))
    selectors = sorted((d for d in drivers if not is_default(d)), key=lambda d: d["metadata"]["name"])
    clashes = {}
    for node in sorted(labels_by_node):
        matched = tuple(d["metadata"]["name"] for d in selectors if selects(d, labels_by_node[node]))
        if len(matched) > 1:
            clashes.setdefault(matched, []).append(node)
    for matched, names in sorted(clashes.items()):
        shown = ", ".join(names[:5]) + (" and %d more" % (len(names) - 5) if len(names) > 5 else "")
        problems.append(
            "NVIDIADrivers %s would all select node%s %s (nodeSelectors %s): the GPU Operator installs no driver there "
            "and marks them notReady (ConflictingNodeSelector); change or delete the NVIDIADriver that is not a "
            "pool's, or take the node out of the pool"
            % (", ".join(matched), "s" if len(names) > 1 else "", shown,
               "; ".join("%s %s" % (d["metadata"]["name"], _selector_text(d)) for d in selectors
                         if d["metadata"]["name"] in matched)))
    return problems


def _selector_text(obj):
    selector = (obj.get("spec") or {}).get("nodeSelector") or {}
    return "{%s}" % ", ".join("%s: %s" % item for item in sorted(selector.items()))


def plan_drivers(pools, live_drivers, labels_by_node, policy_spec):
    """The NVIDIADrivers a node pools run writes and deletes, and every reason to refuse it.

    pools: [(name, PoolDriver or None, max_unavailable)]. live_drivers: every live NVIDIADriver (None when the API
    server does not serve them; [] when the ClusterPolicy is not in NVIDIADriver mode, which is refused anyway).
    labels_by_node: nodes_after(). policy_spec: the ClusterPolicy's spec, None when there is none (its absence is
    refused elsewhere).

    Returns {"drivers": [objects to apply], "delete": [names of ours no pool names any more], "problems": [...]}.
    A pool that drops its driver key has its NVIDIADriver deleted: its nodes fall back to the default one.
    """
    wanted = [(name, driver, max_unavailable) for name, driver, max_unavailable in pools if driver is not None]
    live = list(live_drivers or [])
    out = {"drivers": [], "delete": [], "problems": []}
    if wanted and live_drivers is None and policy_spec is not None:
        out["problems"].append("pool '%s' names a driver, but the API server does not serve %s NVIDIADriver: install "
                               "GPU Operator v26.7.0 or newer first (playbook kubegpu.platform.gpu_operator)"
                               % (wanted[0][0], NVIDIA_DRIVER_API))
        return out
    if wanted and policy_spec is not None and not (policy_spec.get("driver") or {}).get("useNvidiaDriverCRD"):
        out["problems"].append(
            "pool '%s' names a driver, but the ClusterPolicy has driver.useNvidiaDriverCRD false, so the GPU Operator "
            "would ignore NVIDIADrivers and install its one driver everywhere: set kubegpu_gpu_operator.driver."
            "per_node_pool: true and run the gpu_operator playbook first" % wanted[0][0])
    by_name = dict((d["metadata"]["name"], d) for d in live)
    rendered = [render_driver(name, driver, max_unavailable) for name, driver, max_unavailable in wanted]
    for obj in rendered:
        other = by_name.get(obj["metadata"]["name"])
        if other is not None and not ours(other):
            out["problems"].append("NVIDIADriver %s exists and is not this collection's (no %s=%s label): rename or "
                                   "delete it, it has the name pool '%s' needs" % (
                                       obj["metadata"]["name"], MANAGED_BY_LABEL, COLLECTION,
                                       obj["metadata"]["labels"][POOL_LABEL]))
        out["problems"].extend(immutable_problems(obj, other))
    names = set(obj["metadata"]["name"] for obj in rendered)
    out["delete"] = sorted(d["metadata"]["name"] for d in live if ours(d) and d["metadata"]["name"] not in names)
    kept = [d for d in live if d["metadata"]["name"] not in names and d["metadata"]["name"] not in out["delete"]]
    if rendered:
        out["problems"].extend(overlap_problems(rendered + kept, labels_by_node))
    out["drivers"] = copy.deepcopy(rendered)
    return out
