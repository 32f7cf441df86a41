# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Install an operator through OLM: pick the channel and CSV, render the objects, decide which InstallPlan to approve.

Pure functions over the objects the access layer returns (PackageManifest, Subscription, InstallPlan,
ClusterServiceVersion as dicts). The flow is shared/reference/gpu-operator.md "OLM flow": Namespace ->
OperatorGroup -> Subscription (Manual approval) -> approve the InstallPlan of exactly the expected CSV -> wait
for the CSV to succeed. Upgrades go one CSV at a time along the channel, as OLM offers them, and a plan for a
CSV the task did not ask for is never approved.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

MARKETPLACE_NAMESPACE = "openshift-marketplace"
PACKAGE_API = "packages.operators.coreos.com/v1"
OLM_V1 = "operators.coreos.com/v1"
OLM_V1ALPHA1 = "operators.coreos.com/v1alpha1"
MAX_LISTED_PACKAGES = 20

# What the module's wait loop should do next (see `next_step`).
DONE, APPROVE, WAIT, WAIT_PLAN, FAILED = "done", "approve", "wait", "wait-plan", "failed"


class OlmError(Exception):
    """The request cannot be met; the message names the object, the value, what exists and what to do."""


def version_key(version):
    """A sortable key for a CSV version: `26.3.2` < `26.3.10` < `26.7.0`; `4.20.0-2025...` compares its suffix."""
    main, _sep, suffix = str(version or "").lstrip("v").partition("-")
    parts = tuple(int(p) if p.isdigit() else 0 for p in main.split("."))
    tail = tuple(int(p) if p.isdigit() else 0 for p in re.split(r"[.-]", suffix)) if suffix else ()
    return parts, tail


def csv_version(csv_name):
    """`gpu-operator-certified.v26.7.0` -> `26.7.0`; `nfd.4.20.0-202510211040` -> `4.20.0-202510211040`."""
    tail = csv_name.split(".", 1)[1] if "." in csv_name else csv_name
    return tail[1:] if tail.startswith("v") and tail[1:2].isdigit() else tail


def not_found_message(package, available):
    names = sorted(available)
    listed = ", ".join(names[:MAX_LISTED_PACKAGES]) or "none"
    if len(names) > MAX_LISTED_PACKAGES:
        listed += " and {0} more".format(len(names) - MAX_LISTED_PACKAGES)
    return ("package {0} not found in the catalog (PackageManifest {1}/{0}); packages available: {2}. Check the "
            "package name, or that its CatalogSource is healthy (oc get catalogsource -n {1}).".format(
                package, MARKETPLACE_NAMESPACE, listed))


def channel_chain(channel):
    """The CSV names of a PackageManifest channel, oldest first (the head, currentCSV, last)."""
    entries = channel.get("entries") or []
    if not entries:
        return [channel["currentCSV"]] if channel.get("currentCSV") else []
    if all(e.get("version") for e in entries):
        # The package server lists newest first; sort on version, keeping that order for equal versions.
        ordered = sorted(enumerate(entries), key=lambda ie: (version_key(ie[1]["version"]), -ie[0]))
        return [e["name"] for _i, e in ordered]
    return [e["name"] for e in reversed(entries)]


def select(manifest, channel=None, csv=None, source=None, source_namespace=None):
    """Resolve the task against a PackageManifest. Returns the choice as a dict, or raises OlmError.

    The dict has package, channel, default_channel, head (the channel's currentCSV), chain (oldest first), csv (the
    expected CSV: `csv` or the head), version, source, source_namespace.
    """
    status = manifest.get("status") or {}
    package = status.get("packageName") or manifest["metadata"]["name"]
    default = status.get("defaultChannel")
    channels = dict((c["name"], c) for c in status.get("channels") or [])
    name = channel or default
    if name not in channels:
        raise OlmError("package {0}: channel {1} is not offered; channels: {2} (default: {3})".format(
            package, name, ", ".join(sorted(channels)) or "none", default))
    chain = channel_chain(channels[name])
    head = channels[name].get("currentCSV") or (chain[-1] if chain else None)
    expected = csv or head
    if expected not in chain:
        raise OlmError("package {0}: csv {1} is not in channel {2}; the channel has: {3} (head: {4})".format(
            package, expected, name, ", ".join(chain) or "none", head))
    versions = dict((e["name"], e.get("version")) for e in channels[name].get("entries") or [])
    return {
        "package": package, "channel": name, "default_channel": default, "head": head, "chain": chain,
        "csv": expected, "version": versions.get(expected) or csv_version(expected),
        "source": source or status.get("catalogSource"),
        "source_namespace": source_namespace or status.get("catalogSourceNamespace") or MARKETPLACE_NAMESPACE,
    }


