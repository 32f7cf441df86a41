# -*- coding: utf-8 -*-
"""Tenancy quota planning: capacity from the pool plan, shares and units, refusals, objects (docs/tenancy.md)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.objects import desired_objects, queue_of
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.quotas import plan_quotas, pool_capacity
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.report import live_rows, usage_rows
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.spec import TenancyError, parse_settings

from pool_builders import A100, H100, L40S, by_label, node, raw_pool

H200 = "NVIDIA-H200"
NODES = ([node("h100-%d" % i, H100, 8, labels={"pool": "mig"}) for i in range(2)]
         + [node("l40s-%d" % i, L40S, 4, labels={"pool": "ts"}) for i in range(3)]
         + [node("a100-0", A100, 4, labels={"pool": "mps"})]
         + [node("h200-0", H200, 8, labels={"pool": "dra"}, mig_capable=False)])


MIXED = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}


def pools(layout=None):
    return [raw_pool("mig", by_label("pool", "mig"), {"strategy": "mig", "mig": {"layout": layout or MIXED}}),
            raw_pool("ts", by_label("pool", "ts"), {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}),
            raw_pool("mps", by_label("pool", "mps"), {"strategy": "mps", "mps": {"replicas": 2}}),
            raw_pool("dra", by_label("pool", "dra"), {"strategy": "dra"})]


def test_capacity_in_each_pools_own_resource_names():
    capacity = pool_capacity(pools(), NODES)
    assert capacity["mig"] == {"strategy": "mig", "nodes": 2, "resources": {
        "nvidia.com/mig-3g.40gb": 1 * 8 * 2, "nvidia.com/mig-2g.20gb": 1 * 8 * 2, "nvidia.com/mig-1g.10gb": 2 * 8 * 2},
        "allocatable": {"cpu": "192", "memory": "2048Gi"}}
    assert capacity["ts"]["resources"] == {"nvidia.com/gpu": 3 * 4 * 4}
    assert capacity["mps"]["resources"] == {"nvidia.com/gpu": 4 * 2}
    assert capacity["dra"]["resources"] == {"gpu.nvidia.com": 8}


def test_capacity_follows_a_mig_layout_change():
    # A uniform layout runs under MIG strategy single: the device plugin advertises nvidia.com/gpu.
    before = pool_capacity(pools("all-1g.10gb"), NODES)["mig"]["resources"]
    after = pool_capacity(pools(MIXED), NODES)["mig"]["resources"]
    assert before == {"nvidia.com/gpu": 7 * 8 * 2}
    assert after == {"nvidia.com/mig-3g.40gb": 16, "nvidia.com/mig-2g.20gb": 16, "nvidia.com/mig-1g.10gb": 32}


def _plan(teams, layout=None, **extra):
    settings = parse_settings(dict(extra, teams=teams))
    return settings, plan_quotas(settings, pool_capacity(pools(layout), NODES))


@pytest.mark.parametrize("quotas, expected", [
    ([{"pool": "ts", "share": 0.5}], {"ts": {"nvidia.com/gpu": 24}}),
    ([{"pool": "ts", "share": 0.33}], {"ts": {"nvidia.com/gpu": 15}}),         # floor(0.33 x 48)
    ([{"pool": "ts", "units": 5}], {"ts": {"nvidia.com/gpu": 5}}),
    ([{"pool": "mig", "share": 0.5}], {"mig": {"nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-2g.20gb": 8,
                                               "nvidia.com/mig-1g.10gb": 16}}),
    ([{"pool": "dra", "units": 3}], {"dra": {"gpu.nvidia.com": 3}}),
    ([{"pool": "mig", "units": {"nvidia.com/mig-3g.40gb": 4}}], {"mig": {"nvidia.com/mig-3g.40gb": 4}}),
])
def test_shares_and_units(quotas, expected):
    dummy, plan = _plan([{"name": "a", "quotas": quotas}])
    assert plan["teams"]["a"] == expected


def test_teams_and_unassigned_add_up_to_capacity_across_a_layout_change():
    teams = [{"name": "a", "quotas": [{"pool": "mig", "share": 0.5}]},
             {"name": "b", "quotas": [{"pool": "mig", "share": 0.25}]}]
    for layout in ("all-1g.10gb", {"3g.40gb": 2}, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}):
        dummy, plan = _plan(teams, layout)
        for resource, units in plan["capacity"]["mig"]["resources"].items():
            given = sum(plan["teams"][t]["mig"][resource] for t in ("a", "b"))
            assert given + plan["unassigned"]["mig"][resource] == units


@pytest.mark.parametrize("teams, message", [
    ([{"name": "a", "quotas": [{"pool": "mgi", "share": 0.5}]}], "pool 'mgi'): no such pool (did you mean 'mig'?)"),
    ([{"name": "a", "quotas": [{"pool": "mig", "units": {"nvidia.com/mig-7g.80gb": 1}}]}],
     "units name resource 'nvidia.com/mig-7g.80gb', which the pool does not offer"),
    ([{"name": "a", "quotas": [{"pool": "mig", "units": 2}]}], "units is 2 but the pool offers several resources"),
    ([{"name": "a", "quotas": [{"pool": "ts", "share": 0.6}]}, {"name": "b", "quotas": [{"pool": "ts", "share": 0.5}]}],
     "pool 'ts' nvidia.com/gpu: the teams' quotas add up to 52 (a: 28, b: 24), above the 48 the pool offers (3 nodes)"),
    ([{"name": "a", "quotas": [{"pool": "dra", "units": 9}]}], "pool 'dra' gpu.nvidia.com: the teams' quotas add up to 9"),
    ([{"name": "a", "quotas": [{"pool": "ts", "units": 48}]}], None),
])
def test_refusals(teams, message):
    if message is None:
        _plan(teams)
        return
    with pytest.raises(TenancyError) as err:
        _plan(teams)
    assert message in str(err.value)


def test_layout_change_that_leaves_quotas_above_capacity_names_the_teams():
    teams = [{"name": "a", "quotas": [{"pool": "mig", "units": {"nvidia.com/mig-1g.10gb": 30}}]}]
    _plan(teams, {"1g.10gb": 2, "3g.40gb": 1})
    with pytest.raises(TenancyError) as err:
        _plan(teams, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1})
    assert "pool 'mig' nvidia.com/mig-1g.10gb: the teams' quotas add up to 30 (a: 30), above the 16" in str(err.value)


@pytest.mark.parametrize("raw, message", [
    ({"teams": [{"name": "a", "quotas": [{"pool": "ts"}]}]}, "give one of share"),
    ({"teams": [{"name": "a", "quotas": [{"pool": "ts", "share": 1.5}]}]}, "share is 1.5"),
    ({"teams": [{"name": "a", "quotas": [{"pool": "ts", "units": -1}]}]}, "units is -1"),
    ({"teams": [{"name": "a", "priority": "interactve"}]}, "did you mean 'interactive'"),
    ({"teams": [{"name": "a", "namespaces": ["x"]}, {"name": "b", "namespaces": ["x"]}]}, "namespace 'x' is already"),
    ({"teams": [{"name": "a", "quotass": []}]}, "unknown key 'quotass' (did you mean 'quotas'?)"),
    ({"teams": [{"name": "unassigned"}]}, "also a team's name"),
    ({"priority_classes": [{"name": "x", "value": 1, "preemption": "Always"}]}, "preemption is 'Always'"),
])
def test_settings_refused(raw, message):
    with pytest.raises(TenancyError) as err:
        parse_settings(raw)
    assert message in str(err.value)


def test_kueue_objects():
    settings, plan = _plan([{"name": "a", "namespaces": ["a1", "a2"], "priority": "interactive",
                             "quotas": [{"pool": "ts", "share": 0.5}, {"pool": "mps", "units": 2}]},
                            {"name": "b", "borrow": False, "lend": False, "quotas": [{"pool": "mig", "share": 0.5}]}])
    objects = desired_objects(settings, plan)
    kinds = [o["kind"] for o in objects]
    assert kinds.index("Namespace") < kinds.index("ClusterQueue") < kinds.index("LocalQueue")
    flavors = dict((o["metadata"]["name"], o) for o in objects if o["kind"] == "ResourceFlavor")
    assert sorted(flavors) == ["dra", "kubegpu-cpu-memory", "mig", "mps", "ts"]
    assert flavors["ts"]["spec"]["nodeLabels"] == {"kubegpu.io/node-pool": "ts"}
    # cpu and memory: a flavor without node labels, so that it adds no nodeSelector beside the pool's flavor.
    assert "spec" not in flavors["kubegpu-cpu-memory"]
    queues = dict((o["metadata"]["name"], o) for o in objects if o["kind"] == "ClusterQueue")
    assert sorted(queues) == ["a", "b", "unassigned"]
    groups = queues["a"]["spec"]["resourceGroups"]
    # ts and mps both offer nvidia.com/gpu: one resource group with both flavors.
    gpu = next(g for g in groups if g["coveredResources"] == ["nvidia.com/gpu"])
    assert [(f["name"], f["resources"][0]["nominalQuota"]) for f in gpu["flavors"]] == [("mps", 2), ("ts", 24)]
    assert all(f["resources"][0].get("borrowingLimit") == 0 for g in queues["b"]["spec"]["resourceGroups"]
               for f in g["flavors"])
    # Per flavor and resource, the nominal quotas of every ClusterQueue add up to the pool's capacity.
    for pool, entry in plan["capacity"].items():
        for resource, units in entry["resources"].items():
            total = sum(r["nominalQuota"] for q in queues.values() for g in q["spec"]["resourceGroups"]
                        for f in g["flavors"] if f["name"] == pool for r in f["resources"] if r["name"] == resource)
            assert total == units
    local = [(o["metadata"]["namespace"], o["spec"]["clusterQueue"]) for o in objects if o["kind"] == "LocalQueue"]
    assert local == [("a1", "a"), ("a2", "a"), ("b", "b")]
    assert queue_of(settings, "a2") == ("a", "interactive")
    assert queue_of(settings, "elsewhere") is None


def _node_group(queue):
    groups = [g for g in queue["spec"]["resourceGroups"] if g["coveredResources"] == ["cpu", "memory"]]
    assert len(groups) == 1
    return dict((r["name"], r) for r in groups[0]["flavors"][0]["resources"])


def test_every_queue_covers_cpu_and_memory():
    # Kueue admits a workload only when its ClusterQueue covers every resource it asks for: a model asks for cpu and
    # memory beside its GPUs. By default each queue may use what the GPU pools' nodes offer: 7 nodes of 96 cpu, 1Ti.
    settings, plan = _plan([{"name": "a", "quotas": [{"pool": "ts", "share": 0.5}], "cpu": "40500m", "memory": "256Gi"},
                            {"name": "b", "borrow": False, "lend": False, "quotas": [{"pool": "mig", "share": 0.5}]}])
    assert plan["node_quotas"] == {"a": {"cpu": "40500m", "memory": "256Gi"}, "b": {"cpu": "672", "memory": "7168Gi"},
                                   "unassigned": {"cpu": "672", "memory": "7168Gi"}}
    queues = dict((o["metadata"]["name"], o) for o in desired_objects(settings, plan) if o["kind"] == "ClusterQueue")
    assert _node_group(queues["a"]) == {"cpu": {"name": "cpu", "nominalQuota": "40500m"},
                                        "memory": {"name": "memory", "nominalQuota": "256Gi"}}
    assert _node_group(queues["b"])["cpu"] == {"name": "cpu", "nominalQuota": "672", "borrowingLimit": 0,
                                               "lendingLimit": 0}
    assert _node_group(queues["unassigned"])["memory"]["nominalQuota"] == "7168Gi"
    # The flavor is in one resource group only (Kueue refuses a flavor in two).
    for queue in queues.values():
        names = [f["name"] for g in queue["spec"]["resourceGroups"] for f in g["flavors"]]
        assert len(names) == len(set(names))


def test_node_quotas_sum_the_pools_nodes_as_kubelets_publish_them():
    nodes = [node("l40s-%d" % i, L40S, 4, labels={"pool": "ts"}, allocatable={"cpu": "7910m", "memory": "263839996Ki"})
             for i in range(2)] + [node("h100-0", H100, 8, labels={"pool": "other"})]
    settings = parse_settings({"teams": [{"name": "a", "quotas": [{"pool": "ts", "units": 1}], "cpu": 0.5}]})
    plan = plan_quotas(settings, pool_capacity([pools()[1]], nodes))
    # Millicores summed, memory in the largest exact unit; a node of no pool does not count.
    assert plan["node_quotas"]["unassigned"] == {"cpu": "15820m", "memory": "527679992Ki"}
    assert plan["node_quotas"]["a"] == {"cpu": "0.5", "memory": "527679992Ki"}


@pytest.mark.parametrize("team, message", [
    ({"name": "a", "cpu": "lots"}, "team 'a': cpu is 'lots'; expected a Kubernetes quantity >= 0 (e.g. 64 or 500m)"),
    ({"name": "a", "memory": -1}, "team 'a': memory is -1; expected a Kubernetes quantity >= 0"),
    ({"name": "a", "memory": True}, "team 'a': memory is True"),
])
def test_bad_cpu_or_memory_refused(team, message):
    with pytest.raises(TenancyError) as err:
        parse_settings({"teams": [team]})
    assert message in str(err.value)


def test_resource_quotas_without_kueue():
    settings, plan = _plan([{"name": "a", "namespaces": ["a1", "a2"],
                             "quotas": [{"pool": "ts", "units": 5}, {"pool": "mps", "units": 2},
                                        {"pool": "dra", "units": 1}]}], kueue=False)
    objects = desired_objects(settings, plan)
    assert not [o for o in objects if o["apiVersion"].startswith("kueue")]
    quotas = dict((o["metadata"]["namespace"], o["spec"]["hard"]) for o in objects if o["kind"] == "ResourceQuota")
    # ts and mps both offer nvidia.com/gpu: 7 for the team, 4 + 3 over its two namespaces.
    assert quotas["a1"]["requests.nvidia.com/gpu"] == "4" and quotas["a2"]["requests.nvidia.com/gpu"] == "3"
    assert quotas["a1"]["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"] == "1"
    assert quotas["a1"]["requests.nvidia.com/mig-3g.40gb"] == "0" and quotas["a2"]["requests.nvidia.com/mig-3g.40gb"] == "0"
    assert queue_of(settings, "a1") is None


def test_usage_rows():
    settings, plan = _plan([{"name": "a", "quotas": [{"pool": "ts", "units": 5}]}])
    queue = {"metadata": {"name": "a"}, "status": {"flavorsUsage": [
        {"name": "ts", "resources": [{"name": "nvidia.com/gpu", "total": "7", "borrowed": "2"}]}]}}
    rows = usage_rows(settings, plan, [queue], [])
    assert {"team": "a", "pool": "ts", "resource": "nvidia.com/gpu", "quota": 5, "used": 7, "borrowed": 2} in rows
    assert any(r["team"] == "unassigned" and r["quota"] == 43 for r in rows)


def test_live_rows_from_the_clusterqueues_the_stage_writes():
    """The capacity report reads the quotas back from the ClusterQueues as written (no inventory): the same quotas
    as the plan's, usage and borrowing from the status Kueue keeps; the cpu and memory flavor is not a GPU pool."""
    settings, plan = _plan([{"name": "a", "quotas": [{"pool": "ts", "units": 5}, {"pool": "mig", "share": 0.5}]}])
    queues = [o for o in desired_objects(settings, plan) if o["kind"] == "ClusterQueue"]
    queues[0]["status"] = {"flavorsUsage": [
        {"name": "ts", "resources": [{"name": "nvidia.com/gpu", "total": "7", "borrowed": "2"}]},
        {"name": "kubegpu-cpu-memory", "resources": [{"name": "cpu", "total": "8"}]}]}
    rows = live_rows(queues, [], [])
    assert {"team": "a", "pool": "ts", "resource": "nvidia.com/gpu", "quota": 5, "used": 7, "borrowed": 2} in rows
    assert {"team": "a", "pool": "mig", "resource": "nvidia.com/mig-3g.40gb", "quota": 8, "used": 0,
            "borrowed": 0} in rows
    assert not [r for r in rows if r["pool"] == "kubegpu-cpu-memory"]
    # Every quota the plan gives is read back, the shared queue's included, and nothing else.
    planned = sorted((holder, pool, resource, n) for holder, given in
                     list(plan["teams"].items()) + [("unassigned", plan["unassigned"])]
                     for pool, resources in given.items() for resource, n in resources.items() if n)
    assert sorted((r["team"], r["pool"], r["resource"], r["quota"]) for r in rows) == planned


