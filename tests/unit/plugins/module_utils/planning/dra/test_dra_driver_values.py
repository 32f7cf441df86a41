# -*- coding: utf-8 -*-
"""NVIDIA DRA driver chart: release names per version, values, feature gates, and every key in the real chart."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml
from kubegpu_devcluster.paths import charts_dir  # pylint: disable=import-error

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.driver_values import (
    VALUE_PATHS,
    driver_owner_from_nodes,
    driver_values,
    installed_from_helm,
    release_for,
    release_line,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError

OPERATOR = {"driver_owner": "gpu-operator"}
HOST = {"driver_owner": "host"}


def _chart_dir():
    """../shared/charts/dra-driver-nvidia-gpu beside the repository, or under KUBEGPU_CHARTS_DIR."""
    return os.path.join(str(charts_dir()), "dra-driver-nvidia-gpu")


# ---------------------------------------------------------------------------------------------
# release per chart version
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version, line, name, chart", [
    ("0.4.1", (0, 4), "dra-driver-nvidia-gpu", "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"),
    ("0.4.0", (0, 4), "dra-driver-nvidia-gpu", "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"),
    ("v0.5.0", (0, 5), "dra-driver-nvidia-gpu", "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"),
    ("25.12.0", (0, 3), "nvidia-dra-driver-gpu", "nvidia/nvidia-dra-driver-gpu"),
    ("25.8.1", (0, 2), "nvidia-dra-driver-gpu", "nvidia/nvidia-dra-driver-gpu"),
])
def test_release_for(version, line, name, chart):
    release = release_for(version)
    assert release_line(version) == line
    assert (release["name"], release["namespace"], release["chart"]) == (name, name, chart)
    assert release["name_override"] is None


@pytest.mark.parametrize("version", ["0.3.0", "24.9.0", "26.1.0", "latest", None])
def test_release_for_unknown_versions(version):
    with pytest.raises(DraError, match="chart_version"):
        release_for(version)


def test_upgrade_from_25_keeps_the_release_and_sets_name_override():
    installed = {"name": "nvidia-dra-driver-gpu", "namespace": "nvidia-dra-driver-gpu", "chart_version": "25.12.0"}
    result = driver_values(OPERATOR, installed=installed)
    assert (result["release"]["name"], result["release"]["namespace"]) == ("nvidia-dra-driver-gpu",
                                                                           "nvidia-dra-driver-gpu")
    assert result["release"]["chart"].startswith("oci://registry.k8s.io/")
    assert result["values"]["nameOverride"] == "nvidia-dra-driver-gpu"
    assert any("CRDs" in warning for warning in result["warnings"])


def test_downgrade_is_refused():
    installed = {"name": "dra-driver-nvidia-gpu", "namespace": "dra-driver-nvidia-gpu", "chart_version": "0.4.1"}
    with pytest.raises(DraError, match="would downgrade it"):
        driver_values(dict(OPERATOR, chart_version="25.12.0"), installed=installed)


# ---------------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("settings, root", [(OPERATOR, "/run/nvidia/driver"), (HOST, "/")])
def test_values(settings, root):
    result = driver_values(settings)
    assert result["values"] == {
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "nvidiaDriverRoot": root,
        "kubeletPlugin": {"nodeSelector": {"nvidia.com/dra-kubelet-plugin": "true"}},
        "featureGates": {},
    }
    assert result["release"]["name"] == "dra-driver-nvidia-gpu"
    assert result["warnings"] == [] and result["requirements"] == []


def test_values_with_everything_set():
    values = driver_values(dict(HOST, compute_domains=True, log_verbosity=6,
                                feature_gates={"TimeSlicingSettings": True, "ContextualLogging": False}))["values"]
    assert values["resources"]["computeDomains"] == {"enabled": True}
    assert values["logVerbosity"] == "6"
    assert values["featureGates"] == {"ContextualLogging": False, "TimeSlicingSettings": True}


def test_needed_gates_are_turned_on():
    values = driver_values(OPERATOR, needed_gates={"MPSSupport": "mps-small"})["values"]
    assert values["featureGates"] == {"MPSSupport": True}


def _emitted(values, prefix=""):
    """Dotted paths of values, stopping at maps the chart leaves open (nodeSelector, featureGates)."""
    for key, value in values.items():
        path = prefix + key
        if isinstance(value, dict) and path not in ("kubeletPlugin.nodeSelector", "featureGates"):
            yield from _emitted(value, path + ".")
        else:
            yield path


def test_every_emitted_key_is_a_known_path():
    installed = {"name": "nvidia-dra-driver-gpu", "namespace": "nvidia-dra-driver-gpu", "chart_version": "25.12.0"}
    values = driver_values(dict(OPERATOR, compute_domains=True, log_verbosity=2,
                                feature_gates={"DynamicMIG": True}), installed=installed)["values"]
    assert set(_emitted(values)) == set(VALUE_PATHS)


def test_every_known_path_exists_in_the_chart():
    path = os.path.join(_chart_dir(), "values.yaml")
    if not os.path.exists(path):
        pytest.skip("%s is absent: the chart's values.yaml (shared/charts, or KUBEGPU_CHARTS_DIR) is needed" % path)
    with open(path) as handle:
        chart = yaml.safe_load(handle)
    with open(os.path.join(_chart_dir(), "Chart.yaml")) as handle:
        assert yaml.safe_load(handle)["version"] == "0.4.1"
    for dotted in VALUE_PATHS:
        node = chart
        for key in dotted.split("."):
            assert isinstance(node, dict) and key in node, "%s is not in the chart's values.yaml" % dotted
            node = node[key]


# ---------------------------------------------------------------------------------------------
# feature gates and other refusals
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("settings, fragments", [
    (dict(OPERATOR, feature_gates={"DynamicMig": True}),
     ["unknown gate 'DynamicMig'", "valid: ", "DynamicMIG", "TimeSlicingSettings", "ContextualLogging"]),
    (dict(OPERATOR, feature_gates={"FabricManagerPartitioning": True}), ["unknown gate 'FabricManagerPartitioning'"]),
    # A gate of a later driver than the chart asked for says when it arrived.
    (dict(OPERATOR, chart_version="25.8.1", feature_gates={"DynamicMIG": True}),
     ["unknown gate 'DynamicMIG' for driver 0.2", "arrived with driver 0.3"]),
    (dict(OPERATOR, feature_gates={"MPSSupport": "yes"}), ["feature_gates.MPSSupport is 'yes'; expected true or false"]),
    (dict(OPERATOR, feature_gates=["MPSSupport"]), ["feature_gates is ['MPSSupport']"]),
    (dict(OPERATOR, feature_gates={"DynamicMIG": True, "MPSSupport": True}), ["DynamicMIG and MPSSupport"]),
    (dict(OPERATOR, feature_gates={"DynamicMIG": True, "PassthroughSupport": True}),
     ["DynamicMIG and PassthroughSupport"]),
    (dict(OPERATOR, feature_gates={"DynamicMIG": True, "NVMLDeviceHealthCheck": True}),
     ["DynamicMIG and NVMLDeviceHealthCheck"]),
    (dict(OPERATOR, feature_gates={"PassthroughSupport": True, "NVMLDeviceHealthCheck": True}),
     ["PassthroughSupport and NVMLDeviceHealthCheck"]),
    (dict(OPERATOR, feature_gates={"MPSSupport": True, "NVMLDeviceHealthCheck": True}),
     ["MPSSupport and NVMLDeviceHealthCheck"]),
    # ComputeDomainCliques is on by default and needs IMEXDaemonsWithDNSNames.
    (dict(OPERATOR, feature_gates={"IMEXDaemonsWithDNSNames": False}),
     ["ComputeDomainCliques needs IMEXDaemonsWithDNSNames"]),
    (dict(OPERATOR, feature_gates={"DeviceMetadata": True}), ["DeviceMetadata needs PassthroughSupport"]),
    ({}, ["driver_owner is None", "gpu-operator", "/run/nvidia/driver", "host"]),
    ({"driver_owner": "operator"}, ["driver_owner is 'operator'"]),
    (dict(OPERATOR, namespace="x"), ["unknown key namespace"]),
    (dict(OPERATOR, compute_domains="no"), ["compute_domains is 'no'"]),
    (dict(OPERATOR, log_verbosity=-1), ["log_verbosity is -1"]),
    ("gpu-operator", ["kubegpu_dra.driver is 'gpu-operator'"]),
])
def test_refused(settings, fragments):
    with pytest.raises(DraError) as caught:
        driver_values(settings)
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_needed_gate_turned_off_by_the_user_is_refused():
    with pytest.raises(DraError, match="feature_gates.MPSSupport is false, but claim template 'mps-small' needs it"):
        driver_values(dict(OPERATOR, feature_gates={"MPSSupport": False}), needed_gates={"MPSSupport": "mps-small"})


def test_needed_gate_clashing_with_a_user_gate_names_both():
    with pytest.raises(DraError, match="DynamicMIG and MPSSupport"):
        driver_values(dict(OPERATOR, feature_gates={"DynamicMIG": True}), needed_gates={"MPSSupport": "mps-small"})


@pytest.mark.parametrize("kubernetes, reported", [
    ("v1.34.2", True), ("v1.35.0", True), ("v1.36.0", False), (None, False),
])
def test_dynamic_mig_reports_partitionable_devices(kubernetes, reported):
    result = driver_values(dict(OPERATOR, feature_gates={"DynamicMIG": True}), kubernetes_version=kubernetes)
    assert bool(result["requirements"]) is reported
    if reported:
        assert "DRAPartitionableDevices=true" in result["requirements"][0]
        assert "kube-scheduler" in result["requirements"][0]


# ---------------------------------------------------------------------------------------------
# who owns the driver
# ---------------------------------------------------------------------------------------------

def node(name, deploy_driver=None):
    labels = {} if deploy_driver is None else {"nvidia.com/gpu.deploy.driver": deploy_driver}
    return {"metadata": {"name": name, "labels": labels}}


@pytest.mark.parametrize("nodes, owner", [
    ([node("a", "true"), node("b", "true")], "gpu-operator"),
    ([node("a", "pre-installed")], "host"),
    ([node("a"), node("b", "pre-installed")], "host"),
    ([node("a")], None),
    ([], None),
])
def test_driver_owner_from_nodes(nodes, owner):
    assert driver_owner_from_nodes(nodes) == owner


def test_driver_owner_from_nodes_that_disagree():
    with pytest.raises(DraError, match="gpu-operator: a; host: b, c"):
        driver_owner_from_nodes([node("a", "true"), node("c", "pre-installed"), node("b", "pre-installed")])


# ---------------------------------------------------------------------------------------------
# the release found by kubernetes.core.helm_info
# ---------------------------------------------------------------------------------------------

def test_a_25_release_found_by_helm_info_is_upgraded_in_place():
    status = {"name": "nvidia-dra-driver-gpu", "namespace": "nvidia-dra-driver-gpu",
              "chart": "nvidia-dra-driver-gpu-25.12.0", "app_version": "25.12.0", "status": "deployed"}
    installed = installed_from_helm(status)
    assert installed == {"name": "nvidia-dra-driver-gpu", "namespace": "nvidia-dra-driver-gpu",
                         "chart_version": "25.12.0"}
    release = release_for(installed=installed)
    assert (release["name"], release["namespace"], release["name_override"]) == (
        "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")
    assert release["chart_version"] == "0.4.1"


def test_no_release_found_installs_the_new_one():
    assert installed_from_helm(None) is None and installed_from_helm({}) is None
    release = release_for(installed=installed_from_helm({}))
    assert (release["name"], release["namespace"], release["name_override"]) == (
        "dra-driver-nvidia-gpu", "dra-driver-nvidia-gpu", None)


def test_another_chart_under_the_old_name_is_refused():
    with pytest.raises(DraError, match="not nvidia-dra-driver-gpu"):
        installed_from_helm({"name": "nvidia-dra-driver-gpu", "namespace": "x", "chart": "something-1.0.0"})
