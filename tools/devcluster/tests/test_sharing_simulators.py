"""The mig-manager and device-plugin simulators follow shared/reference (MIG, time-slicing) and can fail on demand.

One GPU Operator (a Helm-style Deployment) and one ClusterPolicy serve the whole module; each test uses nodes
of the default fleet that no other test here touches, or puts back what it changed. The fleet is reloaded
before and after the module, so later tests see the nodes as the fleet file describes them.
"""
from __future__ import annotations

import copy
import os
import signal
import time
import uuid
from dataclasses import dataclass

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError

from kubegpu_devcluster.testing import wait_for
from kubegpu_devcluster.cluster import read_state, simulator_user
from kubegpu_devcluster.simulators.__main__ import process_groups
from kubegpu_devcluster.simulators.framework import Copy
from kubegpu_devcluster.simulators.mig_manager import MigManagerSimulator

CP = "nvidia.com/v1"
RESTARTED = "kubectl.kubernetes.io/restartedAt"
PAUSED = "paused-for-mig-change"
PAUSABLE = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "client")

# mig-parted document in the style of default-mig-parted-config: device filters per GPU family.
H100_A100_80GB = ["0x233010DE", "0x20B210DE"]
H200 = ["0x233510DE"]
MIG_CONFIG = {"version": "v1", "mig-configs": {
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
    "all-balanced": [
        {"device-filter": H100_A100_80GB, "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
        {"device-filter": H200, "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}}],
    "all-3g.40gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}],
    # Half the GPUs split, half whole: mixed strategy advertises both kinds.
    "half-7g-half-1g": [
        {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"devices": [4, 5, 6, 7], "mig-enabled": False}],
    "too-many-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 3}}],
    "3g-3g-1g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2, "1g.10gb": 1}}],
    "a100-40gb-only": [{"device-filter": "0x20B010DE", "devices": "all", "mig-enabled": True,
                        "mig-devices": {"1g.5gb": 7}}],
}}


def _time_slicing(replicas: int, rename_by_default: bool = False, kind: str = "timeSlicing") -> str:
    block = {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}
    if rename_by_default:
        block["renameByDefault"] = True
    # NVIDIA's plugin does not start with MPS under mixed (validateFlags): an MPS config says none, as the collection's.
    strategy = "none" if kind == "mps" else "mixed"
    return yaml.safe_dump({"version": "v1", "flags": {"migStrategy": strategy}, "sharing": {kind: block}})


PLUGIN_CONFIG = {
    "ts-4": _time_slicing(4),
    "ts-edit": _time_slicing(4),
    "ts-rename": _time_slicing(4, rename_by_default=True),
    "mps-4": _time_slicing(4, kind="mps"),
    "single": yaml.safe_dump({"version": "v1", "flags": {"migStrategy": "single"}}),
}


@dataclass
class Operator:
    namespace: str        # the operator namespace: ClusterPolicy status.namespace
    policy: str
    mig_config: str
    plugin_config: str


def _api(dc, kind, api_version="v1"):
    return dc.admin.resources.get(api_version=api_version, kind=kind)


def _reload_fleet(dc) -> None:
    dc.fleet_file = None   # force: the nodes come back exactly as the fleet file has them
    dc.fleet("default")


def _node(dc, name):
    return _api(dc, "Node").get(name=name).to_dict()


def _labels(dc, name) -> dict:
    return _node(dc, name)["metadata"].get("labels") or {}


def _allocatable(dc, name) -> dict:
    status = _node(dc, name)["status"]
    assert {k: v for k, v in status["capacity"].items() if k.startswith("nvidia.com/")} == \
        {k: v for k, v in status["allocatable"].items() if k.startswith("nvidia.com/")}
    return {k: int(v) for k, v in status["allocatable"].items() if k.startswith("nvidia.com/")}


def _label(dc, node, key, value) -> None:
    _api(dc, "Node").patch(name=node, body={"metadata": {"labels": {key: value}}},
                           content_type="application/merge-patch+json")


def _mig_state(dc, node):
    return _labels(dc, node).get("nvidia.com/mig.config.state")


def _set_mig(dc, node, config, state="success", timeout=120):
    _label(dc, node, "nvidia.com/mig.config", config)
    if state:
        wait_for(lambda: _mig_state(dc, node) == state, timeout=timeout, what=f"{node}: mig.config.state={state}")


def _restore_mig(dc, node):
    _set_mig(dc, node, "all-disabled")
    wait_for(lambda: _allocatable(dc, node).get("nvidia.com/gpu") == 8, what=f"{node}: 8 whole GPUs again")


def _paused(labels) -> dict:
    return {o: labels.get(f"nvidia.com/gpu.deploy.{o}") for o in PAUSABLE + ("nvsm",)}


def _restart_plugin(dc, op) -> None:
    """kubectl rollout restart ds/nvidia-device-plugin-daemonset."""
    _api(dc, "DaemonSet", "apps/v1").patch(
        name="nvidia-device-plugin-daemonset", namespace=op.namespace,
        body={"spec": {"template": {"metadata": {"annotations": {RESTARTED: str(time.time())}}}}},
        content_type="application/merge-patch+json")


def _configmap(name, namespace, data) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


@pytest.fixture(scope="module", name="operator")
def operator_fixture(devcluster_session):
    dc = devcluster_session
    dc.clear_knobs()
    _reload_fleet(dc)
    policies = _api(dc, "ClusterPolicy", CP)
    for cp in policies.get().items:   # only the oldest policy is reconciled
        policies.delete(name=cp.metadata.name)
    suffix = uuid.uuid4().hex[:6]
    helm_ns = f"gpu-operator-{suffix}"
    _api(dc, "Namespace").create(body={"metadata": {"name": helm_ns}})
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "gpu-operator", "labels": {"app.kubernetes.io/component": "gpu-operator"}},
              "spec": {"selector": {"matchLabels": {"app": "gpu-operator"}},
                       "template": {"metadata": {"labels": {"app": "gpu-operator"}},
                                    "spec": {"containers": [{"name": "gpu-operator", "image": "sim"}]}}}}
    _api(dc, "Deployment", "apps/v1").create(body=deploy, namespace=helm_ns)
    op = Operator("", f"sharing-{suffix}", f"mig-parted-{suffix}", f"plugin-config-{suffix}")
    spec = {"operator": {}, "daemonsets": {}, "driver": {}, "toolkit": {}, "devicePlugin": {}, "dcgm": {},
            "dcgmExporter": {}, "gfd": {}, "nodeStatusExporter": {}, "mig": {"strategy": "mixed"}}
    policies.create(body={"apiVersion": CP, "kind": "ClusterPolicy", "metadata": {"name": op.policy}, "spec": spec})
    # The namespace is the CSV's when an earlier test left a Succeeded gpu-operator-certified CSV, else ours.
    op.namespace = wait_for(lambda: (policies.get(name=op.policy).status or {}).get("namespace"),
                            what="ClusterPolicy status.namespace")
    cms = _api(dc, "ConfigMap")
    cms.create(body=_configmap(op.mig_config, op.namespace, {"config.yaml": yaml.safe_dump(MIG_CONFIG)}),
               namespace=op.namespace)
    cms.create(body=_configmap(op.plugin_config, op.namespace, PLUGIN_CONFIG), namespace=op.namespace)
    policies.patch(name=op.policy, content_type="application/merge-patch+json", body={"spec": {
        "migManager": {"config": {"name": op.mig_config}},
        "devicePlugin": {"config": {"name": op.plugin_config, "default": ""}}}})
    wait_for(lambda: (policies.get(name=op.policy).status or {}).get("state") == "ready", what="policy ready")
    yield op
    dc.clear_knobs()
    policies.delete(name=op.policy)
    wait_for(lambda: not _api(dc, "DaemonSet", "apps/v1").get(label_selector="app.kubernetes.io/managed-by=gpu-operator").items,
             what="operands deleted with their ClusterPolicy")
    for name in (op.mig_config, op.plugin_config):
        try:
            cms.delete(name=name, namespace=op.namespace)
        except NotFoundError:
            pass
    _api(dc, "Deployment", "apps/v1").delete(name="gpu-operator", namespace=helm_ns)
    _api(dc, "Namespace").delete(name=helm_ns)
    _reload_fleet(dc)


def test_operator_keeps_operand_daemonsets(dc, operator):
    mark = dc.audit.mark()
    ds_api = _api(dc, "DaemonSet", "apps/v1")
    for name in ("nvidia-device-plugin-daemonset", "nvidia-mig-manager"):
        ds = ds_api.get(name=name, namespace=operator.namespace)
        assert [(r.kind, r.name) for r in ds.metadata.ownerReferences] == [("ClusterPolicy", operator.policy)]
    # The policy's config names reach the pod templates (what the pods would mount).
    plugin = ds_api.get(name="nvidia-device-plugin-daemonset", namespace=operator.namespace).to_dict()
    volumes = plugin["spec"]["template"]["spec"]["volumes"]
    assert [v["configMap"]["name"] for v in volumes] == [operator.plugin_config]
    # A deleted operand comes back, created by the operator's own user.
    ds_api.delete(name="nvidia-mig-manager", namespace=operator.namespace)
    wait_for(lambda: ds_api.get(field_selector="metadata.name=nvidia-mig-manager",
                                namespace=operator.namespace).items, what="mig-manager DaemonSet recreated")
    creates = [e for e in dc.audit.writes(mark, user=None) if e.resource == "daemonsets" and e.verb == "create"]
    assert [(e.name, e.user) for e in creates] == [("nvidia-mig-manager", simulator_user("gpu-operator"))]


@pytest.mark.usefixtures("operator")
def test_mixed_mig_layout_pending_then_success(dc):
    """all-balanced on 8xH100 under mixed: pending with operands paused, success, then allocatable catches up."""
    node = "gpu-h100-000"
    dc.knobs({"mig-manager.seconds": "3", "device-plugin.seconds": "1"})
    before = _labels(dc, node)
    assert before.get("nvidia.com/gpu.deploy.nvsm") is None
    _set_mig(dc, node, "all-balanced", state="pending")
    labels = _labels(dc, node)
    assert _paused(labels) == {o: PAUSED for o in PAUSABLE} | {"nvsm": None}
    assert labels["nvidia.com/gpu.deploy.driver"] == "true"     # only GPU clients are paused
    wait_for(lambda: _allocatable(dc, node) == {"nvidia.com/gpu": 0}, what="0 GPUs while pending")
    wait_for(lambda: _mig_state(dc, node) != "pending", interval=0.05, what="end of pending")
    # success comes BEFORE the device plugin has re-registered (reference, Timing)
    assert _mig_state(dc, node) == "success"
    assert _allocatable(dc, node) == {"nvidia.com/gpu": 0}
    assert _paused(_labels(dc, node)) == {o: "true" for o in PAUSABLE} | {"nvsm": None}
    wait_for(lambda: _allocatable(dc, node) == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 16,
                                                "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-3g.40gb": 8},
             what="MIG resources advertised")
    labels = _labels(dc, node)
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.replicas"]) == ("8", "0")
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/mig-1g.10gb.count"] == "16"
    assert labels["nvidia.com/mig-3g.40gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"
    annotations = _node(dc, node)["metadata"]["annotations"]
    assert annotations["devcluster.kubegpu.io/mig-applied"] == "all-balanced"
    # Half split, half whole: both kinds of resource; profiles no longer there stay at 0.
    dc.knobs({"mig-manager.seconds": "0.2", "device-plugin.seconds": "0.2"})
    _set_mig(dc, node, "half-7g-half-1g")
    wait_for(lambda: _allocatable(dc, node) == {"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 28,
                                                "nvidia.com/mig-2g.20gb": 0, "nvidia.com/mig-3g.40gb": 0},
             what="half split")
    labels = _labels(dc, node)
    assert "nvidia.com/mig-2g.20gb.count" not in labels
    assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.replicas"]) == ("8", "1")
    _restore_mig(dc, node)
    assert {k for k in _labels(dc, node) if k.startswith("nvidia.com/mig-")} == set()


@pytest.mark.parametrize("config, reason", [("too-many-3g", "count above the profile's maximum"),
                                            ("3g-3g-1g", "9 of 8 memory slices"),
                                            ("a100-40gb-only", "device filter of another GPU")])
@pytest.mark.usefixtures("operator")
def test_impossible_geometry_fails(dc, config, reason):
    node = "gpu-h100-001"
    dc.knobs({"mig-manager.seconds": "0.3"})
    _set_mig(dc, node, config, state="pending")
    wait_for(lambda: _mig_state(dc, node) == "failed", what=f"failed ({reason})")
    node_obj = _node(dc, node)
    assert _paused(node_obj["metadata"]["labels"]) == {o: "true" for o in PAUSABLE} | {"nvsm": None}
    assert "devcluster.kubegpu.io/mig-applied" not in (node_obj["metadata"].get("annotations") or {})
    time.sleep(1)   # a failed label is not retried until it changes
    assert _mig_state(dc, node) == "failed"
    assert _allocatable(dc, node) == {"nvidia.com/gpu": 8}
    _restore_mig(dc, node)


def _children(pid: int) -> set:
    """The live child processes of `pid` (from /proc: zombies left out)."""
    found = set()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[1]) == pid:
            found.add(int(entry))
    return found


