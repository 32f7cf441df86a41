# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The doctor: every check over one read of the cluster, and the findings sorted worst first."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.findings import (
    SEVERITY_ORDER,
    summary,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.monitoring_checks import MONITORING_CHECKS
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.node_checks import NODE_CHECKS
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.pod_checks import (
    POD_CHECKS,
    free_units,
    pools_offering,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.attribution import unattributed_notes
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DCGM_EXPORTER_DAEMONSET
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_state import is_gpu_node
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.pods import gpu_requests

DEFAULT_MIG_PENDING_TIMEOUT = 900


def reconciled_policy(policies):
    """The ClusterPolicy the operator reconciles: the oldest (a second one is `ignored` upstream), or None."""
    ordered = sorted(policies, key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))
    return ordered[0] if ordered else None


def diagnose(nodes, pods, policies=(), daemonsets=(), service_monitors=None, namespace=None, platform="kubernetes",
             now=0.0, mig_pending_timeout=DEFAULT_MIG_PENDING_TIMEOUT):
    """Findings for a cluster read once, and their summary.

    nodes, pods: every Node and Pod; policies: ClusterPolicies; daemonsets: those of the operator namespace;
    service_monitors: the ServiceMonitors of the operator namespace, None when the API is not served; namespace:
    the operator's Namespace object; now: epoch seconds. Returns {summary (see findings.summary), findings (worst
    first, then by object), checked: {gpu_nodes, gpu_pods}}, and notes when there is something the doctor knows
    cannot be measured: [monitoring/attribution.unattributed_notes] (per-pod GPU metrics on DRA pools, under a
    ClusterPolicy whose exporter is on). Notes are no findings: nothing is wrong that a fix in the cluster mends,
    so they leave the verdict alone.
    """
    policy = reconciled_policy(list(policies))
    operator_ns = ((policy or {}).get("status") or {}).get("namespace")
    gpu_nodes = [n for n in nodes if is_gpu_node(n)]
    gpu_pods = [p for p in pods if gpu_requests(p)]
    by_node = {}
    for pod in gpu_pods:
        by_node.setdefault((pod.get("spec") or {}).get("nodeName"), []).append(pod)
    findings = []
    for node in gpu_nodes:
        ctx = {"now": now, "mig_pending_timeout": mig_pending_timeout, "pods": by_node.get(node["metadata"]["name"], [])}
        for check in NODE_CHECKS:
            findings += check(node, ctx)
    pod_ctx = {"nodes": dict((n["metadata"]["name"], n) for n in gpu_nodes),
               "pools": pools_offering(gpu_nodes, free_units(gpu_nodes, gpu_pods))}
    for pod in gpu_pods:
        for check in POD_CHECKS:
            findings += check(pod, pod_ctx)
    view = {"policy": policy, "operator_namespace": operator_ns, "daemonsets": list(daemonsets),
            "exporter_pods": [p for p in pods if p["metadata"].get("namespace") == operator_ns
                              and ((p["metadata"].get("labels") or {}).get("app") == DCGM_EXPORTER_DAEMONSET)],
            "gpu_nodes": gpu_nodes, "service_monitors": service_monitors, "namespace": namespace,
            "platform": platform}
    for check in MONITORING_CHECKS:
        findings += check(view)
    findings.sort(key=lambda f: (-SEVERITY_ORDER.index(f["severity"]), f["pattern"], f["object"], f["field"]))
    result = {"summary": summary(findings), "findings": findings,
              "checked": {"gpu_nodes": len(gpu_nodes), "gpu_pods": len(gpu_pods)}}
    exporter_on = policy is not None and ((policy.get("spec") or {}).get("dcgmExporter") or {}).get("enabled") is not False
    notes = unattributed_notes(nodes) if exporter_on else []
    if notes:
        result["notes"] = notes
    return result
