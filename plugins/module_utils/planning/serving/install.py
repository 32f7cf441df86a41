# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the serving stage installs for a platform plan (platform.py): OLM operators, Helm charts, and the
objects that turn them on (DSCInitialization, DataScienceCluster, KedaController).

- operators(plan, settings): the olm_operator arguments of each missing operator, in install order.
- chart_releases(plan, settings, facts): the kubernetes.core.helm releases of the missing charts (chart folder names
  under the charts directory: kserve-crd, kserve-resources, keda), in install order.
- platform_objects(plan, settings, facts): the objects to apply once the operators run. On OpenShift AI the
  DataScienceCluster carries KServe Managed and, on 2.x, its default deployment mode and Knative Serving; its
  DSCInitialization carries Service Mesh (Managed for Knative mode on 2.x). On 3.x with KEDA, the Custom Metrics
  Autoscaler's KedaController.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import MANAGED_BY
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.platform import (
    AUTHORINO,
    CMA,
    KSERVE_UPSTREAM,
    OPENSHIFT_AI_2,
    OPENSHIFT_AI_3,
    RHOAI,
    SERVERLESS,
    SERVICE_MESH,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.spec import KNATIVE, STANDARD

RHOAI_NAMESPACE = "redhat-ods-operator"
APPLICATIONS_NAMESPACE = "redhat-ods-applications"
MONITORING_NAMESPACE = "redhat-ods-monitoring"     # OpenShift AI's monitoring stack (its DSCInitialization's default)
KEDA_NAMESPACE_OPENSHIFT = "openshift-keda"
DSC_NAME = "default-dsc"
DSCI_NAME = "default-dsci"
KEDA_CONTROLLER = "keda"
SMCP = {"name": "data-science-smcp", "namespace": "istio-system"}
KSERVE_NAMESPACE = "kserve"
KEDA_NAMESPACE = "keda"
LABELS = dict(MANAGED_BY)

# Where each chart is published, and its folder in a charts directory laid out as shared/charts is.
PUBLISHED = {
    "kserve-crd": {"ref": "oci://ghcr.io/kserve/charts/kserve-crd", "version": "v0.20.0", "folder": "kserve/kserve-crd"},
    "kserve-resources": {"ref": "oci://ghcr.io/kserve/charts/kserve-resources", "version": "v0.20.0",
                         "folder": "kserve/kserve-resources"},
    "keda": {"ref": "keda", "repo_url": "https://kedacore.github.io/charts", "version": "2.20.2", "folder": "keda"},
}

# package: (namespace, all namespaces?) as each operator's documentation installs it.
_OPERATORS = {
    RHOAI: (RHOAI_NAMESPACE, True),
    SERVERLESS: ("openshift-serverless", True),
    SERVICE_MESH: ("openshift-operators", True),
    AUTHORINO: ("openshift-operators", True),
    CMA: (KEDA_NAMESPACE_OPENSHIFT, True),
}
_COMPONENT_PACKAGES = {
    "openshift_ai": RHOAI, "serverless": SERVERLESS, "service_mesh": SERVICE_MESH, "authorino": AUTHORINO,
    "custom_metrics_autoscaler": CMA,
}
# Service Mesh, Serverless and Authorino before OpenShift AI: its KServe component waits for them otherwise.
_ORDER = (SERVICE_MESH, SERVERLESS, AUTHORINO, CMA, RHOAI)


def operators(plan, settings):
    """olm_operator arguments of each missing operator, dependencies first."""
    packages = [_COMPONENT_PACKAGES[c] for c in plan["missing"] if c in _COMPONENT_PACKAGES]
    out = []
    for package in sorted(packages, key=_ORDER.index):
        namespace, all_namespaces = _OPERATORS[package]
        args = {"package": package, "namespace": namespace}
        if all_namespaces:
            args["operator_group"] = {"target_namespaces": []}
        if package == RHOAI:
            for key in ("channel", "approval", "source"):
                if settings.openshift_ai.get(key):
                    args[key] = settings.openshift_ai[key]
        out.append(args)
    return out


def chart_releases(plan, settings, facts):
    """kubernetes.core.helm releases for the missing charts, in install order: {name, namespace, chart, chart_ref,
    repo_url, version, values}. chart_ref is the folder under settings.helm.charts_dir when one is given (Helm reads
    the version from its Chart.yaml), else the published chart at its pinned version.

    KServe's CRD chart is skipped when its CRDs exist and were not installed by Helm (another installer owns
    them; Helm would refuse to adopt them).
    """
    if plan["flavor"] != KSERVE_UPSTREAM:
        return []
    out = []
    kserve_ns = settings.kserve.get("namespace") or KSERVE_NAMESPACE
    if "kserve" in plan["missing"]:
        if facts.get("kserve_crds") != "other":
            out.append(_release(settings, "kserve-crd", "kserve-crd", kserve_ns, {}))
        values = {"kserve": {"controller": {"deploymentMode": plan["mode_names"][plan["mode"]]}}}
        out.append(_release(settings, "kserve", "kserve-resources", kserve_ns,
                            _merge(values, settings.kserve.get("values") or {})))
    if "keda" in plan["missing"]:
        out.append(_release(settings, "keda", "keda", settings.keda.get("namespace") or KEDA_NAMESPACE,
                            dict(settings.keda.get("values") or {})))
    return out


def _release(settings, name, chart, namespace, values):
    published = PUBLISHED[chart]
    charts_dir = (settings.helm.get("charts_dir") or "").rstrip("/")
    release = {"name": name, "namespace": namespace, "chart": chart, "values": values}
    if charts_dir:
        release.update(chart_ref="%s/%s" % (charts_dir, published["folder"]), repo_url=None, version=None)
    else:
        release.update(chart_ref=published["ref"], repo_url=published.get("repo_url"), version=published["version"])
    return release


def _merge(base, over):
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def platform_objects(plan, settings, facts):
    """The objects that switch the platform on, to apply once the operators run (server-side apply)."""
    if plan["flavor"] == OPENSHIFT_AI_2:
        knative = plan["mode"] == KNATIVE
        dsci = {"apiVersion": "dscinitialization.opendatahub.io/v1", "kind": "DSCInitialization",
                "metadata": {"name": _name(facts.get("dsci"), DSCI_NAME)},
                "spec": {"applicationsNamespace": APPLICATIONS_NAMESPACE,
                         "serviceMesh": {"managementState": "Managed" if knative else "Removed",
                                         "controlPlane": dict(SMCP)}}}
        kserve = {"managementState": "Managed",
                  "defaultDeploymentMode": plan["mode_names"][plan["mode"]],
                  "serving": {"managementState": "Managed" if knative else "Removed", "name": "knative-serving"}}
        dsc = {"apiVersion": "datasciencecluster.opendatahub.io/v1", "kind": "DataScienceCluster",
               "metadata": {"name": _name(facts.get("dsc"), DSC_NAME)},
               "spec": {"components": {"kserve": kserve}}}
        return [dsci, dsc]
    if plan["flavor"] == OPENSHIFT_AI_3:
        dsci = {"apiVersion": "dscinitialization.opendatahub.io/v2", "kind": "DSCInitialization",
                "metadata": {"name": _name(facts.get("dsci"), DSCI_NAME)},
                "spec": {"applicationsNamespace": APPLICATIONS_NAMESPACE}}
        dsc = {"apiVersion": "datasciencecluster.opendatahub.io/v2", "kind": "DataScienceCluster",
               "metadata": {"name": _name(facts.get("dsc"), DSC_NAME)},
               "spec": {"components": {"kserve": {"managementState": "Managed"}}}}
        objects = [dsci, dsc]
        if plan["scale_to_zero"].get(STANDARD):
            objects.append({"apiVersion": "keda.sh/v1alpha1", "kind": "KedaController",
                            "metadata": {"name": KEDA_CONTROLLER, "namespace": KEDA_NAMESPACE_OPENSHIFT},
                            "spec": {"watchNamespace": ""}})
        return objects
    return []


def _name(live, default):
    """One DataScienceCluster (and DSCInitialization) per cluster: keep the name of the one that exists."""
    return ((live or {}).get("metadata") or {}).get("name") or default