def _all_processes(pids: set):
    """pids when there are as many as the simulators have processes, else None (wait_for looks again)."""
    return pids if len(pids) == len(process_groups()) else None


@pytest.mark.usefixtures("operator")
def test_simulator_processes_that_end_are_started_again(dc):
    """mig-manager and the device plugin run in processes of their own, the other simulators in a third, under one
    parent (simulators/__main__.py). Killed, each is started again, and a MIG change then goes through as before."""
    parent = read_state(dc.state)["pids"]["simulators"]
    before = wait_for(lambda: _all_processes(_children(parent)), what="every simulator process")
    for pid in before:
        os.kill(pid, signal.SIGKILL)
    after = wait_for(lambda: _all_processes(_children(parent) - before), what="every simulator process, new")
    assert len(after) == len(before) == 3
    node = "gpu-h100-001"
    _set_mig(dc, node, "all-balanced")
    wait_for(lambda: _allocatable(dc, node).get("nvidia.com/gpu") != 8, what=f"{node}: MIG devices advertised")
    _restore_mig(dc, node)


@pytest.mark.usefixtures("operator")
def test_unknown_mig_config_fails_at_once(dc):
    """The config name is checked before anything is paused (mig-parted assert --valid-config)."""
    node = "gpu-h100-001"
    mark = dc.audit.mark()
    _set_mig(dc, node, "no-such-config", state="failed")
    states = [e for e in dc.audit.writes(mark, user=simulator_user("mig-manager")) if e.name == node]
    assert len(states) == 1
    assert _paused(_labels(dc, node)) == {o: "true" for o in PAUSABLE} | {"nvsm": None}
    _restore_mig(dc, node)


