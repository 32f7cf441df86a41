# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The alert rules: one PrometheusRule rule group built from the thresholds of kubegpu_monitoring.alerts.

Metrics, as their exporters publish them (docs/monitoring.md names the sources):
- DCGM exporter (the GPU Operator's dcgm-exporter DaemonSet): DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE (MiB),
  DCGM_FI_DEV_GPU_UTIL (percent), DCGM_FI_DEV_XID_ERRORS (the last XID error's code, 0 when none),
  DCGM_FI_DEV_GPU_TEMP (degrees C); labels gpu, UUID, device, modelName, Hostname, GPU_I_PROFILE and GPU_I_ID on a
  MIG instance, and pod, namespace, container while a pod holds the GPU (the exporter's pod mapping, on under the
  GPU Operator).
- kube-state-metrics: kube_node_labels (a node's labels, only those allowed by --metric-labels-allowlist, as
  label_<key with . / - as _>), kube_pod_status_phase, kube_pod_container_resource_requests (resource with
  . and / as _: nvidia_com_gpu, nvidia_com_mig_3g_40gb).
- the GPU Operator: gpu_operator_reconciliation_status (1 reconciled, 0 operands not ready, -1 ClusterPolicy
  unavailable, -2 operator error).

Every alert has labels severity (critical | warning | info) and the annotations summary, description and runbook
(what to do). Annotations use only {{ $labels.<name> }} and {{ printf "%.0f" $value }}, which the unit tests render
themselves to compare with promtool's. Pure.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    MIG_STATE_FAILED,
    MIG_STATE_LABEL,
    SHARED_RESOURCE_SUFFIX,
)

GROUP_NAME = "kubegpu-gpu"
VALUE = '{{ printf "%.0f" $value }}'
GPU = "GPU {{ $labels.gpu }} ({{ $labels.modelName }}, {{ $labels.UUID }}) on {{ $labels.Hostname }}"


def metric_label(key):
    """The Prometheus label name kube-state-metrics gives a Kubernetes label or resource name: invalid characters
    become _ (nvidia.com/mig.config.state -> nvidia_com_mig_config_state)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def pool_resources(pools):
    """{resource name: [pool names]}: the extended resources pods ask for to land on each pool.

    Whole GPUs and MIG strategy single: nvidia.com/gpu; MIG mixed (or a layout of several profiles):
    nvidia.com/mig-<profile>; time-slicing or MPS with rename_by_default: nvidia.com/gpu.shared. DRA pools have no
    extended resource (pods claim devices), so they have no entry. pools are pool_spec.Pool objects.
    """
    out = {}
    for pool in pools:
        names = []
        if pool.strategy == "dra":
            continue
        if pool.strategy == "mig" and pool.mig is not None:
            layout = pool.mig.layout
            profiles = sorted(layout) if isinstance(layout, dict) else []
            if pool.mig.strategy == "mixed" or len(profiles) > 1:
                names = [MIG_RESOURCE_PREFIX + p for p in profiles] or [GPU_RESOURCE]
            else:
                names = [GPU_RESOURCE]
        else:
            sharing = pool.time_slicing or pool.mps
            names = [GPU_RESOURCE + (SHARED_RESOURCE_SUFFIX if sharing is not None and sharing.rename_by_default
                                     else "")]
        for name in names:
            out.setdefault(name, []).append(pool.name)
    return out or {GPU_RESOURCE: []}


def _rule(name, expr, duration, severity, summary, description, runbook, labels=None):
    rule = {"alert": name, "expr": expr}
    if duration not in ("0", "0s", "0m", ""):
        rule["for"] = duration
    rule["labels"] = dict({"severity": severity}, **(labels or {}))
    rule["annotations"] = {"summary": summary, "description": description, "runbook": runbook}
    return rule


def alert_rules(settings, pools=()):
    """The rules of kubegpu_monitoring (parse_settings' result) for the pools (pool_spec.Pool), in catalogue order,
    without the alerts listed in alerts.disabled."""
    a = settings["alerts"]
    rules = []
    mem = a["gpu_memory_used_percent"]
    rules.append(_rule(
        "GPUMemoryAlmostFull",
        "100 * DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > %d" % mem,
        a["gpu_memory_used_for"], "warning",
        "GPU memory %s%% used on {{ $labels.Hostname }}" % VALUE,
        "%s has used more than %d%% of its memory for %s (pod {{ $labels.namespace }}/{{ $labels.pod }})."
        % (GPU, mem, a["gpu_memory_used_for"]),
        "A model server that fills its GPU fails new requests with out-of-memory errors. Check the pod's "
        "--gpu-memory-utilization and context length against the model's sizing (kubegpu.platform.model_sizing), "
        "or move the model to a larger slice or pool."))
    idle = a["gpu_idle_percent"]
    rules.append(_rule(
        "GPUAllocatedButIdle",
        'DCGM_FI_DEV_GPU_UTIL{pod!=""} < %d' % idle,
        a["gpu_idle_for"], "info",
        "GPU held by {{ $labels.namespace }}/{{ $labels.pod }} is %s%% busy" % VALUE,
        "%s is allocated to pod {{ $labels.namespace }}/{{ $labels.pod }} but has been below %d%% utilisation for "
        "%s." % (GPU, idle, a["gpu_idle_for"]),
        "The pod holds a whole GPU it does not use. Let the model scale to zero (min_replicas 0), share the pool's "
        "GPUs (time-slicing, MPS or a smaller MIG slice), or lower the model's replicas."))
    rules.append(_rule(
        "GPUXidError",
        "DCGM_FI_DEV_XID_ERRORS != 0",
        a["xid_errors_for"], "critical",
        "XID error %s on {{ $labels.Hostname }} GPU {{ $labels.gpu }}" % VALUE,
        "%s reported XID error %s (the driver's last error code)." % (GPU, VALUE),
        "Look the code up in NVIDIA's XID catalogue. 48, 63, 64, 74, 79, 92, 94, 95 mean the GPU needs a reset or "
        "service: cordon the node, drain its GPU pods and reset the GPU or reboot the node; application XIDs "
        "(13, 31, 43) point at the workload. Run kubegpu.platform.doctor for the node."))
    temp = a["gpu_temperature_celsius"]
    rules.append(_rule(
        "GPUTemperatureHigh",
        "DCGM_FI_DEV_GPU_TEMP > %d" % temp,
        a["gpu_temperature_for"], "warning",
        "GPU at %s C on {{ $labels.Hostname }}" % VALUE,
        "%s has been above %d degrees C for %s." % (GPU, temp, a["gpu_temperature_for"]),
        "A hot GPU slows its clocks and may shut down. Check the node's cooling and fans, and DCGM's "
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS; move work off the node if it keeps rising."))
    state = metric_label(MIG_STATE_LABEL)
    rules.append(_rule(
        "GPUMigConfigFailed",
        'kube_node_labels{label_%s="%s"} == 1' % (state, MIG_STATE_FAILED),
        a["mig_config_failed_for"], "critical",
        "MIG configuration failed on {{ $labels.node }}",
        "mig-manager set %s=%s on node {{ $labels.node }}: the node's MIG layout was not applied and its GPU "
        "pool offers no slices there." % (MIG_STATE_LABEL, MIG_STATE_FAILED),
        "Read the nvidia-mig-manager pod's log on the node (GPU processes still running, a layout the GPU refuses), "
        "fix the cause and run the node_pools stage again (kubegpu.platform.node_pools); kubegpu.platform.doctor "
        "lists the node's state. Needs kube-state-metrics with --metric-labels-allowlist=nodes=[%s]."
        % MIG_STATE_LABEL))
    rules.append(_rule(
        "GPUClusterPolicyNotReady",
        "gpu_operator_reconciliation_status != 1",
        a["cluster_policy_not_ready_for"], "critical",
        "GPU Operator ClusterPolicy not ready (status %s)" % VALUE,
        "The GPU Operator has not reconciled its ClusterPolicy for %s (status %s: 0 operands not ready, "
        "-1 ClusterPolicy unavailable, -2 operator error)." % (a["cluster_policy_not_ready_for"], VALUE),
        "Run kubectl get clusterpolicy and look at status.conditions, then the pods in the operator's namespace "
        "that are not Running (driver, toolkit, device plugin, validator); kubegpu.platform.doctor reports them."))
    for resource, names in sorted(pool_resources(pools).items()):
        pool_text = ", ".join(names) if names else "any pool"
        rules.append(_rule(
            "GPUPodsPending",
            "count(\n  (sum by (namespace, pod) (kube_pod_container_resource_requests{resource=\"%s\"}) > 0)\n"
            "  and on (namespace, pod) (kube_pod_status_phase{phase=\"Pending\"} == 1)\n) > 0" % metric_label(resource),
            a["pods_pending_for"], "warning",
            "%s pod(s) waiting for %s" % (VALUE, resource),
            "%s pod(s) asking for %s (pools: %s) have been Pending for %s."
            % (VALUE, resource, pool_text, a["pods_pending_for"]),
            "The pool has no free %s: kubectl describe pod shows the scheduler's reason. Add nodes to the pool "
            "(its MachineSet), free GPUs (scale idle models to zero), or share the GPUs more (more time-slicing "
            "replicas, smaller MIG slices). The capacity report (kubegpu.platform.report) shows each pool's free "
            "GPUs." % resource,
            labels={"resource": resource, "pools": ",".join(names)}))
    disabled = set(a["disabled"] or ())
    return [rule for rule in rules if rule["alert"] not in disabled]


def rule_groups(settings, pools=()):
    """The spec.groups of the PrometheusRule (also what a rules file for promtool holds)."""
    return [{"name": GROUP_NAME, "rules": alert_rules(settings, pools)}]
