"""The simulators follow the upstream behaviour in shared/reference and can be told to fail."""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pytest

from kubegpu_devcluster.simulators.framework import Simulator, heartbeat_free, status_free
from kubegpu_devcluster.testing import (
    OLM_V1A1,
    approve_plan,
    csv_phase,
    install_plans,
    olm_subscribe,
    wait_for,
)


def test_olm_manual_install_then_next_plan_waits(dc):
    dc.fleet("default")
    ns = olm_subscribe(dc, "v26.3", starting="gpu-operator-certified.v26.3.2")
    plans = wait_for(lambda: [p for p in install_plans(dc, ns) if (p.status or {}).get("phase")], what="an InstallPlan with status")
    assert [(p.spec.clusterServiceVersionNames, p.spec.approved, p.status.phase) for p in plans] == \
        [(["gpu-operator-certified.v26.3.2"], False, "RequiresApproval")]
    approve_plan(dc, ns, plans[0])
    wait_for(lambda: csv_phase(dc, ns, "gpu-operator-certified.v26.3.2") == "Succeeded", what="CSV Succeeded")
    subs = dc.admin.resources.get(api_version=OLM_V1A1, kind="Subscription")
    # As in OLM, the Subscription records the install in a write of its own, after the CSV's phase.
    wait_for(lambda: (subs.get(name="gpu-operator-certified", namespace=ns).status or {}).get("installedCSV")
             == "gpu-operator-certified.v26.3.2", what="Subscription installedCSV")
    # As in OLM, the channel's next CSV gets its own plan at once, and it waits for approval.
    upgrade = wait_for(lambda: [p for p in install_plans(dc, ns) if not p.spec.approved], what="the upgrade plan")
    assert upgrade[0].spec.clusterServiceVersionNames == ["gpu-operator-certified.v26.3.3"]
    csv = dc.admin.resources.get(api_version=OLM_V1A1, kind="ClusterServiceVersion").get(
        name="gpu-operator-certified.v26.3.2", namespace=ns)
    examples = json.loads(csv.metadata.annotations["alm-examples"])
    assert [e["kind"] for e in examples] == ["ClusterPolicy", "NVIDIADriver"]


def test_olm_subscription_records_a_succeeded_csv_whose_write_was_lost(dc):
    """The Subscription's installedCSV follows the cluster, not one write: with that write lost (a conflict when
    the CSV succeeded; played here by taking it out), the next look at the Subscription records it again."""
    dc.fleet("default")
    ns = olm_subscribe(dc, "v26.3", starting="gpu-operator-certified.v26.3.2")
    plans = wait_for(lambda: [p for p in install_plans(dc, ns) if (p.status or {}).get("phase")], what="an InstallPlan with status")
    approve_plan(dc, ns, plans[0])
    subs = dc.admin.resources.get(api_version=OLM_V1A1, kind="Subscription")
    # Settled: the install recorded and the next CSV's plan offered.
    wait_for(lambda: (subs.get(name="gpu-operator-certified", namespace=ns).status or {}).get("currentCSV")
             == "gpu-operator-certified.v26.3.3", what="the upgrade offered")
    sub = subs.get(name="gpu-operator-certified", namespace=ns).to_dict()
    sub["status"] = dict(sub["status"], state="UpgradePending", currentCSV="gpu-operator-certified.v26.3.2")
    del sub["status"]["installedCSV"]
    subs.status.replace(body=sub, namespace=ns)
    wait_for(lambda: (subs.get(name="gpu-operator-certified", namespace=ns).status or {}).get("installedCSV")
             == "gpu-operator-certified.v26.3.2", what="installedCSV recorded again")


def test_olm_unknown_channel_and_package_fail_resolution(dc):
    dc.fleet("default")
    for channel, package, expected in (("v99", "gpu-operator-certified", "no operators found in channel v99"),
                                       ("stable", "no-such-operator", "no operators found in package no-such")):
        ns = olm_subscribe(dc, channel, package=package)

        def failed():
            sub = dc.admin.resources.get(api_version=OLM_V1A1, kind="Subscription").get(name=package, namespace=ns)
            return [c for c in ((sub.status or {}).get("conditions") or []) if c["type"] == "ResolutionFailed"]
        cond = wait_for(failed, what="ResolutionFailed")
        assert expected in cond[0]["message"]
        assert install_plans(dc, ns) == []


def test_olm_csv_failure_knob(dc):
    dc.fleet("default")
    dc.knobs({"olm.fail_csv": "nfd.4.20.0-202510211040"})
    ns = olm_subscribe(dc, "stable", approval="Automatic", package="nfd", source="redhat-operators")
    wait_for(lambda: csv_phase(dc, ns, "nfd.4.20.0-202510211040") == "Failed", what="CSV Failed")


def _policy(dc, name):
    body = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": name},
            "spec": {"operator": {}, "daemonsets": {}, "driver": {}, "toolkit": {}, "devicePlugin": {},
                     "dcgm": {}, "dcgmExporter": {}, "gfd": {}, "nodeStatusExporter": {}}}
    dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy").create(body=body)


