#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: dra_nodes
short_description: Hand the GPUs of the DRA pools' nodes from the device plugin to the NVIDIA DRA driver
version_added: 0.1.0
description:
  - Resolves the pools with C(sharing.strategy dra) to their nodes and refuses a node that a device-plugin pool
    (none, mig, time-slicing, mps) also takes, or that still carries C(nvidia.com/dra-kubelet-plugin=true) while a
    device-plugin pool takes it. Nothing is written then.
  - Labels each DRA node C(nvidia.com/dra-kubelet-plugin=true) (the DRA driver's kubelet plugin runs there) and
    C(nvidia.com/gpu.deploy.device-plugin=false), which turns the GPU Operator's device plugin off on that node
    only (the operator adds an operand's deploy label only where it is missing).
  - A node that carries the plugin label but is in no DRA pool any more loses it, and loses the device plugin's
    C(false) so that the GPU Operator deploys the device plugin there again.
  - With O(driver_owner=gpu-operator) and at least one DRA pool, sets C(NODE_LABEL_FOR_GPU_POD_EVICTION=nvidia.com/dra-kubelet-plugin)
    in the ClusterPolicy's C(spec.driver.manager.env), so that the operator's driver manager evicts the pods using
    DRA-allocated GPUs before it restarts the driver (GPU Operator 25.10 or later); takes the entry out again when
    no DRA pool remains or the host installs the driver. The CRD declares that list atomic, so the entry is merged
    into the entries others set and written with the resourceVersion read (a concurrent write is read again).
  - Waits until every DRA node publishes a ResourceSlice of C(gpu.nvidia.com), and reports its devices.
  - Only labels that differ are patched, so a second run writes nothing. Check mode returns the plan and sends the writes as server-side dry runs.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  pools:
    description: The node pools (C(kubegpu_node_pools), see the gpu_node_pools module).
  driver_owner:
    description:
      - Who installs the NVIDIA driver (the C(dra_platform) module's C(driver.owner)). V(gpu-operator) - the
        ClusterPolicy's driver manager is told the DRA plugin's node label while a DRA pool exists; V(host) - the
        entry is taken out. Unset - the ClusterPolicy is left alone.
    type: str
    choices: [gpu-operator, host]
  wait:
    description: Wait until each DRA node publishes a ResourceSlice (needs the DRA driver installed).
  timeout:
    description: Seconds to wait for the ResourceSlices.
    default: 600
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubegpu.platform.wait
  - kubegpu.platform.wait.optional
  - kubegpu.platform.inputs.pools
attributes:
  check_mode:
    support: full
    description: Returns the label plan and writes nothing (label patches and the ClusterPolicy update are sent as server-side dry runs).
  diff_mode:
    support: full
    description: Shows each node's labels before and after.
requirements:
  - kubernetes >= 24.2.0
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: Give the DRA pools' GPUs to the DRA driver
  kubegpu.platform.dra_nodes:
    pools:
      - name: dra-h200
        selector: {matchLabels: {nvidia.com/gpu.product: NVIDIA-H200}}
        sharing: {strategy: dra}
"""

RETURN = r"""
ready:
  description:
    - Whether the wait is over. V(false) only when O(wait_round) ran out first; the task's C(until) calls again.
  returned: always
  type: bool
progress:
  description:
    - 'What the last wait saw (cluster/wait.py): C(summary) (one line, for example C(ResourceSlices: 1/2 ready;
      gpu-2: no ResourceSlice of gpu.nvidia.com (40 s))), C(target), C(expected), C(ready) (items ready),
      C(pending) and C(failed) (item to what was last seen and for how long), C(waited_s) (since O(wait_started))
      and C(lines) (one per change seen, with its time).'
  returned: when the module waited
  type: dict
dra_pools:
  description: Per DRA pool, the names of its nodes.
  returned: always
  type: dict
node_labels:
  description: Per node whose labels change, each label and its new value (null when removed).
  returned: always
  type: dict
cluster_policy:
  description: The ClusterPolicy whose driver manager env was read (C(name)), whether the DRA entry is wanted
    (C(wanted)) and the env before and after (C(before), C(after)); null when O(driver_owner) is unset or no
    ClusterPolicy exists.
  returned: always
  type: dict
devices:
  description: Per DRA node, the number of devices its ResourceSlices publish.
  returned: when wait is true, outside check mode
  type: dict
changes:
  description:
    - Each object written (or that would be, in check mode) in order, with C(key) (C(kind/name), or
      C(kind/namespace/name)), C(kind), C(namespace), C(name), the dotted C(fields) that differ and their values
      C(before) and C(after), nested as in the object (C(before) null for a new object, C(after) null for a deleted one).
  returned: always
  type: list
  elements: dict
diff:
  description:
    - C(before) and C(after), each a mapping of object key (C(kind/name) or C(kind/namespace/name)) to the fields that
      differ; an object changed twice in a run shows its first before and its last after.
    - Only in diff mode (C(--diff)), built from RV(changes), which lists the same changes in every mode.
  returned: in diff mode
  type: dict
"""

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import (
    Change,
    change_report,
    patch_labels,
    update_object,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.args import POOLS_ARG_SPEC
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.dra import devices
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import Target, resource_slices
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.driver_values import GPU_OPERATOR, HOST
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.operator_env import (
    ENV_PATH,
    eviction_env,
    manager_env,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.platform import GROUP, best_version
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.pools import dra_pool_nodes, plan_node_labels
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.cluster_policy import CLUSTER_POLICY_API
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DRA_FIELD_MANAGER
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError


def driver_manager_env(module, wanted):
    """Set or take out the DRA entry of the ClusterPolicy's driver manager env. Returns (report, Change or None)."""
    cluster = module.cluster
    if cluster.resource(CLUSTER_POLICY_API, "ClusterPolicy") is None:
        return None, None
    # The operator reconciles the oldest ClusterPolicy and ignores the others.
    policies = sorted(cluster.list(CLUSTER_POLICY_API, "ClusterPolicy"),
                      key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))
    if not policies:
        if wanted:
            module.warn("no ClusterPolicy: the GPU Operator's driver manager was not told %s (install the GPU "
                        "Operator stage first, then run this stage again)" % ENV_PATH)
        return None, None
    policy = policies[0]
    name = policy["metadata"]["name"]
    before = manager_env(policy)
    after = eviction_env(before, wanted)
    report = {"name": name, "wanted": wanted, "before": before, "after": before if after is None else after}
    if after is None:
        return report, None
    change = Change("ClusterPolicy", name, fields=[ENV_PATH], before={"spec": {"driver": {"manager": {"env": before}}}},
                    after={"spec": {"driver": {"manager": {"env": after}}}})

    def mutate(live):
        env = eviction_env(manager_env(live), wanted)
        if env is None:
            return False
        manager = live.setdefault("spec", {}).setdefault("driver", {}).setdefault("manager", {})
        manager["env"] = env
        return True
    update_object(cluster, CLUSTER_POLICY_API, "ClusterPolicy", name, mutate, field_manager=DRA_FIELD_MANAGER,
                  check_mode=module.check_mode)
    return report, change


