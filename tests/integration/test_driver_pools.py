"""A driver per node pool, through the playbooks, on the Kubernetes fleet with NVIDIA's gpu-operator chart v26.7.0.

The gpu_operator playbook with driver.per_node_pool: true switches the ClusterPolicy to NVIDIADriver mode and the
chart deploys its default NVIDIADriver (held on 580.105.08 here through helm.values, as fleets hold nodes on 580);
the node_pools playbook renders one NVIDIADriver per pool that names a driver. What is shown (writes counted in
the audit log; the local cluster's nvidia-driver simulator plays the operator's NVIDIADriver and upgrade
controllers, simulators/decisions/nvidia_driver.py):
- two pools on different drivers plus the default: three NVIDIADrivers, every GPU node selected by exactly one;
- check mode writes nothing; a second run writes nothing;
- a version (branch) change on one pool writes its NVIDIADriver only, and the upgrade rolls over that pool's nodes
  only, at most the pool's max_unavailable at once;
- a foreign NVIDIADriver overlapping a pool's nodes, and a change of an immutable field, refused with no write.
"""
from __future__ import annotations

import json
import threading
import time

import pytest

from conftest import wait_for
from gpu_operator_playbook import _extra_vars, _failure, _reset, _run

PLAYBOOK = "playbooks/node_pools.yml"
DRIVER_API = "nvidia.com/v1alpha1"
STATE = "nvidia.com/gpu-driver-upgrade-state"
VERSION = "nvidia.com/cuda.driver-version.full"
POOL = "kubegpu.io/node-pool"
SIMULATOR = "system:kubegpu-sim:nvidia-driver"
IN_PROGRESS = ("cordon-required", "pod-restart-required", "validation-required", "uncordon-required")
FLEET_DRIVER = "580.105.08"
T4 = {"name": "t4", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "g4dn.12xlarge"}},
      "max_unavailable": 2, "sharing": {"strategy": "none"}, "driver": {"version": "580.173.02"}}
A10G = {"name": "a10g", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "g5.2xlarge"}},
        "max_unavailable": 1, "sharing": {"strategy": "none"}, "driver": {"version": "595.91.07"}}
POOLS = [T4, A10G]


@pytest.fixture(scope="module")
def cluster(devcluster_session, helm_bin):
    """The Kubernetes fleet, fresh, with the GPU Operator chart in NVIDIADriver mode and its default NVIDIADriver."""
    dc = devcluster_session
    dc.fleet("kubernetes", fresh=True)
    _reset(dc)
    out, stats, dummy = _run(dc, helm_bin, *_extra_vars(
        driver={"kernel_module_type": "open", "per_node_pool": True},
        helm={"chart": "{{ lookup('ansible.builtin.env', 'KUBEGPU_TEST_CHARTS') }}/gpu-operator", "repo_url": "",
              "binary": "{{ lookup('ansible.builtin.env', 'KUBEGPU_TEST_HELM') }}",
              "values": {"driver": {"version": FLEET_DRIVER}}}))
    assert stats["failures"] == 0, _failure(out)
    wait_for(lambda: _state(dc, "default") == "ready", timeout=120, what="the chart's default NVIDIADriver ready")
    yield dc
    _reset(dc)


def _drivers(dc):
    api = dc.admin.resources.get(api_version=DRIVER_API, kind="NVIDIADriver")
    return {d.metadata.name: d.to_dict() for d in api.get().items}


def _state(dc, name):
    return ((_drivers(dc).get(name) or {}).get("status") or {}).get("state")


def _gpu_nodes(dc):
    return {n.metadata.name: dict(n.metadata.labels) for n in dc.admin.resources.get(api_version="v1", kind="Node").get(
        label_selector="nvidia.com/gpu.present=true").items}


def _play(dc, pools, *args):
    proc = dc.playbook(PLAYBOOK, "-e", json.dumps({"kubegpu_node_pools": pools, "node_pools_timeout": 120}), *args)
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"no JSON from ansible-playbook (rc {proc.returncode}): {proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return out, out["stats"]["localhost"]


def _failed(out):
    return [r["msg"] for p in out["plays"] for t in p["tasks"] for r in [t["hosts"].get("localhost", {})]
            if r.get("failed")]


def _owners(drivers, labels):
    """The NVIDIADrivers that select a node: the non-default ones whose nodeSelector matches, else the default."""
    matched = [n for n, d in drivers.items() if not d["spec"].get("default")
               and all(labels.get(k) == v for k, v in (d["spec"].get("nodeSelector") or {}).items())]
    return matched or [n for n, d in drivers.items() if d["spec"].get("default")]


def _settled(dc):
    return all(d.get("status", {}).get("state") == "ready" for d in _drivers(dc).values())


def _in_pool(dc, pool):
    return sorted(n for n, labels in _gpu_nodes(dc).items() if labels.get(POOL) == pool)


def test_check_mode_on_a_cluster_without_pool_drivers_writes_nothing(cluster):
    dc = cluster
    mark = dc.audit.mark()
    out, stats = _play(dc, POOLS, "--check")
    assert stats["failures"] == 0, _failed(out)
    assert dc.audit.writes(mark) == []
    assert sorted(_drivers(dc)) == ["default"]


