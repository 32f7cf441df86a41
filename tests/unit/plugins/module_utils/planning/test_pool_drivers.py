# -*- coding: utf-8 -*-
"""A driver per node pool (planning/node_pools/drivers.py): parsing, rendering, and the refusals before any write."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import MANAGED_BY_LABEL, POOL_LABEL
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.drivers import (
    DriverError,
    PoolDriver,
    driver_name,
    nodes_after,
    overlap_problems,
    parse_driver,
    plan_drivers,
    render_driver,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import plan_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError, parse_pools

from pool_builders import by_label, node, raw_pool  # noqa: E402  pylint: disable=wrong-import-order

CRD_MODE = {"driver": {"useNvidiaDriverCRD": True}}
R580 = PoolDriver(version="580.173.02")
R595 = PoolDriver(version="595.91.07")


def chart_default():
    """The gpu-operator chart's default CR (templates/nvidiadriver.yaml, deployDefaultCR)."""
    return {"metadata": {"name": "default", "labels": {}},
            "spec": {"default": True, "driverType": "gpu", "usePrecompiled": False, "version": "595.91.07"}}


def foreign(name, selector):
    return {"metadata": {"name": name}, "spec": {"driverType": "gpu", "nodeSelector": selector}}


def labels(**pools):
    """{node: labels}, each node in the pool given (None: in no pool)."""
    return dict((n, {POOL_LABEL: p} if p else {"other": "x"}) for n, p in pools.items())


# -- parse_driver


def test_absent_driver_is_none():
    assert parse_driver("pool 'a'", None) is None


def test_defaults_fill_the_driver():
    assert parse_driver("pool 'a'", {"version": "580.173.02"}) == R580


def test_branch_with_precompiled():
    got = parse_driver("pool 'a'", {"version": 580, "precompiled": True, "kernel_module_type": "open"})
    assert (got.version, got.precompiled, got.kernel_module_type) == ("580", True, "open")


@pytest.mark.parametrize("raw, words", [
    ({"version": "580"}, ["pool 'a'", "driver.version is '580', a branch", "precompiled: true", "'580.173.02'"]),
    ({"version": "latest"}, ["driver.version is 'latest'", "such as '580.173.02'"]),
    ({"version": "580.173.02", "type": "cuda"}, ["driver.type is 'cuda'", "gpu, vgpu, vgpu-host-manager"]),
    ({"version": "580.173.02", "kernel_module_type": "closed"}, ["kernel_module_type is 'closed'", "auto, open"]),
    ({"version": "580.173.02", "precompiled": "yes"}, ["driver.precompiled is 'yes'", "true or false"]),
    ({"version": "580.173.02", "branch": "580"}, ["unknown key branch in driver", "valid: version"]),
    ("580", ["driver is '580'", "expected a mapping"]),
    ({"version": "580.173.02", "image": ""}, ["driver.image is ''", "non-empty"]),
])
def test_bad_driver_refused(raw, words):
    with pytest.raises(DriverError) as err:
        parse_driver("pool 'a'", raw)
    for word in words:
        assert word in str(err.value)


def test_pool_parses_its_driver():
    pool = parse_pools([raw_pool("a", driver={"version": "580.173.02"}), raw_pool("b")])
    assert pool[0].driver == R580 and pool[1].driver is None


def test_pool_driver_error_is_a_pool_error():
    with pytest.raises(PoolError, match="pool 'a': driver.version is 'x'"):
        parse_pools([raw_pool("a", driver={"version": "x"})])


# -- render_driver


def test_render_selects_the_pool_label_and_carries_max_unavailable():
    obj = render_driver("gb200", PoolDriver(version="580", precompiled=True, kernel_module_type="open",
                                            auto_upgrade=False), "25%")
    assert obj["metadata"]["name"] == "kubegpu-pool-gb200"
    assert obj["metadata"]["labels"] == {MANAGED_BY_LABEL: "kubegpu.platform", POOL_LABEL: "gb200"}
    spec = obj["spec"]
    assert spec["nodeSelector"] == {POOL_LABEL: "gb200"}
    assert spec["default"] is False
    assert (spec["driverType"], spec["usePrecompiled"], spec["kernelModuleType"], spec["version"]) == \
        ("gpu", True, "open", "580")
    assert (spec["repository"], spec["image"]) == ("nvcr.io/nvidia", "driver")
    assert spec["upgradePolicy"] == {"autoUpgrade": False, "maxParallelUpgrades": 0, "maxUnavailable": "25%"}


