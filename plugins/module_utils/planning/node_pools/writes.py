# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every object a node pools run writes, decided before the first write.

plan_pools (node_pools.py) says what each node's labels become and what the ConfigMaps hold;
plan_writes adds what else is written and checks what plan_pools cannot see:

- whether anything needs our ConfigMaps at all: on a cluster where no pool selects a node and
  nothing of ours exists yet, a run writes nothing (a pool that selects nothing writes nothing for
  itself);
- the two ConfigMaps (content during the roll-out, and once every node has moved), the
  ClusterPolicy's pointers to them, and the MachineSet templates (an unknown MachineSet is refused
  here, before anything is written);
- whether the device plugin must restart, and the record that makes that decision survive runs.

The device plugin reads its ConfigMap only when its pods start (gpu-operator#1144). What it
read last is recorded as a digest of the effective configuration (the keys and texts that stay
once the roll-out is over, foreign keys included) in the ClusterPolicy annotation
kubegpu.io/device-plugin-config. A restart is planned when the record differs from the digest
now wanted, an absent record and an empty ConfigMap included, unless this run points the
ClusterPolicy at the ConfigMap for the first time (the operator then rewrites the DaemonSet, whose
new pods read the content written just before). The restart is a pod template annotation of the
DaemonSet (what `kubectl rollout restart` does) written before the record: a run stopped between
the two restarts once more in the next run, never less. Old keys dropped after the roll-out are
not part of the digest, so dropping them restarts nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DEVICE_PLUGIN_CONFIG_ANNOTATION
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import (
    MACHINE_API_NAMESPACE,
    PoolError,
)


def config_digest(data):
    """Return the digest of device plugin ConfigMap data: equal data, equal digest, whatever the key order."""
    text = json.dumps(dict(data or {}), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _spec_get(obj, *path):
    value = obj or {}
    for key in path:
        value = (value or {}).get(key) if isinstance(value, dict) else None
    return value


def plan_writes(plan, pools, observed, names):
    """Return every object besides node labels that the run writes, in the order it writes them.

    plan: plan_pools' result. pools: the parsed Pools (for their machinesets). observed:
    {"policy": the ClusterPolicy dict, "namespace": the operator namespace, "configmaps": {name: dict},
    "machinesets": [dicts] or None when the cluster does not serve MachineSets,
    "device_plugin_daemonset": dict or None}. names: {"mig_configmap", "device_plugin_configmap"}.

    Returns {"needed", "configmaps": [{name, namespace, data, data_final}], "device_plugin_restart":
    {daemonset, namespace, digest, reason} or None, "cluster_policy": {name, spec, annotations} or None,
    "machinesets": [{name, namespace, labels}], "digest"}. Raises PoolError for a MachineSet that
    does not exist.
    """
    policy = observed["policy"]
    namespace = observed["namespace"]
    configmaps = observed.get("configmaps") or {}
    mig_name, dp_name = names["mig_configmap"], names["device_plugin_configmap"]
    machinesets = machineset_writes(plan, pools, observed.get("machinesets"))
    points_at_ours = (_spec_get(policy, "spec", "migManager", "config", "name") == mig_name
                      and _spec_get(policy, "spec", "devicePlugin", "config", "name") == dp_name)
    needed = bool(
        any(entry["mig_config"] or entry["device_plugin_config"] for entry in plan["pools"])
        or plan["released"]["node_changes"] or mig_name in configmaps or dp_name in configmaps or points_at_ours
    )
    digest = config_digest(plan["device_plugin_data_final"])
    result = {"needed": needed, "configmaps": [], "device_plugin_restart": None, "cluster_policy": None,
              "machinesets": machinesets, "digest": digest}
    if not needed:
        return result
    result["configmaps"] = [
        {"name": mig_name, "namespace": namespace, "data": {"config.yaml": plan["mig_parted_config"]},
         "data_final": {"config.yaml": plan["mig_parted_config_final"]}},
        {"name": dp_name, "namespace": namespace, "data": plan["device_plugin_data"],
         "data_final": plan["device_plugin_data_final"]},
    ]
    record = ((policy.get("metadata") or {}).get("annotations") or {}).get(DEVICE_PLUGIN_CONFIG_ANNOTATION)
    pointer_changes = _spec_get(policy, "spec", "devicePlugin", "config", "name") != dp_name
    daemonset = observed.get("device_plugin_daemonset")
    if record != digest and not pointer_changes and daemonset is not None:
        result["device_plugin_restart"] = {
            "daemonset": daemonset["metadata"]["name"], "namespace": daemonset["metadata"].get("namespace"),
            "digest": digest,
            "reason": "the device plugin last read configuration %s, this run wants %s"
                      % (record or "(unknown)", digest),
        }
    result["cluster_policy"] = {
        "name": policy["metadata"]["name"],
        "spec": {"migManager": {"config": {"name": mig_name}}, "devicePlugin": {"config": {"name": dp_name}}},
        "annotations": {DEVICE_PLUGIN_CONFIG_ANNOTATION: digest},
    }
    return result


def machineset_writes(plan, pools, machinesets):
    """Return [{name, namespace, labels}] for the MachineSets pools name; refuse the ones that do not exist."""
    wanted = [(pool, entry) for pool, entry in zip(pools, plan["pools"]) if pool.machinesets]
    if not wanted:
        return []
    if machinesets is None:
        pool = wanted[0][0]
        raise PoolError(
            "pool '%s': machinesets %s: this cluster does not serve MachineSets (machine.openshift.io/v1beta1, "
            "OpenShift's Machine API); select the pool's nodes with a selector instead"
            % (pool.name, ", ".join(pool.machinesets))
        )
    found = sorted(item["metadata"]["name"] for item in machinesets)
    writes = []
    for pool, entry in wanted:
        missing = [name for name in pool.machinesets if name not in found]
        if missing:
            raise PoolError(
                "pool '%s': machinesets: MachineSet %s not found in namespace %s (found: %s); correct the name or "
                "create the MachineSet first"
                % (pool.name, ", ".join(missing), MACHINE_API_NAMESPACE, ", ".join(found) or "none")
            )
        for name in pool.machinesets:
            writes.append({"name": name, "namespace": MACHINE_API_NAMESPACE, "labels": entry["labels"]})
    return writes
