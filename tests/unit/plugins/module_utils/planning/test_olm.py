# -*- coding: utf-8 -*-
"""OLM planning: channel and CSV choice, upgrade steps, which InstallPlan is approved, status descriptions."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.olm import (
    APPROVE,
    DONE,
    FAILED,
    WAIT,
    WAIT_PLAN,
    OlmError,
    channel_chain,
    choose_operator_group,
    csv_failure,
    csv_version,
    describe_subscription,
    find_subscription,
    next_step,
    not_found_message,
    package_csvs,
    pending_plans,
    plan_for,
    plans_of,
    select,
    subscription_object,
    upgrade_steps,
    version_key,
)

GPU = "gpu-operator-certified"


def manifest(channels, default, name=GPU, catalog="certified-operators"):
    """A PackageManifest as the package server returns it: entries newest first (channels given oldest first)."""
    return {"metadata": {"name": name, "namespace": "openshift-marketplace"},
            "status": {"packageName": name, "defaultChannel": default, "catalogSource": catalog,
                       "catalogSourceNamespace": "openshift-marketplace",
                       "channels": [{"name": ch, "currentCSV": csvs[-1],
                                     "entries": [{"name": c, "version": csv_version(c)} for c in reversed(csvs)]}
                                    for ch, csvs in channels.items()]}}


# The simulated catalog (tools/devcluster/catalog/packages.yaml).
GPU_MANIFEST = manifest({"stable": [GPU + ".v26.3.3", GPU + ".v26.7.0"],
                         "v26.3": [GPU + ".v26.3.2", GPU + ".v26.3.3"],
                         "v26.7": [GPU + ".v26.7.0"]}, "v26.7")


def plan(name, csvs, approved=False, owner="sub-uid", generation=1, created="2026-11-01T00:00:00Z"):
    meta = {"name": name, "creationTimestamp": created}
    if owner:
        meta["ownerReferences"] = [{"kind": "Subscription", "uid": owner, "name": GPU}]
    return {"metadata": meta, "spec": {"clusterServiceVersionNames": csvs, "approved": approved,
                                       "generation": generation}}


def sub(installed=None, state=None, conditions=None, current=None):
    status = {}
    if installed:
        status["installedCSV"] = installed
    if state:
        status["state"] = state
    if current:
        status["currentCSV"] = current
    if conditions:
        status["conditions"] = conditions
    return {"metadata": {"name": GPU, "uid": "sub-uid"}, "spec": {"name": GPU}, "status": status}


def csv(name, phase, reason=None, message=None):
    return {"metadata": {"name": name, "namespace": "nvidia-gpu-operator"},
            "status": {"phase": phase, "reason": reason, "message": message}}


# -- versions and channels

@pytest.mark.parametrize("older, newer", [
    ("26.3.2", "26.3.3"), ("26.3.9", "26.3.10"), ("26.3.3", "26.7.0"), ("v1.2.0", "1.10.0"),
    ("4.20.0-202510211040", "4.20.0-202511011200"), ("4.20.0-202510211040", "4.21.0"),
])
def test_version_order(older, newer):
    assert version_key(older) < version_key(newer)


@pytest.mark.parametrize("name, version", [
    (GPU + ".v26.7.0", "26.7.0"), ("nfd.4.20.0-202510211040", "4.20.0-202510211040"),
    ("rhods-operator.2.25.0", "2.25.0"), ("serverless-operator.v1.37.0", "1.37.0"),
])
def test_csv_version(name, version):
    assert csv_version(name) == version


def test_chain_is_oldest_first_by_version_whatever_the_listing_order():
    channel = {"name": "c", "currentCSV": "x.v1.10.0",
               "entries": [{"name": "x.v1.2.0", "version": "1.2.0"}, {"name": "x.v1.10.0", "version": "1.10.0"},
                           {"name": "x.v1.9.0", "version": "1.9.0"}]}
    assert channel_chain(channel) == ["x.v1.2.0", "x.v1.9.0", "x.v1.10.0"]


def test_chain_without_entries_is_the_head():
    assert channel_chain({"name": "c", "currentCSV": "x.v1"}) == ["x.v1"]
    assert channel_chain({"name": "c", "entries": [{"name": "x.b"}, {"name": "x.a"}]}) == ["x.a", "x.b"]


@pytest.mark.parametrize("channel, wanted_csv, expected_channel, expected_csv", [
    (None, None, "v26.7", GPU + ".v26.7.0"),                    # default channel, its head
    ("v26.3", None, "v26.3", GPU + ".v26.3.3"),                 # the channel's head
    ("v26.3", GPU + ".v26.3.2", "v26.3", GPU + ".v26.3.2"),     # an older CSV of the channel
    ("stable", GPU + ".v26.3.3", "stable", GPU + ".v26.3.3"),
])
def test_select_channel_and_csv(channel, wanted_csv, expected_channel, expected_csv):
    choice = select(GPU_MANIFEST, channel, wanted_csv)
    assert (choice["channel"], choice["csv"]) == (expected_channel, expected_csv)
    assert choice["source"] == "certified-operators"
    assert choice["source_namespace"] == "openshift-marketplace"
    assert choice["version"] == csv_version(expected_csv)
    assert choice["chain"][-1] == choice["head"]


def test_select_source_override():
    choice = select(GPU_MANIFEST, source="my-mirror", source_namespace="mirrors")
    assert (choice["source"], choice["source_namespace"]) == ("my-mirror", "mirrors")


def test_unknown_channel_names_the_channels_and_the_default():
    with pytest.raises(OlmError) as e:
        select(GPU_MANIFEST, "v99")
    assert str(e.value) == ("package gpu-operator-certified: channel v99 is not offered; channels: stable, v26.3, "
                            "v26.7 (default: v26.7)")


def test_csv_not_in_channel_names_the_channel_content():
    with pytest.raises(OlmError) as e:
        select(GPU_MANIFEST, "v26.7", GPU + ".v26.3.2")
    assert "csv gpu-operator-certified.v26.3.2 is not in channel v26.7" in str(e.value)
    assert "the channel has: gpu-operator-certified.v26.7.0 (head: gpu-operator-certified.v26.7.0)" in str(e.value)


def test_not_found_lists_up_to_twenty_packages():
    msg = not_found_message("nope", ["p{0:02d}".format(i) for i in range(25)])
    assert msg.startswith("package nope not found in the catalog (PackageManifest openshift-marketplace/nope); "
                          "packages available: p00, p01")
    assert "p19 and 5 more" in msg and "p20" not in msg
    assert "packages available: none" in not_found_message("nope", [])


def test_package_csvs_cover_every_channel():
    assert package_csvs(GPU_MANIFEST) == {GPU + ".v26.3.2", GPU + ".v26.3.3", GPU + ".v26.7.0"}


# -- upgrade steps

CHAIN = ["x.v1.0.0", "x.v1.1.0", "x.v1.2.0", "x.v1.3.0"]


@pytest.mark.parametrize("installed, expected, steps", [
    (None, "x.v1.2.0", ["x.v1.2.0"]),                         # fresh install: straight to startingCSV
    ("x.v1.2.0", "x.v1.2.0", []),
    ("x.v1.0.0", "x.v1.1.0", ["x.v1.1.0"]),
    ("x.v1.0.0", "x.v1.3.0", ["x.v1.1.0", "x.v1.2.0", "x.v1.3.0"]),  # one CSV at a time
    ("x.v0.9.0", "x.v1.1.0", ["x.v1.0.0", "x.v1.1.0"]),       # installed from another channel
])
def test_upgrade_steps(installed, expected, steps):
    assert upgrade_steps(CHAIN, installed, expected) == steps


@pytest.mark.parametrize("installed", ["x.v1.3.0", "x.v2.0.0"])
def test_no_downgrade(installed):
    with pytest.raises(OlmError) as e:
        upgrade_steps(CHAIN, installed, "x.v1.1.0")
    assert "is newer than the expected x.v1.1.0; OLM does not downgrade" in str(e.value)


# -- InstallPlan choice: exactly one, exactly the expected CSV

def test_plan_for_exactly_the_csv():
    plans = [plan("install-a", [GPU + ".v26.3.3"]), plan("install-b", [GPU + ".v26.3.2"]),
             plan("install-c", [GPU + ".v26.3.2", "other.v1"])]
    to_approve, approved = plan_for(plans, GPU + ".v26.3.2")
    assert to_approve["metadata"]["name"] == "install-b" and approved is None


def test_plan_for_prefers_the_newest_and_respects_an_approved_one():
    plans = [plan("install-old", [GPU + ".v26.3.2"], generation=1),
             plan("install-new", [GPU + ".v26.3.2"], generation=2)]
    assert plan_for(plans, GPU + ".v26.3.2")[0]["metadata"]["name"] == "install-new"
    plans.append(plan("install-done", [GPU + ".v26.3.2"], approved=True))
    to_approve, approved = plan_for(plans, GPU + ".v26.3.2")
    assert to_approve is None and approved["metadata"]["name"] == "install-done"


def test_plan_for_nothing():
    assert plan_for([plan("install-a", [GPU + ".v26.3.3"])], GPU + ".v26.3.2") == (None, None)


def test_plans_of_the_subscription_only():
    mine = plan("install-a", [GPU + ".v26.3.2"])
    other_owner = plan("install-b", [GPU + ".v26.3.2"], owner="someone-else")
    unowned_known = plan("install-c", [GPU + ".v26.3.3"], owner=None)
    unowned_foreign = plan("install-d", ["nfd.4.20.0"], owner=None)
    got = plans_of([mine, other_owner, unowned_known, unowned_foreign], sub(), package_csvs(GPU_MANIFEST))
    assert [p["metadata"]["name"] for p in got] == ["install-a", "install-c"]


def test_pending_plans_excludes_approved_and_named():
    plans = [plan("install-a", [GPU + ".v26.3.2"], approved=True), plan("install-b", [GPU + ".v26.3.3"]),
             plan("install-c", [GPU + ".v26.7.0"])]
    assert pending_plans(plans, excluding=["install-c"]) == [
        {"name": "install-b", "csvs": [GPU + ".v26.3.3"], "approved": False, "phase": None}]


V263 = select(GPU_MANIFEST, "v26.3", GPU + ".v26.3.2")
V263_HEAD = select(GPU_MANIFEST, "v26.3", GPU + ".v26.3.3")


def test_next_step_waits_for_the_plan_then_approves_exactly_one():
    assert next_step(V263, "Manual", sub(), [], {}) == (WAIT_PLAN, "an InstallPlan for gpu-operator-certified.v26.3.2")
    plans = [plan("install-x", [GPU + ".v26.3.3"]), plan("install-y", [GPU + ".v26.3.2"])]
    action, (chosen, target) = next_step(V263, "Manual", sub(), plans, {})
    assert (action, chosen["metadata"]["name"], target) == (APPROVE, "install-y", GPU + ".v26.3.2")


def test_next_step_done_leaves_the_offered_upgrade_alone():
    plans = [plan("install-y", [GPU + ".v26.3.2"], approved=True), plan("install-z", [GPU + ".v26.3.3"])]
    got = next_step(V263, "Manual", sub(installed=GPU + ".v26.3.2"), plans,
                    {GPU + ".v26.3.2": csv(GPU + ".v26.3.2", "Succeeded")})
    assert got == (DONE, GPU + ".v26.3.2")


def test_next_step_upgrade_approves_the_next_csv_only():
    plans = [plan("install-y", [GPU + ".v26.3.2"], approved=True), plan("install-z", [GPU + ".v26.3.3"])]
    action, (chosen, target) = next_step(V263_HEAD, "Manual", sub(installed=GPU + ".v26.3.2"), plans, {})
    assert (action, chosen["metadata"]["name"], target) == (APPROVE, "install-z", GPU + ".v26.3.3")


def test_next_step_waits_on_the_phase_after_approval():
    plans = [plan("install-y", [GPU + ".v26.3.2"], approved=True)]
    assert next_step(V263, "Manual", sub(), plans, {GPU + ".v26.3.2": csv(GPU + ".v26.3.2", "Installing")}) == \
        (WAIT, "CSV gpu-operator-certified.v26.3.2 phase Installing")


def test_next_step_reports_a_failed_csv_with_reason():
    failed = csv(GPU + ".v26.3.2", "Failed", "InstallComponentFailed", "pods not available")
    action, msg = next_step(V263, "Manual", sub(), [], {GPU + ".v26.3.2": failed})
    assert action == FAILED
    assert msg == ("ClusterServiceVersion nvidia-gpu-operator/gpu-operator-certified.v26.3.2 failed (reason "
                   "InstallComponentFailed): pods not available")


def test_next_step_never_approves_a_bundled_plan():
    plans = [plan("install-b", [GPU + ".v26.3.2", "nfd.4.20.0"])]
    action, msg = next_step(V263, "Manual", sub(), plans, {})
    assert action == FAILED and "install-b would install gpu-operator-certified.v26.3.2 together" in msg


def test_next_step_automatic_never_approves_and_accepts_later_csvs():
    plans = [plan("install-y", [GPU + ".v26.3.2"])]       # OLM approves Automatic plans itself
    assert next_step(V263, "Automatic", sub(), plans, {})[0] == WAIT
    assert next_step(V263, "Automatic", sub(installed=GPU + ".v26.3.3"), [],
                     {GPU + ".v26.3.3": csv(GPU + ".v26.3.3", "Succeeded")}) == (DONE, GPU + ".v26.3.3")


def test_next_step_installed_but_not_succeeded_waits():
    assert next_step(V263, "Manual", sub(installed=GPU + ".v26.3.2"), [], {}) == \
        (WAIT, "CSV gpu-operator-certified.v26.3.2 phase (not created yet)")


# -- objects and status

def test_subscription_object_is_the_reference_flow():
    obj = subscription_object(GPU, "nvidia-gpu-operator", V263, "Manual", GPU + ".v26.3.2")
    assert obj["spec"] == {"name": GPU, "channel": "v26.3", "source": "certified-operators",
                           "sourceNamespace": "openshift-marketplace", "installPlanApproval": "Manual",
                           "startingCSV": GPU + ".v26.3.2"}
    assert "startingCSV" not in subscription_object(GPU, "ns", V263, "Manual", None)["spec"]


def group(name, targets=None):
    return {"metadata": {"name": name}, "spec": {"targetNamespaces": targets} if targets else {}}


def test_operator_group_created_with_default_targets():
    obj = choose_operator_group([], "gpu", "gpu-group", False, ["gpu"])
    assert obj["metadata"] == {"name": "gpu-group", "namespace": "gpu"}
    assert obj["spec"] == {"targetNamespaces": ["gpu"]}
    assert choose_operator_group([], "gpu", "gpu-group", False, [])["spec"] == {}   # AllNamespaces


def test_operator_group_adopts_a_matching_one():
    obj = choose_operator_group([group("og", ["gpu"])], "gpu", "gpu-group", False, ["gpu"])
    assert obj["metadata"]["name"] == "og"


@pytest.mark.parametrize("existing, name_given, targets, expected", [
    ([group("og", ["other"])], False, ["gpu"], "already has OperatorGroup og (targets [other])"),
    ([group("og", ["gpu"])], True, ["gpu"], "already has OperatorGroup og"),
    ([group("a", ["gpu"]), group("b", ["gpu"])], False, ["gpu"], "has 2 OperatorGroups (a, b)"),
    ([group("gpu-group", ["gpu"])], False, [], "switching it to all namespaces"),
])
def test_operator_group_refusals(existing, name_given, targets, expected):
    with pytest.raises(OlmError) as e:
        choose_operator_group(existing, "gpu", "gpu-group", name_given, targets)
    assert expected in str(e.value)


def test_find_subscription_by_package_not_name():
    subs = [{"metadata": {"name": "mine"}, "spec": {"name": GPU}}, {"metadata": {"name": "nfd"}, "spec": {"name": "nfd"}}]
    assert find_subscription(subs, GPU)["metadata"]["name"] == "mine"
    assert find_subscription(subs, "other") is None


def test_describe_subscription_names_state_and_resolution_failure():
    s = sub(state="UpgradePending", installed="a.v1", current="a.v2", conditions=[
        {"type": "ResolutionFailed", "status": "True", "reason": "ConstraintsNotSatisfiable", "message": "no operators"}])
    assert describe_subscription(s) == (
        "Subscription gpu-operator-certified: state UpgradePending, installedCSV a.v1, currentCSV a.v2; conditions: "
        "ResolutionFailed=True (ConstraintsNotSatisfiable): no operators")
    assert describe_subscription(None) == "Subscription not found"


def test_csv_failure_only_when_failed():
    assert csv_failure(csv("a.v1", "Installing")) is None
    assert csv_failure(None) is None
    assert "failed (reason unknown): no message" in csv_failure(csv("a.v1", "Failed"))


def test_next_step_approves_a_later_csv_olm_offers_directly_but_never_past_the_expected_one():
    """olm.skipRange: OLM may offer the channel's later CSV at once; within the asked range it is approved."""
    to_head = select(GPU_MANIFEST, "stable", GPU + ".v26.7.0")
    skip = [plan("install-skip", [GPU + ".v26.7.0"])]
    action, (chosen, target) = next_step(to_head, "Manual", sub(installed=GPU + ".v26.3.2"), skip, {})
    assert (action, chosen["metadata"]["name"], target) == (APPROVE, "install-skip", GPU + ".v26.7.0")
    approved = [plan("install-skip", [GPU + ".v26.7.0"], approved=True)]
    assert next_step(to_head, "Manual", sub(installed=GPU + ".v26.3.2"), approved,
                     {GPU + ".v26.7.0": csv(GPU + ".v26.7.0", "Installing")}) == \
        (WAIT, "CSV gpu-operator-certified.v26.7.0 phase Installing")
    only_to_263 = select(GPU_MANIFEST, "stable", GPU + ".v26.3.3")
    assert next_step(only_to_263, "Manual", sub(installed=GPU + ".v26.3.2"), skip, {}) == \
        (WAIT_PLAN, "an InstallPlan for gpu-operator-certified.v26.3.3")
