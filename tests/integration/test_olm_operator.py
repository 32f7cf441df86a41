"""olm_operator against the simulated OLM: installs converge, approve exactly one plan, refuse bad input before writing."""
from __future__ import annotations

import json
import time
import uuid
from datetime import datetime

from conftest import wait_for
from kubegpu_devcluster.cluster import ADMIN

V1A1 = "operators.coreos.com/v1alpha1"
GPU = "gpu-operator-certified"
NFD_CSV = "nfd.4.20.0-202510211040"


def _ns(prefix="olm"):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _writes(dc, mark):
    return [f"{e.verb} {e.resource}/{e.name}{'/' + e.subresource if e.subresource else ''}"
            for e in dc.audit.writes(mark)]


def _get_times(dc, mark, resource):
    """Seconds (from the audit log's receive timestamps) of the admin's GETs of `resource` since mark."""
    times = []
    dc.audit.settle()
    with open(dc.audit.path, "rb") as f:
        f.seek(mark)
        for line in f:
            e = json.loads(line)
            if e.get("stage") == "ResponseComplete" and e.get("verb") == "get" and \
                    (e.get("objectRef") or {}).get("resource") == resource and \
                    e.get("user", {}).get("username") == ADMIN[0]:
                stamp = datetime.strptime(e["requestReceivedTimestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
                times.append(stamp.timestamp())
    return times


def _plans(dc, ns):
    return [p.to_dict() for p in dc.admin.resources.get(api_version=V1A1, kind="InstallPlan").get(namespace=ns).items]


def _exists(dc, kind, name, api_version="v1", namespace=None):
    return any(o.metadata.name == name for o in
               dc.admin.resources.get(api_version=api_version, kind=kind).get(namespace=namespace).items)


def _install(dc, ns, check=False, **args):
    return dc.module("olm_operator", dict({"package": GPU, "namespace": ns, "timeout": 120}, **args), check=check)


def test_install_converges_and_second_run_writes_nothing(dc):
    dc.fleet("default")
    ns = _ns()
    mark = dc.audit.mark()
    t0 = time.monotonic()
    result = _install(dc, ns)
    took = time.monotonic() - t0
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    assert (result["installed_csv"], result["version"], result["channel"]) == (f"{GPU}.v26.7.0", "26.7.0", "v26.7")
    assert [p["csvs"] for p in result["approved_plans"]] == [[f"{GPU}.v26.7.0"]]
    assert result["subscription"]["state"] == "AtLatestKnown"
    assert [o["kind"] for o in result["plan"]["objects"]] == ["Namespace", "OperatorGroup", "Subscription"]
    # (Read before this test's own GETs.) The wait polls every 2 s (a read right after an approval aside), not a per-second flood.
    polls = _get_times(dc, mark, "subscriptions")
    gaps = [b - a for a, b in zip(polls, polls[1:])]
    assert len(polls) >= 2 and sum(1 for g in gaps if g < 1.9) <= len(result["approved_plans"]), gaps
    assert len(polls) <= took / 2 + 2, (len(polls), took)
    writes = _writes(dc, mark)
    assert sorted(w.split("/")[0] for w in writes) == [
        "patch installplans", "patch namespaces", "patch operatorgroups", "patch subscriptions"], writes
    og = dc.admin.resources.get(api_version="operators.coreos.com/v1", kind="OperatorGroup").get(
        name=f"{ns}-group", namespace=ns)
    assert og.spec.targetNamespaces == [ns]
    sub = dc.admin.resources.get(api_version=V1A1, kind="Subscription").get(name=GPU, namespace=ns)
    assert (sub.spec.channel, sub.spec.installPlanApproval, sub.spec.source, sub.spec.startingCSV) == \
        ("v26.7", "Manual", "certified-operators", f"{GPU}.v26.7.0")

    mark = dc.audit.mark()
    again = _install(dc, ns)
    assert not again.get("failed"), again.get("msg")
    assert again["changed"] is False
    assert again["approved_plans"] == [] and again["installed_csv"] == f"{GPU}.v26.7.0"
    assert _writes(dc, mark) == []


def test_check_mode_on_a_fresh_namespace_shows_the_plan_and_writes_nothing(dc):
    dc.fleet("default")
    ns = _ns()
    mark = dc.audit.mark()
    result = _install(dc, ns, check=True, channel="v26.3")
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    assert [(o["kind"], o["name"], o["fields"]) for o in result["plan"]["objects"]] == [
        ("Namespace", ns, ["(new object)"]), ("OperatorGroup", f"{ns}-group", ["(new object)"]),
        ("Subscription", GPU, ["(new object)"])]
    assert result["plan"]["install"] == [{"csv": f"{GPU}.v26.3.3", "install_plan": None, "approved": False}]
    assert result["approved_plans"] == [{"name": None, "csvs": [f"{GPU}.v26.3.3"]}]
    assert result["installed_csv"] is None
    assert _writes(dc, mark) == []
    assert not _exists(dc, "Namespace", ns)


def test_manual_approval_approves_exactly_one_plan(dc):
    """startingCSV v26.3.2 on channel v26.3: the simulator offers v26.3.3 at once; it must stay unapproved."""
    dc.fleet("default")
    ns = _ns()
    mark = dc.audit.mark()
    result = _install(dc, ns, channel="v26.3", csv=f"{GPU}.v26.3.2")
    assert not result.get("failed"), result.get("msg")
    assert result["installed_csv"] == f"{GPU}.v26.3.2"
    assert [p["csvs"] for p in result["approved_plans"]] == [[f"{GPU}.v26.3.2"]]
    approvals = [w for w in _writes(dc, mark) if w.startswith("patch installplans")]
    assert approvals == [f"patch installplans/{result['approved_plans'][0]['name']}"]

    offered = wait_for(lambda: [p for p in _plans(dc, ns) if p["spec"]["clusterServiceVersionNames"] ==
                                [f"{GPU}.v26.3.3"]], what="the v26.3.3 plan")
    time.sleep(1)
    assert dc.admin.resources.get(api_version=V1A1, kind="InstallPlan").get(
        name=offered[0]["metadata"]["name"], namespace=ns).spec.approved is False

    mark = dc.audit.mark()
    again = _install(dc, ns, channel="v26.3", csv=f"{GPU}.v26.3.2")
    assert again["changed"] is False and _writes(dc, mark) == []
    assert again["installed_csv"] == f"{GPU}.v26.3.2"
    assert [(p["name"], p["csvs"]) for p in again["pending_plans"]] == [
        (offered[0]["metadata"]["name"], [f"{GPU}.v26.3.3"])]
    assert again["subscription"]["state"] == "UpgradePending"


def test_upgrade_approves_exactly_the_next_plan(dc):
    dc.fleet("default")
    ns = _ns()
    first = _install(dc, ns, channel="v26.3", csv=f"{GPU}.v26.3.2")
    assert first["installed_csv"] == f"{GPU}.v26.3.2", first.get("msg")
    offered = wait_for(lambda: [p for p in _plans(dc, ns) if p["spec"]["clusterServiceVersionNames"] ==
                                [f"{GPU}.v26.3.3"]], what="the v26.3.3 plan")[0]["metadata"]["name"]

    mark = dc.audit.mark()
    check = _install(dc, ns, check=True, channel="v26.3", csv=f"{GPU}.v26.3.3")
    assert check["plan"]["install"] == [{"csv": f"{GPU}.v26.3.3", "install_plan": offered, "approved": False}]
    assert check["plan"]["objects"] == [] and _writes(dc, mark) == []

    mark = dc.audit.mark()
    result = _install(dc, ns, channel="v26.3", csv=f"{GPU}.v26.3.3")
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    assert result["approved_plans"] == [{"name": offered, "csvs": [f"{GPU}.v26.3.3"]}]
    assert (result["installed_csv"], result["version"]) == (f"{GPU}.v26.3.3", "26.3.3")
    # Only the approval is written: the Subscription keeps its startingCSV, nothing else changed.
    assert _writes(dc, mark) == [f"patch installplans/{offered}"]
    assert result["pending_plans"] == []


def test_unknown_channel_package_or_csv_fail_before_any_write(dc):
    dc.fleet("default")
    ns = _ns()
    mark = dc.audit.mark()
    channel = _install(dc, ns, channel="v99")
    assert channel["failed"] is True
    assert channel["msg"] == ("package gpu-operator-certified: channel v99 is not offered; channels: stable, v25.3, "
                              "v26.3, v26.7 (default: v26.7)")
    package = _install(dc, ns, package="no-such-operator")
    assert package["failed"] is True
    assert package["msg"].startswith(
        "package no-such-operator not found in the catalog (PackageManifest openshift-marketplace/no-such-operator); "
        "packages available: authorino-operator, gpu-operator-certified, kueue-operator, nfd, "
        "openshift-custom-metrics-autoscaler-operator, "
        "rhods-operator, serverless-operator, servicemeshoperator.")
    csv = _install(dc, ns, channel="v26.7", csv=f"{GPU}.v26.3.2")
    assert csv["failed"] is True and "is not in channel v26.7" in csv["msg"]
    assert _writes(dc, mark) == []
    assert not _exists(dc, "Namespace", ns)


def test_csv_failure_is_reported_with_its_reason(dc):
    dc.fleet("default")
    dc.knobs({"olm.fail_csv": NFD_CSV})
    ns = _ns("nfd")
    result = dc.module("olm_operator", {"package": "nfd", "namespace": ns, "timeout": 60})
    assert result["failed"] is True
    # The waiter's error: the object, the CSV's reason, what was expected, then what to look at.
    assert result["msg"].startswith(
        f"package nfd (Subscription {ns}/nfd): ClusterServiceVersion {ns}/{NFD_CSV} failed (reason "
        "InstallComponentFailed): install strategy failed: Deployment gpu-operator: pods not available (simulated "
        f"failure) for 0 s (expected CSV {NFD_CSV} Succeeded; after "), result["msg"]
    assert "last CSV phase seen: Failed" in result["msg"]
    assert [p["csvs"] for p in result["approved_plans"]] == [[NFD_CSV]]


def test_timeout_names_the_phase_and_the_subscription(dc):
    dc.fleet("default")
    dc.knobs({"olm.hang_csv": f"{GPU}.v26.7.0"})
    ns = _ns()
    t0 = time.monotonic()
    result = _install(dc, ns, timeout=6)
    assert time.monotonic() - t0 < 30
    assert result["failed"] is True
    msg = result["msg"]
    # The object, what was expected, what was last seen and for how long, then what to look at.
    assert msg.startswith(f"package {GPU} (Subscription {ns}/{GPU}): not ready after 6 s (expected CSV {GPU}.v26.7.0 "
                          f"Succeeded); last seen: CSV {GPU}.v26.7.0 phase Installing for "), msg
    assert ("last CSV phase seen: Installing; Subscription gpu-operator-certified: state UpgradePending" in msg), msg
    assert "pending InstallPlans: none" in msg
    lines = result["progress"]["lines"]
    assert f"an InstallPlan for {GPU}.v26.7.0" in lines[0] or "approved" in lines[0], lines


def test_automatic_approval_with_namespace_labels(dc):
    dc.fleet("default")
    ns = _ns("nfd")
    labels = {"openshift.io/cluster-monitoring": "true"}
    mark = dc.audit.mark()
    result = dc.module("olm_operator", {"package": "nfd", "namespace": ns, "approval": "Automatic",
                                        "namespace_labels": labels, "operator_group": {"name": "nfd-og"},
                                        "timeout": 60})
    assert not result.get("failed"), result.get("msg")
    assert result["installed_csv"] == NFD_CSV and result["approved_plans"] == []
    assert not any(w.startswith("patch installplans") for w in _writes(dc, mark))
    namespace = dc.admin.resources.get(api_version="v1", kind="Namespace").get(name=ns)
    assert namespace.metadata.labels["openshift.io/cluster-monitoring"] == "true"
    assert _exists(dc, "OperatorGroup", "nfd-og", "operators.coreos.com/v1", ns)

    # A second OperatorGroup name for the same namespace is refused (OLM allows one), before any write.
    mark = dc.audit.mark()
    other = dc.module("olm_operator", {"package": "nfd", "namespace": ns, "approval": "Automatic",
                                       "operator_group": {"name": "another"}})
    assert other["failed"] is True and "already has OperatorGroup nfd-og" in other["msg"]
    assert _writes(dc, mark) == []


def test_wait_false_approves_and_returns_then_a_waiting_run_writes_nothing(dc):
    dc.fleet("default")
    dc.knobs({"olm.csv_seconds": "6"})
    ns = _ns()
    result = _install(dc, ns, wait=False)
    assert not result.get("failed"), result.get("msg")
    assert [p["csvs"] for p in result["approved_plans"]] == [[f"{GPU}.v26.7.0"]]
    assert result["installed_csv"] is None            # returned without waiting for the CSV
    mark = dc.audit.mark()
    again = _install(dc, ns)
    assert not again.get("failed"), again.get("msg")
    assert (again["changed"], again["installed_csv"]) == (False, f"{GPU}.v26.7.0")
    assert _writes(dc, mark) == []
