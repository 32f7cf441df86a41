#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_node_pools
short_description: Share GPUs per node pool with MIG, time-slicing or MPS, validated before anything is written
version_added: 0.1.0
description:
  - Resolves each pool to its nodes (label selector and, on OpenShift, MachineSets) with list calls, refuses
    overlapping pools and layouts that do not fit the GPU model of every node, then renders the mig-parted
    ConfigMap and the device-plugin ConfigMap (one key per pool, keeping entries it does not own), points the
    ClusterPolicy at them, labels the nodes and the MachineSet templates, and rolls the change out in batches of
    C(max_unavailable) nodes per pool, waiting for C(nvidia.com/mig.config.state=success) and for each node's
    allocatable to match the plan.
  - Stops at the first node that fails, names it and its state, and leaves the remaining nodes untouched.
  - Restarts the device-plugin DaemonSet when the content of its ConfigMap changed, because the device plugin
    does not re-read it otherwise (gpu-operator#1144).
  - Refuses a MIG change on a node that runs GPU pods unless O(drain_gpu_pods=true).
  - In check mode returns the full plan (per pool the nodes, old and new configuration and resources before and
    after) and writes nothing; with C(--diff) shows the ConfigMap and label changes.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  pools:
    description:
      - The node pools. Each has C(name), C(selector) (a Kubernetes label selector) and/or C(machinesets)
        (OpenShift MachineSet names), C(max_unavailable) (nodes changed at once, an integer or a percentage,
        default 1) and C(sharing).
      - C(sharing.strategy) is one of C(none), C(mig), C(time-slicing), C(mps), C(dra). C(sharing.mig.layout) is a
        named layout (C(all-balanced), C(all-1g.10gb)...), a mapping of profile to count, or a list of per-GPU
        entries; C(sharing.mig.strategy) is C(mixed) or C(single). C(sharing.time_slicing) has C(replicas),
        C(rename_by_default), C(fail_requests_greater_than_one), and may be combined with MIG to time-slice MIG
        devices. C(sharing.mps) has C(replicas) and C(rename_by_default). C(dra) only reserves the nodes for the
        DRA stage.
    type: list
    elements: dict
    required: true
  operator_namespace:
    description: Namespace of the GPU Operator. Default is the one the ClusterPolicy reports in C(status.namespace).
    type: str
  mig_configmap:
    description: Name of the mig-parted ConfigMap (key C(config.yaml)) the ClusterPolicy's C(migManager.config) points at.
    type: str
    default: kubegpu-mig-parted-config
  device_plugin_configmap:
    description: Name of the device-plugin ConfigMap the ClusterPolicy's C(devicePlugin.config) points at.
    type: str
    default: kubegpu-device-plugin-config
  drain_gpu_pods:
    description:
      - Before a node's MIG geometry changes, cordon it and evict the pods that use its GPUs, and uncordon it when
        the node is done. Without it a MIG change on a node with GPU pods is refused, listing the pods.
    type: bool
    default: false
  label_nodes:
    description:
      - Label (and so reconfigure) nodes. With V(false) only the ConfigMaps, ClusterPolicy and MachineSets are
        reconciled; the C(node_pools) role does that first, then rolls out batch by batch with O(limit_nodes).
    type: bool
    default: true
  limit_nodes:
    description:
      - Change only these nodes (the ConfigMaps, ClusterPolicy and MachineSets are always reconciled). The
        C(node_pools) role uses it to roll out batch by batch with progress in the job output.
    type: list
    elements: str
  wait:
    description: Wait for every changed node to finish (MIG state success and allocatable as planned).
    type: bool
    default: true
  timeout:
    description: Seconds to wait for one batch of nodes.
    type: int
    default: 900
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
attributes:
  check_mode:
    support: full
    description: Returns the plan and writes nothing.
  diff_mode:
    support: full
    description: Shows ConfigMap and node label changes.
requirements:
  - kubernetes >= 24.2.0
  - PyYAML
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: Share GPUs per pool
  kubegpu.platform.gpu_node_pools:
    pools:
      - name: llm-h100
        selector: {matchLabels: {node.kubernetes.io/instance-type: p5.48xlarge}}
        sharing: {strategy: mig, mig: {layout: {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}}
      - name: embed-l40s
        selector: {matchLabels: {nvidia.com/gpu.product: NVIDIA-L40S}}
        max_unavailable: 50%
        sharing: {strategy: time-slicing, time_slicing: {replicas: 8}}
  register: pools

- name: Show what would change, without changing anything
  kubegpu.platform.gpu_node_pools:
    pools: "{{ kubegpu_node_pools }}"
  check_mode: true
  register: plan
"""

RETURN = r"""
plan:
  description: Per pool the nodes, strategy, config names, batches and per-node changes (labels before/after, whether
    MIG changes, allocatable before and after), plus the rendered ConfigMap contents and warnings.
  returned: always
  type: dict
changes:
  description: Each object written (or that would be, in check mode) with the fields that differ, before and after.
  returned: always
  type: list
  elements: dict
rollout:
  description: Per pool, per node changed, the final state, detail and seconds it took.
  returned: when nodes changed and wait is true
  type: dict
"""

import hashlib

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import (
    apply_configmap,
    apply_object,
    patch_labels,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import ClusterError
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.drain import drain_node, uncordon_node
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import (
    WaitTimeout,
    wait_for_nodes,
    wait_for_operand_configs,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools import check_gpu_pods, plan_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.pool_spec import PoolError, parse_pools

POOL_LABEL = "kubegpu.io/node-pool"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
# Our own field manager: the cluster_policy module owns the rest of the ClusterPolicy under another.
FIELD_MANAGER = "kubegpu.platform/node-pools"
DEVICE_PLUGIN_DAEMONSET = "nvidia-device-plugin-daemonset"
MIG_MANAGER_DAEMONSET = "nvidia-mig-manager"
RESTART_ANNOTATION = "kubegpu.io/device-plugin-config-hash"


def observe(module):
    """Everything the plan needs, read with list calls (none per node)."""
    cluster = module.cluster
    policies = cluster.list("nvidia.com/v1", "ClusterPolicy")
    if not policies:
        raise ClusterError("no ClusterPolicy found: install the GPU Operator first (playbook "
                           "kubegpu.platform.gpu_operator), then share GPUs per pool")
    policy = sorted(policies, key=lambda p: p["metadata"].get("creationTimestamp") or "")[0]
    namespace = module.params["operator_namespace"] or (policy.get("status") or {}).get("namespace")
    if not namespace:
        raise ClusterError("ClusterPolicy {0} reports no status.namespace yet: set operator_namespace".format(
            policy["metadata"]["name"]))
    configmaps = dict((c["metadata"]["name"], c) for c in cluster.list("v1", "ConfigMap", namespace=namespace))
    return {
        "policy": policy, "namespace": namespace, "configmaps": configmaps,
        "nodes": cluster.list("v1", "Node"),
        "machinesets": cluster.list("machine.openshift.io/v1beta1", "MachineSet", namespace="openshift-machine-api"),
    }


def config_hash(data):
    return hashlib.sha256(repr(sorted(data.items())).encode("utf-8")).hexdigest()[:16]


def reconcile_configuration(module, seen, plan):
    """ConfigMaps, ClusterPolicy pointers, device-plugin restart, MachineSet templates. Returns Changes."""
    p, check = module.params, module.check_mode
    ns = seen["namespace"]
    cms = seen["configmaps"]
    changes = [
        apply_configmap(module.cluster, p["mig_configmap"], ns, {"config.yaml": plan["mig_parted_config"]}, check,
                        current=cms.get(p["mig_configmap"]), current_known=True, field_manager=FIELD_MANAGER),
        apply_configmap(module.cluster, p["device_plugin_configmap"], ns, plan["device_plugin_data"], check,
                        current=cms.get(p["device_plugin_configmap"]), current_known=True,
                        field_manager=FIELD_MANAGER),
    ]
    policy = seen["policy"]
    changes.append(apply_object(module.cluster, {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": policy["metadata"]["name"]},
        "spec": {"migManager": {"config": {"name": p["mig_configmap"]}},
                 "devicePlugin": {"config": {"name": p["device_plugin_configmap"]}}}},
        check, current=policy, current_known=True, field_manager=FIELD_MANAGER))
    # The device plugin reads its ConfigMap only when it starts: restart it exactly when the content changed
    # (new configs for nodes to move to), with an annotation derived from the content so that an unchanged
    # config never restarts it. A first ConfigMap needs none: the operator mounts it into new pods.
    old_data = (cms.get(p["device_plugin_configmap"]) or {}).get("data") or {}
    if old_data and old_data != plan["device_plugin_data"]:
        daemonset = module.cluster.get("apps/v1", "DaemonSet", DEVICE_PLUGIN_DAEMONSET, ns)
        if daemonset is not None:
            changes.append(apply_object(module.cluster, {
                "apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": DEVICE_PLUGIN_DAEMONSET, "namespace": ns},
                "spec": {"template": {"metadata": {"annotations": {
                    RESTART_ANNOTATION: config_hash(plan["device_plugin_data"])}}}}},
                check, current=daemonset, current_known=True, field_manager=FIELD_MANAGER))
    changes.extend(machineset_changes(module, seen, plan))
    return changes


def machineset_changes(module, seen, plan):
    """New machines of a pool's MachineSets come up with the pool's labels, so they join the pool."""
    out = []
    by_name = dict((m["metadata"]["name"], m) for m in seen["machinesets"])
    for pool_raw, pool_plan in zip(module.params["pools"], plan["pools"]):
        labels = pool_plan["labels"]
        for ms_name in pool_raw.get("machinesets") or []:
            ms = by_name.get(ms_name)
            if ms is None:
                raise ClusterError("pool '{0}': machinesets: MachineSet {1} not found in openshift-machine-api "
                                   "(found: {2})".format(pool_plan["name"], ms_name, ", ".join(sorted(by_name)) or "none"))
            out.append(apply_object(module.cluster, {
                "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
                "metadata": {"name": ms_name, "namespace": "openshift-machine-api"},
                "spec": {"template": {"spec": {"metadata": {"labels": labels}}}}},
                module.check_mode, current=ms, current_known=True, field_manager=FIELD_MANAGER))
    return out


def roll_out(module, seen, plan, busy):
    """Label nodes batch by batch per pool, waiting for each batch. Returns (label changes, rollout, failure)."""
    limit = set(module.params["limit_nodes"] or [])
    labels = dict((n["metadata"]["name"], dict(n["metadata"].get("labels") or {})) for n in seen["nodes"])
    changes, rollout = [], {}
    # Nodes no pool selects any more give back our labels too (one at a time, after the pools).
    entries = [(p, "{0}={1}".format(POOL_LABEL, p["name"])) for p in plan["pools"]]
    entries.append((dict(plan["released"], name="(released)"), None))
    for pool, selector in entries:
        for batch in pool["batches"]:
            batch = [n for n in batch if not limit or n in limit]
            if not batch:
                continue
            failure = roll_batch(module, pool, batch, selector, labels, busy, changes, rollout)
            if failure:
                return changes, rollout, failure
    return changes, rollout, None


def roll_batch(module, pool, batch, selector, labels, busy, changes, rollout):
    """Change one batch in two steps and wait for each: first the MIG geometry, then the device plugin config.

    Switching the device plugin's config (and with it the MIG strategy) only once the geometry is in place
    keeps a node whose MIG change fails on its old, consistent configuration instead of advertising an
    invalid one (gpu-operator#460). Returns a failure message or None.
    """
    mig_first = [n for n in batch if pool["node_changes"][n]["mig_change"]]
    drained = []
    # The state label still says `success` for the previous config until mig-manager picks the change up;
    # setting it to `pending` with the new config means only mig-manager's own verdict can end the wait.
    steps = [(mig_first, lambda n: dict([(k, v) for k, v in pool["node_changes"][n]["labels"].items()
                                         if k in (MIG_CONFIG_LABEL, POOL_LABEL)] + [(MIG_STATE_LABEL, "pending")]),
              lambda n: {"mig_change": True}),
             (batch, lambda n: pool["node_changes"][n]["labels"], lambda n: pool["node_changes"][n])]
    for nodes, wanted_labels, expectation in steps:
        for name in nodes:
            if name in busy and name not in drained and not module.check_mode:
                drain_node(module.cluster, name, busy[name], module.params["timeout"])
                drained.append(name)
            change = patch_labels(module.cluster, "v1", "Node", name, wanted_labels(name), module.check_mode,
                                  labels[name])
            labels[name].update(change.after or {})
            changes.append(change)
        if not nodes or module.check_mode or not module.params["wait"]:
            continue
        try:
            states, failed = wait_for_nodes(module.cluster, dict((n, expectation(n)) for n in nodes),
                                            selector if nodes is batch else None, module.params["timeout"])
        except WaitTimeout as e:
            return "pool '{0}': batch {1}: {2}".format(pool["name"], ", ".join(batch), e)
        rollout.setdefault(pool["name"], {}).update(
            (n, {"state": s[0], "detail": s[1], "seconds": round(s[2], 1)}) for n, s in states.items())
        if failed:
            untouched = [n for b in pool["batches"] for n in b if n != failed and n not in rollout[pool["name"]]]
            message = ("pool '{0}': node {1} failed: {2}. Its device plugin config was left as it was, and so "
                       "were the pool's other nodes ({3}).")
            return message.format(pool["name"], failed, states[failed][1], ", ".join(untouched) or "none left")
    for name in drained:
        uncordon_node(module.cluster, name)
    return None


def diff_of(changes):
    before, after = [], []
    for c in changes:
        if c.changed:
            title = "{0} {1}{2}".format(c.kind, (c.namespace + "/") if c.namespace else "", c.name)
            before.append({title: c.before})
            after.append({title: c.after})
    return {"before": before, "after": after}


def run(module):
    try:
        pools = parse_pools(module.params["pools"])
        seen = observe(module)
        cms = seen["configmaps"]
        plan = plan_pools(pools, seen["nodes"],
                          ((cms.get(module.params["mig_configmap"]) or {}).get("data") or {}).get("config.yaml"),
                          (cms.get(module.params["device_plugin_configmap"]) or {}).get("data"))
    except PoolError as e:
        module.fail_json(msg=str(e))
    busy = check_gpu_pods(plan, module.cluster.list("v1", "Pod")) if any(
        c["mig_change"] for p in plan["pools"] for c in p["node_changes"].values()) else []
    if busy and not module.params["drain_gpu_pods"]:
        module.fail_json(msg="MIG change refused on nodes running GPU pods: {0}. A MIG change takes the node's GPUs "
                             "away from them; stop them or set drain_gpu_pods: true.".format(
                                 "; ".join("{0}: {1}".format(b["node"], ", ".join(b["pods"])) for b in busy)),
                         plan=plan)
    changes = reconcile_configuration(module, seen, plan)
    if not module.check_mode and any(c.changed for c in changes):
        try:
            wait_for_operand_configs(module.cluster, seen["namespace"], {
                DEVICE_PLUGIN_DAEMONSET: ("config", module.params["device_plugin_configmap"]),
                MIG_MANAGER_DAEMONSET: ("mig-parted-config", module.params["mig_configmap"])}, module.params["timeout"])
        except WaitTimeout as e:
            module.fail_json(msg=str(e), changes=[c.as_dict() for c in changes if c.changed], plan=plan)
    label_changes, rollout, failure = [], {}, None
    if module.params["label_nodes"]:
        label_changes, rollout, failure = roll_out(module, seen, plan, dict((b["node"], b["pods"]) for b in busy))
    changes += label_changes
    if not failure and module.params["label_nodes"] and not module.params["limit_nodes"] and module.params["wait"] \
            and plan["mig_parted_config_final"] != plan["mig_parted_config"]:
        # Every node has moved to its pool's current configs: drop those no node names any more.
        changes.append(apply_configmap(module.cluster, module.params["mig_configmap"], seen["namespace"],
                                       {"config.yaml": plan["mig_parted_config_final"]}, module.check_mode,
                                       field_manager=FIELD_MANAGER))
    if not failure and module.params["label_nodes"] and not module.params["limit_nodes"] and module.params["wait"] \
            and plan["device_plugin_data_final"] != plan["device_plugin_data"]:
        # Keys only removed, never changed: the device plugin needs no restart for that.
        changes.append(apply_configmap(module.cluster, module.params["device_plugin_configmap"], seen["namespace"],
                                       plan["device_plugin_data_final"], module.check_mode, field_manager=FIELD_MANAGER))
    result = {"changed": any(c.changed for c in changes), "plan": plan, "rollout": rollout,
              "changes": [c.as_dict() for c in changes if c.changed]}
    if module._diff:
        result["diff"] = diff_of(changes)
    if failure:
        module.fail_json(msg=failure, **result)
    return result


def main():
    module = KubegpuModule(
        argument_spec={
            "pools": {"type": "list", "elements": "dict", "required": True},
            "operator_namespace": {"type": "str"},
            "mig_configmap": {"type": "str", "default": "kubegpu-mig-parted-config"},
            "device_plugin_configmap": {"type": "str", "default": "kubegpu-device-plugin-config"},
            "drain_gpu_pods": {"type": "bool", "default": False},
            "label_nodes": {"type": "bool", "default": True},
            "limit_nodes": {"type": "list", "elements": "str"},
            "wait": {"type": "bool", "default": True},
            "timeout": {"type": "int", "default": 900},
        },
        supports_check_mode=True,
    )
    module.run(run)


if __name__ == "__main__":
    main()
