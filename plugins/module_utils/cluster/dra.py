# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reads for the DRA stage: the platform facts plan_platform judges, and what its waits read (cluster/wait.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import Target
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.platform import GROUP

OPENSHIFT_CONFIG = "config.openshift.io/v1"


def platform_facts(cluster):
    """Discovery of resource.k8s.io, /version, and on OpenShift the ClusterVersion, FeatureGate and Scheduler."""
    facts = {"served_versions": cluster.served_versions(GROUP), "kubernetes_version": cluster.server_version(),
             "openshift_version": None, "feature_set": None, "scheduler_dra": None}
    version = cluster.get(OPENSHIFT_CONFIG, "ClusterVersion", "version")
    if version is None:
        return facts
    facts["openshift_version"] = ((version.get("status") or {}).get("desired") or {}).get("version")
    gate = cluster.get(OPENSHIFT_CONFIG, "FeatureGate", "cluster") or {}
    facts["feature_set"] = (gate.get("spec") or {}).get("featureSet") or ""
    scheduler = cluster.get(OPENSHIFT_CONFIG, "Scheduler", "cluster") or {}
    facts["scheduler_dra"] = ((scheduler.get("spec") or {}).get("profileCustomizations") or {}).get(
        "dynamicResourceAllocation")
    return facts


def served_target():
    """The wait target of resource.k8s.io: discovery of the group, judged by api_served(GROUP)."""
    return Target.custom(GROUP, read=lambda c: c.served_versions(GROUP))


def devices(outcome):
    """{node: number of devices} from a ResourceSlice wait's last read."""
    out = {}
    for item in outcome.observed or []:
        spec = item.get("spec") or {}
        if spec.get("driver") == "gpu.nvidia.com" and (spec.get("nodeName") in outcome.items):
            out[spec["nodeName"]] = out.get(spec["nodeName"], 0) + len(spec.get("devices") or [])
    return out