def run(module):
    cluster = module.cluster
    nodes = cluster.list("v1", "Node")
    try:
        dra_pools = dra_pool_nodes(module.params["pools"], nodes)
    except PoolError as e:
        module.fail_json(msg=str(e), changed=False)
    plan = plan_node_labels(dra_pools, nodes)
    labels = dict((n["metadata"]["name"], n["metadata"].get("labels") or {}) for n in nodes)
    changes = [patch_labels(cluster, "v1", "Node", name, wanted, module.check_mode, labels[name])
               for name, wanted in sorted(plan.items())]
    policy = None
    if module.params["driver_owner"]:
        policy, change = driver_manager_env(module, bool(dra_pools) and module.params["driver_owner"] == GPU_OPERATOR)
        if change is not None:
            changes.append(change)
    result = {"dra_pools": dra_pools, "node_labels": plan, "cluster_policy": policy}
    result.update(change_report(changes))
    dra_nodes = sorted(set(n for pool in dra_pools.values() for n in pool))
    if module.params["wait"] and not module.check_mode and dra_nodes:
        api_version = best_version(cluster.served_versions(GROUP))
        if api_version is None:
            module.fail_json(msg="the API server serves no %s version: run dra_platform first" % GROUP, **result)
        outcome = module.wait_for(Target(api_version, "ResourceSlice", names=dra_nodes, title="ResourceSlices"),
                                  resource_slices(dra_nodes), result, interval=1.0)
        result["devices"] = devices(outcome)
    else:
        result["ready"] = True
    return result


def main():
    module = KubegpuModule(
        argument_spec={
            "driver_owner": {"type": "str", "choices": [GPU_OPERATOR, HOST]},
        },
        shared=(POOLS_ARG_SPEC,),
        supports_check_mode=True,
        waits=True,
        timeout=600,
    )
    module.run(run)


if __name__ == "__main__":
    main()
