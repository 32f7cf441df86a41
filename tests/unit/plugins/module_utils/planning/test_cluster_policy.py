# -*- coding: utf-8 -*-
"""ClusterPolicy planning: bases (alm-examples, chart defaults), deep merge, refusals, NVIDIADriver guard, diffs."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.cluster_policy import (
    CHART_VALUES,
    SECTIONS,
    PolicyError,
    as_stored,
    chart_spec,
    check_immutable,
    check_single_policy,
    deep_merge,
    desired_spec,
    driver_objects,
    example_of,
    immutable_changes,
    pick_operator_csv,
)

# The alm-examples of gpu-operator-certified 26.3.3 as the reference describes them (gpu-operator.md).
ALM_POLICY = {
    "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "gpu-cluster-policy"},
    "spec": {"operator": {"use_ocp_driver_toolkit": True}, "cdi": {"enabled": True},
             "driver": {"enabled": True, "useNvidiaDriverCRD": False, "kernelModuleType": "auto"},
             "dcgmExporter": {"serviceMonitor": {"enabled": True}},
             "devicePlugin": {"config": {"name": "", "default": ""}}, "mig": {"strategy": "single"},
             "toolkit": {"enabled": True}, "daemonsets": {}, "dcgm": {"enabled": True}, "gfd": {"enabled": True},
             "nodeStatusExporter": {"enabled": True}},
}
ALM_DRIVER = {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": "gpu-driver"},
              "spec": {"driverType": "gpu"}}


def csv(examples, name="gpu-operator-certified.v26.3.3", phase="Succeeded", version=None):
    meta = {"name": name, "namespace": "nvidia-gpu-operator"}
    if examples is not None:
        meta["annotations"] = {"alm-examples": examples if isinstance(examples, str) else json.dumps(examples)}
    return {"metadata": meta, "spec": {"version": version or name.split(".v", 1)[1]}, "status": {"phase": phase}}


# -- bases

def test_alm_examples_cluster_policy_entry():
    name, spec = example_of(csv([ALM_DRIVER, ALM_POLICY]), "ClusterPolicy")
    assert name == "gpu-cluster-policy"
    assert spec["operator"] == {"use_ocp_driver_toolkit": True}
    assert spec["cdi"] == {"enabled": True} and spec["mig"] == {"strategy": "single"}
    assert example_of(csv([ALM_DRIVER, ALM_POLICY]), "NVIDIADriver") == ("gpu-driver", {"driverType": "gpu"})


@pytest.mark.parametrize("examples, expected", [
    (None, "has no alm-examples annotation"),
    ("[{not json", "alm-examples is not valid JSON"),
    ('{"kind": "ClusterPolicy"}', "alm-examples is not a list"),
    ([ALM_DRIVER], "alm-examples has no ClusterPolicy entry"),
])
def test_alm_examples_problems_name_the_csv(examples, expected):
    with pytest.raises(PolicyError) as e:
        example_of(csv(examples), "ClusterPolicy")
    assert expected in str(e.value)
    assert "nvidia-gpu-operator/gpu-operator-certified.v26.3.3" in str(e.value)


def test_pick_operator_csv_prefers_succeeded_then_newest():
    csvs = [csv([], "gpu-operator-certified.v26.7.0", phase="Installing"),
            csv([], "gpu-operator-certified.v26.3.3"), csv([], "gpu-operator-certified.v26.3.2"),
            csv([], "nfd.4.20.0-202510211040", version="4.20.0")]
    assert pick_operator_csv(csvs)["metadata"]["name"] == "gpu-operator-certified.v26.3.3"
    assert pick_operator_csv(csvs[3:]) is None


def test_chart_values_are_the_reference_ones():
    """Reference "Vanilla k8s (Helm)" values, field by field."""
    v = CHART_VALUES
    assert v["nfd"]["enabled"] is True
    assert v["cdi"] == {"enabled": True, "nriPluginEnabled": False}
    assert v["driver"]["enabled"] is True and v["driver"]["kernelModuleType"] == "auto"
    assert v["driver"]["usePrecompiled"] is False
    assert v["driver"]["nvidiaDriverCRD"] == {"enabled": False, "deployDefaultCR": True, "driverType": "gpu",
                                              "nodeSelector": {}}
    assert v["driver"]["upgradePolicy"] == {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%"}
    assert v["toolkit"]["enabled"] is True
    assert v["devicePlugin"]["config"] == {"create": False, "name": "", "default": "", "data": {}}
    assert v["mig"]["strategy"] == "single"
    assert v["migManager"]["config"] == {"default": "all-disabled", "create": False, "name": "", "data": {}}


def test_chart_spec_renders_like_the_chart_template():
    spec = chart_spec()
    assert "nfd" not in spec                                     # a chart switch, not a ClusterPolicy field
    assert spec["driver"]["useNvidiaDriverCRD"] is False and "nvidiaDriverCRD" not in spec["driver"]
    assert spec["driver"]["kernelModuleType"] == "auto" and spec["driver"]["usePrecompiled"] is False
    assert spec["devicePlugin"]["config"] == {"name": "", "default": ""}
    assert spec["migManager"]["config"] == {"default": "all-disabled"}   # empty name is not rendered
    assert spec["cdi"] == {"enabled": True}                     # nriPluginEnabled only when enabled with CDI
    # every section the CRD requires is there
    for section in ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd", "nodeStatusExporter",
                    "operator", "toolkit"):
        assert section in spec
    assert set(spec) <= set(SECTIONS)
    assert CHART_VALUES["driver"]["nvidiaDriverCRD"]["enabled"] is False    # rendering does not touch the constant


def test_chart_spec_with_the_driver_crd_leaves_driver_fields_to_it():
    values = copy.deepcopy(CHART_VALUES)
    values["driver"]["nvidiaDriverCRD"]["enabled"] = True
    values["cdi"]["nriPluginEnabled"] = True
    spec = chart_spec(values)
    assert spec["driver"]["useNvidiaDriverCRD"] is True
    assert "kernelModuleType" not in spec["driver"] and "usePrecompiled" not in spec["driver"]
    assert spec["cdi"] == {"enabled": True, "nriPluginEnabled": True}


# -- deep merge and the desired spec

@pytest.mark.parametrize("base, override, expected", [
    ({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}}, {"a": {"b": 1, "c": 3}}),
    ({"a": {"b": 1}}, {"a": {"d": {"e": 1}}}, {"a": {"b": 1, "d": {"e": 1}}}),
    ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),                          # lists replace
    ({"a": {"b": 1, "c": 2}}, {"a": {"b": None}}, {"a": {"c": 2}}),    # None removes
    ({"a": 1}, {"a": {"b": 2}}, {"a": {"b": 2}}),
    ({}, {}, {}),
])
def test_deep_merge(base, override, expected):
    before = copy.deepcopy(base)
    assert deep_merge(base, override) == expected
    assert base == before


def test_desired_spec_merges_settings_over_the_base():
    settings = {"driver": {"kernelModuleType": "open"}, "mig": {"strategy": "mixed"}}
    spec, warnings = desired_spec(ALM_POLICY["spec"], settings)
    assert spec["driver"] == {"enabled": True, "useNvidiaDriverCRD": False, "kernelModuleType": "open"}
    assert spec["mig"] == {"strategy": "mixed"} and spec["cdi"] == {"enabled": True}
    assert warnings == []


def test_dead_fields_in_the_base_are_dropped_with_a_warning():
    base = deep_merge(ALM_POLICY["spec"], {"operator": {"defaultRuntime": "crio"}})
    spec, warnings = desired_spec(base, {})
    assert "defaultRuntime" not in spec["operator"]
    assert warnings == ["base ClusterPolicy: dropped operator.defaultRuntime, which the operator ignores (use "
                        "nothing: the operator detects the container runtime itself)"]


def test_keep_live_fields_carry_what_another_stage_set():
    live = {"devicePlugin": {"config": {"name": "kubegpu-device-plugin-config", "default": ""}},
            "migManager": {"config": {"name": "kubegpu-mig-parted-config"}}}
    spec, _w = desired_spec(chart_spec(), {}, live)
    assert spec["devicePlugin"]["config"] == {"name": "kubegpu-device-plugin-config", "default": ""}
    assert spec["migManager"]["config"] == {"name": "kubegpu-mig-parted-config"}
    # the task's own settings win over the live value, and no live value means the base
    spec, _w = desired_spec(chart_spec(), {"devicePlugin": {"config": {"name": "mine"}}}, live)
    assert spec["devicePlugin"]["config"] == {"name": "mine", "default": ""}
    spec, _w = desired_spec(chart_spec(), {}, {})
    assert spec["devicePlugin"]["config"] == {"name": "", "default": ""}
    spec, _w = desired_spec(chart_spec(), {}, live, keep_live=[])
    assert spec["devicePlugin"]["config"] == {"name": "", "default": ""}


def test_keep_live_fields_carry_the_dra_stage_driver_manager_env():
    env = [{"name": "ENABLE_GPU_POD_EVICTION", "value": "true"},
           {"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": "nvidia.com/dra-kubelet-plugin"}]
    # A base that names the env (OpenShift bundles' alm-examples list the driver manager's settings there).
    base = chart_spec()
    base["driver"]["manager"] = {"env": [{"name": "ENABLE_GPU_POD_EVICTION", "value": "true"}]}
    spec, _w = desired_spec(base, {}, {"driver": {"manager": {"env": env}}})
    assert spec["driver"]["manager"]["env"] == env
    spec, _w = desired_spec(base, {}, {})
    assert spec["driver"]["manager"]["env"] == [{"name": "ENABLE_GPU_POD_EVICTION", "value": "true"}]


@pytest.mark.parametrize("settings, expected", [
    ({"cdi": {"default": True}}, "settings.cdi.default: dead field, the operator ignores it (cdi.default: True); use "
                                 "cdi.enabled"),
    ({"operator": {"defaultRuntime": "crio"}}, "settings.operator.defaultRuntime: dead field, the operator ignores it "
                                               "(operator.defaultRuntime: 'crio'); use nothing: the operator detects"),
    ({"driver": {"useOpenKernelModules": True}}, "settings.driver.useOpenKernelModules: dead field, the operator "
                                                 "ignores it (driver.useOpenKernelModules: True); use "
                                                 "driver.kernelModuleType: open, proprietary or auto"),
    ({"devicePlugins": {"enabled": True}}, "settings.devicePlugins: not a ClusterPolicy spec section"),
    ({"cdi": True}, "settings.cdi: must be a mapping of its fields (e.g. cdi: {enabled: true}), got True"),
])
def test_refused_settings(settings, expected):
    with pytest.raises(PolicyError) as e:
        desired_spec(ALM_POLICY["spec"], settings)
    assert expected in str(e.value)


@pytest.mark.parametrize("settings, expected", [
    ({"driver": {"kernelModuleType": "opensource"}},
     "spec.driver.kernelModuleType: 'opensource' is not valid; valid: auto, open, proprietary"),
    ({"mig": {"strategy": "Mixed"}}, "spec.mig.strategy: 'Mixed' is not valid; valid: none, single, mixed"),
    ({"sandboxWorkloads": {"defaultWorkload": "vm"}},
     "spec.sandboxWorkloads.defaultWorkload: 'vm' is not valid; valid: container, vm-passthrough, vm-vgpu"),
])
def test_enum_values(settings, expected):
    with pytest.raises(PolicyError) as e:
        desired_spec(ALM_POLICY["spec"], settings)
    assert str(e.value) == expected


@pytest.mark.parametrize("value", ["auto", "open", "proprietary"])
def test_valid_kernel_module_types(value):
    assert desired_spec(ALM_POLICY["spec"], {"driver": {"kernelModuleType": value}})[0]["driver"][
        "kernelModuleType"] == value


def test_single_policy():
    policies = [{"metadata": {"name": "cluster-policy"}}]
    check_single_policy(policies, "cluster-policy")
    check_single_policy([], "gpu-cluster-policy")
    with pytest.raises(PolicyError) as e:
        check_single_policy(policies, "gpu-cluster-policy")
    assert "ClusterPolicy cluster-policy already exists" in str(e.value) and "set name: cluster-policy" in str(e.value)


# -- NVIDIADriver

CRD_ON = {"driver": {"useNvidiaDriverCRD": True}}


def test_driver_objects_need_the_crd_switch():
    with pytest.raises(PolicyError) as e:
        driver_objects([{"name": "a", "spec": {}}], {"driver": {"useNvidiaDriverCRD": False}})
    assert "nvidia_drivers needs settings.driver.useNvidiaDriverCRD: true" in str(e.value)
    assert driver_objects([], {}) == []


@pytest.mark.parametrize("drivers, expected", [
    ([{"spec": {}}], "nvidia_drivers[0]: name is required"),
    ([{"name": "a"}, {"name": "a"}], "nvidia_drivers: a is listed twice"),
    ([{"name": "a", "spec": {"driverType": "cuda"}}],
     "NVIDIADriver a: spec.driverType: 'cuda' is not valid; valid: gpu, vgpu, vgpu-host-manager"),
    ([{"name": "a", "spec": {"useOpenKernelModules": True}}], "spec.useOpenKernelModules is a dead field"),
])
def test_driver_entry_problems(drivers, expected):
    with pytest.raises(PolicyError) as e:
        driver_objects(drivers, CRD_ON)
    assert expected in str(e.value)


def test_driver_objects():
    objs = driver_objects([{"name": "h100", "spec": {"driverType": "gpu", "nodeSelector": {"a": "b"}}}], CRD_ON)
    assert objs == [{"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": "h100"},
                     "spec": {"driverType": "gpu", "nodeSelector": {"a": "b"}}}]


def live_driver(**spec):
    return {"metadata": {"name": "h100"}, "spec": spec}


@pytest.mark.parametrize("desired, live, expected", [
    ({"driverType": "vgpu"}, live_driver(driverType="gpu"), [("driverType", "gpu", "vgpu")]),
    ({"usePrecompiled": True}, live_driver(driverType="gpu"), [("usePrecompiled", False, True)]),  # CRD default
    ({"driverType": "gpu", "usePrecompiled": False}, live_driver(driverType="gpu", usePrecompiled=False), []),
    ({"version": "580"}, live_driver(driverType="vgpu", usePrecompiled=True), []),   # not named: not changed
    ({"driverType": "vgpu"}, None, []),                                               # new object
])
def test_immutable_changes(desired, live, expected):
    obj = {"metadata": {"name": "h100"}, "spec": desired}
    assert immutable_changes(obj, live) == expected


def test_check_immutable_explains_delete_and_recreate():
    objs = driver_objects([{"name": "h100", "spec": {"driverType": "gpu", "usePrecompiled": True}}], CRD_ON)
    with pytest.raises(PolicyError) as e:
        check_immutable(objs, {"h100": live_driver(driverType="gpu", usePrecompiled=False)})
    msg = str(e.value)
    assert msg.startswith("NVIDIADriver h100: spec.usePrecompiled is False, the task wants True.")
    assert "immutable upstream: delete the NVIDIADriver and let this task create it again" in msg
    check_immutable(objs, {})


# -- what the API server defaults is not drift


# The part of the ClusterPolicy CRD's spec schema these cases touch, as v26.7.0's CRD declares it
# (shared/crds/nvidia/nvidia.com_clusterpolicies.yaml): cdi.default and the relabelings' action have defaults.
SCHEMA = {"type": "object", "properties": {
    "cdi": {"type": "object", "properties": {"default": {"type": "boolean", "default": False},
                                             "enabled": {"type": "boolean", "default": True},
                                             "nriPluginEnabled": {"type": "boolean", "default": False}}},
    "sandboxWorkloads": {"type": "object", "properties": {
        "defaultWorkload": {"type": "string", "default": "container"}, "enabled": {"type": "boolean"}}},
    "dcgmExporter": {"type": "object", "properties": {"serviceMonitor": {"type": "object", "properties": {
        "enabled": {"type": "boolean"},
        "relabelings": {"type": "array", "items": {"type": "object", "properties": {
            "action": {"type": "string", "default": "replace"}, "targetLabel": {"type": "string"},
            "sourceLabels": {"type": "array", "items": {"type": "string"}}}}}}}}},
    "validator": {"type": "object", "properties": {"plugin": {"type": "object", "properties": {
        "env": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "value": {"type": "string"}}}}}}}},
}}
# A ClusterPolicy as the API server returns it after defaulting (what the live object holds).
LIVE = {"cdi": {"default": False, "enabled": True, "nriPluginEnabled": False},
        "sandboxWorkloads": {"defaultWorkload": "container", "enabled": False},
        "dcgmExporter": {"serviceMonitor": {"enabled": True, "relabelings": [
            {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}]}},
        "validator": {"plugin": {"env": [{"name": "WITH_WORKLOAD", "value": "false"}]}}}


def _differs(desired, live):
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.objects import differences
    return differences(desired, live)


def test_a_field_the_crd_defaults_and_the_settings_do_not_name_is_not_compared():
    """cdi.default: the CRD defaults it to false (the removal of the default, gpu-operator#2796, was reverted in
    #2866/#2903); the collection never sends it, so the live false is not drift."""
    spec, dummy = desired_spec(chart_spec(), {"cdi": {"enabled": True}}, schema=SCHEMA)
    assert "default" not in spec["cdi"]
    assert _differs({"cdi": spec["cdi"]}, {"cdi": LIVE["cdi"]}) == []


def test_a_removed_field_the_crd_defaults_is_not_sent_and_not_compared():
    """A null in the settings removes the field from what is sent; the API server's default takes its place."""
    spec, dummy = desired_spec(chart_spec(), {"sandboxWorkloads": {"defaultWorkload": None}}, schema=SCHEMA)
    assert "defaultWorkload" not in spec["sandboxWorkloads"]
    assert _differs(spec["sandboxWorkloads"], LIVE["sandboxWorkloads"]) == []


def test_list_items_are_compared_with_the_defaults_the_server_gives_them():
    settings = {"dcgmExporter": {"serviceMonitor": {"relabelings": [
        {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}]}}}
    without, dummy = desired_spec(chart_spec(), settings)
    monitor = LIVE["dcgmExporter"]["serviceMonitor"]
    assert _differs(without["dcgmExporter"]["serviceMonitor"], monitor) == ["relabelings"]
    spec, dummy = desired_spec(chart_spec(), settings, schema=SCHEMA)
    assert spec["dcgmExporter"]["serviceMonitor"]["relabelings"] == LIVE["dcgmExporter"]["serviceMonitor"]["relabelings"]
    assert _differs(spec["dcgmExporter"]["serviceMonitor"], monitor) == []
    # An item the user changed by hand is still drift.
    edited = {"relabelings": [dict(monitor["relabelings"][0], action="keep")]}
    assert _differs(spec["dcgmExporter"]["serviceMonitor"], dict(monitor, **edited)) == ["relabelings"]


@pytest.mark.parametrize("value, expected", [
    ({"cdi": {"enabled": True}}, {"cdi": {"enabled": True}}),                        # absent stays absent
    ({"cdi": None}, {"cdi": None}),                                                  # no default for the section
    ({"unknown": {"a": [{}]}}, {"unknown": {"a": [{}]}}),                            # not in the schema: as it is
    ({"dcgmExporter": {"serviceMonitor": {"relabelings": [{"action": "drop"}]}}},     # set: kept
     {"dcgmExporter": {"serviceMonitor": {"relabelings": [{"action": "drop"}]}}}),
    ({"validator": {"plugin": {"env": [{"name": "A"}]}}}, {"validator": {"plugin": {"env": [{"name": "A"}]}}}),
])
def test_as_stored(value, expected):
    before = copy.deepcopy(value)
    assert as_stored(value, SCHEMA) == expected
    assert value == before
