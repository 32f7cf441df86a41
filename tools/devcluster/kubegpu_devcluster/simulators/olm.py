"""OLM: Subscription -> InstallPlan (Manual or Automatic) -> ClusterServiceVersion -> Succeeded.

Follows the flow in shared/reference/gpu-operator.md ("OLM flow"): the Subscription resolves against the
catalog (PackageManifest), an InstallPlan names exactly one CSV, a Manual plan waits for spec.approved, the
CSV passes Pending -> InstallReady -> Installing -> Succeeded and the Subscription records installedCSV.
As in OLM, once a CSV is installed and the channel offers a newer one, the next InstallPlan appears at once
(and waits for approval when Manual). Unknown package or channel -> condition ResolutionFailed.
A Subscription moved to another channel upgrades along that channel: the next CSV is the oldest one newer than
the installed CSV, one InstallPlan per step. Each CSV gets its own alm-examples from the catalog data
(catalog.csv_examples), replaces the CSV installed before it, and that one is deleted once the new one Succeeded.

Knobs (ConfigMap kubegpu-devcluster/simulator-knobs):
  olm.csv_seconds   how long a CSV takes from Pending to Succeeded (default 1)
  olm.fail_csv      name of a CSV that ends in phase Failed
  olm.hang_csv      name of a CSV that stays Installing forever
"""
from __future__ import annotations

import json
import secrets

from .. import catalog
from ..catalog import MARKETPLACE_NS, csv_version
from .framework import Simulator, log, now

V1A1 = "operators.coreos.com/v1alpha1"
ADMISSION = "admissionregistration.k8s.io/v1"
# The cluster-scoped kinds OLM deletes with their CSV (by its owner labels) that a simulator creates.
OWNED_CLUSTER_KINDS = ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy",
                       "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
PHASES = ["Pending", "InstallReady", "Installing", "Succeeded"]


def olm_owner_labels(csv: dict) -> dict:
    """The labels OLM puts on a cluster-scoped object it creates for a CSV (an owner reference cannot point from a
    cluster-scoped object to a namespaced one): OLM deletes the objects so labelled when the CSV goes."""
    meta = csv["metadata"]
    return {"olm.owner": meta["name"], "olm.owner.kind": "ClusterServiceVersion",
            "olm.owner.namespace": meta["namespace"]}


def _version_key(v: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in v.split("-")[0].split("."))