def test_pool_names_never_give_the_default_drivers_name():
    assert driver_name("default") != "default" and driver_name("default").startswith("kubegpu-pool-")


# -- overlaps


def test_pool_drivers_and_the_default_are_disjoint():
    drivers = [render_driver("a", R580, 1), render_driver("b", R595, 1), chart_default()]
    assert overlap_problems(drivers, labels(n1="a", n2="b", n3=None)) == []


def test_foreign_driver_selecting_a_pool_node_is_refused():
    drivers = [render_driver("a", R580, 1), foreign("h100", {"other": "x"})]
    problems = overlap_problems(drivers, labels(n1="a", n2=None, n3=None))
    assert problems == []  # n2, n3 are the foreign driver's alone
    clash = dict(labels(n1="a"), n1={POOL_LABEL: "a", "other": "x"})
    problems = overlap_problems(drivers, clash)
    assert len(problems) == 1
    for word in ("NVIDIADrivers h100, kubegpu-pool-a", "node n1", "ConflictingNodeSelector",
                 "kubegpu-pool-a {kubegpu.io/node-pool: a}", "h100 {other: x}"):
        assert word in problems[0]


def test_empty_selector_on_a_non_default_driver_takes_every_node():
    problems = overlap_problems([render_driver("a", R580, 1), foreign("all", {})], labels(n1="a", n2=None))
    assert len(problems) == 1 and "node n1 " in problems[0]


def test_two_defaults_refused():
    other = chart_default()
    other["metadata"]["name"] = "mine"
    problems = overlap_problems([chart_default(), other], {})
    assert problems == ["NVIDIADrivers default, mine are all spec.default: true; the GPU Operator takes one default "
                        "NVIDIADriver for the nodes no other selects: keep one"]


def test_many_clashing_nodes_are_counted_not_listed():
    nodes = dict(("n%d" % i, {POOL_LABEL: "a"}) for i in range(8))
    problems = overlap_problems([render_driver("a", R580, 1), foreign("x", {})], nodes)
    assert "nodes n0, n1, n2, n3, n4 and 3 more" in problems[0]


# -- plan_drivers


def test_plan_two_pools():
    out = plan_drivers([("a", R580, 1), ("b", R595, "50%"), ("c", None, 1)], [chart_default()],
                       labels(n1="a", n2="b", n3="c"), CRD_MODE)
    assert out["problems"] == [] and out["delete"] == []
    assert [d["metadata"]["name"] for d in out["drivers"]] == ["kubegpu-pool-a", "kubegpu-pool-b"]
    assert out["drivers"][1]["spec"]["upgradePolicy"]["maxUnavailable"] == "50%"


def test_plan_refuses_without_nvidiadriver_mode():
    out = plan_drivers([("a", R580, 1)], [], labels(n1="a"), {"driver": {"useNvidiaDriverCRD": False}})
    assert len(out["problems"]) == 1
    assert "pool 'a' names a driver" in out["problems"][0]
    assert "kubegpu_gpu_operator.driver.per_node_pool: true" in out["problems"][0]


def test_no_policy_is_left_to_the_policy_check():
    assert plan_drivers([("a", R580, 1)], [], labels(n1="a"), None)["problems"] == []
    assert plan_drivers([("a", R580, 1)], None, labels(n1="a"), None)["problems"] == []


def test_plan_refuses_when_nvidiadriver_is_not_served():
    out = plan_drivers([("a", R580, 1)], None, labels(n1="a"), CRD_MODE)
    assert "does not serve nvidia.com/v1alpha1 NVIDIADriver" in out["problems"][0] and out["drivers"] == []


