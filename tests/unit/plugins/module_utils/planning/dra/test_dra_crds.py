# -*- coding: utf-8 -*-
"""Who owns the ComputeDomain CRDs: the DRA driver chart's schema while the DRA stage installs the driver, applied
only where the served one differs; the operator's copy (GPU Operator 26.7.0's chart) is the one that differs."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest
import yaml
from kubegpu_devcluster.paths import charts_dir  # pylint: disable=import-error

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.crds import (
    COMPUTE_DOMAIN_CRDS,
    DRA_DRIVER,
    GPU_OPERATOR,
    chart_crds,
    desired,
    plan_crds,
    schema_differences,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError

CDS, CLIQUES = COMPUTE_DOMAIN_CRDS
CHARTS = charts_dir()
NUM_NODES = ("versions", "v1beta1", "schema", "openAPIV3Schema", "properties", "spec", "properties", "numNodes")
SPEC_REQUIRED = ("versions", "v1beta1", "schema", "openAPIV3Schema", "properties", "spec", "required")


def _chart(name):
    folder = CHARTS / name / "crds"
    if not folder.is_dir():
        pytest.skip("the %s chart is not at %s" % (name, CHARTS / name))
    docs = []
    for path in sorted(folder.glob("*.yaml")):
        docs.extend(yaml.safe_load_all(path.read_text()))
    return chart_crds(docs)


def _served(crd):
    """A CRD as the API server returns it: what was written plus defaults, status and bookkeeping."""
    live = copy.deepcopy(crd)
    live["metadata"].update(uid="u", resourceVersion="7", managedFields=[{"manager": "helm"}])
    live["spec"]["conversion"] = {"strategy": "None"}
    live["status"] = {"storedVersions": [v["name"] for v in crd["spec"]["versions"] if v.get("storage")],
                      "acceptedNames": crd["spec"]["names"]}
    return live


@pytest.fixture(scope="module")
def driver():
    return _chart("dra-driver-nvidia-gpu")


@pytest.fixture(scope="module")
def operator():
    return _chart("gpu-operator")


def test_both_charts_ship_both_crds(driver, operator):
    assert sorted(driver) == sorted(operator) == sorted(COMPUTE_DOMAIN_CRDS)


def test_the_operators_computedomains_requires_num_nodes_and_lacks_its_default_and_minimum(driver, operator):
    """The four differences NVIDIA/aicr#2715 lists, read from the charts themselves: required, default, minimum and
    the description's "(default)"; the cliques CRD is the same in both."""
    found = dict((path, (before, after)) for path, before, after in
                 schema_differences(_served(operator[CDS]), desired(driver[CDS])))
    assert found[SPEC_REQUIRED] == (["channel", "numNodes"], ["channel"])
    assert found[NUM_NODES + ("default",)] == (None, 0)
    assert found[NUM_NODES + ("minimum",)] == (None, 0)
    assert "(default)" in found[NUM_NODES + ("description",)][1]
    assert "(default)" not in found[NUM_NODES + ("description",)][0]
    assert len(found) == 4, sorted(found)
    assert schema_differences(_served(operator[CLIQUES]), desired(driver[CLIQUES])) == []


def test_site_order_the_operators_copy_served_is_replaced_by_the_drivers(driver, operator):
    served = {CDS: _served(operator[CDS]), CLIQUES: _served(operator[CLIQUES])}
    plan = plan_crds(driver, served)
    assert plan["owner"] == DRA_DRIVER
    assert plan["crds"][CLIQUES] == {"state": "chart", "differences": []}
    assert plan["crds"][CDS]["state"] == "replace"
    assert any('["channel", "numNodes"] -> ["channel"]' in line for line in plan["crds"][CDS]["differences"])
    [body] = plan["apply"]
    assert body["metadata"]["name"] == CDS and body["spec"] == driver[CDS]["spec"]
    assert set(body) == {"apiVersion", "kind", "metadata", "spec"}


def test_the_drivers_schema_served_means_no_write(driver):
    """The second run, and a GPU Operator upgrade whose hook Job leaves these CRDs alone: nothing to apply."""
    plan = plan_crds(driver, dict((name, _served(crd)) for name, crd in driver.items()))
    assert plan["apply"] == []
    assert [c["state"] for c in plan["crds"].values()] == ["chart", "chart"]


def test_missing_crds_are_left_to_the_charts_install(driver):
    plan = plan_crds(driver, {CDS: None, CLIQUES: None})
    assert plan["apply"] == [] and [c["state"] for c in plan["crds"].values()] == ["missing", "missing"]


def test_without_the_driver_the_operators_copy_is_left(driver, operator):
    plan = plan_crds(driver, {CDS: _served(operator[CDS]), CLIQUES: _served(operator[CLIQUES])},
                     driver_installed=False)
    assert plan["owner"] == GPU_OPERATOR and plan["apply"] == []
    assert [c["state"] for c in plan["crds"].values()] == ["left", "left"]


def test_a_driver_upgrade_brings_its_charts_schema(driver):
    """A newer chart's CRD (a field added) differs from the one served since the older chart: applied, although
    helm upgrade leaves crds/ alone."""
    newer = copy.deepcopy(driver)
    spec = newer[CDS]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["newField"] = {"type": "string"}
    plan = plan_crds(newer, dict((name, _served(crd)) for name, crd in driver.items()))
    assert [b["metadata"]["name"] for b in plan["apply"]] == [CDS]
    assert any("newField" in line for line in plan["crds"][CDS]["differences"])


def test_a_field_only_the_served_schema_has_is_a_difference(driver):
    served = _served(driver[CDS])
    served["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["old"] = {
        "type": "string"}
    assert [p for p, _b, _a in schema_differences(served, desired(driver[CDS]))] == [
        SPEC_REQUIRED[:-1] + ("properties", "old")]


def test_names_the_server_fills_in_are_no_difference(driver):
    wanted = desired(driver[CDS])
    del wanted["spec"]["names"]["singular"]
    assert schema_differences(_served(driver[CDS]), wanted) == []


def test_a_stored_version_the_chart_drops_is_refused_before_any_write(driver, operator):
    served = _served(operator[CDS])
    served["status"]["storedVersions"] = ["v1alpha1", "v1beta1"]
    with pytest.raises(DraError) as e:
        plan_crds(driver, {CDS: served, CLIQUES: _served(driver[CLIQUES])})
    message = str(e.value)
    assert CDS in message and "status.storedVersions" in message and '["v1alpha1"]' in message
    assert "valid: v1beta1" in message and message.endswith("Nothing was written.")


def test_a_document_of_another_api_version_is_refused():
    with pytest.raises(DraError, match="apiextensions.k8s.io/v1"):
        chart_crds([{"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
                     "metadata": {"name": CDS}}])


def test_other_documents_are_ignored():
    assert chart_crds([None, {"kind": "ConfigMap"}, {"kind": "CustomResourceDefinition",
                                                     "metadata": {"name": "other.example.com"}}]) == {}