def upgrade_steps(chain, installed, expected):
    """The CSVs to install, in order, to go from `installed` (None: nothing yet) to `expected` along `chain`.

    A fresh install goes straight to `expected` (the Subscription's startingCSV); an upgrade goes one CSV at a time,
    as OLM offers them. Raises OlmError when `installed` is newer than `expected` (OLM cannot downgrade).
    """
    if not installed:
        return [expected]
    if installed == expected:
        return []
    if installed in chain:
        if chain.index(installed) > chain.index(expected):
            raise OlmError(_newer_message(installed, expected))
        return chain[chain.index(installed) + 1:chain.index(expected) + 1]
    # Installed from another channel: the channel's CSVs newer than it, by version.
    have = version_key(csv_version(installed))
    if have > version_key(csv_version(expected)):
        raise OlmError(_newer_message(installed, expected))
    return [c for c in chain[:chain.index(expected) + 1] if version_key(csv_version(c)) > have]


def _newer_message(installed, expected):
    return ("installed CSV {0} is newer than the expected {1}; OLM does not downgrade. Set csv to {0} (or leave "
            "it unset for the channel head), or uninstall the operator first.".format(installed, expected))


# -- objects


def namespace_object(name, labels=None):
    meta = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def operator_group_object(name, namespace, target_namespaces):
    """target_namespaces [] means AllNamespaces (no targetNamespaces at all)."""
    spec = {"targetNamespaces": list(target_namespaces)} if target_namespaces else {}
    return {"apiVersion": OLM_V1, "kind": "OperatorGroup", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


def subscription_object(name, namespace, choice, approval, starting_csv):
    spec = {"name": choice["package"], "channel": choice["channel"], "source": choice["source"],
            "sourceNamespace": choice["source_namespace"], "installPlanApproval": approval}
    if starting_csv:
        spec["startingCSV"] = starting_csv
    return {"apiVersion": OLM_V1ALPHA1, "kind": "Subscription", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


def _targets(group):
    return sorted(((group.get("spec") or {}).get("targetNamespaces")) or [])


def _all_namespaces(group):
    spec = group.get("spec") or {}
    return not spec.get("targetNamespaces") and not spec.get("selector")


def choose_operator_group(existing, namespace, name, name_given, target_namespaces):
    """The OperatorGroup to apply in `namespace`, honouring OLM's one-group-per-namespace rule. Raises OlmError.

    existing: the OperatorGroups in the namespace. An existing group with another name is adopted when the task
    did not name one and its targets already match; anything else would leave two groups (the CSV then fails with
    TooManyOperatorGroups) or change someone else's group, so it is refused with what to do.
    """
    wanted = sorted(target_namespaces)
    if len(existing) > 1:
        raise OlmError("namespace {0} has {1} OperatorGroups ({2}); OLM allows one per namespace (CSVs fail with "
                       "TooManyOperatorGroups): delete all but one".format(
                           namespace, len(existing), ", ".join(sorted(g["metadata"]["name"] for g in existing))))
    if existing:
        group = existing[0]
        found = group["metadata"]["name"]
        matches = _all_namespaces(group) if not wanted else _targets(group) == wanted
        describe = "all namespaces" if _all_namespaces(group) else "[{0}]".format(", ".join(_targets(group)))
        if found != name and (name_given or not matches):
            raise OlmError(
                "namespace {0} already has OperatorGroup {1} (targets {2}); OLM allows one per namespace. Set "
                "operator_group.name: {1} (and target_namespaces to what it should target), or delete it".format(
                    namespace, found, describe))
        if not wanted and not _all_namespaces(group):
            raise OlmError("OperatorGroup {0}/{1} targets {2}; switching it to all namespaces means deleting it and "
                           "letting this task recreate it".format(namespace, found, describe))
        name = found
    return operator_group_object(name, namespace, wanted)


def find_subscription(subscriptions, package):
    """The Subscription of `package` among a namespace's Subscriptions, or None."""
    found = [s for s in subscriptions if (s.get("spec") or {}).get("name") == package]
    return sorted(found, key=lambda s: s["metadata"]["name"])[0] if found else None


# -- InstallPlans


def plan_csvs(plan):
    return list((plan.get("spec") or {}).get("clusterServiceVersionNames") or [])


def plans_of(plans, subscription, known_csvs):
    """The InstallPlans of one Subscription: owned by it, or (no owner recorded) naming only CSVs of its package."""
    uid = ((subscription or {}).get("metadata") or {}).get("uid")
    known = set(known_csvs)
    out = []
    for plan in plans:
        owners = [o.get("uid") for o in (plan["metadata"].get("ownerReferences") or []) if o.get("kind") == "Subscription"]
        if (uid and uid in owners) or (not owners and set(plan_csvs(plan)) <= known and plan_csvs(plan)):
            out.append(plan)
    return out


def _newest_first(plans):
    return sorted(plans, key=lambda p: ((p.get("spec") or {}).get("generation") or 0,
                                        p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]),
                  reverse=True)


def plan_for(plans, csv):
    """(plan to approve, plan already approved) for exactly [csv]; at most one of them is set.

    Only a plan whose clusterServiceVersionNames is exactly [csv] qualifies: a plan that would also install
    something else is never approved by the task. When OLM made several plans for the CSV, the newest is used.
    """
    exact = [p for p in plans if plan_csvs(p) == [csv]]
    approved = [p for p in exact if (p.get("spec") or {}).get("approved")]
    if approved:
        return None, _newest_first(approved)[0]
    return (_newest_first(exact)[0] if exact else None), None


def bundled_plan(plans, csv):
    """An unapproved plan that installs `csv` together with other CSVs (never approved by the task), or None."""
    for plan in _newest_first(plans):
        names = plan_csvs(plan)
        if csv in names and len(names) > 1 and not (plan.get("spec") or {}).get("approved"):
            return plan
    return None


def describe_plan(plan):
    return {"name": plan["metadata"]["name"], "csvs": plan_csvs(plan),
            "approved": bool((plan.get("spec") or {}).get("approved")),
            "phase": (plan.get("status") or {}).get("phase")}


def pending_plans(plans, excluding=()):
    """Unapproved plans, as {name, csvs, approved, phase}, except those named in `excluding`."""
    return [describe_plan(p) for p in sorted(plans, key=lambda p: p["metadata"]["name"])
            if not (p.get("spec") or {}).get("approved") and p["metadata"]["name"] not in excluding]


# -- status


def subscription_status(sub):
    """The parts of a Subscription's status a person needs: state, CSVs and conditions (type, status, reason, message)."""
    if sub is None:
        return {"name": None, "state": None, "installed_csv": None, "current_csv": None, "conditions": []}
    status = sub.get("status") or {}
    return {
        "name": sub["metadata"]["name"],
        "state": status.get("state") or None,
        "installed_csv": status.get("installedCSV"),
        "current_csv": status.get("currentCSV"),
        "conditions": [dict((k, c.get(k)) for k in ("type", "status", "reason", "message"))
                       for c in status.get("conditions") or []],
    }


def describe_subscription(sub):
    """One line: `state UpgradePending, installed X, current Y; conditions: ResolutionFailed=True (...): msg`."""
    s = subscription_status(sub)
    if s["name"] is None:
        return "Subscription not found"
    text = "Subscription {0}: state {1}, installedCSV {2}, currentCSV {3}".format(
        s["name"], s["state"] or "(none)", s["installed_csv"] or "(none)", s["current_csv"] or "(none)")
    if s["conditions"]:
        text += "; conditions: " + "; ".join(
            "{0}={1} ({2}): {3}".format(c["type"], c["status"], c["reason"], c["message"]) for c in s["conditions"])
    return text


def csv_phase(csv):
    return ((csv or {}).get("status") or {}).get("phase") or None


def csv_failure(csv):
    """`CSV X failed (reason R): message` when the CSV is in phase Failed, else None."""
    status = (csv or {}).get("status") or {}
    if status.get("phase") != "Failed":
        return None
    return "ClusterServiceVersion {0}/{1} failed (reason {2}): {3}".format(
        csv["metadata"].get("namespace"), csv["metadata"]["name"], status.get("reason") or "unknown",
        status.get("message") or "no message")


def watched_csv(choice, approval, sub):
    """(the CSV being installed now or, when none is left to install, the one that should be running; steps left).

    With Automatic approval OLM moves on to later CSVs by itself: one at or past the expected CSV counts as done.
    """
    chain, expected = choice["chain"], choice["csv"]
    installed = ((sub or {}).get("status") or {}).get("installedCSV")
    if installed and approval == "Automatic" and installed in chain and chain.index(installed) >= chain.index(expected):
        expected = installed
    steps = upgrade_steps(chain, installed, expected)
    return (steps[0] if steps else expected), steps


def package_csvs(manifest):
    """Every CSV name the PackageManifest offers, in any channel."""
    out = set()
    for channel in (manifest.get("status") or {}).get("channels") or []:
        out.update(channel_chain(channel))
    return out


def next_step(choice, approval, sub, plans, csvs):
    """What the install loop does next, from what it just read. Returns (action, detail).

    - (DONE, csv name) when the expected CSV (with Automatic approval: it or a later one) is installed and Succeeded;
    - (FAILED, message) when the CSV being installed failed, or only a plan bundling other CSVs offers it;
    - (APPROVE, (plan, csv)) when the plan for exactly the next CSV waits for approval (Manual), or for a later
      CSV of the chain up to the expected one that OLM offers directly (olm.skipRange);
    - (WAIT_PLAN, what) while OLM has not made that plan yet (Manual);
    - (WAIT, what) otherwise (OLM or the operator is at work), saying what is awaited.
    csvs: {name: CSV dict} for the CSVs of interest that exist. Raises OlmError on a downgrade.
    """
    target, steps = watched_csv(choice, approval, sub)
    failure = csv_failure(csvs.get(target))
    if failure:
        return FAILED, failure
    if not steps:
        phase = csv_phase(csvs.get(target))
        if phase == "Succeeded":
            return DONE, target
        return WAIT, "CSV {0} phase {1}".format(target, phase or "(not created yet)")
    if sub is None:
        return WAIT, "the Subscription"
    to_approve, approved = plan_for(plans, target)
    if approved is not None or approval == "Automatic":
        phase = csv_phase(csvs.get(target))
        return WAIT, "CSV {0} phase {1}".format(target, phase or "(not created yet)")
    if to_approve is not None:
        return APPROVE, (to_approve, target)
    # Real bundles carry olm.skipRange: OLM may offer a later CSV of the chain directly (never past the
    # expected one), skipping the intermediate ones. That plan is still exactly one CSV the task asked to reach.
    for later in steps[1:]:
        later_plan, later_approved = plan_for(plans, later)
        if later_approved is not None:
            return WAIT, "CSV {0} phase {1}".format(later, csv_phase(csvs.get(later)) or "(not created yet)")
        if later_plan is not None:
            return APPROVE, (later_plan, later)
    bundled = bundled_plan(plans, target)
    if bundled is not None:
        return FAILED, ("InstallPlan {0} would install {1} together ({2}); the task approves only a plan for exactly "
                        "{1}. Review and approve it yourself, or install the other operators in their own "
                        "namespaces".format(bundled["metadata"]["name"], target, ", ".join(plan_csvs(bundled))))
    return WAIT_PLAN, "an InstallPlan for {0}".format(target)
