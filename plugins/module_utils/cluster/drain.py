# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cordon a node, evict the pods that use its GPUs, and uncordon it afterwards.

mig-manager does not evict user pods (gpu-operator#262: cordon, wait, label, wait, uncordon is left to the
user), so when asked to, we do the cordon and eviction ourselves through the Eviction API, which honours
PodDisruptionBudgets.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import patch_object
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import (
    ClusterError,
    DynamicApiError,
    NotFoundError,
    describe_api_error,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DRAINED_ANNOTATION


def drain_node(cluster, node, pods, timeout, interval=1.0):
    """Cordon `node` (marked as ours) and evict `pods` ("namespace/name"); wait until they are gone or raise
    ClusterError. The caller uncordons, whatever happens."""
    cordon = {"metadata": {"annotations": {DRAINED_ANNOTATION: "true"}}, "spec": {"unschedulable": True}}
    patch_object(cluster, "v1", "Node", node, cordon)
    for ref in pods:
        namespace, name = ref.split("/", 1)
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        try:
            cluster.dynamic.request("post", "/api/v1/namespaces/{0}/pods/{1}/eviction".format(namespace, name),
                                    body=body)
        except NotFoundError:
            continue
        except DynamicApiError as e:
            raise ClusterError(describe_api_error("evict pod {0} from node {1}".format(ref, node), e))
    deadline = time.monotonic() + timeout
    while True:
        left = [ref for ref in pods if cluster.get("v1", "Pod", ref.split("/", 1)[1], ref.split("/", 1)[0])]
        if not left:
            return
        if time.monotonic() > deadline:
            raise ClusterError("node {0}: GPU pods still running {1:.0f} s after eviction: {2}; its MIG "
                               "configuration was left unchanged".format(node, timeout, ", ".join(left)))
        time.sleep(interval)


def uncordon_node(cluster, node):
    """Make the node schedulable again and drop our drain mark."""
    uncordon = {"metadata": {"annotations": {DRAINED_ANNOTATION: None}}, "spec": {"unschedulable": None}}
    patch_object(cluster, "v1", "Node", node, uncordon)