def test_two_pools_and_the_default_three_disjoint_drivers(cluster):
    dc = cluster
    mark = dc.audit.mark()
    out, stats = _play(dc, POOLS)
    assert stats["failures"] == 0, _failed(out)
    writes = [e for e in dc.audit.writes(mark) if e.resource == "nvidiadrivers"]
    assert sorted((e.verb, e.name) for e in writes) == [("patch", "kubegpu-pool-a10g"), ("patch", "kubegpu-pool-t4")]
    drivers = _drivers(dc)
    assert sorted(drivers) == ["default", "kubegpu-pool-a10g", "kubegpu-pool-t4"]
    assert drivers["kubegpu-pool-t4"]["spec"]["nodeSelector"] == {POOL: "t4"}
    assert drivers["kubegpu-pool-t4"]["spec"]["upgradePolicy"]["maxUnavailable"] == 2
    assert drivers["kubegpu-pool-a10g"]["spec"]["upgradePolicy"]["maxUnavailable"] == 1
    owners = {node: _owners(drivers, labels) for node, labels in _gpu_nodes(dc).items()}
    assert all(len(o) == 1 for o in owners.values()), owners
    assert sorted(n for n, o in owners.items() if o == ["kubegpu-pool-t4"]) == _in_pool(dc, "t4")
    assert len(_in_pool(dc, "t4")) == 4 and len(_in_pool(dc, "a10g")) == 3
    wait_for(lambda: _settled(dc), timeout=120, what="every NVIDIADriver ready")
    versions = dict((n, labels[VERSION]) for n, labels in _gpu_nodes(dc).items())
    assert {versions[n] for n in _in_pool(dc, "t4")} == {"580.173.02"}
    assert {versions[n] for n in _in_pool(dc, "a10g")} == {"595.91.07"}
    assert {v for n, v in versions.items() if n not in _in_pool(dc, "t4") + _in_pool(dc, "a10g")} == {FLEET_DRIVER}


def test_second_run_writes_nothing(cluster):
    dc = cluster
    mark = dc.audit.mark()
    out, stats = _play(dc, POOLS)
    assert stats["failures"] == 0 and stats["changed"] == 0, _failed(out)
    assert dc.audit.writes(mark) == []


def test_check_mode_of_a_branch_change_writes_nothing(cluster):
    dc = cluster
    mark = dc.audit.mark()
    out, stats = _play(dc, [dict(T4, driver={"version": "595.91.07"}), A10G], "--check")
    assert stats["failures"] == 0, _failed(out)
    assert dc.audit.writes(mark) == []
    assert _drivers(dc)["kubegpu-pool-t4"]["spec"]["version"] == "580.173.02"


def test_branch_change_rolls_only_that_pool_max_unavailable_at_a_time(cluster):
    dc = cluster
    dc.knobs({"nvidia-driver.step_seconds": "1"})
    t4 = _in_pool(dc, "t4")
    before = _gpu_nodes(dc)
    seen, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            nodes = _gpu_nodes(dc)
            seen.append(sorted(n for n, labels in nodes.items() if labels.get(STATE) in IN_PROGRESS))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    mark = dc.audit.mark()
    try:
        out, stats = _play(dc, [dict(T4, driver={"version": "595.91.07"}), A10G])
        assert stats["failures"] == 0, _failed(out)
        wait_for(lambda: all(_gpu_nodes(dc)[n][VERSION] == "595.91.07" for n in t4) and _settled(dc), timeout=120,
                 what="pool t4 on 595.91.07")
    finally:
        stop.set()
        watcher.join()
    assert [(e.verb, e.resource, e.name) for e in dc.audit.writes(mark)] == [
        ("patch", "nvidiadrivers", "kubegpu-pool-t4")]
    rolled = sorted({e.name for e in dc.audit.writes(mark, user=SIMULATOR) if e.resource == "nodes"})
    assert rolled == t4
    after = _gpu_nodes(dc)
    assert [n for n in after if n not in t4 and after[n][VERSION] != before[n][VERSION]] == []
    assert max(len(s) for s in seen) == 2, seen     # the pool's max_unavailable, reached and never passed
    assert all(set(s) <= set(t4) for s in seen), seen


def test_overlapping_foreign_driver_refused_with_no_write(cluster):
    dc = cluster
    api = dc.admin.resources.get(api_version=DRIVER_API, kind="NVIDIADriver")
    api.create(body={"apiVersion": DRIVER_API, "kind": "NVIDIADriver", "metadata": {"name": "t4-by-hand"},
                     "spec": {"driverType": "gpu", "image": "driver", "repository": "nvcr.io/nvidia",
                              "version": "580.173.02",
                              "nodeSelector": {"node.kubernetes.io/instance-type": "g4dn.12xlarge"}}})
    try:
        mark = dc.audit.mark()
        out, stats = _play(dc, [dict(T4, driver={"version": "595.91.07"}), A10G])
        assert stats["failures"] == 1
        message = " ".join(_failed(out))
        for words in ("NVIDIADrivers kubegpu-pool-t4, t4-by-hand would all select nodes", "ConflictingNodeSelector",
                      "Nothing was written"):
            assert words in message, message
        assert dc.audit.writes(mark) == []
    finally:
        api.delete(name="t4-by-hand")


def test_immutable_field_change_refused_with_no_write(cluster):
    dc = cluster
    mark = dc.audit.mark()
    out, stats = _play(dc, [dict(T4, driver={"version": "595", "precompiled": True}), A10G])
    assert stats["failures"] == 1
    message = " ".join(_failed(out))
    for words in ("pool 't4': driver.precompiled True needs a new NVIDIADriver", "spec.usePrecompiled False",
                  "immutable", "Nothing was written"):
        assert words in message, message
    assert dc.audit.writes(mark) == []