def test_a_label_met_before_the_new_template_is_read_with_it(dc, operator):
    """The Node and DaemonSet watches deliver side by side: a label written right after the operator's new pod
    template (gpu_node_pools waits for it) can reach the mig-manager before the template does. The simulated pods
    restart at the template change, so the label is read with the new template, not failed with the old one."""
    ds = _api(dc, "DaemonSet", "apps/v1").get(name="nvidia-mig-manager", namespace=operator.namespace).to_dict()
    older = copy.deepcopy(ds)   # the template before the ClusterPolicy pointed at the ConfigMap: generated configs
    older["metadata"]["resourceVersion"] = "1"
    older["spec"]["template"]["spec"]["volumes"] = []
    sim = MigManagerSimulator(str(dc.kubeconfig))   # not running: its reconciles are called here, one by one
    sim.reconcile("DaemonSet", ("DaemonSet", operator.namespace, "nvidia-mig-manager"), Copy(older))
    sim._queue.clear()
    sim._queued.clear()
    node = _node(dc, "gpu-h100-001")
    node["metadata"]["labels"]["nvidia.com/mig.config"] = "3g-3g-1g"   # only in the ConfigMap the new pods mount
    mark = dc.audit.mark()
    sim.reconcile("Node", ("Node", None, "gpu-h100-001"), Copy(node))
    assert dc.audit.writes(mark) == []   # the simulator here writes as the administrator: no `failed` state
    assert "3g-3g-1g" not in sim._failed.values()
    assert ("Node", None, "gpu-h100-001") in sim._queued   # looked at again, with the new template


