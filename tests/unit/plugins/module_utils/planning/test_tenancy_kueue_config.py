# -*- coding: utf-8 -*-
"""Kueue's configuration for the DRA quotas: DeviceClass mappings into the chart's Configuration or the Red Hat
build's operand, and what a Kueue the collection did not install lacks (docs/tenancy.md, "What Kueue counts")."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import parse_claim_templates
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.install import KUEUE_CHART, install_plan
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.kueue_config import (
    CHART_CONFIGURATION,
    chart_values,
    configured_mappings,
    device_class_mappings,
    missing_classes,
    missing_warning,
    operand_resources,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.spec import parse_settings

DRA_POOL = {"strategy": "dra", "nodes": 1, "resources": {"gpu.nvidia.com": 8}}
MIG_POOL = {"strategy": "mig", "nodes": 2, "resources": {"nvidia.com/mig-1g.10gb": 32}}
TEMPLATES = parse_claim_templates([{"name": "gpu-40g", "namespaces": ["llm"], "min_memory": "40Gi"},
                                   {"name": "mig-small", "namespaces": ["llm"], "device": "mig",
                                    "mig_profile": "1g.10gb"}])
MAPPING = {"name": "gpu.nvidia.com", "deviceClassNames": ["gpu.nvidia.com", "kubegpu-gpu-40g", "kubegpu-mig-small"]}


def test_dra_pools_map_the_drivers_class_and_the_templates_classes_onto_the_quota_resource():
    assert device_class_mappings({"dra": DRA_POOL, "mig": MIG_POOL}, TEMPLATES) == ([MAPPING], [])


def test_no_mapping_without_a_dra_pool_with_gpus():
    assert device_class_mappings({"mig": MIG_POOL}, TEMPLATES) == ([], [])
    assert device_class_mappings({"dra": dict(DRA_POOL, resources={})}, TEMPLATES) == ([], [])


def test_more_classes_than_kueue_takes_are_named():
    many = parse_claim_templates([{"name": "t%d" % i, "namespaces": ["llm"]} for i in range(9)])
    mappings, warnings = device_class_mappings({"dra": DRA_POOL}, many)
    assert len(mappings[0]["deviceClassNames"]) == 8
    assert warnings == ["Kueue takes at most 8 DeviceClasses per resource name: claims of kubegpu-t7, kubegpu-t8 are "
                        "not counted against the gpu.nvidia.com quotas and stay queued; use fewer claim templates"]


def test_chart_values_carry_the_mapping_in_the_charts_own_configuration():
    values = chart_values({"controllerManager": {"replicas": 2}}, [MAPPING])
    assert values["controllerManager"] == {"replicas": 2}
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["resources"] == {"deviceClassMappings": [MAPPING]}
    # Everything else is the chart's default: the chart takes the Configuration as one text.
    assert dict((k, v) for k, v in config.items() if k != "resources") == CHART_CONFIGURATION
    assert "deployment" in config["integrations"]["frameworks"]
    assert chart_values({"a": 1}, []) == {"a": 1}


def test_chart_values_keep_the_users_configuration_and_other_mappings():
    own = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "waitForPodsReady": {"timeout": "5m"},
           "resources": {"excludeResourcePrefixes": ["example.com/"], "deviceClassMappings": [
               {"name": "example.com/fpga", "deviceClassNames": ["fpga.example.com"]},
               {"name": "old", "deviceClassNames": ["kubegpu-gpu-40g"]}]}}
    values = chart_values({"managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(own)}}, [MAPPING])
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["waitForPodsReady"] == {"timeout": "5m"}
    assert config["resources"]["excludeResourcePrefixes"] == ["example.com/"]
    # A class is in one mapping only: ours takes kubegpu-gpu-40g from the user's "old" one, which is left empty.
    assert config["resources"]["deviceClassMappings"] == [
        {"name": "example.com/fpga", "deviceClassNames": ["fpga.example.com"]}, MAPPING]


def test_install_plan_writes_the_mapping_into_the_chart_or_the_operand():
    settings = parse_settings({"teams": []})
    chart = install_plan(settings, "kubernetes", False, [MAPPING])["charts"][0]
    assert yaml.safe_load(chart["values"]["managerConfig"]["controllerManagerConfigYaml"])["resources"] == \
        {"deviceClassMappings": [MAPPING]}
    operand = install_plan(settings, "openshift", False, [MAPPING])["operands"][0]
    assert operand["spec"]["config"]["resources"] == {"deviceClassMappings": [MAPPING]}
    assert "resources" not in install_plan(settings, "openshift", False, [])["operands"][0]["spec"]["config"]
    assert install_plan(settings, "kubernetes", False, [])["charts"][0]["values"] == {}
    assert operand_resources([]) is None


def test_an_existing_kueue_is_told_what_its_configuration_lacks():
    text = yaml.safe_dump({"resources": {"deviceClassMappings": [
        {"name": "gpu.nvidia.com", "deviceClassNames": ["gpu.nvidia.com"]}]}})
    assert configured_mappings(text) == [{"name": "gpu.nvidia.com", "deviceClassNames": ["gpu.nvidia.com"]}]
    assert configured_mappings(None) == [] and configured_mappings("{not yaml") == []
    missing = missing_classes([MAPPING], configured_mappings(text))
    assert missing == ["kubegpu-gpu-40g", "kubegpu-mig-small"]
    # The operand's spec.config is a dict.
    assert missing_classes([MAPPING], configured_mappings({"resources": {"deviceClassMappings": [MAPPING]}})) == []
    # Mapped onto another name, a class does not count against these quotas.
    assert missing_classes([MAPPING], [{"name": "x", "deviceClassNames": MAPPING["deviceClassNames"]}]) == \
        MAPPING["deviceClassNames"]
    assert missing_warning([MAPPING], missing, "the Kueue CR 'cluster' (spec.config)") == (
        "Kueue does not count DRA claims of DeviceClass kubegpu-gpu-40g, kubegpu-mig-small against the gpu.nvidia.com "
        "quotas, so workloads that ask for them stay queued: set the Kueue CR 'cluster' (spec.config) "
        "resources.deviceClassMappings to hold {name: gpu.nvidia.com, deviceClassNames: [gpu.nvidia.com, "
        "kubegpu-gpu-40g, kubegpu-mig-small]}")


def test_the_configuration_written_is_the_pinned_charts_default():
    """CHART_CONFIGURATION restates the pinned chart's managerConfig.controllerManagerConfigYaml (comments aside):
    a chart bump that changes it fails here (../shared/charts/kueue, or under KUBEGPU_CHARTS_DIR)."""
    repo = os.path.join(os.path.dirname(__file__), *([os.pardir] * 5))
    charts = os.environ.get("KUBEGPU_CHARTS_DIR") or os.path.join(repo, os.pardir, "shared", "charts")
    chart = os.path.join(charts, "kueue")
    if not os.path.isfile(os.path.join(chart, "values.yaml")):
        pytest.skip("%s is absent: the Kueue chart's values.yaml (shared/charts, or KUBEGPU_CHARTS_DIR) is needed"
                    % chart)
    with open(os.path.join(chart, "Chart.yaml")) as f:
        assert yaml.safe_load(f)["version"] == KUEUE_CHART["version"]
    with open(os.path.join(chart, "values.yaml")) as f:
        text = yaml.safe_load(f)["managerConfig"]["controllerManagerConfigYaml"]
    assert yaml.safe_load(text) == CHART_CONFIGURATION
