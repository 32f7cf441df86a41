# -*- coding: utf-8 -*-
"""Serving platform detection (platform.py) and what the stage installs for it (install.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.errors import ServingError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.install import (
    chart_releases,
    operators,
    platform_objects,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.platform import detect_platform
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.spec import parse_settings

CATALOG = {"rhods-operator": {"default_channel": "fast-3.x", "channels": {
    "fast-3.x": "rhods-operator.3.5.0", "stable-3.5": "rhods-operator.3.5.0", "stable": "rhods-operator.2.25.0"}}}


def openshift(**facts):
    base = {"openshift_version": "4.20.3", "operators": {}, "catalog": CATALOG, "groups": {}}
    base.update(facts)
    return base


def kubernetes(**facts):
    base = {"openshift_version": None, "groups": {}}
    base.update(facts)
    return base


def settings(**raw):
    return parse_settings(raw)


def packages(plan, s):
    return [o["package"] for o in operators(plan, s)]


# -- detection: (facts, settings) -> flavor, mode, scale to zero per mode, missing

CASES = [
    ("fresh OpenShift: the catalog's default channel is 3.x",
     openshift(), {}, "openshift-ai-3", "standard", {"knative": None, "standard": "keda"},
     ["openshift_ai", "custom_metrics_autoscaler", "keda_controller"]),
    ("fresh OpenShift, 2.x channel asked: Knative (Serverless) by default",
     openshift(), {"openshift_ai": {"channel": "stable"}}, "openshift-ai-2", "knative",
     {"knative": "knative", "standard": None}, ["openshift_ai", "serverless", "service_mesh", "authorino"]),
    ("2.x installed in RawDeployment mode: the HPA only",
     openshift(operators={"rhods-operator": "rhods-operator.2.25.0"},
               dsc={"apiVersion": "datasciencecluster.opendatahub.io/v1",
                    "spec": {"components": {"kserve": {"defaultDeploymentMode": "RawDeployment"}}}}),
     {}, "openshift-ai-2", "standard", {"knative": None, "standard": None}, []),
    ("2.x installed with its Serverless operators: nothing missing",
     openshift(operators={"rhods-operator": "rhods-operator.2.25.0", "serverless-operator": "s.v1",
                          "servicemeshoperator": "m.v2", "authorino-operator": "a.v1"}),
     {}, "openshift-ai-2", "knative", {"knative": "knative", "standard": None}, []),
    ("3.x DataScienceCluster v2 without the Subscription seen",
     openshift(dsc={"apiVersion": "datasciencecluster.opendatahub.io/v2"}, keda_controller=True,
               operators={"openshift-custom-metrics-autoscaler-operator": "c.v2"}),
     {"install": False}, "openshift-ai-3", "standard", {"knative": None, "standard": "keda"}, []),
    ("Kubernetes without KServe: Standard mode, KServe and KEDA installed",
     kubernetes(), {}, "kserve", "standard", {"knative": None, "standard": "keda"}, ["kserve", "keda"]),
    ("Kubernetes with KServe in Knative mode and Knative Serving",
     kubernetes(kserve_config={"defaultDeploymentMode": "Serverless"}, kserve_controller=True, knative_serving=True),
     {}, "kserve", "knative", {"knative": "knative", "standard": "keda"}, ["keda"]),
    ("Kubernetes with KServe configured for Knative but no Knative: Standard",
     kubernetes(kserve_config={"defaultDeploymentMode": "Knative"}, kserve_controller=True, keda=True),
     {}, "kserve", "standard", {"knative": None, "standard": "keda"}, []),
    ("Kubernetes, KServe without KEDA and install off: the HPA only",
     kubernetes(kserve_config={"defaultDeploymentMode": "Standard"}, kserve_controller=True),
     {"install": False}, "kserve", "standard", {"knative": None, "standard": None}, []),
]


@pytest.mark.parametrize("what,facts,raw,flavor,mode,scale,missing", CASES, ids=[c[0] for c in CASES])
def test_detect_platform(what, facts, raw, flavor, mode, scale, missing):
    plan = detect_platform(facts, settings(**raw))
    assert (plan["flavor"], plan["mode"], plan["scale_to_zero"], plan["missing"]) == (flavor, mode, scale, missing)


REFUSALS = [
    (openshift(operators={"rhods-operator": "rhods-operator.3.5.0"}), {"mode": "knative"},
     "OpenShift AI 3.5.0 removed Serverless (Knative) mode"),
    (kubernetes(), {"mode": "knative"}, "Knative Serving does not run on this cluster"),
    (kubernetes(), {"platform": "openshift-ai"}, "this cluster is not OpenShift"),
    (kubernetes(), {"install": False}, "KServe is not installed"),
    (openshift(catalog={}), {}, "the catalog has no package rhods-operator"),
    (openshift(), {"openshift_ai": {"channel": "eus-9"}}, "package rhods-operator offers fast-3.x, stable, stable-3.5"),
    (openshift(), {"mode": "knative", "install": False, "openshift_ai": {"channel": "stable"}},
     "needs OpenShift Serverless, Service Mesh 2 and Authorino"),
]


@pytest.mark.parametrize("facts,raw,message", REFUSALS)
def test_detect_platform_refusals(facts, raw, message):
    with pytest.raises(ServingError) as e:
        detect_platform(facts, settings(**raw))
    assert message in str(e.value)


def test_operators_come_dependencies_first():
    s = settings(openshift_ai={"channel": "stable", "approval": "Automatic"})
    plan = detect_platform(openshift(), s)
    ops = operators(plan, s)
    expected = ["servicemeshoperator", "serverless-operator", "authorino-operator", "rhods-operator"]
    assert [o["package"] for o in ops] == expected
    assert ops[-1] == {"package": "rhods-operator", "namespace": "redhat-ods-operator", "channel": "stable",
                       "approval": "Automatic", "operator_group": {"target_namespaces": []}}


def test_openshift_ai_2_objects_turn_on_kserve_in_serverless_mode():
    s = settings(openshift_ai={"channel": "stable"})
    plan = detect_platform(openshift(), s)
    dsci, dsc = platform_objects(plan, s, {})
    assert dsci["apiVersion"] == "dscinitialization.opendatahub.io/v1"
    assert dsci["spec"]["serviceMesh"]["managementState"] == "Managed"
    assert dsc["spec"]["components"]["kserve"] == {
        "managementState": "Managed", "defaultDeploymentMode": "Serverless",
        "serving": {"managementState": "Managed", "name": "knative-serving"}}


def test_openshift_ai_3_objects_keep_the_existing_names_and_add_the_keda_controller():
    s = settings()
    facts = openshift(dsc={"apiVersion": "datasciencecluster.opendatahub.io/v2", "metadata": {"name": "mine"}})
    plan = detect_platform(facts, s)
    objects = platform_objects(plan, s, facts)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("DSCInitialization", "default-dsci"), ("DataScienceCluster", "mine"), ("KedaController", "keda")]
    assert objects[1]["spec"] == {"components": {"kserve": {"managementState": "Managed"}}}
    assert chart_releases(plan, s, facts) == []


def test_kubernetes_charts_from_a_charts_directory_or_published():
    s = settings(helm={"charts_dir": "/charts/"}, kserve={"values": {"kserve": {"certManager": {"enabled": False}}}})
    plan = detect_platform(kubernetes(), s)
    releases = chart_releases(plan, s, {})
    assert [(r["name"], r["chart_ref"], r["namespace"]) for r in releases] == [
        ("kserve-crd", "/charts/kserve/kserve-crd", "kserve"), ("kserve", "/charts/kserve/kserve-resources", "kserve"),
        ("keda", "/charts/keda", "keda")]
    assert releases[1]["values"] == {"kserve": {"controller": {"deploymentMode": "Standard"},
                                                "certManager": {"enabled": False}}}
    published = chart_releases(plan, settings(), {"kserve_crds": "other"})
    assert [(r["chart_ref"], r["version"]) for r in published] == [
        ("oci://ghcr.io/kserve/charts/kserve-resources", "v0.20.0"), ("keda", "2.20.2")]
    assert published[1]["repo_url"] == "https://kedacore.github.io/charts"
    assert operators(plan, s) == []


def test_keda_crds_no_release_owns_are_refused_before_the_chart_is_installed():
    # Left by an earlier install or applied by hand: Helm would refuse the keda chart after KServe's went in.
    with pytest.raises(ServingError) as e:
        detect_platform(kubernetes(groups={"keda.sh": ["v1alpha1"]}, keda_crds="other"), settings())
    assert "scaledobjects.keda.sh" in str(e.value) and "meta.helm.sh/release-name=keda" in str(e.value)
    # KEDA's own chart release (a re-run after its operator went away), or KEDA running: nothing to refuse.
    assert "keda" in detect_platform(kubernetes(keda_crds="helm"), settings())["missing"]
    assert detect_platform(kubernetes(keda=True, keda_crds="other"), settings())["missing"] == ["kserve"]
