"""The node_pools PLAYBOOK as users run it: halts, restarts, check mode, refusals, and runs killed midway.

Counts come from the API server's audit log (the admin user is the collection; simulators are their own users).
"""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
import yaml

from bad_input_cases import POOLS_PLAN_TASK
from conftest import REPO, cert_kubeconfig, gpu_allocatable, kill_playbook, node_labels, wait_for
from demo_fleet import EXPECTED, POOLS, install_operator
from kubegpu_devcluster import certs
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DEVICE_PLUGIN_CONFIG_ANNOTATION

PLAYBOOK = "playbooks/node_pools.yml"
SINGLE = [dict(POOLS[0], sharing={"strategy": "mig", "mig": {"layout": "all-1g.10gb"}}), POOLS[1], POOLS[2]]


@pytest.fixture(scope="module")
def operator(devcluster_session):
    """The default fleet with the GPU Operator and its ClusterPolicy ready."""
    return install_operator(devcluster_session)


def _vars(pools, **extra):
    return ["-e", json.dumps(dict({"kubegpu_node_pools": pools, "node_pools_timeout": 60}, **extra))]


def _play(dc, pools, *args, **extra):
    """Run the playbook; return (json output, stats of localhost, seconds)."""
    t0 = time.monotonic()
    proc = dc.playbook(PLAYBOOK, *_vars(pools, **extra), *args)
    seconds = time.monotonic() - t0
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"no JSON from ansible-playbook (rc {proc.returncode}): {proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return out, out["stats"]["localhost"], seconds


def _results(out, action="kubegpu.platform.gpu_node_pools"):
    """(task name, result) of every task that ran the module (skipped ones left out)."""
    found = []
    for play in out["plays"]:
        for task in play["tasks"]:
            result = task["hosts"].get("localhost", {})
            if result.get("action", "") in (action, "gpu_node_pools") and not result.get("skipped"):
                found.append((task["task"]["name"], dict(result, duration=task["task"].get("duration"))))
    return found


def _seconds(result):
    """How long a task ran, from the JSON callback's start and end times."""
    stamps = result.get("duration") or {}
    from datetime import datetime
    start, end = (datetime.fromisoformat(stamps[k].replace("Z", "+00:00")) for k in ("start", "end"))
    return (end - start).total_seconds()


def _failure(out):
    return [(name, r["msg"]) for name, r in _results(out) if r.get("failed")]


def _converge(dc, pools=None, **extra):
    out, stats, dummy = _play(dc, POOLS if pools is None else pools, **extra)
    assert stats["failures"] == 0, _failure(out)
    return out


def _node_writes(writes, name):
    return [e for e in writes if e.resource == "nodes" and e.name == name]


def _restarts(writes):
    return [e for e in writes if e.resource == "daemonsets"]


def test_check_mode_plans_in_one_call(operator):
    dc = operator
    _converge(dc, SINGLE)
    mark = dc.audit.mark()
    out, stats, seconds = _play(dc, POOLS, "--check", "--diff")
    assert stats["failures"] == 0, _failure(out)
    calls = _results(out)
    assert len(calls) == 1, [name for name, dummy in calls]
    plan = calls[0][1]["plan"]
    assert [s["nodes"] for s in plan["steps"] if s["pool"] == "llm-h100"] == [["gpu-h100-000"], ["gpu-h100-001"]]
    assert plan["objects"]["configmaps"] and plan["objects"]["cluster_policy"]
    assert dc.audit.writes(mark) == []
    task = calls[0][1]
    busy = os.getloadavg()[0] / (os.cpu_count() or 1)
    print(f"\ncheck mode, demo fleet: playbook {seconds:.2f} s, {len(dc.audit.events(mark))} requests, "
          f"load {busy:.1f} per CPU")
    # Wall time is printed, not asserted (a machine shared with other jobs stretches it; make bench measures it):
    # what keeps the plan fast is asserted above, one module call and no write, and its requests in
    # test_request_counts.py.
    print(f"planning call {_seconds(task):.2f} s")