def _state(dc, name):
    cp = dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy").get(name=name)
    return (cp.status or {}).get("state"), [c["reason"] for c in ((cp.status or {}).get("conditions") or [])]


def _stop_operators(dc):
    """Earlier tests of the session may have installed the operator (OLM or Helm style): remove it."""
    for api_version, kind, selector in (("apps/v1", "Deployment", "app.kubernetes.io/component=gpu-operator"),
                                        (OLM_V1A1, "ClusterServiceVersion", None)):
        api = dc.admin.resources.get(api_version=api_version, kind=kind)
        for item in api.get(label_selector=selector).items if selector else api.get().items:
            if kind == "Deployment" or item.metadata.name.startswith("gpu-operator-certified."):
                api.delete(name=item.metadata.name, namespace=item.metadata.namespace)


def _delete_policies(dc):
    api = dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    for cp in api.get().items:
        api.delete(name=cp.metadata.name)


def test_cluster_policy_goes_ready_only_with_operator_running(dc):
    dc.fleet("kubernetes")
    _delete_policies(dc)
    _stop_operators(dc)
    _policy(dc, "cluster-policy")
    assert _state(dc, "cluster-policy") == (None, [])      # nobody runs the operator yet
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "gpu-operator", "labels": {"app.kubernetes.io/component": "gpu-operator"}},
              "spec": {"selector": {"matchLabels": {"app": "gpu-operator"}},
                       "template": {"metadata": {"labels": {"app": "gpu-operator"}},
                                    "spec": {"containers": [{"name": "gpu-operator", "image": "sim"}]}}}}
    dc.admin.resources.get(api_version="v1", kind="Namespace").server_side_apply(
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}}, field_manager="tests")
    dc.admin.resources.get(api_version="apps/v1", kind="Deployment").create(body=deploy, namespace="gpu-operator")
    wait_for(lambda: _state(dc, "cluster-policy")[0] == "notReady", what="notReady")
    wait_for(lambda: _state(dc, "cluster-policy") == ("ready", ["Reconciled", "Reconciled"]), what="ready")
    _policy(dc, "second-policy")
    wait_for(lambda: _state(dc, "second-policy")[0] == "ignored", what="duplicate policy ignored")


def test_cluster_policy_never_ready_knob(dc):
    dc.fleet("kubernetes")
    _delete_policies(dc)
    dc.knobs({"gpu-operator.never_ready": "DriverNotReady"})
    _policy(dc, "cluster-policy")
    wait_for(lambda: _state(dc, "cluster-policy") == ("notReady", ["DriverNotReady", "DriverNotReady"]),
             what="notReady with DriverNotReady")


class _Recorder(Simulator):
    """A simulator run in the test process against the test cluster: it records what it is asked to reconcile."""
    name = "recorder"
    watches = {"Node": "v1", "DaemonSet": "apps/v1"}
    cached = frozenset({"Node"})
    status_blind = frozenset({"DaemonSet"})

    def __init__(self, kubeconfig):
        super().__init__(kubeconfig)
        self.seen = []   # (kind, name, the object's labels or annotations as reconciled)

    def reconcile(self, kind, key, obj):
        meta = obj.to_dict()["metadata"] if obj is not None else {}
        self.seen.append((kind, key[2], dict(meta.get("labels" if kind == "Node" else "annotations") or {})))


@pytest.fixture
def recorder(dc):
    sim = _Recorder(str(dc.kubeconfig))
    sim.start()
    yield sim
    sim.stop()


def _quiet(recorder, kind, name):
    """Until the recorder has gone a second without reconciling the object (its first list is done with)."""
    def still():
        before = len([s for s in recorder.seen if s[:2] == (kind, name)])
        time.sleep(1.0)
        return len([s for s in recorder.seen if s[:2] == (kind, name)]) == before > 0
    wait_for(still, what=f"the recorder done with {kind} {name}")


def test_a_node_heartbeat_is_not_reconciled_a_label_change_is_from_the_watch_copy(dc, recorder):
    """A kubelet's status post (only its conditions' heartbeat times move) wakes no reconcile: on 1,000 nodes they
    were most of the simulators' work. A label change does, and the reconcile sees it in the copy the watch
    delivered, without a GET of the node."""
    dc.fleet("default")
    nodes = dc.admin.resources.get(api_version="v1", kind="Node")
    node = nodes.get(label_selector="nvidia.com/gpu.present=true").items[0].metadata.name
    _quiet(recorder, "Node", node)
    mark = dc.audit.mark()
    before = len(recorder.seen)
    conditions = nodes.get(name=node).to_dict()["status"]["conditions"]
    for condition in conditions:
        condition["lastHeartbeatTime"] = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    nodes.status.patch(name=node, body={"status": {"conditions": conditions}},
                       content_type="application/merge-patch+json")
    nodes.patch(name=node, body={"metadata": {"labels": {"example.com/touched": "yes"}}},
                content_type="application/merge-patch+json")
    try:
        # The label change's reconcile comes after the heartbeat's event: once it is there, none came for the beat.
        wait_for(lambda: [s for s in recorder.seen[before:] if s[1] == node], what="the label change reconciled")
        assert [s[2].get("example.com/touched") for s in recorder.seen[before:] if s[1] == node] == ["yes"]
        reads = [e for e in dc.audit.events(mark) if e.verb == "get"
                 and e.resource == "nodes" and e.name == node]
        assert len(reads) == 1   # the test's own read of the conditions; the recorder read nothing
    finally:
        nodes.patch(name=node, body={"metadata": {"labels": {"example.com/touched": None}}},
                    content_type="application/merge-patch+json")