@pytest.mark.usefixtures("operator")
def test_mig_manager_fail_and_hang_knobs(dc):
    failing, hanging = "gpu-a100-000", "gpu-h200-000"
    dc.knobs({"mig-manager.seconds": "0.3", "mig-manager.fail_nodes": f"other,{failing}",
              "mig-manager.hang_nodes": hanging})
    _set_mig(dc, failing, "all-balanced", state="failed")
    assert _allocatable(dc, failing) == {"nvidia.com/gpu": 8}
    _set_mig(dc, hanging, "all-balanced", state="pending")
    wait_for(lambda: _allocatable(dc, hanging) == {"nvidia.com/gpu": 0}, what="0 GPUs while stuck")
    time.sleep(1.5)   # gpu-operator#2833: pending forever, operands paused, nothing advertised
    labels = _labels(dc, hanging)
    assert labels["nvidia.com/mig.config.state"] == "pending"
    assert _paused(labels) == {o: PAUSED for o in PAUSABLE} | {"nvsm": None}
    dc.knobs({"mig-manager.seconds": "0.3"})   # the trap released
    wait_for(lambda: _mig_state(dc, hanging) == "success", what="success once released")
    wait_for(lambda: _allocatable(dc, hanging) == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.18gb": 16,
                                                   "nvidia.com/mig-2g.35gb": 8, "nvidia.com/mig-3g.71gb": 8},
             what="H200 balanced resources")
    _restore_mig(dc, hanging)
    _restore_mig(dc, failing)


