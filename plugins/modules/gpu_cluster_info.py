#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_cluster_info
short_description: Describe a cluster's GPUs, GPU Operator, DRA and serving stack
version_added: 0.1.0
description:
  - Reads the cluster and returns its platform (OpenShift or Kubernetes) and version, the GPU nodes grouped
    by physical GPU model and by node pool with node and GPU counts, allocatable GPU resources and sharing state, the GPU
    Operator install and ClusterPolicy state, the Dynamic Resource Allocation API versions served, and
    which parts of the serving stack (KServe, Knative, KEDA, OpenShift AI) are present.
  - Reads the pods (one list, finished pods left out by the API server) to tell, per node pool, the GPU units
    requested by the pods bound to its nodes, the units idle, and the GPU pods still waiting for a node; the
    report playbook (role kubegpu.platform.report) renders this as the capacity report.
  - Makes only list and get requests; the number of requests does not grow with the number of nodes or pods.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  include_node_names:
    description:
      - Return the names of the nodes of each GPU model.
      - Off by default so that the result stays small on large fleets.
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
requirements:
  - kubernetes >= 24.2.0
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: Describe the GPU cluster
  kubegpu.platform.gpu_cluster_info:
  register: gpu_cluster

- name: Show the H100 node count
  ansible.builtin.debug:
    msg: "{{ gpu_cluster.gpu_nodes.models | selectattr('product', 'equalto', 'NVIDIA-H100-80GB-HBM3') | map(attribute='nodes') | first }}"
"""

RETURN = r"""
platform:
  description: Platform, its version and the Kubernetes version of the API server.
  returned: always
  type: dict
  sample: {name: openshift, version: 4.20.3, kubernetes_version: v1.34.4}
gpu_nodes:
  description:
    - C(nodes) all nodes, C(gpu_nodes) nodes with an NVIDIA GPU, and C(models) one entry per physical GPU model.
    - Each model has C(product), C(nodes), C(gpus) (physical GPUs from C(nvidia.com/gpu.count)), C(memory_mib),
      C(mig_capable), C(allocatable) (sum of GPU resources), C(sharing) (node count per strategy),
      C(mig_states) (node count per C(config=state)) and, when asked, C(node_names).
  returned: always
  type: dict
pools:
  description:
    - One entry per node pool (nodes labelled C(kubegpu.io/node-pool) by M(kubegpu.platform.gpu_node_pools)) with
      C(name), C(nodes), C(products), C(allocatable) (GPU resources summed over its nodes), C(sharing) and C(mig_states).
  returned: always
  type: list
  elements: dict
