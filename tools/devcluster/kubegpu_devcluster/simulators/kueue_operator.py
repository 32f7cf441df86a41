"""The Red Hat build of Kueue's operator (OLM package kueue-operator), as far as the tenancy stage meets it.

Follows openshift/kueue-operator (tools/devcluster/crds/kueue-operator/SOURCES.md) and Red Hat's
"Installing the Red Hat build of Kueue": the operator serves nothing of Kueue's own API until its operand exists.
Acts for CSVs the OLM simulator brought to Succeeded:

- kueue-operator.* Succeeded -> the CRD its bundle owns, Kueue (kueue.openshift.io/v1,
  tools/devcluster/crds/kueue-operator), as OLM creates a CSV's owned CRDs once it installs. The CRD itself
  refuses any name but "cluster" (a CEL rule).
- Kueue "cluster" with spec.managementState Managed (Unmanaged/Removed: left alone): the operator deploys Kueue in
  its own namespace (the CSV's): the kueue.x-k8s.io CRDs (shared/crds/kueue), Deployment
  kueue-controller-manager there, then status: conditions Available True / Progressing False / Degraded False,
  readyReplicas 1, observedGeneration. Without an installed kueue-operator CSV nothing happens (no operator runs).

Kueue's own controller and webhooks do not run here (as with the upstream chart on the Kubernetes fleets): the API
server validates Kueue's objects against the CRDs.

Knobs (ConfigMap kubegpu-devcluster/simulator-knobs):
  kueue-operator.ready_seconds   how long the operand takes to become Available (default 1)
"""
from __future__ import annotations

from .. import crds, paths
from . import serving
from .framework import Simulator, log, now

CSV = "operators.coreos.com/v1alpha1"
KUEUE_OPERAND = "kueue.openshift.io/v1"
PACKAGE = "kueue-operator."
MANAGER = "kueue-operator"
CONTROLLER = "kueue-controller-manager"


class KueueOperatorSimulator(Simulator):
    name = "kueue-operator"
    watches = {"ClusterServiceVersion": CSV, "Kueue": KUEUE_OPERAND}
    extra_kinds = {"Deployment": "apps/v1"}

    def reconcile(self, kind, key, obj):
        if kind == "ClusterServiceVersion":
            if obj is not None and obj.metadata.name.startswith(PACKAGE) and \
                    (obj.status or {}).get("phase") == "Succeeded":
                created = crds.ensure(self.dyn, crds.group_files(paths.crds_dir(), ["kueue-operator"]))
                self.dyn.resources.invalidate_cache()
                if created:
                    log.info("kueue-operator: %s: CRDs %s", obj.metadata.name, ", ".join(created))
                self.requeue("Kueue", None, "cluster")
            return
        if obj is not None and not obj.metadata.deletionTimestamp:
            self._kueue(obj.to_dict())

    def _operator_namespace(self) -> str | None:
        """The namespace of the installed operator (its Succeeded CSV), or None when none runs."""
        for csv in self.api("ClusterServiceVersion").get().items:
            if csv.metadata.name.startswith(PACKAGE) and (csv.status or {}).get("phase") == "Succeeded":
                return csv.metadata.namespace
        return None

    def _kueue(self, kueue: dict) -> None:
        meta = kueue["metadata"]
        namespace = self._operator_namespace()
        if namespace is None or (kueue.get("spec") or {}).get("managementState", "Managed") != "Managed":
            return
        status = kueue.get("status") or {}
        available = [c for c in status.get("conditions") or [] if c.get("type") == "Available"]
        if available and available[0].get("status") == "True" and \
                status.get("observedGeneration") == meta.get("generation"):
            return
        created = crds.ensure(self.dyn, sorted((paths.crds_dir() / "kueue").glob("*.yaml")))
        self.dyn.resources.invalidate_cache()
        if created:
            log.info("kueue-operator: Kueue %s: CRDs %s", meta["name"], ", ".join(created))
        if serving.get(self.api("Deployment"), namespace, CONTROLLER) is None:
            labels = {"app.kubernetes.io/name": "kueue", "control-plane": "controller-manager"}
            self.api("Deployment").create(namespace=namespace, body={
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": CONTROLLER, "namespace": namespace, "labels": labels},
                "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                             {"name": "manager", "image": "registry.redhat.io/kueue/kueue-rhel9:v1.2"}]}}}})
            return self.requeue("Kueue", None, meta["name"], after=self.knobs.seconds("ready_seconds", 1.0))
        stamp = now()
        conditions = [{"type": "Available", "status": "True", "reason": "AsExpected", "message": "",
                       "lastTransitionTime": stamp},
                      {"type": "Progressing", "status": "False", "reason": "AsExpected", "message": "",
                       "lastTransitionTime": stamp},
                      {"type": "Degraded", "status": "False", "reason": "AsExpected", "message": "",
                       "lastTransitionTime": stamp}]
        self.api("Kueue").status.patch(
            body={"apiVersion": KUEUE_OPERAND, "kind": "Kueue", "metadata": {"name": meta["name"]},
                  "status": {"conditions": conditions, "readyReplicas": 1,
                             "observedGeneration": meta.get("generation")}},
            content_type="application/merge-patch+json")