@pytest.mark.usefixtures("operator")
def test_single_strategy_per_node_config(dc):
    """flags.migStrategy in a per-node plugin config (gpu-operator#704): single with one profile, then INVALID."""
    node = "gpu-h100-001"
    dc.knobs({"mig-manager.seconds": "0.2", "device-plugin.seconds": "0.2"})
    _label(dc, node, "nvidia.com/device-plugin.config", "single")
    try:
        _set_mig(dc, node, "all-3g.40gb")
        wait_for(lambda: _allocatable(dc, node) == {"nvidia.com/gpu": 16}, what="16 MIG devices as nvidia.com/gpu")
        labels = _labels(dc, node)
        assert labels["nvidia.com/mig.strategy"] == "single"
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"
        assert labels["nvidia.com/gpu.count"] == "16"
        _set_mig(dc, node, "all-balanced")
        wait_for(lambda: _labels(dc, node)["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-INVALID",
                 what="mixed profiles under single: INVALID")
        labels = _labels(dc, node)
        assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.replicas"]) == ("0", "0")
        # GFD's labels and the device plugin's allocatable are two writes of two simulators: the second may follow.
        wait_for(lambda: _allocatable(dc, node) == {"nvidia.com/gpu": 0}, what="no device under INVALID")
    finally:
        _label(dc, node, "nvidia.com/device-plugin.config", None)
        _restore_mig(dc, node)
    labels = _labels(dc, node)
    assert (labels["nvidia.com/gpu.product"], labels["nvidia.com/gpu.count"]) == ("NVIDIA-H100-80GB-HBM3", "8")
    assert labels["nvidia.com/mig.strategy"] == "mixed"


def _sharing(dc, node) -> tuple:
    labels = _labels(dc, node)
    return (labels["nvidia.com/gpu.product"], labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.replicas"],
            labels["nvidia.com/gpu.sharing-strategy"])


@pytest.mark.usefixtures("operator")
def test_time_slicing_and_unknown_key(dc):
    node = "gpu-l40s-000"
    dc.knobs({"device-plugin.seconds": "0.2"})
    assert _allocatable(dc, node) == {"nvidia.com/gpu": 4}
    _label(dc, node, "nvidia.com/device-plugin.config", "ts-4")
    try:
        wait_for(lambda: _allocatable(dc, node) == {"nvidia.com/gpu": 16}, what="4 GPUs x 4 replicas")
        assert _sharing(dc, node) == ("NVIDIA-L40S-SHARED", "4", "4", "time-slicing")
        assert _labels(dc, node)["nvidia.com/mps.capable"] == "false"
        _label(dc, node, "nvidia.com/device-plugin.config", "no-such-key")   # skipped: what runs stays
        time.sleep(1)
        assert _allocatable(dc, node) == {"nvidia.com/gpu": 16}
        _label(dc, node, "nvidia.com/device-plugin.config", "mps-4")
        wait_for(lambda: _sharing(dc, node)[3] == "mps", what="MPS")
        assert _labels(dc, node)["nvidia.com/mps.capable"] == "true"
        assert _allocatable(dc, node) == {"nvidia.com/gpu": 16}
    finally:
        _label(dc, node, "nvidia.com/device-plugin.config", None)
    wait_for(lambda: _allocatable(dc, node) == {"nvidia.com/gpu": 4}, what="back to 4 whole GPUs")
    assert _sharing(dc, node) == ("NVIDIA-L40S", "4", "1", "none")


@pytest.mark.usefixtures("operator")
def test_rename_by_default(dc):
    node = "gpu-l40s-001"
    dc.knobs({"device-plugin.seconds": "0.2"})
    _label(dc, node, "nvidia.com/device-plugin.config", "ts-rename")
    try:
        wait_for(lambda: _allocatable(dc, node) == {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 16},
                 what="nvidia.com/gpu.shared 16")
        assert _sharing(dc, node) == ("NVIDIA-L40S", "4", "4", "time-slicing")
    finally:
        _label(dc, node, "nvidia.com/device-plugin.config", None)
    wait_for(lambda: _allocatable(dc, node) == {"nvidia.com/gpu": 4, "nvidia.com/gpu.shared": 0},
             what="whole GPUs again, the shared resource left at 0")


def test_configmap_edit_needs_rollout_restart(dc, operator):
    """gpu-operator#1144: the plugin reads its ConfigMap when it starts; edits wait for a rollout restart."""
    node = "gpu-l40s-001"
    dc.knobs({"device-plugin.seconds": "0.2"})
    cms = _api(dc, "ConfigMap")
    _label(dc, node, "nvidia.com/device-plugin.config", "ts-edit")
    try:
        wait_for(lambda: _allocatable(dc, node).get("nvidia.com/gpu") == 16, what="4 replicas")
        cms.patch(name=operator.plugin_config, namespace=operator.namespace,
                  body={"data": {"ts-edit": _time_slicing(8)}}, content_type="application/merge-patch+json")
        time.sleep(1.5)
        assert _allocatable(dc, node).get("nvidia.com/gpu") == 16
        assert _labels(dc, node)["nvidia.com/gpu.replicas"] == "4"
        _restart_plugin(dc, operator)
        wait_for(lambda: _allocatable(dc, node).get("nvidia.com/gpu") == 32, what="8 replicas after the restart")
        assert _labels(dc, node)["nvidia.com/gpu.replicas"] == "8"
    finally:
        cms.patch(name=operator.plugin_config, namespace=operator.namespace,
                  body={"data": {"ts-edit": _time_slicing(4)}}, content_type="application/merge-patch+json")
        _label(dc, node, "nvidia.com/device-plugin.config", None)
    wait_for(lambda: _allocatable(dc, node).get("nvidia.com/gpu") == 4, what="back to 4 whole GPUs")


@pytest.mark.usefixtures("operator")
def test_device_plugin_fail_knob(dc):
    node = "gpu-l40s-000"
    dc.knobs({"device-plugin.seconds": "0.2", "device-plugin.fail_nodes": node})
    wait_for(lambda: _allocatable(dc, node) == {"nvidia.com/gpu": 0}, what="nothing advertised by a crashing plugin")
    assert _allocatable(dc, "gpu-l40s-001")["nvidia.com/gpu"] == 4
    dc.knobs({"device-plugin.seconds": "0.2"})
    wait_for(lambda: _allocatable(dc, node) == {"nvidia.com/gpu": 4}, what="GPUs back once the plugin runs")