capacity:
  description:
    - C(pools) one entry per node pool, then GPU nodes in no pool as C((no pool)), each with C(name), C(pooled),
      C(nodes), C(gpu_models), C(physical_gpus), C(sharing) (node count per strategy), C(mig_states), C(layout)
      (units per physical GPU of each resource), C(allocatable), C(requested) (units held by pods bound to the
      pool's nodes that have not finished, counted as the scheduler counts them), C(idle) (allocatable - requested)
      and C(pending) (pods not bound yet that ask for units the pool offers, each C(pod) and C(resources)).
    - C(unplaceable) pending GPU pods that no pool offers what they ask for.
    - C(notes), only when there is one, what cannot be measured per pool (C(pool), C(nodes), C(field), C(message),
      C(fix)) - the DRA pools, whose GPU metrics carry no pod under a ClusterPolicy (docs/monitoring.md).
  returned: always
  type: dict
  sample:
    pools:
      - name: llm-h100
        pooled: true
        nodes: 2
        gpu_models: [NVIDIA-H100-80GB-HBM3]
        physical_gpus: 16
        sharing: {mig: 2}
        mig_states: {kubegpu-llm-h100=success: 2}
        layout: {nvidia.com/mig-3g.40gb: 1, nvidia.com/mig-1g.10gb: 2}
        allocatable: {nvidia.com/mig-1g.10gb: 32, nvidia.com/mig-3g.40gb: 16}
        requested: {nvidia.com/mig-3g.40gb: 2}
        idle: {nvidia.com/mig-1g.10gb: 32, nvidia.com/mig-3g.40gb: 14}
        pending: [{pod: llm/train-0, resources: {nvidia.com/mig-3g.40gb: 20}}]
    unplaceable: []
observed_at:
  description: When the cluster was read (UTC, ISO 8601); the capacity report's time stamp.
  returned: always
  type: str
  sample: "2026-11-30T22:40:00Z"
gpu_operator:
  description: Whether the GPU Operator is installed, how (olm or helm), its version and namespace, and each ClusterPolicy's state and conditions.
  returned: always
  type: dict
dra:
  description:
    - Versions of C(resource.k8s.io) served (preferred first), DeviceClass names and the ResourceSlice count.
    - C(nodes) the NVIDIA devices each node publishes, and C(claim_templates) those of M(kubegpu.platform.dra_claim_templates)
      with C(name), C(device_class) and C(claims) (C(<kind> <namespace>/<name>)).
  returned: always
  type: dict
teams:
  description:
    - The teams' GPU quota, usage and borrowing per pool and resource, read from what the tenancy stage
      (M(kubegpu.platform.tenancy_quotas)) wrote - its Kueue ClusterQueues (usage and borrowing as Kueue reports
      them in their status) or its plain ResourceQuotas (usage as the API server's quota admission counts it, per
      resource name over every pool that offers it) - one entry per C(team), C(pool), C(resource) with C(quota),
      C(used) and C(borrowed). Empty when the stage wrote none.
  returned: always
  type: list
  elements: dict
  sample: [{team: research, pool: llm-h100, resource: nvidia.com/mig-3g.40gb, quota: 8, used: 2, borrowed: 0}]
serving:
  description:
    - Whether the KServe, Knative Serving, KEDA and OpenShift AI APIs are served, and the KServe controller found.
    - C(models) the InferenceServices of M(kubegpu.platform.serving_models), each with C(name) (C(namespace/name)),
      C(pool) or C(claim_template), C(ready) and C(min_replicas).
  returned: always
  type: dict
"""

import time

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.platform import platform_info
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.capacity import pool_capacity
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.summary import dra_summary
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.cluster_summary import (
    gpu_operator_status,
    summarize_gpu_nodes,
    summarize_pools,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    CLAIM_TEMPLATE_LABEL,
    KUEUE_API,
    MANAGED_BY,
    PART_OF_LABEL,
    POOL_LABEL,
    SERVING_MODEL_LABEL,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.objects import PART_OF as TENANCY
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.report import live_rows


FINISHED_PODS_OUT = "status.phase!=Succeeded,status.phase!=Failed"


def dra_info(cluster):
    versions = cluster.served_versions("resource.k8s.io")
    if not versions:
        return {"served_versions": [], "device_classes": [], "resource_slices": 0, "nodes": {}, "claim_templates": []}
    api = "resource.k8s.io/" + versions[0]
    classes = cluster.list(api, "DeviceClass")
    slices = cluster.list(api, "ResourceSlice")
    ours = [dict(obj, kind=kind) for kind, items in (
        ("DeviceClass", classes),
        ("ResourceClaimTemplate", cluster.list(api, "ResourceClaimTemplate", label_selector=CLAIM_TEMPLATE_LABEL)),
        ("ResourceClaim", cluster.list(api, "ResourceClaim", label_selector=CLAIM_TEMPLATE_LABEL))) for obj in items]
    return dict({
        "served_versions": versions,
        "device_classes": sorted(d["metadata"]["name"] for d in classes),
        "resource_slices": len(slices),
    }, **dra_summary(slices, ours))


def serving_info(cluster):
    def served(api_version, kind):
        return cluster.resource(api_version, kind) is not None

    controllers = cluster.list("apps/v1", "Deployment", label_selector="control-plane=kserve-controller-manager")
    dscs = cluster.list("datasciencecluster.opendatahub.io/v2", "DataScienceCluster") or \
        cluster.list("datasciencecluster.opendatahub.io/v1", "DataScienceCluster")
    models = []
    if served("serving.kserve.io/v1beta1", "InferenceService"):
        for isvc in cluster.list("serving.kserve.io/v1beta1", "InferenceService",
                                 label_selector=",".join(["%s=%s" % item for item in MANAGED_BY.items()]
                                                         + [SERVING_MODEL_LABEL])):
            meta, status = isvc["metadata"], isvc.get("status") or {}
            labels = meta.get("labels") or {}
            ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
            models.append({"name": "%s/%s" % (meta["namespace"], meta["name"]),
                           "pool": labels.get(POOL_LABEL),
                           "claim_template": labels.get(CLAIM_TEMPLATE_LABEL),
                           "ready": bool(ready) and ready[0].get("status") == "True",
                           "min_replicas": ((isvc.get("spec") or {}).get("predictor") or {}).get("minReplicas")})
    return {
        "models": sorted(models, key=lambda m: m["name"]),
        "kserve": {"api": served("serving.kserve.io/v1beta1", "InferenceService"),
                   "controller": bool(controllers)},
        "knative_serving": {"api": served("serving.knative.dev/v1", "Service")},
        "keda": {"api": served("keda.sh/v1alpha1", "ScaledObject")},
        "openshift_ai": {"api": served("datasciencecluster.opendatahub.io/v1", "DataScienceCluster"),
                         "data_science_clusters": sorted(d["metadata"]["name"] for d in dscs)},
    }


def teams_info(cluster, capacity):
    """The tenancy stage's quotas and their use (two lists, whatever the number of teams)."""
    ours = "%s=%s" % (PART_OF_LABEL, TENANCY)
    return live_rows(cluster.list(KUEUE_API, "ClusterQueue", label_selector=ours),
                     cluster.list("v1", "ResourceQuota", label_selector=ours), capacity["pools"])


def gather(module):
    cluster = module.cluster
    observed_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    nodes = cluster.list("v1", "Node")
    # Finished pods hold no units: the API server leaves them out, so the list stays the size of what runs.
    pods = cluster.list("v1", "Pod", field_selector=FINISHED_PODS_OUT)
    summary = summarize_gpu_nodes(nodes)
    if not module.params["include_node_names"]:
        for model in summary["models"]:
            del model["node_names"]
    operator = gpu_operator_status(
        # Copied CSVs (one per namespace under an AllNamespaces OperatorGroup) say nothing new.
        cluster.list("operators.coreos.com/v1alpha1", "ClusterServiceVersion", label_selector="!olm.copiedFrom"),
        cluster.list("apps/v1", "Deployment", label_selector="app.kubernetes.io/component=gpu-operator"),
        cluster.list("nvidia.com/v1", "ClusterPolicy"),
    )
    capacity = pool_capacity(nodes, pods)
    return {
        "changed": False,
        "platform": platform_info(cluster),
        "gpu_nodes": summary,
        "pools": summarize_pools(nodes),
        "capacity": capacity,
        "teams": teams_info(cluster, capacity),
        "observed_at": observed_at,
        "gpu_operator": operator,
        "dra": dra_info(cluster),
        "serving": serving_info(cluster),
    }


def main():
    module = KubegpuModule(argument_spec={"include_node_names": {"type": "bool", "default": False}},
                           supports_check_mode=True)
    module.run(gather)


if __name__ == "__main__":
    main()
