# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The doctor's checks of one GPU node: MIG state, paused operands, device plugin, lost GPUs, time-slicing memory.

Each check takes the node (a plain dict as the API returns it) and a context ({now: epoch seconds,
mig_pending_timeout: seconds, pods: the pods placed on this node}) and returns a list of findings.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import time

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.findings import finding, obj_ref
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    COUNT_LABEL,
    DEPLOY_LABEL_PREFIX,
    DEVICE_PLUGIN_CONFIG_LABEL,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    GPU_COUNT_ANNOTATION,
    GPU_RESOURCE_PREFIXES,
    MIG_CONFIG_LABEL,
    MIG_STATE_FAILED,
    MIG_STATE_LABEL,
    MIG_STATE_PENDING,
    PAUSED_FOR_MIG_CHANGE,
    POOL_LABEL,
    SHARING_STRATEGY_LABEL,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_state import (
    gfd_facts,
    gpu_allocatable,
    node_annotations,
    node_labels,
    node_name,
    paused_operands,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.pods import gpu_requests

TIME_SLICING = "time-slicing"


def _label_field(label):
    return "metadata.labels[%s]" % label


def _ref(node):
    return obj_ref(node, "Node")


def _pool_hint(labels):
    pool = labels.get(POOL_LABEL)
    return " (pool %s)" % pool if pool else ""


def parse_time(text):
    """An RFC 3339 API timestamp (2026-11-30T22:40:00Z) as epoch seconds; None when absent or unreadable."""
    if not text:
        return None
    try:
        return calendar.timegm(time.strptime(str(text)[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def label_written_at(node, label):
    """When `label` was last written, from the node's managedFields: the newest entry that owns the label.

    The API server stamps each field manager's entry with the time of its last change, so for
    nvidia.com/mig.config.state (written by mig-manager with the paused operand labels when a change starts) it
    tells since when the state is what it is. None when no entry owns the label (e.g. managedFields stripped).
    """
    key = "f:" + label
    newest = None
    for entry in (node.get("metadata") or {}).get("managedFields") or []:
        if entry.get("subresource"):
            continue
        labels = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
        if key in labels:
            at = parse_time(entry.get("time"))
            if at is not None and (newest is None or at > newest):
                newest = at
    return newest


def check_mig_failed(node, ctx):
    labels = node_labels(node)
    if labels.get(MIG_STATE_LABEL) != MIG_STATE_FAILED:
        return []
    config = labels.get(MIG_CONFIG_LABEL)
    return [finding(
        "mig_failed", _ref(node), _label_field(MIG_STATE_LABEL), MIG_STATE_FAILED,
        "mig-manager could not apply MIG config %r on node %s%s" % (config, node_name(node), _pool_hint(labels)),
        "Read the nvidia-mig-manager pod's log on %s (kubectl logs -n <operator namespace> -l app=nvidia-mig-manager "
        "--field-selector spec.nodeName=%s); check that config %r exists in the mig-parted ConfigMap and fits the "
        "GPU; then run ansible-playbook kubegpu.platform.node_pools to apply the pool's layout again"
        % (node_name(node), node_name(node), config))]


def check_mig_pending_too_long(node, ctx):
    labels = node_labels(node)
    if labels.get(MIG_STATE_LABEL) != MIG_STATE_PENDING:
        return []
    since = label_written_at(node, MIG_STATE_LABEL)
    if since is None:
        return []   # cannot tell for how long: a pending change is normal, say nothing rather than guess
    age = int(ctx["now"] - since)
    if age < ctx["mig_pending_timeout"]:
        return []
    paused = paused_operands(labels)
    return [finding(
        "mig_pending_too_long", _ref(node), _label_field(MIG_STATE_LABEL), MIG_STATE_PENDING,
        "MIG config %r on node %s%s has been pending for %d s (threshold %d s)%s"
        % (labels.get(MIG_CONFIG_LABEL), node_name(node), _pool_hint(labels), age, ctx["mig_pending_timeout"],
           "; operands paused: " + ", ".join(paused) if paused else ""),
        "Read the nvidia-mig-manager pod's log on %s: a GPU still in use (a process or pod holding the GPU, "
        "gpu-operator#2833) blocks the change; stop the GPU clients or drain the node, or restart the mig-manager "
        "pod on it" % node_name(node))]


def check_operands_paused(node, ctx):
    """Operands left paused-for-mig-change while no MIG change is running (a change in progress pauses them)."""
    labels = node_labels(node)
    paused = paused_operands(labels)
    if not paused or labels.get(MIG_STATE_LABEL) == MIG_STATE_PENDING:
        return []
    return [finding(
        "operands_paused", _ref(node), _label_field(DEPLOY_LABEL_PREFIX + "<operand>"),
        dict((op, PAUSED_FOR_MIG_CHANGE) for op in paused),
        "operands %s are %s on node %s%s but no MIG change is pending (state %s)"
        % (", ".join(paused), PAUSED_FOR_MIG_CHANGE, node_name(node), _pool_hint(labels),
           labels.get(MIG_STATE_LABEL, "unset")),
        "Set each paused gpu.deploy.<operand> label back to true (kubectl label node %s --overwrite %s), after "
        "fixing the MIG state" % (node_name(node), " ".join("%s%s=true" % (DEPLOY_LABEL_PREFIX, op) for op in paused)))]


def check_device_plugin_not_advertising(node, ctx):
    labels = node_labels(node)
    facts = gfd_facts(labels)
    if not facts["count"] or labels.get(MIG_STATE_LABEL) == MIG_STATE_PENDING:
        return []   # no GPUs by GFD, or a MIG change in progress (the plugin is paused on purpose)
    if labels.get(DEVICE_PLUGIN_DEPLOY_LABEL) != "true":
        return []   # the device plugin is not meant to run here (disabled, paused: other checks say why)
    allocatable = gpu_allocatable(node)
    if sum(allocatable.values()):
        return []
    return [finding(
        "device_plugin_not_advertising", _ref(node), "status.allocatable", allocatable or {},
        "node %s%s has %d GPU(s) %s by GFD labels but advertises no GPU resource"
        % (node_name(node), _pool_hint(labels), facts["count"], facts["product"]),
        "Check the nvidia-device-plugin-daemonset pod on %s (kubectl logs -n <operator namespace> "
        "-l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName=%s): a crash-looping plugin, "
        "a bad device-plugin config key (label %s) or an invalid MIG geometry "
        "(product %s); restart the pod once fixed" % (node_name(node), node_name(node), DEVICE_PLUGIN_CONFIG_LABEL,
                                                      facts["product"]))]


def check_gpu_lost(node, ctx):
    """Fewer GPUs than the node had: gpu.count below what the collection recorded, or GPUs the kubelet marked
    unhealthy (allocatable below capacity)."""
    labels = node_labels(node)
    facts = gfd_facts(labels)
    found = []
    recorded = node_annotations(node).get(GPU_COUNT_ANNOTATION)
    if recorded and str(recorded).isdigit() and facts["physical_count"] is not None \
            and facts["physical_count"] < int(recorded):
        found.append(finding(
            "gpu_lost", _ref(node), _label_field(COUNT_LABEL), facts["physical_count"],
            "node %s%s shows %d GPU(s), it had %d (annotation %s)"
            % (node_name(node), _pool_hint(labels), facts["physical_count"], int(recorded), GPU_COUNT_ANNOTATION),
            "A GPU fell off the bus or was disabled: cordon and drain %s, check the driver log (dmesg: Xid 79, "
            "nvidia-smi), then repair or replace the node" % node_name(node)))
    status = node.get("status") or {}
    capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
    for res in sorted(capacity):
        if not res.startswith(GPU_RESOURCE_PREFIXES) or not str(capacity[res]).isdigit():
            continue
        have = int(allocatable.get(res, 0)) if str(allocatable.get(res, 0)).isdigit() else 0
        if have < int(capacity[res]):
            found.append(finding(
                "gpu_lost", _ref(node), "status.allocatable[%s]" % res, have,
                "node %s%s advertises %d of its %d %s: the device plugin reports unhealthy GPUs"
                % (node_name(node), _pool_hint(labels), have, int(capacity[res]), res),
                "Check GPU health on %s (device-plugin log: 'unhealthy', dmesg Xid errors, DCGM health); cordon "
                "and drain it, then reset the GPU or repair the node" % node_name(node)))
    return found


def _memory_utilization(pod):
    """The fraction of a GPU's memory the pod's containers declare (vLLM --gpu-memory-utilization), or None."""
    declared = None
    for container in (pod.get("spec") or {}).get("containers") or []:
        words = list(container.get("command") or []) + list(container.get("args") or [])
        for i, word in enumerate(words):
            value = None
            if word == "--gpu-memory-utilization" and i + 1 < len(words):
                value = words[i + 1]
            elif str(word).startswith("--gpu-memory-utilization="):
                value = str(word).split("=", 1)[1]
            if value is not None:
                try:
                    declared = (declared or 0.0) + float(value)
                except ValueError:
                    pass
    return declared


def check_time_slicing_oversubscribed(node, ctx):
    """Time-sliced replicas share a GPU's memory: the pods placed must fit in the node's GPU memory together."""
    labels = node_labels(node)
    if labels.get(SHARING_STRATEGY_LABEL) != TIME_SLICING:
        return []
    facts = gfd_facts(labels)
    if not facts["count"] or not facts["memory_mib"]:
        return []
    need_mib, placed = 0.0, []
    for pod in ctx.get("pods") or []:
        utilization = _memory_utilization(pod)
        units = sum(u for r, u in gpu_requests(pod).items() if r.startswith(GPU_RESOURCE_PREFIXES))
        if utilization is None or not units:
            continue
        need = units * utilization * facts["memory_mib"]
        need_mib += need
        placed.append("%s (%d x %.2f)" % (obj_ref(pod, "Pod"), units, utilization))
    have_mib = facts["count"] * facts["memory_mib"]
    if need_mib <= have_mib:
        return []
    return [finding(
        "time_slicing_oversubscribed", _ref(node), "pods on node (--gpu-memory-utilization x replicas)",
        int(need_mib),
        "time-sliced node %s%s: the pods placed need %d MiB of GPU memory, its %d GPU(s) have %d MiB: %s"
        % (node_name(node), _pool_hint(labels), int(need_mib), facts["count"], have_mib, ", ".join(placed)),
        "Lower --gpu-memory-utilization of these models (serving sizing), lower the pool's time_slicing replicas "
        "so that fewer pods share a GPU, or move a model to a MIG pool where memory is isolated")]


NODE_CHECKS = (check_mig_failed, check_mig_pending_too_long, check_operands_paused,
               check_device_plugin_not_advertising, check_gpu_lost, check_time_slicing_oversubscribed)
