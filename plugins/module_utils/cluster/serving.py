# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reads for the serving stage: the facts planning/serving/platform.py judges, and the plan of both modules.

Every read is a list or a get of a known name: the cost does not grow with the number of nodes or models.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import MANAGED_BY_LABEL, SERVING_FIELD_MANAGER
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.errors import ServingError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.install import (
    APPLICATIONS_NAMESPACE,
    KEDA_CONTROLLER,
    KEDA_NAMESPACE_OPENSHIFT,
    KSERVE_NAMESPACE,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.platform import (
    DSC_GROUP,
    DSCI_GROUP,
    GROUPS,
    KEDA_GROUP,
    KSERVE_GROUP,
    RHOAI,
    detect_platform,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.models import cluster_offers, plan_models
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import SizingError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.spec import parse_settings
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.objects import queue_of
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.spec import TenancyError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.spec import parse_settings as parse_tenancy

OPENSHIFT_CONFIG = "config.openshift.io/v1"
SUBSCRIPTIONS = "operators.coreos.com/v1alpha1"
PACKAGES = "packages.operators.coreos.com/v1"
MARKETPLACE = "openshift-marketplace"
KSERVE_CONFIGMAP = "inferenceservice-config"
KSERVE_CONTROLLER = "kserve-controller-manager"
KNATIVE_NAMESPACE = "knative-serving"
KNATIVE_AUTOSCALER = "autoscaler"
KEDA_OPERATOR = "keda-operator"
ISVC_CRD = "inferenceservices.serving.kserve.io"
SCALEDOBJECT_CRD = "scaledobjects.keda.sh"
FIELD_MANAGER = SERVING_FIELD_MANAGER
PLANNING_ERRORS = (ServingError, DraError, PoolError, SizingError, TenancyError)


def _newest(versions):
    """The newest of an API group's versions by number (v2 before v1), None when none is served."""
    def key(version):
        digits = "".join(c for c in version[1:] if c.isdigit())
        return (int(digits or 0), "alpha" not in version and "beta" not in version)
    return max(versions, key=key) if versions else None


def _first(cluster, group, versions, kind):
    version = _newest(versions)
    if version is None:
        return None
    items = cluster.list("%s/%s" % (group, version), kind)
    if not items:
        return None
    obj = sorted(items, key=lambda o: o["metadata"]["name"])[0]
    obj["apiVersion"] = "%s/%s" % (group, version)
    return obj


def _deployment_named(cluster, name, namespace=None):
    return bool(cluster.list("apps/v1", "Deployment", namespace=namespace, field_selector="metadata.name=%s" % name))


def _catalog_entry(cluster, package):
    manifest = cluster.get(PACKAGES, "PackageManifest", package, MARKETPLACE)
    if manifest is None:
        return None
    status = manifest.get("status") or {}
    return {"default_channel": status.get("defaultChannel"),
            "channels": dict((c.get("name"), c.get("currentCSV")) for c in status.get("channels") or [])}


def _kserve_config(cluster, namespace):
    configmap = cluster.get("v1", "ConfigMap", KSERVE_CONFIGMAP, namespace)
    if configmap is None:
        return None
    try:
        return json.loads((configmap.get("data") or {}).get("deploy") or "{}")
    except ValueError:
        return {}


def platform_facts(cluster, kserve_namespace=KSERVE_NAMESPACE):
    """Observe what platform.detect_platform needs (see its docstring for each fact)."""
    version = cluster.get(OPENSHIFT_CONFIG, "ClusterVersion", "version")
    openshift = ((version or {}).get("status") or {}).get("desired", {}).get("version") if version else None
    groups = dict((group, cluster.served_versions(group)) for group in GROUPS)
    facts = {"openshift_version": openshift, "groups": groups, "operators": {}, "catalog": {}, "dsc": None,
             "dsci": None, "kserve_config": None, "kserve_controller": False, "knative_serving": False,
             "keda": False, "keda_controller": False, "kserve_crds": None, "keda_crds": None}
    if openshift:
        for sub in cluster.list(SUBSCRIPTIONS, "Subscription"):
            package = (sub.get("spec") or {}).get("name")
            installed = (sub.get("status") or {}).get("installedCSV")
            if package and installed:
                facts["operators"][package] = installed
        if RHOAI not in facts["operators"]:
            entry = _catalog_entry(cluster, RHOAI)
            if entry:
                facts["catalog"][RHOAI] = entry
        facts["dsc"] = _first(cluster, DSC_GROUP, groups.get(DSC_GROUP), "DataScienceCluster")
        facts["dsci"] = _first(cluster, DSCI_GROUP, groups.get(DSCI_GROUP), "DSCInitialization")
        facts["keda_controller"] = cluster.get("keda.sh/v1alpha1", "KedaController", KEDA_CONTROLLER,
                                               KEDA_NAMESPACE_OPENSHIFT) is not None
    facts["kserve_config"] = _kserve_config(cluster, APPLICATIONS_NAMESPACE if openshift and facts["dsc"]
                                            else kserve_namespace)
    facts["kserve_controller"] = _deployment_named(cluster, KSERVE_CONTROLLER)
    facts["knative_serving"] = _deployment_named(cluster, KNATIVE_AUTOSCALER, KNATIVE_NAMESPACE)
    facts["keda"] = _deployment_named(cluster, KEDA_OPERATOR)
    if groups.get(KSERVE_GROUP):
        facts["kserve_crds"] = _crd_installer(cluster, ISVC_CRD)
    if groups.get(KEDA_GROUP):
        facts["keda_crds"] = _crd_installer(cluster, SCALEDOBJECT_CRD)
    return facts


def _crd_installer(cluster, name):
    """"helm" when the served CRD `name` carries Helm's managed-by label, else "other" (one list call)."""
    helm = cluster.list("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                        label_selector="%s=Helm" % MANAGED_BY_LABEL, field_selector="metadata.name=%s" % name)
    return "helm" if helm else "other"


def plan_serving(cluster, raw_settings, raw_pools, raw_templates, raw_tenancy=None):
    """Observe and plan, for the serving modules: (settings, facts, platform plan, models plan).

    raw_tenancy (kubegpu_tenancy): models in a namespace of a team that uses Kueue are queued in its LocalQueue.
    Raises PLANNING_ERRORS (ServingError, DraError, PoolError, SizingError, TenancyError) before anything is written.
    """
    settings = parse_settings(raw_settings)
    facts = platform_facts(cluster, settings.kserve.get("namespace") or KSERVE_NAMESPACE)
    platform = detect_platform(facts, settings)
    nodes = cluster.list("v1", "Node") if settings.models else []
    slices, pools, templates = cluster_offers(raw_pools, raw_templates, nodes)
    tenancy = parse_tenancy(raw_tenancy)
    queues = dict((model.namespace, queue_of(tenancy, model.namespace)) for model in settings.models
                  if queue_of(tenancy, model.namespace))
    return settings, facts, platform, plan_models(settings, platform, slices, pools, templates, queues)