def test_converge_then_second_run_changes_nothing(operator):
    dc = operator
    _converge(dc, SINGLE)
    mark = dc.audit.mark()
    t0 = time.monotonic()
    out = _converge(dc)
    writes = dc.audit.writes(mark)
    print(f"\nconverge single -> demo pools: {time.monotonic() - t0:.1f} s, {len(_results(out))} module calls, "
          f"{len(dc.audit.events(mark))} requests, {len(writes)} writes ({len(_restarts(writes))} restart)")
    assert len(_restarts(writes)) == 1
    mark = dc.audit.mark()
    out, stats, dummy = _play(dc, POOLS)
    assert stats["failures"] == 0 and stats["changed"] == 0, _failure(out)
    assert dc.audit.writes(mark) == []
    assert len(_results(out)) == 1            # nothing to roll out: no batch task, no finish task


def test_failed_node_halts_its_pool_and_the_pools_after_it(operator):
    dc = operator
    _converge(dc)
    dc.knobs({"mig-manager.fail_nodes": "gpu-h100-000"})
    changed = [SINGLE[0], dict(POOLS[1], sharing={"strategy": "time-slicing", "time_slicing": {"replicas": 8}}),
               POOLS[2]]
    before = {n: node_labels(dc, n) for n in ("gpu-h100-001", "gpu-l40s-000", "gpu-l40s-001")}
    mark = dc.audit.mark()
    try:
        out, stats, dummy = _play(dc, changed)
    finally:
        dc.clear_knobs()
    assert stats["failures"] == 1, _results(out)
    (name, msg), = _failure(out)
    # Batch 1's task ends once its node has started and batch 2's carries it on (its node waiting for the slot),
    # unless batch 1's first look already saw the failure.
    # (The planning task, which starts batch 1, says "batch" in its name too: only the batch tasks are counted.)
    batch_tasks = [n for n, dummy in _results(out) if "Roll out pool " in n]
    assert name == batch_tasks[-1] and "pool llm-h100: batch" in name, (name, batch_tasks)
    assert len(batch_tasks) in (1, 2), batch_tasks
    assert "node gpu-h100-000 failed" in msg and "mig.config.state=failed" in msg
    assert "Not started" in msg and "pool llm-h100: gpu-h100-001" in msg and "pool embed-l40s" in msg
    writes = dc.audit.writes(mark)
    # the later node of the pool and the later pool: not one write, labels as they were
    for node in before:
        assert _node_writes(writes, node) == [], node
        assert node_labels(dc, node) == before[node], node
    _converge(dc)                                   # the failed node comes back with the layout it had


def test_replicas_change_restarts_the_device_plugin_exactly_once(operator):
    dc = operator
    _converge(dc)
    more = [POOLS[0], dict(POOLS[1], sharing={"strategy": "time-slicing", "time_slicing": {"replicas": 8}}), POOLS[2]]
    # the restart takes a while to reach the pods: nodes relabelled meanwhile must still get the new config
    dc.knobs({"device-plugin.restart_seconds": "3"})
    mark = dc.audit.mark()
    _converge(dc, more)
    restarts = _restarts(dc.audit.writes(mark))
    assert [e.name for e in restarts] == ["nvidia-device-plugin-daemonset"]
    wait_for(lambda: gpu_allocatable(dc)["gpu-l40s-000"] == {"nvidia.com/gpu": 32}, what="32 time-sliced GPUs")
    mark = dc.audit.mark()
    out, stats, dummy = _play(dc, more)                   # nothing changed: no restart, no write
    assert stats["changed"] == 0 and dc.audit.writes(mark) == []
    mark = dc.audit.mark()
    _converge(dc)
    assert len(_restarts(dc.audit.writes(mark))) == 1
    wait_for(lambda: gpu_allocatable(dc)["gpu-l40s-000"] == {"nvidia.com/gpu": 16}, what="16 time-sliced GPUs")