def test_live_rows_from_plain_resource_quotas():
    """Without Kueue the quotas are per resource name over a team's namespaces: the row names every pool that
    offers the resource, and a DRA device count is read back as the driver's class."""
    settings, plan = _plan([{"name": "a", "namespaces": ["a1", "a2"],
                             "quotas": [{"pool": "ts", "units": 5}, {"pool": "mps", "units": 2},
                                        {"pool": "dra", "units": 1}]}], kueue=False)
    quotas = [o for o in desired_objects(settings, plan) if o["kind"] == "ResourceQuota"]
    quotas[0]["status"] = {"used": {"requests.nvidia.com/gpu": "3", "requests.cpu": "2"}}
    pools = [{"name": "mps", "allocatable": {"nvidia.com/gpu": 8}}, {"name": "ts", "allocatable": {"nvidia.com/gpu": 48}}]
    rows = live_rows([], quotas, pools)
    assert {"team": "a", "pool": "mps, ts", "resource": "nvidia.com/gpu", "quota": 7, "used": 3, "borrowed": 0} in rows
    assert {"team": "a", "pool": "-", "resource": "gpu.nvidia.com", "quota": 1, "used": 0, "borrowed": 0} in rows
    assert not [r for r in rows if r["resource"] in ("cpu", "nvidia.com/mig-3g.40gb")]   # not GPU / zero


def test_a_dra_node_that_does_not_tell_its_gpus_is_named():
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import SizingError
    bare = node("h200-0", None, labels={"pool": "dra"})
    with pytest.raises(SizingError) as err:
        pool_capacity([pools()[3]], [bare])
    assert "pool 'dra': node h200-0 does not tell its GPUs yet" in str(err.value)
