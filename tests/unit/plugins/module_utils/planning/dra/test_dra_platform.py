# -*- coding: utf-8 -*-
"""DRA platform check: what each Kubernetes / OpenShift release needs, what is written, what is refused."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.platform import (
    best_version,
    feature_gate_object,
    plan_platform,
    scheduler_object,
)


def kube(version, served=("v1",)):
    return {"kubernetes_version": version, "served_versions": list(served)}


def ocp(version, served=("v1",), feature_set="", scheduler_dra=None):
    return {"kubernetes_version": "v1.33.5", "openshift_version": version, "served_versions": list(served),
            "feature_set": feature_set, "scheduler_dra": scheduler_dra}


@pytest.mark.parametrize("served, expected", [
    (["v1", "v1beta1", "v1beta2"], "resource.k8s.io/v1"),
    (["v1beta1", "v1beta2"], "resource.k8s.io/v1beta2"),
    (["v1beta1"], "resource.k8s.io/v1beta1"),
    ([], None),
])
def test_best_version(served, expected):
    assert best_version(served) == expected


# ---------------------------------------------------------------------------------------------
# ready, with what is written and waited for
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("facts, ack, ready, writes, wait, warned", [
    (kube("v1.34.2"), False, True, [], False, False),
    (kube("v1.35.0+k3s1"), False, True, [], False, False),
    (kube("1.36.1-gke.100", ("v1", "v1beta2")), False, True, [], False, False),
    # 1.34.0/1.34.1 serve DRA but the driver needs 1.34.2: a warning, not a refusal.
    (kube("v1.34.1"), False, True, [], False, True),
    (ocp("4.21.0"), False, True, [], False, False),
    (ocp("4.22.3"), False, True, [], False, False),
    # Tech Preview already set: nothing to write (4.20), the scheduler customisation on 4.19.
    (ocp("4.20.3", feature_set="TechPreviewNoUpgrade"), False, True, [], False, False),
    (ocp("4.19.9", feature_set="TechPreviewNoUpgrade"), False, False, [scheduler_object()], False, False),
    (ocp("4.19.9", feature_set="TechPreviewNoUpgrade", scheduler_dra="Enabled"), False, True, [], False, False),
    # Tech Preview set, API servers still rolling out: wait.
    (ocp("4.20.3", served=(), feature_set="TechPreviewNoUpgrade"), False, False, [], True, False),
    # Acknowledged: the collection writes the feature set (and the scheduler on 4.19) and waits.
    (ocp("4.20.3", served=()), True, False, [feature_gate_object()], True, True),
    (ocp("4.19.2", served=()), True, False, [feature_gate_object(), scheduler_object()], True, True),
    # A custom feature set that already serves DRA is used as it is.
    (ocp("4.20.3", feature_set="CustomNoUpgrade"), False, True, [], False, True),
])
def test_plan(facts, ack, ready, writes, wait, warned):
    plan = plan_platform(facts, acknowledge_tech_preview_no_upgrade=ack)
    assert plan["ready"] is ready
    assert plan["writes"] == writes
    assert (plan["wait_for"] is not None) is wait
    assert bool(plan["warnings"]) is warned
    assert plan["platform"] == ("openshift" if facts.get("openshift_version") else "kubernetes")


def test_feature_gate_object():
    assert feature_gate_object() == {"apiVersion": "config.openshift.io/v1", "kind": "FeatureGate",
                                     "metadata": {"name": "cluster"}, "spec": {"featureSet": "TechPreviewNoUpgrade"}}


def test_plan_names_api_version():
    assert plan_platform(kube("v1.34.2", ("v1beta2", "v1")))["api_version"] == "resource.k8s.io/v1"


# ---------------------------------------------------------------------------------------------
# refusals
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("facts, ack, fragments, requirements", [
    (kube("v1.31.4"), False, ["Kubernetes 1.31.4", "alpha", "upgrade"], 0),
    # 1.32/1.33: the control plane's gates and runtime-config, returned as requirements.
    (kube("v1.32.3", ()), False, ["Kubernetes 1.32.3", "DynamicResourceAllocation=true", "kube-scheduler",
                                  "kubelet", "--runtime-config=resource.k8s.io/v1beta1=true"], 3),
    (kube("v1.33.1", ("v1beta1",)), False, ["1.33.1", "served: v1beta1", "does not change the control plane"], 3),
    (kube("v1.34.2", ("v1beta2",)), False, ["resource.k8s.io/v1=false", "served: v1beta2"], 1),
    (ocp("4.18.9", ()), True, ["OpenShift 4.18.9 has no DRA", "4.21"], 0),
    (ocp("4.21.1", ()), False, ["GA but the API server serves no"], 0),
    # Not acknowledged: the refusal says it is irreversible and blocks upgrades, and what to set.
    (ocp("4.20.3", ()), False, ["TechPreviewNoUpgrade", "irreversible", "blocks every upgrade",
                                "acknowledge_tech_preview_no_upgrade: true", "4.21"], 1),
    (ocp("4.19.0", ()), False, ["TechPreviewNoUpgrade", "Scheduler", "irreversible"], 1),
    (ocp("4.20.3", (), "CustomNoUpgrade"), True, ["CustomNoUpgrade", "does not change", "customNoUpgrade.enabled"], 1),
    (ocp("4.19.1", (), "DevPreviewNoUpgrade"), True, ["DevPreviewNoUpgrade", "dynamicResourceAllocation"], 1),
    ({"kubernetes_version": "latest", "served_versions": ["v1"]}, False, ["Kubernetes version is 'latest'"], 0),
    ({"kubernetes_version": "v1.34.2", "served_versions": "v1"}, False, ["served_versions is 'v1'"], 0),
    ("v1.34", False, ["expected a mapping"], 0),
])
def test_refused(facts, ack, fragments, requirements):
    with pytest.raises(DraError) as caught:
        plan_platform(facts, acknowledge_tech_preview_no_upgrade=ack)
    for fragment in fragments:
        assert fragment in str(caught.value)
    assert len(caught.value.requirements) == requirements


def test_acknowledgement_must_be_a_bool():
    with pytest.raises(DraError, match="acknowledge_tech_preview_no_upgrade is 'yes'; expected true or false"):
        plan_platform(ocp("4.20.3", ()), acknowledge_tech_preview_no_upgrade="yes")