def test_empty_configuration_then_converge(operator):
    dc = operator
    _converge(dc)
    nothing = [{"name": "nobody", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "none"}},
                "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}}]
    # Every node released: the device-plugin ConfigMap is empty. The module itself, since the playbooks refuse a
    # pool that selects nothing (a typo in a selector).
    result = dc.module("gpu_node_pools", {"pools": nothing})
    assert not result.get("failed"), result.get("msg")
    cms = dc.admin.resources.get(api_version="v1", kind="ConfigMap")
    ns = [c for c in cms.get().items if c.metadata.name == "kubegpu-device-plugin-config"][0].metadata.namespace
    assert not (cms.get(name="kubegpu-device-plugin-config", namespace=ns).data or {})
    # what an earlier version of the collection left: no record of what the device plugin read
    policies = dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    name = policies.get().items[0].metadata.name
    policies.patch(name=name, body={"metadata": {"annotations": {DEVICE_PLUGIN_CONFIG_ANNOTATION: None}}},
                   content_type="application/merge-patch+json")
    mark = dc.audit.mark()
    _converge(dc)
    assert len(_restarts(dc.audit.writes(mark))) == 1
    for node, expected in EXPECTED.items():
        assert gpu_allocatable(dc)[node] == expected, node


def test_unknown_machineset_is_refused_before_any_write(operator):
    dc = operator
    bad = [POOLS[0], POOLS[1], dict(POOLS[2], machinesets=["no-such-machineset"])]
    mark = dc.audit.mark()
    out, stats, dummy = _play(dc, bad)
    assert stats["failures"] == 1
    # The playbook's preflight checks the inventory; the pools' cluster checks are gpu_node_pools' own, made on the
    # fleet it plans from (one Node list per run), before its first write.
    (name, msg), = _any_failure(out)
    task = name.split(" : ")[-1]
    assert task == POOLS_PLAN_TASK, name
    assert "pool 'batch-a100': machinesets: MachineSet no-such-machineset not found" in msg
    assert "demo-gpu-a100-us-east-1a" in msg and "nothing was written" in msg.lower()
    assert dc.audit.writes(mark) == []


def _any_failure(out):
    """(task name, message) of every failed task, whichever module ran it."""
    return [(task["task"]["name"], task["hosts"]["localhost"].get("msg")) for play in out["plays"]
            for task in play["tasks"] if task["hosts"].get("localhost", {}).get("failed")]


def test_pool_that_selects_nothing_writes_nothing(operator):
    dc = operator
    _converge(dc)
    nothing = {"name": "nobody", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "none"}},
               "sharing": {"strategy": "mig", "mig": {"layout": "all-balanced"}}}
    mark = dc.audit.mark()
    # The playbook refuses it before any write (most often a typo in the selector): its role sets
    # refuse_empty_pools...
    out, stats, dummy = _play(dc, POOLS + [nothing])
    assert stats["failures"] == 1
    (name, msg), = _any_failure(out)
    assert "pool 'nobody': selects no node" in msg and "node.kubernetes.io/instance-type=none" in msg
    # ...and the module alone (refuse_empty_pools false) plans nothing for it and says so.
    result = dc.module("gpu_node_pools", {"pools": POOLS + [nothing]})
    assert not result.get("failed") and not result["changed"], result.get("msg")
    assert "pool 'nobody' selects no node" in json.dumps(result.get("warnings"))
    assert dc.audit.writes(mark) == []


