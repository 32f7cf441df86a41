"""The GPU Operator's upgrade path on OpenShift: olm_operator, then cluster_policy.

Raising the channel and CSV upgrades through OLM, approving (Manual) exactly the InstallPlan of the next CSV, one
CSV at a time; OLM never touches the ClusterPolicy, so cluster_policy then reconciles the fields the new version
needs from its CSV's alm-examples (shared/reference/gpu-operator.md: cdi.enabled is true by default from v25.10;
the v25.3.4 CSV of the simulated catalog has it false).
"""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError

from conftest import REPO, wait_for
from kubegpu_devcluster.cluster import ADMIN, simulator_user

V1A1 = "operators.coreos.com/v1alpha1"
CP = "nvidia.com/v1"
GPU = "gpu-operator-certified"
V25_3_4, V26_3_2, V26_3_3 = f"{GPU}.v25.3.4", f"{GPU}.v26.3.2", f"{GPU}.v26.3.3"
POLICY = "gpu-cluster-policy"
CATALOG = REPO / "tools" / "devcluster" / "catalog" / "packages.yaml"


def _catalog_policy_spec():
    """The ClusterPolicy example the 26.x CSVs carry (the package's `examples`)."""
    pkg = next(p for p in yaml.safe_load(Path(CATALOG).read_text())["packages"] if p["name"] == GPU)
    return next(e for e in pkg["examples"] if e["kind"] == "ClusterPolicy")["spec"]


def _writes(dc, mark):
    return [f"{e.verb} {e.resource}/{e.name}" for e in dc.audit.writes(mark)]


def _olm_steps(dc, mark, ns):
    """Every user's writes to the namespace's InstallPlans and CSVs since mark, in order (status writes left out)."""
    kept = ("installplans", "clusterserviceversions")
    return [(e.user, e.verb, e.resource, e.name) for e in dc.audit.events(mark, user=None)
            if e.is_write and e.namespace == ns and not e.subresource and e.resource in kept]


def _list(dc, kind, ns=None, api_version=V1A1):
    return [o.to_dict() for o in dc.admin.resources.get(api_version=api_version, kind=kind).get(namespace=ns).items]


def _olm(dc, ns, channel, csv, check=False):
    return dc.module("olm_operator", {"package": GPU, "namespace": ns, "channel": channel, "csv": csv,
                                      "approval": "Manual", "timeout": 120}, check=check)


def _policy(dc, ns):
    return dc.module("cluster_policy", {"csv_namespace": ns, "timeout": 60}, diff=True)


def _delete_policies(dc, names=None):
    api = dc.admin.resources.get(api_version=CP, kind="ClusterPolicy")
    for obj in api.get().items:
        if names is None or obj.metadata.name in names:
            try:
                api.delete(name=obj.metadata.name)
            except NotFoundError:
                pass
    wait_for(lambda: not [o for o in api.get().items if names is None or o.metadata.name in names],
             what="ClusterPolicies deleted")


@pytest.fixture
def upgrade(dc):
    """The default (OpenShift) fleet, no ClusterPolicy (the operator reconciles one; earlier test modules may
    have left theirs) and a fresh namespace; afterwards the ClusterPolicy and the namespace are removed."""
    dc.fleet("default")
    _delete_policies(dc)
    ns = f"upg-{uuid.uuid4().hex[:6]}"
    yield dc, ns
    _delete_policies(dc, [POLICY])
    try:
        dc.admin.resources.get(api_version="v1", kind="Namespace").delete(name=ns)
    except NotFoundError:
        pass


