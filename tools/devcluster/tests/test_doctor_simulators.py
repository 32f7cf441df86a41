"""What the doctor's faults look like in the simulators: the DCGM exporter operand and its ServiceMonitor, GPUs lost
(device-plugin.lost_gpus) and a container OOMKilled (KWOK stage, pod annotation devcluster.kubegpu.io/oom-kill).

One GPU Operator (a Helm-style Deployment) and one ClusterPolicy serve the module; the fleet is reloaded before and
after it.
"""
from __future__ import annotations

import uuid

import pytest

from kubegpu_devcluster.testing import wait_for

CP = "nvidia.com/v1"
EXPORTER = "nvidia-dcgm-exporter"


def _api(dc, kind, api_version="v1"):
    return dc.admin.resources.get(api_version=api_version, kind=kind)


def _reload_fleet(dc) -> None:
    dc.fleet_file = None
    dc.fleet("default")


@pytest.fixture(scope="module", name="operator_ns")
def operator_fixture(devcluster_session):
    dc = devcluster_session
    dc.clear_knobs()
    _reload_fleet(dc)
    policies = _api(dc, "ClusterPolicy", CP)
    for cp in policies.get().items:
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
    name = f"doctor-{suffix}"
    policies.create(body={"apiVersion": CP, "kind": "ClusterPolicy", "metadata": {"name": name}, "spec": {
        "operator": {}, "daemonsets": {}, "driver": {}, "toolkit": {}, "devicePlugin": {}, "dcgm": {},
        "dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": True}}, "gfd": {}, "nodeStatusExporter": {}}})
    namespace = wait_for(lambda: (policies.get(name=name).status or {}).get("namespace"), what="status.namespace")
    wait_for(lambda: (policies.get(name=name).status or {}).get("state") == "ready", what="policy ready")
    yield name, namespace
    dc.clear_knobs()
    policies.delete(name=name)
    wait_for(lambda: not _api(dc, "DaemonSet", "apps/v1").get(
        label_selector="app.kubernetes.io/managed-by=gpu-operator").items, what="operands deleted with the policy")
    wait_for(lambda: not _api(dc, "ServiceMonitor", "monitoring.coreos.com/v1").get(namespace=namespace).items,
             what="ServiceMonitor deleted with the policy")
    _api(dc, "Deployment", "apps/v1").delete(name="gpu-operator", namespace=helm_ns)
    _api(dc, "Namespace").delete(name=helm_ns)
    _reload_fleet(dc)


def _gpu_nodes(dc) -> set:
    return {n.metadata.name for n in _api(dc, "Node").get(label_selector="nvidia.com/gpu.deploy.dcgm-exporter=true").items}


def _exporter_nodes(dc, namespace) -> set:
    return {p.spec.nodeName for p in _api(dc, "Pod").get(namespace=namespace, label_selector=f"app={EXPORTER}").items
            if p.status.phase == "Running"}


def test_dcgm_exporter_daemonset_pods_and_service_monitor(dc, operator_ns):
    policy, namespace = operator_ns
    ds = _api(dc, "DaemonSet", "apps/v1").get(name=EXPORTER, namespace=namespace)
    assert ds.spec.template.spec.nodeSelector.to_dict() == {"nvidia.com/gpu.deploy.dcgm-exporter": "true"}
    assert [(r.kind, r.name) for r in ds.metadata.ownerReferences] == [("ClusterPolicy", policy)]
    # The DaemonSet controller places one pod per GPU node, KWOK runs them.
    wanted = _gpu_nodes(dc)
    assert wanted
    wait_for(lambda: _exporter_nodes(dc, namespace) == wanted, timeout=60, what="an exporter pod on every GPU node")
    monitors = _api(dc, "ServiceMonitor", "monitoring.coreos.com/v1")
    assert [m.metadata.name for m in monitors.get(namespace=namespace).items] == [EXPORTER]
    policies = _api(dc, "ClusterPolicy", CP)
    policies.patch(name=policy, content_type="application/merge-patch+json",
                   body={"spec": {"dcgmExporter": {"serviceMonitor": {"enabled": False}}}})
    wait_for(lambda: not monitors.get(namespace=namespace).items, what="ServiceMonitor removed when disabled")
    policies.patch(name=policy, content_type="application/merge-patch+json",
                   body={"spec": {"dcgmExporter": {"enabled": False}}})
    daemonsets = _api(dc, "DaemonSet", "apps/v1")
    wait_for(lambda: not daemonsets.get(field_selector=f"metadata.name={EXPORTER}", namespace=namespace).items,
             what="exporter DaemonSet removed when disabled")
    policies.patch(name=policy, content_type="application/merge-patch+json",
                   body={"spec": {"dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": True}}}})
    wait_for(lambda: monitors.get(namespace=namespace).items, what="ServiceMonitor back")


@pytest.mark.usefixtures("operator_ns")
def test_lost_gpus_knob(dc):
    node = "gpu-l40s-000"
    nodes = _api(dc, "Node")

    def state():
        n = nodes.get(name=node)
        return (n.metadata.labels.get("nvidia.com/gpu.count"), n.status.capacity.get("nvidia.com/gpu"),
                n.status.allocatable.get("nvidia.com/gpu"))

    wait_for(lambda: state() == ("4", "4", "4"), what="4 healthy L40S")
    dc.knobs({"device-plugin.lost_gpus": f"other=2,{node}=1"})
    # Capacity stays (the kubelet keeps unhealthy devices), allocatable and GFD's count drop.
    wait_for(lambda: state() == ("3", "4", "3"), what="one GPU lost")
    dc.clear_knobs()
    wait_for(lambda: state() == ("4", "4", "4"), what="the GPU back once the knob is cleared")


@pytest.mark.usefixtures("operator_ns")
def test_oom_killed_pod(dc):
    pods = _api(dc, "Pod")
    ns = "default"

    def pod(name, annotations):
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations},
                "spec": {"nodeName": "gpu-l40s-001", "containers": [{"name": "main", "image": "sim"}],
                         "tolerations": [{"operator": "Exists"}]}}

    oom = f"oom-{uuid.uuid4().hex[:6]}"
    pods.create(body=pod(oom, {"devcluster.kubegpu.io/oom-kill": "true"}), namespace=ns)

    def last():
        s = pods.get(name=oom, namespace=ns).status
        statuses = s.containerStatuses or []
        return statuses[0].to_dict() if statuses and statuses[0].restartCount else None

    status = wait_for(last, timeout=60, what=f"container OOMKilled ({oom})")
    assert status["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert status["lastState"]["terminated"]["exitCode"] == 137
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    pods.delete(name=oom, namespace=ns, grace_period_seconds=0)
    # Without the annotation a pod just runs. It gets a name of its own: kwok's delete of the first pod goes by
    # name, and a late retry of it would remove a new pod of the same name (CI met that race under load).
    plain = f"plain-{uuid.uuid4().hex[:6]}"
    pods.create(body=pod(plain, {}), namespace=ns)
    wait_for(lambda: pods.get(name=plain, namespace=ns).status.phase == "Running", what="plain pod runs")
    assert pods.get(name=plain, namespace=ns).status.containerStatuses[0].restartCount == 0
    pods.delete(name=plain, namespace=ns, grace_period_seconds=0)
