# -*- coding: utf-8 -*-
"""plan_writes: every object a node pools run writes, decided before the first write."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import plan_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError, parse_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    DEVICE_PLUGIN_CONFIG_ANNOTATION as RECORD_ANNOTATION,
    POOL_LABEL,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.writes import (
    config_digest,
    plan_writes,
)

from pool_builders import L40S, by_label, node, raw_pool  # noqa: E402  pylint: disable=wrong-import-order

NAMES = {"mig_configmap": "kubegpu-mig-parted-config", "device_plugin_configmap": "kubegpu-device-plugin-config"}
TS = {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}
DS = {"metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "gpu-operator"}}


def policy(points=False, record=None):
    spec = {"mig": {"strategy": "single"}}
    if points:
        spec["migManager"] = {"config": {"name": NAMES["mig_configmap"]}}
        spec["devicePlugin"] = {"config": {"name": NAMES["device_plugin_configmap"]}}
    metadata = {"name": "cluster-policy", "annotations": {RECORD_ANNOTATION: record} if record else {}}
    return {"metadata": metadata, "spec": spec}


def writes(raw_pools, nodes, the_policy=None, configmaps=None, machinesets=(), daemonset="default"):
    pools = parse_pools(raw_pools)
    daemonset = DS if daemonset == "default" else daemonset
    configmaps = configmaps or {}
    dp = (configmaps.get(NAMES["device_plugin_configmap"]) or {}).get("data")
    plan = plan_pools(pools, nodes, None, dp)
    observed = {"policy": the_policy or policy(), "namespace": "gpu-operator", "configmaps": configmaps,
                "machinesets": None if machinesets is None else list(machinesets), "device_plugin_daemonset": daemonset}
    return plan, plan_writes(plan, pools, observed, NAMES)


def l40s(name, pool="p"):
    return node(name, product=L40S, count=4, labels={"pool": pool})


def test_a_pool_that_selects_nothing_on_a_fresh_cluster_writes_nothing():
    plan, result = writes([raw_pool("empty", sharing=TS)], [node("n")])
    assert result == {"needed": False, "configmaps": [], "device_plugin_restart": None, "cluster_policy": None,
                      "machinesets": [], "digest": config_digest({})}
    assert plan["steps"] == []


def test_an_empty_pool_writes_nothing_for_itself_beside_a_pool_with_nodes():
    plan, result = writes([raw_pool("p", sharing=TS), raw_pool("empty", sharing=TS)], [l40s("a")])
    data = result["configmaps"][1]["data"]
    assert [key for key in data if key.startswith("kubegpu-empty")] == []
    assert [key for key in data if key.startswith("kubegpu-p-")] != []


def test_first_run_points_the_policy_and_records_without_a_restart_of_ours():
    plan, result = writes([raw_pool("p", sharing=TS)], [l40s("a")])
    assert result["needed"] is True
    assert [cm["name"] for cm in result["configmaps"]] == ["kubegpu-mig-parted-config", "kubegpu-device-plugin-config"]
    assert result["cluster_policy"] == {
        "name": "cluster-policy",
        "spec": {"migManager": {"config": {"name": "kubegpu-mig-parted-config"}},
                 "devicePlugin": {"config": {"name": "kubegpu-device-plugin-config"}}},
        "annotations": {RECORD_ANNOTATION: config_digest(plan["device_plugin_data_final"])}}
    # the operator rewrites the DaemonSet for the new pointer: its new pods read the ConfigMap just written
    assert result["device_plugin_restart"] is None


@pytest.mark.parametrize("record, restart", [
    (None, True),                      # an earlier version, or a run that left the ConfigMap empty: unknown
    ("0123456789abcdef", True),        # the plugin read another configuration
    ("SAME", False),                   # it read this one: nothing changed
])
def test_restart_when_what_the_plugin_read_differs(record, restart):
    plan, first = writes([raw_pool("p", sharing=TS)], [l40s("a")])
    if record == "SAME":
        record = first["digest"]
    configmaps = {NAMES["device_plugin_configmap"]: {"data": plan["device_plugin_data"]}}
    dummy, result = writes([raw_pool("p", sharing=TS)], [l40s("a")], policy(True, record), configmaps)
    assert (result["device_plugin_restart"] is not None) is restart
    assert result["cluster_policy"]["annotations"] == {RECORD_ANNOTATION: first["digest"]}
    if restart:
        assert result["device_plugin_restart"]["digest"] == first["digest"]
        assert result["device_plugin_restart"]["daemonset"] == "nvidia-device-plugin-daemonset"


def test_empty_configuration_is_a_configuration_too():
    plan, result = writes([raw_pool("p", sharing=TS)], [node("n")], policy(True, "0123456789abcdef"),
                          {NAMES["device_plugin_configmap"]: {"data": {}}})
    assert result["digest"] == config_digest({})
    assert result["device_plugin_restart"]["digest"] == config_digest({})


def test_no_daemonset_no_restart():
    dummy, result = writes([raw_pool("p", sharing=TS)], [l40s("a")], policy(True, None), daemonset=None)
    assert result["device_plugin_restart"] is None and result["cluster_policy"] is not None


def test_old_keys_kept_for_the_roll_out_do_not_change_the_digest():
    old = {"kubegpu-p-0badc0de": "version: v1\n"}
    labels = {"pool": "p", POOL_LABEL: "p", "nvidia.com/device-plugin.config": "kubegpu-p-0badc0de"}
    nodes = [node("a", product=L40S, count=4, labels=labels)]
    plan, result = writes([raw_pool("p", sharing=TS)], nodes, policy(True, None),
                          {NAMES["device_plugin_configmap"]: {"data": old}})
    during, final = result["configmaps"][1]["data"], result["configmaps"][1]["data_final"]
    assert "kubegpu-p-0badc0de" in during and "kubegpu-p-0badc0de" not in final
    assert result["digest"] == config_digest(final)


def test_machinesets_are_labelled_with_the_pool_labels():
    ms = {"metadata": {"name": "gpu-a", "namespace": "openshift-machine-api"}}
    plan, result = writes([raw_pool("p", sharing=TS, machinesets=["gpu-a"])], [l40s("a")], machinesets=[ms])
    assert result["machinesets"] == [{"name": "gpu-a", "namespace": "openshift-machine-api",
                                      "labels": plan["pools"][0]["labels"]}]


@pytest.mark.parametrize("machinesets, message", [
    ([{"metadata": {"name": "gpu-b"}}], "pool 'p': machinesets: MachineSet gpu-a not found in namespace "
                                        "openshift-machine-api (found: gpu-b)"),
    ([], "MachineSet gpu-a not found in namespace openshift-machine-api (found: none)"),
    (None, "pool 'p': machinesets gpu-a: this cluster does not serve MachineSets"),
])
def test_unknown_machineset_is_refused_in_the_plan(machinesets, message):
    with pytest.raises(PoolError) as err:
        writes([raw_pool("p", selector=by_label("pool", "p"), sharing=TS, machinesets=["gpu-a"])], [l40s("a")],
               machinesets=machinesets)
    assert message in str(err.value)