def test_channel_upgrade_approves_each_next_plan_then_policy_gets_cdi(upgrade):
    dc, ns = upgrade

    # v25.3.4 from its own channel, then the ClusterPolicy from that CSV's alm-examples: CDI off.
    first = _olm(dc, ns, "v25.3", V25_3_4)
    assert not first.get("failed"), first.get("msg")
    assert first["installed_csv"] == V25_3_4 and [p["csvs"] for p in first["approved_plans"]] == [[V25_3_4]]
    created = _policy(dc, ns)
    assert not created.get("failed"), created.get("msg")
    assert (created["changed"], created["name"], created["state"]) == (True, POLICY, "ready")
    assert created["base"] == f"alm-examples of ClusterServiceVersion {ns}/{V25_3_4}"
    assert created["spec"]["cdi"] == {"enabled": False}
    assert dict(created["spec"], cdi={"enabled": True}) == _catalog_policy_spec()   # the only difference

    # Check mode: the channel changes and two CSVs follow, one after the other; nothing is written.
    mark = dc.audit.mark()
    check = _olm(dc, ns, "v26.3", V26_3_3, check=True)
    assert not check.get("failed"), check.get("msg")
    assert [(o["kind"], o["fields"]) for o in check["plan"]["objects"]] == [("Subscription", ["spec.channel"])]
    assert check["plan"]["install"] == [{"csv": V26_3_2, "install_plan": None, "approved": False},
                                        {"csv": V26_3_3, "install_plan": None, "approved": False}]
    assert _writes(dc, mark) == []

    # The upgrade: the Subscription's channel, then exactly the plan of the next CSV, one CSV at a time.
    mark = dc.audit.mark()
    upgraded = _olm(dc, ns, "v26.3", V26_3_3)
    assert not upgraded.get("failed"), upgraded.get("msg")
    assert (upgraded["changed"], upgraded["installed_csv"], upgraded["version"]) == (True, V26_3_3, "26.3.3")
    assert [p["csvs"] for p in upgraded["approved_plans"]] == [[V26_3_2], [V26_3_3]]
    assert upgraded["pending_plans"] == [] and upgraded["subscription"]["state"] == "AtLatestKnown"
    plan_a, plan_b = (p["name"] for p in upgraded["approved_plans"])
    # The admin's writes: the Subscription and the two approvals, nothing else (the approvals are the only
    # InstallPlan writes).
    assert _writes(dc, mark) == [f"patch subscriptions/{GPU}", f"patch installplans/{plan_a}",
                                 f"patch installplans/{plan_b}"]
    # With OLM's own writes in between: each plan is offered only once the CSV before it has replaced its
    # predecessor, and approved before the next one exists.
    admin, olm = ADMIN[0], simulator_user("olm")
    steps = _olm_steps(dc, mark, ns)
    assert steps == [
        (olm, "create", "installplans", plan_a), (admin, "patch", "installplans", plan_a),
        (olm, "create", "clusterserviceversions", V26_3_2), (olm, "delete", "clusterserviceversions", V25_3_4),
        (olm, "create", "installplans", plan_b), (admin, "patch", "installplans", plan_b),
        (olm, "create", "clusterserviceversions", V26_3_3), (olm, "delete", "clusterserviceversions", V26_3_2),
    ], steps
    # No other plan was approved: the namespace holds the three plans of the three steps, all approved.
    plans = _list(dc, "InstallPlan", ns)
    assert sorted((p["spec"]["clusterServiceVersionNames"], p["spec"]["approved"]) for p in plans) == [
        ([V25_3_4], True), ([V26_3_2], True), ([V26_3_3], True)]
    assert [(c["metadata"]["name"], c["status"]["phase"], c["spec"].get("replaces"))
            for c in _list(dc, "ClusterServiceVersion", ns)] == [(V26_3_3, "Succeeded", V26_3_2)]
    sub = dc.admin.resources.get(api_version=V1A1, kind="Subscription").get(name=GPU, namespace=ns)
    assert (sub.spec.channel, sub.spec.startingCSV, sub.status.installedCSV) == ("v26.3", V25_3_4, V26_3_3)
    # OLM left the ClusterPolicy as it was.
    live = dc.admin.resources.get(api_version=CP, kind="ClusterPolicy").get(name=POLICY)
    assert live.spec.cdi.enabled is False

    # cluster_policy reconciles it from the new CSV's alm-examples: CDI on, one write.
    mark = dc.audit.mark()
    reconciled = _policy(dc, ns)
    assert not reconciled.get("failed"), reconciled.get("msg")
    assert reconciled["changed"] is True and reconciled["state"] == "ready"
    assert reconciled["base"] == f"alm-examples of ClusterServiceVersion {ns}/{V26_3_3}"
    key = "ClusterPolicy/" + reconciled["name"]
    assert reconciled["diff"] == {"before": {key: {"spec": {"cdi": {"enabled": False}}}},
                                  "after": {key: {"spec": {"cdi": {"enabled": True}}}}}
    assert _writes(dc, mark) == [f"patch clusterpolicies/{POLICY}"]
    assert reconciled["spec"] == _catalog_policy_spec()

    # A second run of both writes nothing.
    mark = dc.audit.mark()
    again = _olm(dc, ns, "v26.3", V26_3_3)
    assert not again.get("failed"), again.get("msg")
    assert (again["changed"], again["approved_plans"], again["installed_csv"]) == (False, [], V26_3_3)
    policy_again = _policy(dc, ns)
    assert not policy_again.get("failed"), policy_again.get("msg")
    assert policy_again["changed"] is False and policy_again["diff"] == {"before": {}, "after": {}}
    assert _writes(dc, mark) == []
