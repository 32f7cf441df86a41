# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reads for the DRA stage: the platform facts plan_platform judges, and waits on what the cluster serves."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import WaitTimeout
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.platform import (
    OPENSHIFT_CONFIG_API,
    cluster_version,
    openshift_release,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.platform import GROUP
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DRA_DRIVER


def platform_facts(cluster):
    """Discovery of resource.k8s.io, /version, and on OpenShift the ClusterVersion, FeatureGate and Scheduler."""
    facts = {"served_versions": cluster.served_versions(GROUP), "kubernetes_version": cluster.server_version(),
             "openshift_version": None, "feature_set": None, "scheduler_dra": None}
    version = cluster_version(cluster)
    if version is None:
        return facts
    facts["openshift_version"] = openshift_release(version)
    gate = cluster.get(OPENSHIFT_CONFIG_API, "FeatureGate", "cluster") or {}
    facts["feature_set"] = (gate.get("spec") or {}).get("featureSet") or ""
    scheduler = cluster.get(OPENSHIFT_CONFIG_API, "Scheduler", "cluster") or {}
    facts["scheduler_dra"] = ((scheduler.get("spec") or {}).get("profileCustomizations") or {}).get(
        "dynamicResourceAllocation")
    return facts


def wait_until_served(cluster, timeout, interval=2.0, clock=time.monotonic, sleep=time.sleep):
    """Poll discovery until resource.k8s.io is served; return the served versions. Raises WaitTimeout."""
    start = clock()
    while True:
        served = cluster.served_versions(GROUP)
        if served:
            return served
        if clock() - start > timeout:
            raise WaitTimeout("%s was still not served after %.0f s; the control plane rolls out a new feature set "
                              "node by node: check the kube-apiserver ClusterOperator" % (GROUP, timeout), {})
        sleep(interval)


def wait_for_slices(cluster, api_version, nodes, timeout, interval=1.0, clock=time.monotonic, sleep=time.sleep):
    """Wait until each node publishes a ResourceSlice of the NVIDIA driver (one list per poll).

    Returns {node: number of devices}. Raises WaitTimeout naming the nodes still without one.
    """
    start = clock()
    while True:
        devices = {}
        for item in cluster.list(api_version, "ResourceSlice"):
            spec = item.get("spec") or {}
            if spec.get("driver") == DRA_DRIVER and spec.get("nodeName") in nodes:
                devices[spec["nodeName"]] = devices.get(spec["nodeName"], 0) + len(spec.get("devices") or [])
        missing = sorted(set(nodes) - set(devices))
        if not missing:
            return devices
        if clock() - start > timeout:
            raise WaitTimeout("no ResourceSlice of gpu.nvidia.com after %.0f s on node%s %s: is the DRA driver's "
                              "kubelet plugin running there (DaemonSet in the driver's namespace)?"
                              % (timeout, "s" if len(missing) > 1 else "", ", ".join(missing)), {})
        sleep(interval)