def test_no_driver_pools_and_no_nvidiadriver_api_is_fine():
    assert plan_drivers([("a", None, 1)], None, labels(n1="a"), {}) == {"drivers": [], "delete": [], "problems": []}


def test_branch_change_is_an_update():
    live = render_driver("a", R580, 1)
    out = plan_drivers([("a", R595, 1)], [live, chart_default()], labels(n1="a"), CRD_MODE)
    assert out["problems"] == [] and out["drivers"][0]["spec"]["version"] == "595.91.07"


@pytest.mark.parametrize("change, words", [
    ({"precompiled": True, "version": "580"},
     ["pool 'a': driver.precompiled True needs a new NVIDIADriver",
      "NVIDIADriver kubegpu-pool-a has spec.usePrecompiled False", "immutable", "Keep driver.precompiled: False",
      "move the nodes to a new pool"]),
    ({"type": "vgpu"}, ["driver.type 'vgpu' needs a new NVIDIADriver", "spec.driverType 'gpu'"]),
])
def test_immutable_change_refused(change, words):
    live = render_driver("a", R580, 1)
    wanted = PoolDriver(**dict(R580.__dict__, **change))
    out = plan_drivers([("a", wanted, 1)], [live], labels(n1="a"), CRD_MODE)
    assert len(out["problems"]) == 1
    for word in words:
        assert word in out["problems"][0]


def test_immutable_field_absent_on_live_object_reads_its_crd_default():
    live = render_driver("a", R580, 1)
    del live["spec"]["usePrecompiled"]
    assert plan_drivers([("a", R580, 1)], [live], labels(n1="a"), CRD_MODE)["problems"] == []


def test_name_taken_by_a_foreign_driver_refused():
    taken = foreign("kubegpu-pool-a", {POOL_LABEL: "a"})
    out = plan_drivers([("a", R580, 1)], [taken], labels(n1="a"), CRD_MODE)
    assert any("NVIDIADriver kubegpu-pool-a exists and is not this collection's" in p for p in out["problems"])


def test_pool_without_driver_any_more_has_its_nvidiadriver_deleted():
    live = [render_driver("a", R580, 1), render_driver("b", R580, 1), chart_default(), foreign("x", {"k": "v"})]
    out = plan_drivers([("a", R580, 1), ("b", None, 1)], live, labels(n1="a", n2="b"), CRD_MODE)
    assert out["delete"] == ["kubegpu-pool-b"] and out["problems"] == []


def test_deleted_driver_does_not_count_as_an_overlap():
    stale = foreign("kubegpu-pool-b", {})
    stale["metadata"]["labels"] = {MANAGED_BY_LABEL: "kubegpu.platform"}
    out = plan_drivers([("a", R580, 1)], [stale], labels(n1="a"), CRD_MODE)
    assert out["delete"] == ["kubegpu-pool-b"] and out["problems"] == []


# -- nodes_after: the labels the overlap check sees are those the run leaves


def test_nodes_after_takes_the_plans_pool_labels():
    nodes = [node("n1", labels={"pool": "a"}), node("n2", labels={"pool": "b"}),
             node("n3", labels={POOL_LABEL: "old"})]
    plan = plan_pools(parse_pools([raw_pool("a"), raw_pool("b", selector=by_label("pool", "b"))]), nodes)
    after = nodes_after(nodes, plan)
    assert after["n1"][POOL_LABEL] == "a" and after["n2"][POOL_LABEL] == "b"
    assert POOL_LABEL not in after["n3"]  # released from its old pool


def test_a_node_joining_the_pool_is_checked_for_overlap():
    nodes = [node("n1", labels={"pool": "a", "zone": "z1"})]
    plan = plan_pools(parse_pools([raw_pool("a")]), nodes)
    out = plan_drivers([("a", R580, 1)], [foreign("zone", {"zone": "z1"})], nodes_after(nodes, plan), CRD_MODE)
    assert len(out["problems"]) == 1 and "node n1" in out["problems"][0]
