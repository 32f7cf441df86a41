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

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import patch_object
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import (
    ClusterError,
    DynamicApiError,
    NotFoundError,
    describe_api_error,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DRAINED_ANNOTATION
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import (
    READY,
    WAITING,
    Predicate,
    RoundOver,
    Target,
    WaitTimeout,
    wait_for,
)


def drain_node(cluster, node, pods, timeout, interval=1.0, budget=None, started=None, memory=None):
    """Cordon `node` (marked as ours) and evict `pods` ("namespace/name"); wait until they are gone or raise
    ClusterError. The caller uncordons, whatever happens, except when the round (budget) ran out: then RoundOver
    is raised, the node stays cordoned (marked) and the next call carries on."""
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

    def read(c):
        return [ref for ref in pods if c.get("v1", "Pod", ref.split("/", 1)[1], ref.split("/", 1)[0])]

    def judge(left, target):
        return dict((ref, (WAITING, "still running") if ref in left else (READY, "gone")) for ref in pods)

    target = Target.custom("node {0}: GPU pods evicted".format(node), read=read, names=pods)
    try:
        outcome = wait_for(cluster, target, Predicate("the evicted GPU pods gone", judge), timeout, interval=interval,
                           budget=budget, started=started, memory=memory)
    except WaitTimeout as e:
        raise ClusterError("{0}; its MIG configuration was left unchanged".format(e))
    if not outcome.ready:
        raise RoundOver(outcome.progress)


def uncordon_node(cluster, node):
    """Make the node schedulable again and drop our drain mark."""
    uncordon = {"metadata": {"annotations": {DRAINED_ANNOTATION: None}}, "spec": {"unschedulable": None}}
    patch_object(cluster, "v1", "Node", node, uncordon)
