# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The doctor's checks of GPU metrics: a DCGM exporter on every GPU node, and Prometheus scraping it.

Each check takes the cluster view (see diagnose.Snapshot) and returns a list of findings. The GPU Operator runs
the exporter as DaemonSet nvidia-dcgm-exporter (pods labelled app=nvidia-dcgm-exporter) in its namespace on nodes
labelled nvidia.com/gpu.deploy.dcgm-exporter=true, and with spec.dcgmExporter.serviceMonitor.enabled creates a
ServiceMonitor for it there; OpenShift's cluster Prometheus reads the operator's documented namespace
nvidia-gpu-operator and openshift-* namespaces as they are, any other only when labelled
openshift.io/cluster-monitoring=true (shared/reference/gpu-operator.md).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.findings import finding, obj_ref
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    CLUSTER_MONITORING_LABEL,
    DCGM_EXPORTER_DAEMONSET,
    GPU_OPERATOR_NAMESPACE_OPENSHIFT,
    DCGM_EXPORTER_DEPLOY_LABEL,
    OPENSHIFT,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_state import node_labels, node_name


def _exporter_wanted(policy):
    return ((policy.get("spec") or {}).get("dcgmExporter") or {}).get("enabled", True) is not False


def _policy_ref(policy):
    return obj_ref(policy, "ClusterPolicy")


def check_dcgm_exporter(view):
    policy, namespace = view["policy"], view["operator_namespace"]
    if policy is None or namespace is None:
        return []   # no GPU Operator reconciling yet: nothing to expect
    if not _exporter_wanted(policy):
        return [finding(
            "dcgm_exporter_missing", _policy_ref(policy), "spec.dcgmExporter.enabled", False,
            "the DCGM exporter is disabled: no GPU metrics (utilisation, memory, Xid errors) from any node",
            "Set spec.dcgmExporter.enabled: true in the ClusterPolicy (kubegpu_gpu_operator; ansible-playbook "
            "kubegpu.platform.gpu_operator)")]
    if not any(ds["metadata"]["name"] == DCGM_EXPORTER_DAEMONSET for ds in view["daemonsets"]):
        return [finding(
            "dcgm_exporter_missing", "DaemonSet/%s/%s" % (namespace, DCGM_EXPORTER_DAEMONSET), "metadata.name", None,
            "the GPU Operator has not created the DCGM exporter DaemonSet in %s" % namespace,
            "Check the gpu-operator pod's log and the ClusterPolicy status (state, conditions)")]
    running = set(p["spec"].get("nodeName") for p in view["exporter_pods"]
                  if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))
    found = []
    for node in view["gpu_nodes"]:
        if node_labels(node).get(DCGM_EXPORTER_DEPLOY_LABEL) != "true" or node_name(node) in running:
            continue
        found.append(finding(
            "dcgm_exporter_missing", obj_ref(node, "Node"), "pods of DaemonSet %s/%s on node"
            % (namespace, DCGM_EXPORTER_DAEMONSET), None,
            "no running DCGM exporter pod on GPU node %s: its GPUs are not measured" % node_name(node),
            "kubectl get pods -n %s -l app=%s -o wide: look for a pod on %s that is not Running (image pull, "
            "taints the DaemonSet does not tolerate, DCGM failing to start)"
            % (namespace, DCGM_EXPORTER_DAEMONSET, node_name(node))))
    return found


def _monitored_as_is(namespace):
    return namespace == GPU_OPERATOR_NAMESPACE_OPENSHIFT or namespace.startswith("openshift-")


def check_dcgm_scraped(view):
    policy, namespace = view["policy"], view["operator_namespace"]
    if policy is None or namespace is None or not _exporter_wanted(policy):
        return []
    found = []
    if view["service_monitors"] is None:
        found.append(finding(
            "dcgm_not_scraped", "CustomResourceDefinition/servicemonitors.monitoring.coreos.com", "served", False,
            "the ServiceMonitor API is not served: no Prometheus Operator scrapes the DCGM exporter",
            "Install the Prometheus Operator (kube-prometheus-stack), or on OpenShift enable cluster monitoring; "
            "then set spec.dcgmExporter.serviceMonitor.enabled: true in the ClusterPolicy"))
    elif not any(DCGM_EXPORTER_DAEMONSET in sm["metadata"]["name"] or "dcgm" in sm["metadata"]["name"]
                 for sm in view["service_monitors"]):
        sm_enabled = (((policy.get("spec") or {}).get("dcgmExporter") or {}).get("serviceMonitor") or {}).get("enabled")
        found.append(finding(
            "dcgm_not_scraped", _policy_ref(policy), "spec.dcgmExporter.serviceMonitor.enabled", sm_enabled,
            "no ServiceMonitor for the DCGM exporter in %s: Prometheus does not scrape GPU metrics" % namespace,
            "Set spec.dcgmExporter.serviceMonitor.enabled: true in the ClusterPolicy (the operator then creates "
            "ServiceMonitor %s)" % DCGM_EXPORTER_DAEMONSET))
    ns = view["namespace"]
    if view["platform"] == OPENSHIFT and ns is not None and not _monitored_as_is(namespace):
        value = ((ns.get("metadata") or {}).get("labels") or {}).get(CLUSTER_MONITORING_LABEL)
        if value != "true":
            found.append(finding(
                "dcgm_not_scraped", obj_ref(ns, "Namespace"), "metadata.labels[%s]" % CLUSTER_MONITORING_LABEL,
                value, "OpenShift's cluster monitoring ignores namespace %s: the DCGM exporter's ServiceMonitor "
                "is not read" % namespace,
                "oc label namespace %s %s=true (ansible-playbook kubegpu.platform.gpu_operator sets it)"
                % (namespace, CLUSTER_MONITORING_LABEL)))
    return found


MONITORING_CHECKS = (check_dcgm_exporter, check_dcgm_scraped)
