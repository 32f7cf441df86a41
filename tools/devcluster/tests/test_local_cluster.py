"""The local cluster is a real API server: CRD validation, RBAC, resource.k8s.io/v1, an audit log per user."""
from __future__ import annotations

import time

import pytest
from kubernetes.dynamic.exceptions import ForbiddenError, UnprocessibleEntityError

from kubegpu_devcluster.cluster import ADMIN, NOBODY, simulator_user


def test_serves_dra_v1(dc):
    groups = dc.admin.request("GET", "/apis/resource.k8s.io").to_dict()
    assert "v1" in [v["version"] for v in groups["versions"]]
    assert groups["preferredVersion"]["version"] == "v1"


def test_rejects_invalid_cluster_policy_field(dc):
    """The upstream ClusterPolicy CRD's enum for mig.strategy is enforced by the server, not by us."""
    api = dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    base = {"operator": {}, "daemonsets": {}, "driver": {}, "toolkit": {}, "devicePlugin": {}, "dcgm": {},
            "dcgmExporter": {}, "gfd": {}, "nodeStatusExporter": {}}
    body = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "invalid-policy"},
            "spec": dict(base, mig={"strategy": "bogus"})}
    with pytest.raises(UnprocessibleEntityError) as err:
        api.create(body=body)
    assert "spec.mig.strategy" in str(err.value.body)
    assert "bogus" in str(err.value.body)
    assert api.get(field_selector="metadata.name=invalid-policy").items == []


def test_refuses_user_without_rbac_rights(dc):
    mark = dc.audit.mark()
    with pytest.raises(ForbiddenError):
        dc.client("nobody").resources.get(api_version="v1", kind="Node").get()
    refused = [e for e in dc.audit.events(mark, user=NOBODY[0]) if e.resource == "nodes"]
    assert [(e.verb, e.code) for e in refused] == [("list", 403)]


def test_audit_log_tells_users_apart(dc):
    """Every request has its verb and user; the admin's writes are counted apart from the simulators'."""
    mark = dc.audit.mark()
    api = dc.admin.resources.get(api_version="v1", kind="ConfigMap")
    api.create(body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "audit-probe"}},
               namespace="default")
    api.delete(name="audit-probe", namespace="default")
    writes = dc.audit.writes(mark, user=ADMIN[0])
    assert [(e.verb, e.resource, e.name) for e in writes] == [("create", "configmaps", "audit-probe"),
                                                              ("delete", "configmaps", "audit-probe")]
    assert all(e.user == ADMIN[0] for e in writes)
    everyone = {e.user for e in dc.audit.events(0, user=None)}
    assert simulator_user("fleet") in everyone       # the fleet was loaded by its simulator's user


def test_dry_run_is_not_a_write(dc):
    mark = dc.audit.mark()
    api = dc.admin.resources.get(api_version="v1", kind="ConfigMap")
    api.create(body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}}, namespace="default",
               dry_run="All")
    events = dc.audit.events(mark)
    assert [e.verb for e in events if e.resource == "configmaps"] == ["create"]
    assert dc.audit.writes(mark) == []


def test_second_cluster_starts_warm_and_down_leaves_no_process(devcluster_session, tmp_path):
    """A warm start (binaries and CRD seed cached) brings every component up, and cluster-down stops every process
    it started."""
    import os
    import time

    from kubegpu_devcluster import __main__ as devcluster
    from kubegpu_devcluster import cluster

    state = tmp_path / "second"
    t0 = time.monotonic()
    devcluster.up(state, devcluster.DEFAULT_FLEET)
    took = time.monotonic() - t0
    started = cluster.read_state(state)["pids"]
    assert sorted(started) == ["cert-manager", "etcd", "kube-apiserver", "kube-controller-manager",
                               "kube-scheduler", "kwok", "simulators"]
    pids = list(started.values())
    assert all(cluster._alive(p) for p in pids)
    # Printed, not asserted: on a loaded machine a start is slower, and a timed assertion would fail before the
    # cluster below is stopped (the cost of a start is measured by make bench, not by a test).
    print(f"\nwarm start with the demo fleet, every component healthy and every node leased: {took:.1f} s")
    cluster.down(state)
    assert not state.exists()
    # down() returns only once every process has exited: /proc/<pid>/stat is gone, or at most a zombie
    # waiting for this test process to reap it.
    alive = [pid for pid in pids if os.path.exists(f"/proc/{pid}/stat")
             and open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
    assert alive == []


def test_stop_kills_what_ignores_sigterm_and_waits_for_it(tmp_path, monkeypatch):
    """stop() escalates to SIGKILL and returns only once the process has exited."""
    import subprocess
    import sys

    from kubegpu_devcluster import cluster

    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                               "print('ready', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, start_new_session=True)
    assert stubborn.stdout.readline() == b"ready\n"          # SIGTERM is ignored from here on
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "state.json").write_text('{"pids": {"stubborn": %d}}' % stubborn.pid)
    monkeypatch.setattr(cluster, "STOP_GRACE", 0.5)
    cluster.stop(tmp_path)
    assert not cluster._alive(stubborn.pid)
    assert cluster.read_state(tmp_path)["pids"] == {}


def test_crd_removal_releases_only_a_crd_with_no_object_left(dc, monkeypatch):
    """crds.wait_gone: a CRD kept terminating by an object of its own (a finalizer nobody removes) is not released,
    and the timeout names what the API server's finalizer waits for; once the object goes, the CRD goes."""
    from kubegpu_devcluster import crds

    group, plural = "hold.kubegpu.test", "holds"
    name = f"{plural}.{group}"
    api = dc.admin.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    api.create(body={"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                     "metadata": {"name": name},
                     "spec": {"group": group, "scope": "Cluster",
                              "names": {"plural": plural, "singular": "hold", "kind": "Hold", "listKind": "HoldList"},
                              "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                                  "openAPIV3Schema": {"type": "object"}}}]}})
    deadline = time.monotonic() + 60
    while True:
        try:
            holds = dc.admin.resources.get(api_version=f"{group}/v1", kind="Hold")
            holds.create(body={"apiVersion": f"{group}/v1", "kind": "Hold",
                               "metadata": {"name": "kept", "finalizers": ["kubegpu.test/kept"]}})
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            dc.admin.resources.invalidate_cache()
            time.sleep(0.5)
    monkeypatch.setattr(crds, "STUCK_SECONDS", 1)
    api.delete(name=name)
    with pytest.raises(RuntimeError, match=rf"{name}: Instance"):
        crds.wait_gone(dc.admin, {name}, timeout=8)
    assert api.get(name=name).metadata.finalizers == [crds.CLEANUP_FINALIZER]
    holds.patch(name="kept", content_type="application/merge-patch+json", body={"metadata": {"finalizers": None}})
    crds.wait_gone(dc.admin, {name}, timeout=90)