def test_a_daemonset_status_change_is_not_reconciled_a_spec_change_is(dc, recorder):
    """For a status-blind kind, the DaemonSet controller's pod counts wake no reconcile; an annotation does."""
    dc.fleet("default")
    namespace = "kube-system"
    sets = dc.admin.resources.get(api_version="apps/v1", kind="DaemonSet")
    body = {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "recorder-probe", "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": "recorder-probe"}},
                     "template": {"metadata": {"labels": {"app": "recorder-probe"}},
                                  "spec": {"nodeSelector": {"example.com/none": "none"},
                                           "containers": [{"name": "c", "image": "example.com/probe:1"}]}}}}
    sets.create(body=body, namespace=namespace)
    try:
        _quiet(recorder, "DaemonSet", "recorder-probe")
        before = len(recorder.seen)
        sets.status.patch(name="recorder-probe", namespace=namespace, body={"status": {"numberMisscheduled": 1}},
                          content_type="application/merge-patch+json")
        sets.patch(name="recorder-probe", namespace=namespace,
                   body={"metadata": {"annotations": {"example.com/touched": "yes"}}},
                   content_type="application/merge-patch+json")
        wait_for(lambda: [s for s in recorder.seen[before:] if s[1] == "recorder-probe"], what="the annotation reconciled")
        time.sleep(1.0)
        assert [s[2].get("example.com/touched") for s in recorder.seen[before:] if s[1] == "recorder-probe"] == ["yes"]
    finally:
        sets.delete(name="recorder-probe", namespace=namespace)


def test_the_cache_keeps_the_newest_version_and_hands_out_copies(dc):
    """A write's response (remember) and a watch event may come in either order: the newer resourceVersion stays,
    so a reconcile never acts on the version before the simulator's own write."""
    sim = _Recorder(str(dc.kubeconfig))   # not started: no watch fills the cache behind the test's back

    def node(version, value):
        return {"metadata": {"name": "n1", "resourceVersion": str(version), "labels": {"step": value}}}
    sim.remember("Node", node(7, "written"))
    sim._store("Node", node(5, "an older event"))
    assert sim._current(("Node", None, "n1")).to_dict()["metadata"]["labels"] == {"step": "written"}
    sim._store("Node", node(9, "a newer event"))
    copy = sim._current(("Node", None, "n1")).to_dict()
    assert copy["metadata"]["labels"] == {"step": "a newer event"}
    copy["metadata"]["labels"]["step"] = "changed by a reconciler"
    assert sim._current(("Node", None, "n1")).to_dict()["metadata"]["labels"] == {"step": "a newer event"}
    sim.remember("DaemonSet", {"metadata": {"name": "d", "namespace": "x", "resourceVersion": "1"}})
    assert ("DaemonSet", "x", "d") not in sim._cache   # not a cached kind: reconciled from a GET


def test_heartbeat_free_fingerprint():
    node = {"metadata": {"name": "n", "resourceVersion": "1", "labels": {"a": "1"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "t1"}]}}
    beat = json.loads(json.dumps(node))
    beat["metadata"]["resourceVersion"] = "2"
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "t2"
    assert heartbeat_free(beat) == heartbeat_free(node)
    for path, value in ((("metadata", "labels"), {"a": "2"}), (("status", "allocatable"), {"nvidia.com/gpu": "7"})):
        changed = json.loads(json.dumps(beat))
        changed[path[0]][path[1]] = value
        assert heartbeat_free(changed) != heartbeat_free(node), path
    not_ready = json.loads(json.dumps(beat))
    not_ready["status"]["conditions"][0]["status"] = "False"
    assert heartbeat_free(not_ready) != heartbeat_free(node)


def test_status_free_fingerprint():
    ds = {"metadata": {"name": "d", "resourceVersion": "1", "generation": 1}, "spec": {"template": {"a": 1}},
          "status": {"numberReady": 3}}
    counted = json.loads(json.dumps(ds))
    counted["metadata"]["resourceVersion"], counted["status"]["numberReady"] = "2", 4
    assert status_free(counted) == status_free(ds)
    respec = json.loads(json.dumps(ds))
    respec["spec"]["template"]["a"] = 2
    assert status_free(respec) != status_free(ds)
