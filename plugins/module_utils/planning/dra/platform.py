# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a cluster can serve DRA, and what the collection may write to get it there.

plan_platform reads discovery facts and returns the platform plan, or raises DraError when the
collection must stop. The rules (shared/reference/dra-kserve-openshift-ai.md, "Kubernetes DRA" and
"DRA on OpenShift"):

- Kubernetes 1.34 and later serve resource.k8s.io/v1 (DRA GA): ready. The NVIDIA DRA driver 0.4
  needs 1.34.2 (kubernetes#133920), so 1.34.0/1.34.1 get a warning.
- Kubernetes 1.32/1.33: DRA is beta and off; it needs the DynamicResourceAllocation gate on four
  control-plane and node components and a --runtime-config flag. The collection does not own the
  control plane: it stops and returns those changes as requirements.
- OpenShift 4.21 and later: DRA is GA: ready.
- OpenShift 4.19/4.20: only under featureSet TechPreviewNoUpgrade (4.19 also the Scheduler's
  profileCustomizations.dynamicResourceAllocation: Enabled). That feature set can never be undone
  and blocks upgrades, so the collection writes it only when the user acknowledged exactly that;
  otherwise it refuses. A CustomNoUpgrade set is the user's own: left alone.

Facts (what the access layer discovers):
  served_versions   versions of resource.k8s.io the API server serves (["v1", "v1beta2"], [] for none)
  kubernetes_version  the API server's gitVersion ("v1.34.2")
  openshift_version   ClusterVersion's desired version ("4.20.3"), None on Kubernetes
  feature_set         FeatureGate/cluster spec.featureSet ("" or None for the default set)
  scheduler_dra       Scheduler/cluster spec.profileCustomizations.dynamicResourceAllocation, None if unset
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.versions import (
    parse_release,
    release_text,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import KUBERNETES, OPENSHIFT, OPENSHIFT_CONFIG_API

GROUP = "resource.k8s.io"
# Discovery order: the newest version served is the one to write.
VERSIONS = ("v1", "v1beta2", "v1beta1")

TECH_PREVIEW = "TechPreviewNoUpgrade"
CUSTOM = "CustomNoUpgrade"
DEV_PREVIEW = "DevPreviewNoUpgrade"
ACKNOWLEDGE = "acknowledge_tech_preview_no_upgrade"

KUBE_GA = (1, 34)
KUBE_BETA = (1, 32)
KUBE_DRIVER_MIN = (1, 34, 2)
OPENSHIFT_GA = (4, 21)
OPENSHIFT_TECH_PREVIEW = (4, 19)
OPENSHIFT_SCHEDULER_PROFILE = (4, 19)
GATE = "DynamicResourceAllocation"
BETA_COMPONENTS = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubelet")

_FACT_KEYS = ("served_versions", "kubernetes_version", "openshift_version", "feature_set", "scheduler_dra")


def feature_gate_object(feature_set=TECH_PREVIEW):
    """Return the OpenShift FeatureGate 'cluster' with spec.featureSet."""
    return {"apiVersion": OPENSHIFT_CONFIG_API, "kind": "FeatureGate", "metadata": {"name": "cluster"},
            "spec": {"featureSet": feature_set}}


def scheduler_object():
    """Return the OpenShift Scheduler 'cluster' with the DRA profile customisation enabled (4.19)."""
    return {"apiVersion": OPENSHIFT_CONFIG_API, "kind": "Scheduler", "metadata": {"name": "cluster"},
            "spec": {"profileCustomizations": {"dynamicResourceAllocation": "Enabled"}}}


def best_version(served_versions):
    """Return "resource.k8s.io/<version>" for the newest served version, None when none is served."""
    for version in VERSIONS:
        if version in served_versions:
            return "%s/%s" % (GROUP, version)
    return None


def plan_platform(facts, acknowledge_tech_preview_no_upgrade=False):
    """Return the DRA platform plan for a cluster, or raise DraError when the collection must stop.

    The plan is a dict:
      platform       "openshift" or "kubernetes"
      version        the release DRA was judged on ("4.20.3" or "1.34.2")
      api_version    the resource.k8s.io version to write now, None while none is served
      ready          True when DRA is served and nothing needs writing
      writes         objects to apply first (FeatureGate, Scheduler), in order
      wait_for       what to wait for after the writes, None when there is nothing to wait for
      warnings       sentences the user should read
    DraError carries requirements: what someone must change outside the collection.
    """
    if not isinstance(facts, Mapping):
        raise DraError("DRA platform facts are %r; expected a mapping with keys %s" % (facts, ", ".join(_FACT_KEYS)))
    served = _served(facts.get("served_versions"))
    if not isinstance(acknowledge_tech_preview_no_upgrade, bool):
        raise DraError(
            "kubegpu_dra.%s is %r; expected true or false" % (ACKNOWLEDGE, acknowledge_tech_preview_no_upgrade)
        )
    if facts.get("openshift_version"):
        return _openshift(facts, served, acknowledge_tech_preview_no_upgrade)
    return _kubernetes(facts, served)


def _served(versions):
    if versions is None:
        return ()
    if not isinstance(versions, (list, tuple)) or not all(isinstance(v, str) for v in versions):
        raise DraError("served_versions is %r; expected a list of resource.k8s.io versions such as ['v1']" % (versions,))
    return tuple(versions)


def _plan(platform, release, served, ready, writes=(), wait_for=None, warnings=()):
    return {"platform": platform, "version": release_text(release), "api_version": best_version(served),
            "ready": ready, "writes": list(writes), "wait_for": wait_for, "warnings": list(warnings)}


def _kubernetes(facts, served):
    release = parse_release(facts.get("kubernetes_version"), "Kubernetes version")
    text = release_text(release)
    if release[:2] < KUBE_BETA:
        raise DraError(
            "Kubernetes %s has DRA only as an alpha API; the DRA stage needs Kubernetes 1.34 or later "
            "(resource.k8s.io/v1, GA) and the NVIDIA DRA driver 0.4 needs 1.34.2: upgrade the cluster" % text
        )
    if release[:2] < KUBE_GA:
        requirements = [
            "enable the feature gate %s=true on %s" % (GATE, ", ".join(BETA_COMPONENTS)),
            "start kube-apiserver with --runtime-config=%s/v1beta1=true" % GROUP,
            "or upgrade to Kubernetes 1.34.2 or later, where DRA is GA and on by default "
            "(the NVIDIA DRA driver 0.4 needs 1.34.2)",
        ]
        raise DraError(
            "Kubernetes %s: DRA is beta and off by default (%s served: %s); the collection does not change "
            "the control plane: %s" % (text, GROUP, ", ".join(served) or "none", "; ".join(requirements)),
            requirements,
        )
    if "v1" not in served:
        requirement = ("remove resource.k8s.io/v1=false from kube-apiserver's --runtime-config (and %s=false "
                       "from the components' --feature-gates)" % GATE)
        raise DraError(
            "Kubernetes %s should serve %s/v1 but the API server does not (served: %s); %s"
            % (text, GROUP, ", ".join(served) or "none", requirement),
            [requirement],
        )
    warnings = []
    if release < KUBE_DRIVER_MIN:
        warnings.append(
            "Kubernetes %s: the NVIDIA DRA driver 0.4 needs 1.34.2 or later (kubernetes#133920); "
            "upgrade the control plane and kubelets" % text
        )
    return _plan(KUBERNETES, release, served, True, warnings=warnings)


def _openshift(facts, served, acknowledged):
    release = parse_release(facts.get("openshift_version"), "OpenShift version")
    text = release_text(release)
    feature_set = facts.get("feature_set") or ""
    if release[:2] >= OPENSHIFT_GA:
        if not served:
            raise DraError(
                "OpenShift %s: DRA is GA but the API server serves no %s version; check the cluster's "
                "FeatureGate and kube-apiserver operator status" % (text, GROUP)
            )
        return _plan(OPENSHIFT, release, served, True)
    if release[:2] < OPENSHIFT_TECH_PREVIEW:
        raise DraError(
            "OpenShift %s has no DRA; it needs OpenShift 4.21 or later (GA), or 4.19/4.20 as a Technology "
            "Preview: upgrade the cluster" % text
        )
    scheduler = []
    if release[:2] == OPENSHIFT_SCHEDULER_PROFILE[:2] and facts.get("scheduler_dra") != "Enabled":
        scheduler = [scheduler_object()]
    if feature_set == TECH_PREVIEW:
        if served and not scheduler:
            return _plan(OPENSHIFT, release, served, True)
        return _plan(OPENSHIFT, release, served, False, writes=scheduler,
                     wait_for=None if served else "%s served by every API server" % GROUP)
    if feature_set in (CUSTOM, DEV_PREVIEW):
        if served and not scheduler:
            return _plan(OPENSHIFT, release, served, True, warnings=[
                "OpenShift %s: featureSet %s is yours; DRA is served, so it is used as it is" % (text, feature_set)])
        requirement = ("enable %s in the FeatureGate's spec.customNoUpgrade.enabled%s" % (
            GATE, " and set Scheduler/cluster spec.profileCustomizations.dynamicResourceAllocation: Enabled"
            if scheduler else ""))
        raise DraError(
            "OpenShift %s runs featureSet %s, which the collection does not change; DRA is not ready "
            "(%s served: %s): %s" % (text, feature_set, GROUP, ", ".join(served) or "none", requirement),
            [requirement],
        )
    if not acknowledged:
        requirement = "set kubegpu_dra.%s: true, or upgrade to OpenShift 4.21 where DRA is GA" % ACKNOWLEDGE
        raise DraError(
            "OpenShift %s serves DRA only as a Technology Preview: FeatureGate/cluster spec.featureSet must become "
            "%s%s. That change is irreversible: it can never be turned off and it blocks every upgrade of the "
            "cluster. The collection makes it only when told so: %s"
            % (text, TECH_PREVIEW, " and the Scheduler must enable dynamicResourceAllocation" if scheduler else "",
               requirement),
            [requirement],
        )
    return _plan(
        OPENSHIFT, release, served, False, writes=[feature_gate_object()] + scheduler,
        wait_for="%s served by every API server (the control plane rolls out the new feature set)" % GROUP,
        warnings=["OpenShift %s: featureSet %s is being set as acknowledged; it cannot be undone and blocks "
                  "upgrades of this cluster" % (text, TECH_PREVIEW)],
    )