def test_drain_then_failure_leaves_no_node_cordoned(operator):
    dc = operator
    _converge(dc)
    pods = dc.admin.resources.get(api_version="v1", kind="Pod")
    pods.create(namespace="default", body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vllm-drain"},
        "spec": {"nodeName": "gpu-h100-000", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "vllm", "image": "vllm/vllm-openai",
                                 "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}}]}})
    dc.knobs({"mig-manager.fail_nodes": "gpu-h100-000"})
    try:
        out, stats, dummy = _play(dc, SINGLE, node_pools_drain_gpu_pods=True)
    finally:
        dc.clear_knobs()
    assert stats["failures"] == 1
    (name, msg), = _failure(out)
    assert "node gpu-h100-000 failed" in msg and "Uncordoned again: gpu-h100-000" in msg
    nodes = dc.admin.resources.get(api_version="v1", kind="Node")
    assert not [n.metadata.name for n in nodes.get().items if n.spec.unschedulable]
    dc.clear_knobs()
    _converge(dc)


# ---------------------------------------------------------------------------------------------
# Within a batch, each node's two steps follow its own hardware
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ending", ["finishes", "killed"])
def test_each_node_takes_its_device_plugin_step_once_its_own_mig_is_done(operator, ending):
    """Two MIG nodes in one batch, one of them slow: the other's device plugin config follows its own MIG success
    and its allocatable is in place while the slow one is still pending, on its old device plugin config. Killed
    there, half-way through the batch, the next run finishes the slow node alone and a third writes nothing."""
    dc = operator
    _converge(dc, SINGLE)
    key = _mixed_key(dc)
    one_batch = [dict(POOLS[0], max_unavailable=2)] + POOLS[1:]
    dc.knobs({"mig-manager.hang_nodes": "gpu-h100-001"})
    proc = subprocess.Popen(["ansible-playbook", PLAYBOOK, *_vars(one_batch)], cwd=REPO, env=dc.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for(lambda: gpu_allocatable(dc)["gpu-h100-000"] == EXPECTED["gpu-h100-000"], timeout=120, interval=0.2,
                 what="gpu-h100-000 in place while gpu-h100-001 hangs")
        fast, slow = node_labels(dc, "gpu-h100-000"), node_labels(dc, "gpu-h100-001")
        assert fast["nvidia.com/device-plugin.config"] == key
        assert slow["nvidia.com/mig.config.state"] == "pending"
        assert slow["nvidia.com/device-plugin.config"] != key, "the slow node's device plugin step came too early"
        assert proc.poll() is None, "the batch ended with a node still pending"
        if ending == "killed":
            kill_playbook(proc)
    except BaseException:
        kill_playbook(proc)
        raise
    finally:
        dc.clear_knobs()
    if ending == "killed":
        mark = dc.audit.mark()
        out, stats, dummy = _play(dc, one_batch)
        assert stats["failures"] == 0, _failure(out)
        writes = dc.audit.writes(mark)
        assert _node_writes(writes, "gpu-h100-000") == [], "the node done before the kill was written again"
        assert _node_writes(writes, "gpu-h100-001"), "the slow node's device plugin step was never sent"
    else:
        stdout, stderr = proc.communicate(timeout=120)
        out = json.loads(stdout)
        assert out["stats"]["localhost"]["failures"] == 0, _failure(out)
        batches = [name for name, dummy in _results(out) if "Roll out pool llm-h100" in name]
        assert len(batches) == 1 and "gpu-h100-000, gpu-h100-001" in batches[0], batches
    for node in ("gpu-h100-000", "gpu-h100-001"):
        assert gpu_allocatable(dc)[node] == EXPECTED[node], node
        assert node_labels(dc, node)["nvidia.com/device-plugin.config"] == key
    if ending == "killed":
        mark = dc.audit.mark()
        out, stats, dummy = _play(dc, one_batch)
        assert stats["changed"] == 0 and dc.audit.writes(mark) == [], _failure(out)


def test_a_node_starts_as_soon_as_a_slot_is_free_not_when_its_batch_is_done(operator):
    """max_unavailable 2 over three MIG nodes, one of them hanging: the third node (the second batch) starts as soon
    as the fast node of the first batch is done, while the slow one is still pending (a sliding window, as a
    DaemonSet's rolling update), and the run ends once the slow one is done too."""
    dc = operator
    _converge(dc, SINGLE)
    wide = [dict(POOLS[0], max_unavailable=2, sharing={"strategy": "mig", "mig": {"layout": "all-balanced"}},
                 selector={"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                                 "values": ["p5.48xlarge", "p5e.48xlarge"]}]})] + POOLS[1:]
    dc.knobs({"mig-manager.hang_nodes": "gpu-h100-001"})
    run_mark = dc.audit.mark()
    proc = subprocess.Popen(["ansible-playbook", PLAYBOOK, *_vars(wide)], cwd=REPO, env=dc.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        def h200_reconfigured():
            h200, h100 = node_labels(dc, "gpu-h200-000"), node_labels(dc, "gpu-h100-000")
            return (h200.get("nvidia.com/mig.config", "").startswith("kubegpu-llm-h100-") and
                    h200.get("nvidia.com/mig.config") == h100.get("nvidia.com/mig.config") and
                    h200.get("nvidia.com/mig.config.state") == "success")
        wait_for(h200_reconfigured, timeout=120, interval=0.2,
                 what="gpu-h200-000 (batch 2) reconfigured while gpu-h100-001 hangs")
        assert node_labels(dc, "gpu-h100-001")["nvidia.com/mig.config.state"] == "pending", (
            node_labels(dc, "gpu-h100-001"), node_labels(dc, "gpu-h200-000"))
        assert node_labels(dc, "gpu-h100-000")["nvidia.com/mig.config.state"] == "success"
        assert proc.poll() is None, "the run ended with a node still pending"
    except BaseException:
        kill_playbook(proc)
        raise
    finally:
        dc.clear_knobs()
    stdout, stderr = proc.communicate(timeout=120)
    out = json.loads(stdout)
    assert out["stats"]["localhost"]["failures"] == 0, _failure(out)
    batches = [(name, r) for name, r in _results(out) if "Roll out pool llm-h100" in name]
    assert len(batches) == 2 and "batch 1/2 (gpu-h100-000, gpu-h100-001)" in batches[0][0], batches
    assert "batch 2/2 (gpu-h200-000)" in batches[1][0], batches
    # The waits watched the nodes (cluster/watch.py): each of the run's module calls read the fleet a few times,
    # not once a second of the seconds the hanging node held the run up.
    reads = [e for e in dc.audit.events(run_mark) if e.resource == "nodes" and not e.name and e.verb in ("list", "watch")]
    assert [e for e in reads if e.verb == "watch" and e.code == 200], [str(e) for e in reads]
    assert len([e for e in reads if e.verb == "list"]) <= 12, [str(e) for e in reads]
    # The first batch's task handed its nodes on once started; the last one carried them on and waited for every
    # node (gpu-h100-000 may have been done before it began: then it is not in its result).
    first, last = (r["rollout"]["llm-h100"] for dummy, r in batches)
    assert {n: v["state"] for n, v in first.items()} == {"gpu-h100-000": "started", "gpu-h100-001": "started"}, first
    assert {"gpu-h100-001", "gpu-h200-000"} <= set(last) and {v["state"] for v in last.values()} == {"done"}, last
    for node in ("gpu-h100-000", "gpu-h100-001", "gpu-h200-000"):
        assert node_labels(dc, node)["nvidia.com/mig.config"] == node_labels(dc, "gpu-h100-000")["nvidia.com/mig.config"]
    # The last batch took every node left to its end: it finished the roll-out (the config of the pool's old layout
    # dropped), and the role made no finishing call after it.
    assert batches[1][1]["finished"] is True and batches[0][1]["finished"] is False, batches
    assert [name for name, dummy in _results(out) if name.startswith("Finish")] == [], _results(out)
    mig_configs = [cm for cm in dc.admin.resources.get(api_version="v1", kind="ConfigMap").get().to_dict()["items"]
                   if cm["metadata"]["name"] == "kubegpu-mig-parted-config"]
    assert len(mig_configs) == 1, mig_configs
    h100_configs = [k for k in mig_configs[0]["data"]["config.yaml"].split() if k.startswith("kubegpu-llm-h100-")]
    assert h100_configs == [node_labels(dc, "gpu-h100-000")["nvidia.com/mig.config"] + ":"], h100_configs
    mark = dc.audit.mark()
    out, stats, dummy = _play(dc, wide)
    assert stats["changed"] == 0 and dc.audit.writes(mark) == [], _failure(out)
    _converge(dc)                                   # gpu-h200-000 leaves the pool again (released)
    # Released one node at a time through the same window: its last step (pool label, device plugin config) too.
    h200 = node_labels(dc, "gpu-h200-000")
    assert "kubegpu.io/node-pool" not in h200 and "nvidia.com/device-plugin.config" not in h200, h200
    assert h200["nvidia.com/mig.config"] == "all-disabled", h200


NO_WATCH_USER = "kubegpu-no-watch"
RBAC = "rbac.authorization.k8s.io/v1"


def _account_without_watch(dc):
    """A user allowed every verb on everything but `watch` (a hand-written role, or rules granted before the waits
    watched), and a kubeconfig of it. Returns (kubeconfig, [(api_version, kind, name)] to delete)."""
    pki = dc.state / "pki"
    certs.CertificateAuthority(pki).issue("no-watch", NO_WATCH_USER)
    verbs = ["get", "list", "create", "update", "patch", "delete", "deletecollection"]
    role = {"metadata": {"name": NO_WATCH_USER}, "rules": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": verbs}, {"nonResourceURLs": ["*"], "verbs": ["get"]}]}
    binding = {"metadata": {"name": NO_WATCH_USER},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NO_WATCH_USER},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NO_WATCH_USER}]}
    objects = [(RBAC, "ClusterRole", role), (RBAC, "ClusterRoleBinding", binding)]
    for api_version, kind, body in objects:
        dc.admin.resources.get(api_version=api_version, kind=kind).server_side_apply(
            body=dict(body, apiVersion=api_version, kind=kind), field_manager="tests", force_conflicts=True)
    server = yaml.safe_load(dc.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    kubeconfig = cert_kubeconfig(dc.state / "kubeconfig-no-watch", server, pki, "no-watch")
    return kubeconfig, [(api_version, kind, body["metadata"]["name"]) for api_version, kind, body in objects]


def test_an_account_without_watch_rolls_out_by_listing(operator):
    """The roll-out's waits watch the nodes and the operand DaemonSets (cluster/watch.py). An account whose rules lack
    `watch` gets 403 for it: the waits go back to one list a poll and the run converges as before, with no error and
    no warning to act on; the second run writes nothing."""
    dc = operator
    _converge(dc)
    kubeconfig, created = _account_without_watch(dc)
    env = {"K8S_AUTH_KUBECONFIG": str(kubeconfig)}
    try:
        mark = dc.audit.mark()
        proc = dc.playbook(PLAYBOOK, *_vars(SINGLE), env=env)
        out = json.loads(proc.stdout)
        assert out["stats"]["localhost"]["failures"] == 0, _failure(out)
        events = dc.audit.events(mark, user=NO_WATCH_USER)
        again_mark = dc.audit.mark()
        proc = dc.playbook(PLAYBOOK, *_vars(SINGLE), env=env)
        again = json.loads(proc.stdout)["stats"]["localhost"]
    finally:
        for api_version, kind, name in created:
            dc.admin.resources.get(api_version=api_version, kind=kind).delete(name=name)
    # Every watch was refused, and each wait read by listing instead: the nodes more than once a module call.
    watches = [e for e in events if e.verb == "watch"]
    node_lists = [e for e in events if e.resource == "nodes" and e.verb == "list"]
    print(f"\nwithout watch: {len(watches)} watches refused, {len(node_lists)} node lists, {len(events)} requests")
    assert watches and {e.code for e in watches} == {403}, [str(e) for e in watches]
    assert {e.resource for e in watches} >= {"nodes"}, [str(e) for e in watches]
    calls = [name for name, dummy in _results(out)]
    assert len(node_lists) > 2 * len(calls), (len(node_lists), calls)
    assert not [e for e in events if e.code == 403 and e.verb != "watch"], [str(e) for e in events if e.code == 403]
    # Converged as the admin's run would have: every H100 node on the single layout, allocatable as planned.
    for name in ("gpu-h100-000", "gpu-h100-001"):
        assert node_labels(dc, name)["nvidia.com/mig.config.state"] == "success"
        assert node_labels(dc, name)["nvidia.com/mig.config"].startswith("kubegpu-llm-h100-")
    assert again["changed"] == 0 and dc.audit.writes(again_mark, user=NO_WATCH_USER) == []
    _converge(dc)


def test_without_a_wait_each_node_is_one_patch(operator):
    """wait: false - nothing comes between a node's MIG and device plugin steps, so they are one patch a node; the
    hardware then catches up on its own and the next run waits for it and writes nothing more to the nodes."""
    dc = operator
    _converge(dc, SINGLE)
    key = _mixed_key(dc)
    # Check mode shows the same plan: one change per node (both steps in it), and writes nothing.
    mark = dc.audit.mark()
    result = dc.module("gpu_node_pools", {"pools": POOLS, "wait": False}, check=True)
    assert not result.get("failed") and result["changed"], result.get("msg")
    nodes = [c["key"] for c in result["changes"] if c["key"].startswith("Node/gpu-h100-")]
    assert sorted(nodes) == ["Node/gpu-h100-000", "Node/gpu-h100-001"], result["changes"]
    assert dc.audit.writes(mark) == []
    mark = dc.audit.mark()
    result = dc.module("gpu_node_pools", {"pools": POOLS, "wait": False})
    assert not result.get("failed"), result.get("msg")
    writes = dc.audit.writes(mark)
    for node in ("gpu-h100-000", "gpu-h100-001"):
        patches = _node_writes(writes, node)
        assert len(patches) == 1, [str(e) for e in patches]
        labels = node_labels(dc, node)
        assert labels["nvidia.com/device-plugin.config"] == key
    mark = dc.audit.mark()
    out = _converge(dc)
    assert not [e for e in dc.audit.writes(mark) if e.resource == "nodes"]
    for node in ("gpu-h100-000", "gpu-h100-001"):
        assert gpu_allocatable(dc)[node] == EXPECTED[node], node


# ---------------------------------------------------------------------------------------------
# Runs killed midway through a single -> mixed MIG change; the next run converges
# ---------------------------------------------------------------------------------------------

def _start(dc, pools, **extra):
    return dc.start_playbook(PLAYBOOK, *_vars(pools, **extra))


def _dp_data(dc):
    cms = dc.admin.resources.get(api_version="v1", kind="ConfigMap")
    for c in cms.get().items:
        if c.metadata.name == "kubegpu-device-plugin-config":
            return c.data.to_dict() if c.data else {}
    return {}


def _node(dc, name):
    return dc.admin.resources.get(api_version="v1", kind="Node").get(name=name)


def _mixed_key(dc):
    """The device-plugin key of llm-h100 with the MIXED layout, from a check-mode plan."""
    out = _play(dc, POOLS, "--check")[0]
    return _results(out)[0][1]["plan"]["pools"][0]["device_plugin_config"]


KILL_POINTS = ["after-configmaps", "mig-pending", "between-mig-and-device-plugin", "cordoned-by-drain",
               "device-plugin-step"]


@pytest.mark.parametrize("point", KILL_POINTS)
def test_run_killed_midway_is_converged_by_the_next(operator, point):
    dc = operator
    _converge(dc, SINGLE)
    key = _mixed_key(dc)
    extra = {}
    if point in ("mig-pending", "between-mig-and-device-plugin"):
        dc.knobs({"mig-manager.hang_nodes": "gpu-h100-000"})
    elif point == "cordoned-by-drain":
        dc.knobs({"mig-manager.seconds": "8"})
        extra["node_pools_drain_gpu_pods"] = True
        dc.admin.resources.get(api_version="v1", kind="Pod").create(namespace="default", body={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vllm-kill"},
            "spec": {"nodeName": "gpu-h100-000", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "vllm", "image": "vllm/vllm-openai",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    elif point == "device-plugin-step":
        dc.knobs({"device-plugin.seconds": "8"})
    proc = _start(dc, POOLS, **extra)
    try:
        if point == "after-configmaps":
            wait_for(lambda: key in _dp_data(dc), timeout=60, interval=0.05, what="new device-plugin key")
        elif point in ("mig-pending", "between-mig-and-device-plugin"):
            wait_for(lambda: (_node(dc, "gpu-h100-000").metadata.labels or {}).get(
                "nvidia.com/mig.config.state") == "pending", timeout=60, interval=0.1, what="MIG pending")
        elif point == "cordoned-by-drain":
            wait_for(lambda: _node(dc, "gpu-h100-000").spec.unschedulable, timeout=60, interval=0.1, what="cordon")
        else:
            wait_for(lambda: (_node(dc, "gpu-h100-000").metadata.labels or {}).get(
                "nvidia.com/device-plugin.config") == key, timeout=90, interval=0.1, what="device-plugin step")
    finally:
        kill_playbook(proc)
    if point == "between-mig-and-device-plugin":
        # mig-manager finishes with nobody watching: mixed geometry read with the single strategy
        dc.clear_knobs()
        wait_for(lambda: (_node(dc, "gpu-h100-000").metadata.labels or {}).get("nvidia.com/mig.config.state") ==
                 "success", timeout=120, what="mig-manager's success")
        labels = node_labels(dc, "gpu-h100-000")
        assert labels["nvidia.com/device-plugin.config"] != key, "the killed run got past its MIG step"
        wait_for(lambda: (_node(dc, "gpu-h100-000").metadata.labels or {}).get(
            "nvidia.com/gpu.product", "").endswith("-MIG-INVALID"), timeout=120,
            what=f"GFD's MIG-INVALID labels (labels: {labels})")
        assert node_labels(dc, "gpu-h100-000")["nvidia.com/gpu.count"] == "0"
    dc.clear_knobs()
    out, stats, dummy = _play(dc, POOLS, **extra)
    assert stats["failures"] == 0, _failure(out)
    for node in ("gpu-h100-000", "gpu-h100-001"):
        assert gpu_allocatable(dc)[node] == EXPECTED[node], node
        assert not _node(dc, node).spec.unschedulable
        assert node_labels(dc, node)["nvidia.com/device-plugin.config"] == key
    mark = dc.audit.mark()
    out, stats, dummy = _play(dc, POOLS)
    assert stats["changed"] == 0 and dc.audit.writes(mark) == []


def test_batches_wait_in_rounds_with_progress_and_report_the_change(operator):
    """A MIG change slower than a round: the last batch's task is called again until every node is done, prints a
    progress line per round, and its last round still reports the change the first round made."""
    dc = operator
    _converge(dc)
    dc.knobs({"mig-manager.seconds": "4"})
    proc = dc.playbook(PLAYBOOK, *_vars(SINGLE, node_pools_wait_round=1))
    out = json.loads(proc.stdout)
    assert out["stats"]["localhost"]["failures"] == 0, _failure(out)
    rounds = [line for line in proc.stderr.splitlines() if line.startswith("[localhost] waiting ")]
    # gpu-h100-001 starts in the last batch's task, once gpu-h100-000 is done, and is pending for 4 s
    assert any("gpu-h100-001" in line and "mig.config.state" in line for line in rounds), proc.stderr[-3000:]
    [plan] = [r for name, r in _results(out) if name.endswith(POOLS_PLAN_TASK)]
    batches = [(name, r) for name, r in _results(out) if "Roll out pool llm-h100" in name]
    assert len(batches) == 2 and all(r["ready"] for dummy, r in batches), [
        (name, r["changed"], r["ready"], r["attempts"]) for name, r in batches]
    (first_name, first), (last_name, last) = batches
    # The planning call starts the first batch (start_first_batch) and returns once its node has started; the first
    # batch's task finds it started and hands it on without a write; the last one is called again until every node
    # is done, and its last round reports them all (one that finished while its next round started among them).
    # On a loaded machine the node's 4 s MIG change may end before the first batch's task looks: that task then
    # sends the node's device plugin step (its one write there) instead of handing it on untouched.
    assert plan["rollout"]["llm-h100"]["gpu-h100-000"]["state"] == "started", plan["rollout"]
    assert first["rollout"]["llm-h100"]["gpu-h100-000"]["state"] in ("started", "done"), first["rollout"]
    assert [c["key"] for c in first["changes"]] in ([], ["Node/gpu-h100-000"]), first["changes"]
    assert last["attempts"] > 1 and last["rollout"]["llm-h100"]["gpu-h100-001"]["state"] == "done", last["rollout"]
    for node, result in (("gpu-h100-000", plan), ("gpu-h100-001", last)):
        # The node's label patch is the call's that started it; the last task may first have sent the device plugin
        # step of the node it carried on.
        assert "Node/" + node in [c["key"] for c in result["changes"]], (node, result["changes"])
        # Every round's progress lines are kept, the node's among them.
        assert any(node in line for line in result["progress"]["lines"]), result["progress"]
    nodes = {n.metadata.name: n for n in dc.admin.resources.get(api_version="v1", kind="Node").get().items}
    assert not any(nodes[n].spec.unschedulable for n in ("gpu-h100-000", "gpu-h100-001"))
    dc.clear_knobs()
    _converge(dc)
