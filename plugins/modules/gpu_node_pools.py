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
    ClusterPolicy at them, labels the nodes and the MachineSet templates, and rolls the change out with at most
    C(max_unavailable) nodes per pool in flight, waiting for C(nvidia.com/mig.config.state=success) and for each
    node's allocatable to match the plan. The next node starts as soon as one in flight is done (as a DaemonSet's
    rolling update), and a node's device plugin config follows its own MIG success, not the slowest node's.
  - Plans every object it writes before the first write (returned in RV(plan), key C(objects), and per-node steps), and
    refuses, before anything is written, overlapping pools, layouts that do not fit, unknown MachineSets, GPU pods
    in the way and a node whose MIG change failed on the config wanted again. A pool that selects no node writes
    nothing for itself.
  - Stops at the first node that fails, after the nodes in flight finished; names it, its state, the nodes it
    uncordoned and every node not started. No further node, of its pool or of later pools, is started.
  - Restarts the device-plugin DaemonSet exactly once per change of its effective configuration, because the
    device plugin does not re-read its ConfigMap otherwise (gpu-operator#1144); what it last read is recorded in
    the ClusterPolicy annotation C(kubegpu.io/device-plugin-config), so the decision holds across runs.
  - Carries on where a stopped run left nodes (MIG change pending, device-plugin step not done, C(-MIG-INVALID)
    labels, cordoned by its drain); nodes already done are not changed again.
  - Refuses a MIG change on a node that runs GPU pods unless O(drain_gpu_pods=true).
  - Writes an NVIDIADriver C(kubegpu-pool-<pool>) for each pool with a C(driver) (its nodes by C(kubegpu.io/node-pool),
    its upgrades paced by the pool's C(max_unavailable)) and deletes the one of a pool that names none any more;
    refuses, before anything is written, a pool driver while the ClusterPolicy is not in NVIDIADriver mode, a change
    of an immutable NVIDIADriver field, and a node two non-default NVIDIADrivers would select.
  - In check mode returns the full plan (per pool the nodes, old and new configuration and resources before and
    after) and writes nothing (the writes are sent as server-side dry runs; a label patch once per distinct patch);
    with C(--diff) shows the ConfigMap and label changes.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  pools:
    description:
      - The node pools (C(kubegpu_node_pools)). A pool needs C(selector), C(machinesets) or both; with both a node
        must match both. Pools must not overlap.
      - The keys, types and choices below are those of C(POOL_OPTIONS) in C(plugins/module_utils/planning/node_pools/spec.py),
        which a unit test compares with this documentation; the node_pools role's argument spec is generated from it
        (C(tools/pool_schema.py)).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Lowercase letters, digits and C(-), at most 40 characters, unique; configs are named C(kubegpu-<name>).
        type: str
        required: true
      selector:
        description: A Kubernetes label selector over node labels; an empty one is refused (it would take every node).
        type: dict
        suboptions:
          matchLabels:
            description: Label - value; quote C(true), C(false) and numbers.
            type: dict
          matchExpressions:
            description: Requirements over node labels.
            type: list
            elements: dict
            suboptions:
              key:
                description: The label key.
                type: str
                required: true
              operator:
                description: C(In) and C(NotIn) take C(values); C(Exists) and C(DoesNotExist) take none.
                type: str
                required: true
                choices: [In, NotIn, Exists, DoesNotExist]
              values:
                description: Label values.
                type: list
                elements: str
      machinesets:
        description: OpenShift - the MachineSets (namespace C(openshift-machine-api)) whose machines join the pool.
        type: list
        elements: str
      max_unavailable:
        description: Nodes changed at once - a whole number of 1 or more, or a percentage of the pool's nodes (V(25%)).
        type: raw
        default: 1
      sharing:
        description: How the pool's GPUs are shared.
        type: dict
        required: true
        suboptions:
          strategy:
            description: V(dra) only reserves the nodes for the DRA stage.
            type: str
            required: true
            choices: [none, mig, time-slicing, mps, dra]
          mig:
            description: Strategy C(mig) only.
            type: dict
            suboptions:
              layout:
                description:
                  - A named layout (V(all-balanced), V(all-1g.10gb)...), C({profile - count}) per GPU, or a list of
                    per-GPU entries C({devices, profiles}); checked against the GPU model of every node of the pool.
                type: raw
                required: true
              strategy:
                description: How MIG devices are advertised; default what the layout needs.
                type: str
                choices: [single, mixed]
          time_slicing:
            description: Strategy C(time-slicing), or C(mig) to time-slice every MIG device.
            type: dict
            suboptions:
              replicas:
                description: Each device advertised this many times (2 or more).
                type: int
                required: true
              rename_by_default:
                description: Advertise the replicas as C(<resource>.shared).
                type: bool
                default: false
              fail_requests_greater_than_one:
                description: Refuse a container that asks for more than one replica; unset keeps the device plugin's default.
                type: bool
          mps:
            description: Strategy C(mps) only; MPS cannot share MIG devices.
            type: dict
            suboptions:
              replicas:
                description: Each GPU advertised this many times (2 or more).
                type: int
                required: true
              rename_by_default:
                description: Advertise the replicas as C(<resource>.shared).
                type: bool
                default: false
              fail_requests_greater_than_one:
                description: Refuse a container that asks for more than one replica (the default for MPS); V(false) needs device plugin v0.20.0+.
                type: bool
      driver:
        description:
          - The pool's own NVIDIA driver - an NVIDIADriver C(kubegpu-pool-<name>) selecting the pool's nodes (label
            C(kubegpu.io/node-pool)), upgraded by the GPU Operator C(max_unavailable) nodes at a time. Without it the
            pool's nodes take the default NVIDIADriver. Needs the ClusterPolicy in NVIDIADriver mode
            (C(kubegpu_gpu_operator.driver.per_node_pool=true)).
          - C(type) and C(precompiled) of an existing pool driver cannot change (immutable upstream); such a change is
            refused before anything is written.
        type: dict
        suboptions:
          version:
            description: A driver version (V(580.173.02)), or a branch (V(580)) with O(pools[].driver.precompiled=true).
            type: str
            required: true
          type:
            description: NVIDIADriver C(spec.driverType).
            type: str
            default: gpu
            choices: [gpu, vgpu, vgpu-host-manager]
          precompiled:
            description: Precompiled driver images (C(spec.usePrecompiled)).
            type: bool
            default: false
          kernel_module_type:
            description: C(spec.kernelModuleType).
            type: str
            default: auto
            choices: [auto, open, proprietary]
          auto_upgrade:
            description: Let the GPU Operator roll a version change over the pool's nodes (C(spec.upgradePolicy.autoUpgrade)).
            type: bool
            default: true
          repository:
            description: Image repository of the driver (C(spec.repository)).
            type: str
            default: nvcr.io/nvidia
          image:
            description: Image name of the driver (C(spec.image)).
            type: str
            default: driver
  operator_namespace:
    description: Namespace of the GPU Operator; where the mig-parted and device-plugin ConfigMaps are written.
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
  start_first_batch:
    description:
      - With O(label_nodes=false), once the configuration is in place, start the nodes of the plan's first batch (the
        first of the plan's C(steps)) and return as soon as they have started, as a call with O(limit_nodes) and
        O(return_when=started) would; the call for that batch carries them on. The C(node_pools) role sets it, so that
        the roll-out starts without the start-up of a second call. Nothing starts in check mode or with O(wait=false).
    type: bool
    default: false
  limit_nodes:
    description:
      - Start only these nodes (the ConfigMaps, ClusterPolicy and MachineSets are always reconciled). The
        C(node_pools) role uses it to roll out batch by batch with progress in the job output.
    type: list
    elements: str
  carry_nodes:
    description:
      - Nodes an earlier call started (the C(node_pools) role passes the batch before this one) - carried on (their
        device plugin step, their wait) and counted against C(max_unavailable) before a node of O(limit_nodes) starts,
        each of which starts as soon as one of them is done.
    type: list
    elements: str
  return_when:
    description:
      - V(done) waits until every node is done. V(started) returns once every node of O(limit_nodes) has started and
        every node of O(carry_nodes) is done - the next call carries the started ones on (the C(node_pools) role, for
        every batch but a pool's last).
    type: str
    choices: [done, started]
    default: done
  wait:
    description:
      - Wait for every changed node to finish (MIG state success and allocatable as planned).
      - V(false) sends a node's MIG and device plugin labels in one patch (nothing would come between them) and
        returns once they are written.
  timeout:
    description: Seconds one call waits for its nodes (from O(wait_started) when set; without O(limit_nodes), per batch
      of C(max_unavailable) nodes of a pool), and for the operands to mount the new ConfigMaps.
    default: 900
  parallel_writes:
    description:
      - Writes sent at once - the label patches (and drains, uncordons) of the nodes of one batch, the ConfigMaps, the
        MachineSet templates. Each keeps its retries; what must come in order (ConfigMaps, then the device plugin
        restart, then the ClusterPolicy; a node's MIG step before its device plugin step) stays in order.
      - V(1) sends one at a time. More than the API server's fairness settings admit only queues (HTTP 429, retried).
        A user in the default C(global-default) priority level of a kube-apiserver with default settings gets about 49
        seats; lower this on a busy shared cluster.
    type: int
    default: 40
  refuse_empty_pools:
    description:
      - Refuse, before anything is written, a pool that selects no node and names no MachineSet (most often a typo in
        its selector), as the preflight does. V(false) plans nothing for such a pool and warns.
      - The C(node_pools) role sets it, so that its playbook's preflight leaves the pools' cluster checks to this
        module, which makes them on the fleet it plans from (one Node list per run).
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubegpu.platform.wait
  - kubegpu.platform.wait.optional
  - kubegpu.platform.inputs.operator_namespace
attributes:
  check_mode:
    support: full
    description: Returns the plan and writes nothing (writes are server-side dry runs).
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
  description: Per pool the nodes, strategy, config names, batches and per-node changes (C(node_changes) - labels
    C(before) and after (C(labels)), whether MIG changes (C(mig_change)), C(allocatable_before) and
    C(allocatable_after)), the roll-out C(steps) in order,
    the rendered ConfigMap contents, C(objects) (every other object the run writes) and warnings. A call limited to
    a batch (O(limit_nodes)) lists in C(node_changes) only its own nodes (O(limit_nodes) and O(carry_nodes)).
  returned: always
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
    - Only in diff mode (C(--diff)); C(changes) lists the same changes always. On thousands of nodes the diff
      doubles the size of the result Ansible has to carry.
  returned: in diff mode
  type: dict
rollout:
  description:
    - Per pool, per node changed, the final state, detail and seconds it took (from O(wait_started) when set).
    - A round that runs out (O(wait_round)) lists its nodes in flight as C(waiting); the rounds of one wait are merged,
      so the last round lists every node the wait changed, a node that finished between two rounds as C(done).
  returned: when nodes changed and wait is true
  type: dict
finished:
  description:
    - Whether this call finished the roll-out (every node in place, the configs no node names any more dropped) -
      a call without O(limit_nodes), or the last batch of the plan's steps. The C(node_pools) role then skips its
      finishing call.
  returned: always
  type: bool
ready:
  description:
    - Whether the wait is over. V(false) only when O(wait_round) ran out first (the nodes stay as they are, a drained
      node cordoned); the task's C(until) calls again and the next call carries on.
  returned: always
  type: bool
progress:
  description:
    - 'What the last wait saw (cluster/wait.py): C(summary) (one line, for example C(pool ''llm'': batch 1/2 (gpu-1,
      gpu-2): 1/2 ready; gpu-2: nvidia.com/mig.config.state=pending (40 s))), C(target), C(expected), C(ready),
      C(pending) and C(failed) (node to what was last seen and for how long), C(waited_s) and C(lines).'
  returned: when the module waited
  type: dict
"""

import copy
import time

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import (
    apply_configmap,
    apply_object,
    change_report,
    delete_object,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.args import (
    OPERATOR_NAMESPACE_ARG_SPEC,
    operator_namespace,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.parallel import DEFAULT_PARALLEL_WRITES
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.rollout import roll_out, side_by_side
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import RoundOver, Target, operand_configs
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.cluster_policy import CLUSTER_POLICY_API
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    DEVICE_PLUGIN_CONFIG_ANNOTATION,
    DEVICE_PLUGIN_DAEMONSET,
    MACHINE_API_NAMESPACE,
    MIG_MANAGER_DAEMONSET,
    NODE_POOLS_FIELD_MANAGER,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.drivers import (
    NVIDIA_DRIVER_API,
    nodes_after,
    plan_drivers,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import (
    check_gpu_pods,
    empty_pools,
    plan_pools,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import (
    POOL_OPTIONS,
    PoolError,
    parse_pools,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.result import (
    settle_between_rounds,
    shown,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.steps import first_batch, last_call
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.writes import (
    machineset_writes,
    plan_writes,
)

MACHINESET_API = "machine.openshift.io/v1beta1"
NOTHING_WRITTEN = " Nothing was written."


def observe(module):
    """Everything the plan needs, read with list calls (none per node) and one GET of the device plugin DaemonSet.
    Without a ClusterPolicy (or its status.namespace) "policy_problem" says so and the operator's objects are not
    read: plan_run still judges the pools, so that every problem is reported at once."""
    cluster = module.cluster
    seen = {"policy": None, "namespace": None, "policy_problem": None, "configmaps": {},
            "device_plugin_daemonset": None, "nodes": cluster.list("v1", "Node"), "machinesets": None,
            "nvidia_drivers": None}
    if cluster.resource(MACHINESET_API, "MachineSet") is not None:
        seen["machinesets"] = cluster.list(MACHINESET_API, "MachineSet", namespace=MACHINE_API_NAMESPACE)
    policies = cluster.list(CLUSTER_POLICY_API, "ClusterPolicy")
    if not policies:
        seen["policy_problem"] = ("no ClusterPolicy found: install the GPU Operator first (playbook "
                                  "kubegpu.platform.gpu_operator), then share GPUs per pool")
        return seen
    policy = sorted(policies, key=lambda p: p["metadata"].get("creationTimestamp") or "")[0]
    namespace = operator_namespace(module.params, policy)
    seen["policy"] = policy
    # Pool drivers are checked against every NVIDIADriver, ours and not (selectors must not overlap). Outside
    # NVIDIADriver mode none of ours can exist (a pool driver is refused there), so the list is not sent.
    if cluster.resource(NVIDIA_DRIVER_API, "NVIDIADriver") is not None:
        in_crd_mode = ((policy.get("spec") or {}).get("driver") or {}).get("useNvidiaDriverCRD")
        seen["nvidia_drivers"] = cluster.list(NVIDIA_DRIVER_API, "NVIDIADriver") if in_crd_mode else []
    if not namespace:
        seen["policy_problem"] = "ClusterPolicy {0} reports no status.namespace yet: set operator_namespace".format(
            policy["metadata"]["name"])
        return seen
    seen["namespace"] = namespace
    seen["configmaps"] = dict((c["metadata"]["name"], c) for c in cluster.list("v1", "ConfigMap", namespace=namespace))
    seen["device_plugin_daemonset"] = cluster.get("apps/v1", "DaemonSet", DEVICE_PLUGIN_DAEMONSET, namespace)
    return seen


def reconcile_configuration(module, seen, objects):
    """Write what the plan says besides node labels, in this order: ConfigMaps, device plugin restart,
    ClusterPolicy (pointers and the record of what the device plugin read), MachineSet templates."""
    cluster, check = module.cluster, module.check_mode
    changes = []
    side_by_side(module, changes, [
        (lambda cm=cm: apply_configmap(cluster, cm["name"], cm["namespace"], cm["data"], check,
                                       current=seen["configmaps"].get(cm["name"]), current_known=True,
                                       field_manager=NODE_POOLS_FIELD_MANAGER))
        for cm in objects["configmaps"]])
    restart = objects["device_plugin_restart"]
    if restart:
        # A value that changes on every restart: the pods restart even if an earlier, stopped run wrote this digest.
        stamp = "{0} {1}".format(restart["digest"], time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        changes.append(apply_object(cluster, {
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": restart["daemonset"], "namespace": restart["namespace"]},
            "spec": {"template": {"metadata": {"annotations": {DEVICE_PLUGIN_CONFIG_ANNOTATION: stamp}}}}},
            check, current=seen["device_plugin_daemonset"], current_known=True, field_manager=NODE_POOLS_FIELD_MANAGER))
    policy = objects["cluster_policy"]
    if policy:
        changes.append(apply_object(cluster, {
            "apiVersion": CLUSTER_POLICY_API, "kind": "ClusterPolicy",
            "metadata": {"name": policy["name"], "annotations": policy["annotations"]}, "spec": policy["spec"]},
            check, current=seen["policy"], current_known=True, field_manager=NODE_POOLS_FIELD_MANAGER))
    # Before the nodes are labelled: a node that joins a pool with a driver meets its NVIDIADriver with its label.
    drivers = objects.get("drivers") or {"drivers": [], "delete": []}
    live_drivers = dict((d["metadata"]["name"], d) for d in seen["nvidia_drivers"] or [])
    for obj in drivers["drivers"]:
        changes.append(apply_object(cluster, obj, check, current=live_drivers.get(obj["metadata"]["name"]),
                                    current_known=True, field_manager=NODE_POOLS_FIELD_MANAGER))
    for name in drivers["delete"]:
        changes.append(delete_object(cluster, live_drivers[name], check))
    by_name = dict((m["metadata"]["name"], m) for m in seen["machinesets"] or [])
    side_by_side(module, changes, [
        (lambda ms=ms: apply_object(cluster, {
            "apiVersion": MACHINESET_API, "kind": "MachineSet",
            "metadata": {"name": ms["name"], "namespace": ms["namespace"]},
            "spec": {"template": {"spec": {"metadata": {"labels": ms["labels"]}}}}},
            check, current=by_name.get(ms["name"]), current_known=True, field_manager=NODE_POOLS_FIELD_MANAGER))
        for ms in objects["machinesets"]])
    return changes


def plan_run(module):
    """Observe and plan, every refusal included; fails the module before anything is written, with every problem
    found: the ClusterPolicy's, the pools' against the nodes and MachineSets (and, with refuse_empty_pools, a pool
    that selects no node)."""
    params = module.params
    try:
        pools = parse_pools(params["pools"])
    except PoolError as err:
        module.fail_json(msg=str(err) + NOTHING_WRITTEN)
    seen = observe(module)
    problems = [seen["policy_problem"]] if seen["policy_problem"] else []
    cms = seen["configmaps"]
    plan = None
    try:
        plan = plan_pools(pools, seen["nodes"],
                          ((cms.get(params["mig_configmap"]) or {}).get("data") or {}).get("config.yaml"),
                          (cms.get(params["device_plugin_configmap"]) or {}).get("data"),
                          rolling=set(params["limit_nodes"] or []) | set(params["carry_nodes"] or []))
        if problems:
            machineset_writes(plan, pools, seen["machinesets"])
        else:
            plan["objects"] = plan_writes(plan, pools, seen, {
                "mig_configmap": params["mig_configmap"], "device_plugin_configmap": params["device_plugin_configmap"]})
    except PoolError as err:
        problems.append(str(err))
    if plan is not None:
        drivers = plan_drivers([(p.name, p.driver, p.max_unavailable) for p in pools], seen["nvidia_drivers"],
                               nodes_after(seen["nodes"], plan), (seen["policy"] or {}).get("spec"))
        problems.extend(drivers["problems"])
        if "objects" in plan:
            plan["objects"]["drivers"] = {"drivers": drivers["drivers"], "delete": drivers["delete"]}
    if plan is not None and params["refuse_empty_pools"]:
        problems.extend(empty_pools(pools, plan, len(seen["nodes"])))
    if len(problems) == 1:
        module.fail_json(msg=problems[0] + "." + NOTHING_WRITTEN, plan=shown(plan, module.params))
    if problems:
        module.fail_json(msg="{0} problems found before anything was written; nothing was written:\n- {1}".format(
            len(problems), "\n- ".join(problems)), plan=shown(plan, module.params))
    busy = []
    # Checked even when this call labels no node (the role's first call): the refusal must come before the
    # ConfigMaps are written.
    if any(c["mig_change"] for e in plan["pools"] + [plan["released"]] for c in e["node_changes"].values()):
        # The API server leaves out finished pods and the GPU Operator's own: its operands hold no GPU (mig-manager
        # stops them itself), and on a large cluster they are several pods per node, most of a plan's time when listed
        # whole (docs/performance.md, "Reads are lists").
        busy = check_gpu_pods(plan, module.cluster.list("v1", "Pod", field_selector=(
            "status.phase!=Succeeded,status.phase!=Failed,metadata.namespace!=" + seen["namespace"])))
    if busy and not params["drain_gpu_pods"]:
        module.fail_json(msg="MIG change refused on nodes running GPU pods: {0}. A MIG change takes the node's GPUs "
                             "away from them; stop them or set drain_gpu_pods: true.{1}".format(
                                 "; ".join("{0}: {1}".format(b["node"], ", ".join(b["pods"])) for b in busy),
                                 NOTHING_WRITTEN), plan=shown(plan, module.params))
    return seen, plan, dict((b["node"], b["pods"]) for b in busy)


def run(module):
    """Observe and plan (plan_run: every refusal before the first write), configure (ConfigMaps, device plugin
    restart, ClusterPolicy, MachineSets; then the operands mount the new ConfigMaps), roll out (cluster/rollout.py),
    and the result (the call that finishes the roll-out drops the configs no node names any more)."""
    params = module.params
    if params["parallel_writes"] < 1:
        module.fail_json(msg="parallel_writes: expected 1 or more (1 sends one write at a time), got {0}.{1}".format(
            params["parallel_writes"], NOTHING_WRITTEN))
    module.cluster.allow_parallel(params["parallel_writes"])
    # Looked up once before writes go side by side: the client's discovery cache is not shared safely.
    module.cluster.resource("v1", "Node")
    seen, plan, busy = plan_run(module)
    for warning in plan["warnings"]:
        module.warn(warning)
    changes = reconcile_configuration(module, seen, plan["objects"])
    result = {"plan": shown(plan, module.params), "rollout": {}, "ready": True}
    if not module.check_mode and params["wait"]:
        # Checked on every call, not only the one that wrote: a wait spread over rounds starts again here.
        target = Target("apps/v1", "DaemonSet", namespace=seen["namespace"],
                        title="GPU Operator operands in " + seen["namespace"], watch=True)
        result.update(change_report(changes))
        outcome = module.wait_for(target, operand_configs({
            DEVICE_PLUGIN_DAEMONSET: ("config", params["device_plugin_configmap"]),
            MIG_MANAGER_DAEMONSET: ("mig-parted-config", params["mig_configmap"])}), result, interval=1.0)
        if not outcome.ready:
            return result
    rollout, failure = {}, None
    batch = first_batch(params, plan, module.check_mode)
    if params["label_nodes"] or batch:
        try:
            failure = roll_out(module, seen["nodes"], plan, busy, changes, batch or params, rollout)
        except RoundOver as over:
            result.update(change_report(changes))
            result.update(ready=False, progress=over.progress, rollout=rollout)
            return result
    if not failure:
        present = set(n["metadata"]["name"] for n in seen["nodes"])
        settle_between_rounds(module.earlier_rounds("rollout"), rollout, present)
    finished = params["label_nodes"] and params["wait"] and last_call(params, plan)
    if not failure and finished:
        # Every node has moved to its pool's current configs: drop those no node names any more. The effective
        # configuration (and so the device plugin's record) is unchanged by that: no restart.
        for cm in plan["objects"]["configmaps"]:
            if cm["data_final"] != cm["data"]:
                changes.append(apply_configmap(module.cluster, cm["name"], cm["namespace"], cm["data_final"],
                                               module.check_mode, field_manager=NODE_POOLS_FIELD_MANAGER))
    result.update(change_report(changes))
    result["rollout"] = rollout
    result["finished"] = bool(finished and not failure)
    if getattr(module, "progress", None):
        result["progress"] = module.progress
    if failure:
        module.fail_json(msg=failure, **result)
    return result


def main():
    module = KubegpuModule(
        argument_spec={
            "pools": {"type": "list", "elements": "dict", "required": True, "options": copy.deepcopy(POOL_OPTIONS)},
            "mig_configmap": {"type": "str", "default": "kubegpu-mig-parted-config"},
            "device_plugin_configmap": {"type": "str", "default": "kubegpu-device-plugin-config"},
            "drain_gpu_pods": {"type": "bool", "default": False},
            "start_first_batch": {"type": "bool", "default": False},
            "label_nodes": {"type": "bool", "default": True},
            "limit_nodes": {"type": "list", "elements": "str"},
            "carry_nodes": {"type": "list", "elements": "str"},
            "return_when": {"type": "str", "default": "done", "choices": ["done", "started"]},
            "parallel_writes": {"type": "int", "default": DEFAULT_PARALLEL_WRITES},
            "refuse_empty_pools": {"type": "bool", "default": False},
        },
        shared=(OPERATOR_NAMESPACE_ARG_SPEC,),
        supports_check_mode=True,
        waits=True,
        timeout=900,
    )
    module.run(run)


if __name__ == "__main__":
    main()