class OlmSimulator(Simulator):
    name = "olm"
    watches = {"Subscription": V1A1, "InstallPlan": V1A1, "ClusterServiceVersion": V1A1}
    extra_kinds = {"PackageManifest": "packages.operators.coreos.com/v1", "OperatorGroup": "operators.coreos.com/v1"}

    def reconcile(self, kind, key, obj):
        if obj is not None:
            getattr(self, f"_{kind.lower()}")(obj.to_dict())
        elif kind == "ClusterServiceVersion":
            self._csv_deleted(key[1], key[2])

    def _csv_deleted(self, namespace: str, name: str) -> None:
        """As OLM does once a CSV is deleted: the cluster-scoped objects it made for it (labelled with the CSV as
        owner, olm_owner_labels) go too; here the admission kinds (webhooks, and the admission policies the
        simulators play webhooks with)."""
        selector = ",".join(f"{k}={v}" for k, v in sorted(olm_owner_labels(
            {"metadata": {"name": name, "namespace": namespace}}).items()))
        for api_kind in OWNED_CLUSTER_KINDS:
            api = self.dyn.resources.get(api_version=ADMISSION, kind=api_kind)
            for item in api.get(label_selector=selector).items:
                api.delete(name=item.metadata.name)
                log.info("olm: %s %s deleted with its CSV %s/%s", api_kind, item.metadata.name, namespace, name)

    # -- Subscription
    def _set_sub_status(self, sub: dict, status: dict) -> None:
        sub["status"] = dict(sub.get("status") or {}, lastUpdated=now(), **status)
        self.api("Subscription").status.replace(body=sub, namespace=sub["metadata"]["namespace"])

    def _resolution_failed(self, sub: dict, message: str) -> None:
        cond = {"type": "ResolutionFailed", "status": "True", "reason": "ConstraintsNotSatisfiable",
                "message": message, "lastTransitionTime": now()}
        current = [c for c in (sub.get("status") or {}).get("conditions", []) if c.get("type") == "ResolutionFailed"]
        if current and current[0].get("message") == message:
            return
        self._set_sub_status(sub, {"conditions": [cond], "state": ""})

    def _subscription(self, sub: dict) -> None:
        spec, meta = sub["spec"], sub["metadata"]
        status = sub.get("status") or {}
        pkg = self.get("PackageManifest", MARKETPLACE_NS, spec["name"])
        if pkg is None or pkg.status.catalogSource != spec["source"]:
            return self._resolution_failed(sub, (
                f"constraints not satisfiable: no operators found in package {spec['name']} in the catalog "
                f"referenced by subscription {meta['name']}"))
        pkg = pkg.to_dict()["status"]
        channel_name = spec.get("channel") or pkg["defaultChannel"]
        channel = next((c for c in pkg["channels"] if c["name"] == channel_name), None)
        if channel is None:
            return self._resolution_failed(sub, (
                f"constraints not satisfiable: no operators found in channel {channel_name} of package "
                f"{spec['name']} in the catalog referenced by subscription {meta['name']}"))
        chain = [e["name"] for e in reversed(channel["entries"])]  # oldest first
        installed = status.get("installedCSV")
        current = status.get("currentCSV")
        if current and current != installed and self._phase(meta["namespace"], current) == "Succeeded":
            # Level, not edge: the CSV's success is recorded here, from what the cluster holds, so that a write
            # lost to a conflict when the CSV succeeded is made on the next look (the CSV requeues its
            # Subscription each time it is seen Succeeded).
            return self._set_sub_status(sub, {"installedCSV": current, "state": "AtLatestKnown", "conditions": []})
        if not installed:
            target = spec.get("startingCSV") or chain[-1]
            if target not in chain:
                return self._resolution_failed(sub, (
                    f"constraints not satisfiable: startingCSV {target} is not in channel {channel_name} of "
                    f"package {spec['name']}"))
        else:
            newer = [c for c in chain if _version_key(csv_version(c)) > _version_key(csv_version(installed))]
            if not newer:
                if status.get("state") != "AtLatestKnown" or status.get("currentCSV") != installed:
                    self._set_sub_status(sub, {"state": "AtLatestKnown", "currentCSV": installed, "conditions": []})
                return
            target = newer[0]  # upgrades go one CSV at a time along the channel
        if status.get("currentCSV") == target and status.get("installPlanRef"):
            return
        approval = spec.get("installPlanApproval", "Automatic")
        plans = self.api("InstallPlan").get(namespace=meta["namespace"]).items
        created = next((p.to_dict() for p in plans if target in p.spec.clusterServiceVersionNames
                        and any(o.uid == meta["uid"] for o in (p.metadata.ownerReferences or []))), None)
        if created is None:
            plan = {
                "apiVersion": V1A1, "kind": "InstallPlan",
                "metadata": {"name": f"install-{secrets.token_hex(3)[:5]}", "namespace": meta["namespace"],
                             "ownerReferences": [{"apiVersion": V1A1, "kind": "Subscription",
                                                  "name": meta["name"], "uid": meta["uid"]}],
                             "labels": {f"operators.coreos.com/{spec['name']}.{meta['namespace']}": ""}},
                "spec": {"approval": approval, "approved": approval == "Automatic",
                         "clusterServiceVersionNames": [target], "generation": 1},
            }
            created = self.api("InstallPlan").create(body=plan, namespace=meta["namespace"]).to_dict()
        if not created.get("status"):
            created["status"] = {"phase": "RequiresApproval" if approval == "Manual" else "Installing",
                                 "catalogSources": [spec["source"]]}
            self.api("InstallPlan").status.replace(body=created, namespace=meta["namespace"])
        plan_name = created["metadata"]["name"]
        ref = {"apiVersion": V1A1, "kind": "InstallPlan", "name": plan_name, "namespace": meta["namespace"],
               "uid": created["metadata"]["uid"]}
        conditions = ([{"type": "InstallPlanPending", "status": "True", "reason": "RequiresApproval",
                        "lastTransitionTime": now()}] if approval == "Manual" else [])
        self._set_sub_status(sub, {"currentCSV": target, "installPlanRef": ref, "state": "UpgradePending",
                                   "installplan": {"apiVersion": V1A1, "kind": "InstallPlan", "name": plan_name,
                                                   "uuid": ref["uid"]},
                                   "installPlanGeneration": 1, "conditions": conditions,
                                   "catalogHealth": [{"catalogSourceRef": {"name": spec["source"],
                                                                           "namespace": MARKETPLACE_NS},
                                                      "healthy": True, "lastUpdated": now()}]})

    # -- InstallPlan
    def _installed_by_owner(self, plan: dict) -> str | None:
        """The CSV installed now by the Subscription that owns the plan (the one the plan's CSV replaces)."""
        for owner in plan["metadata"].get("ownerReferences") or []:
            if owner.get("kind") == "Subscription":
                sub = self.get("Subscription", plan["metadata"]["namespace"], owner["name"])
                if sub is not None:
                    return (sub.to_dict().get("status") or {}).get("installedCSV")
        return None

    def _installplan(self, plan: dict) -> None:
        status = plan.get("status") or {}
        if not plan["spec"].get("approved") or status.get("phase") == "Complete":
            return
        ns = plan["metadata"]["namespace"]
        target = plan["spec"]["clusterServiceVersionNames"][0]
        # The CSV comes from its bundle in the catalog: its own alm-examples, not the channel head's.
        pkg = catalog.package_of(catalog.load_packages(), target)
        package = pkg["name"] if pkg else target.split(".")[0]
        examples = json.dumps(catalog.csv_examples(pkg, target)) if pkg else "[]"
        # As OLM's resolver does, the new CSV replaces the one the Subscription has installed (across channels
        # too); on a fresh install, the CSV before it in its channel, as the bundle says.
        previous = self._installed_by_owner(plan)
        if not previous and pkg:
            for names in pkg["channels"].values():
                if target in names and names.index(target) > 0:
                    previous = names[names.index(target) - 1]
        csv = {
            "apiVersion": V1A1, "kind": "ClusterServiceVersion",
            "metadata": {"name": target, "namespace": ns,
                         "annotations": {"alm-examples": examples, "olm.targetNamespaces": ns},
                         "labels": {f"operators.coreos.com/{package}.{ns}": ""}},
            "spec": {"displayName": package, "version": csv_version(target),
                     "install": {"strategy": "deployment", "spec": {"deployments": []}},
                     "customresourcedefinitions": {"owned": []}},
        }
        if previous and previous != target:
            csv["spec"]["replaces"] = previous
        if self.get("ClusterServiceVersion", ns, target) is None:
            self.api("ClusterServiceVersion").create(body=csv, namespace=ns)
        plan["status"] = dict(status, phase="Complete")
        self.api("InstallPlan").status.replace(body=plan, namespace=ns)

    # -- ClusterServiceVersion
    def _set_phase(self, csv: dict, phase: str, reason: str, message: str) -> None:
        csv["status"] = dict(csv.get("status") or {}, phase=phase, reason=reason, message=message,
                             lastUpdateTime=now(), lastTransitionTime=now())
        self.api("ClusterServiceVersion").status.replace(body=csv, namespace=csv["metadata"]["namespace"])

    def _phase(self, namespace: str, name: str) -> str:
        csv = self.get("ClusterServiceVersion", namespace, name)
        return ((csv.to_dict().get("status") or {}).get("phase", "")) if csv is not None else ""

    def _succeeded(self, csv: dict) -> None:
        """What follows a CSV's success, idempotent so that any later look at the Succeeded CSV finishes it: the CSV
        it replaces goes, and the Subscriptions installing it record it (their own reconcile does, _subscription)."""
        ns, name = csv["metadata"]["namespace"], csv["metadata"]["name"]
        replaced = csv["spec"].get("replaces")
        if replaced and self.get("ClusterServiceVersion", ns, replaced) is not None:
            self.api("ClusterServiceVersion").delete(name=replaced, namespace=ns)
        for sub in self.api("Subscription").get(namespace=ns).items:
            status = sub.to_dict().get("status") or {}
            if status.get("currentCSV") == name and status.get("installedCSV") != name:
                self.requeue("Subscription", ns, sub.metadata.name)

    def _clusterserviceversion(self, csv: dict) -> None:
        meta = csv["metadata"]
        ns, name = meta["namespace"], meta["name"]
        phase = (csv.get("status") or {}).get("phase", "")
        if phase == "Succeeded":
            return self._succeeded(csv)
        if phase == "Failed":
            return
        groups = self.dyn.resources.get(api_version="operators.coreos.com/v1", kind="OperatorGroup").get(namespace=ns)
        if not groups.items:
            return self._set_phase(csv, "Failed", "NoOperatorGroup",
                                   f"csv in namespace {ns} with no operatorgroups")
        step = self.knobs.seconds("csv_seconds", 1.0) / 3
        if phase == "Installing" and self.knobs.get("hang_csv") == name:
            return self.requeue("ClusterServiceVersion", ns, name, after=1.0)
        if phase == "Installing" and self.knobs.get("fail_csv") == name:
            return self._set_phase(csv, "Failed", "InstallComponentFailed",
                                   "install strategy failed: Deployment gpu-operator: pods not available "
                                   "(simulated failure)")
        nxt = PHASES[PHASES.index(phase) + 1] if phase in PHASES else PHASES[0]
        self._set_phase(csv, nxt, {"Pending": "RequirementsUnknown", "InstallReady": "AllRequirementsMet",
                                   "Installing": "InstallWaiting", "Succeeded": "InstallSucceeded"}[nxt],
                        "simulated install")
        if nxt != "Succeeded":
            return self.requeue("ClusterServiceVersion", ns, name, after=step)
        self._succeeded(csv)
