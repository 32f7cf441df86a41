"""The namespace controller of kube-controller-manager, which the local cluster does not run.

A deleted namespace keeps the `kubernetes` finalizer until everything in it is gone; this removes what is
left (every namespaced kind the server serves), then finalizes the namespace, as the real controller does.
"""
from __future__ import annotations

from kubernetes.dynamic.exceptions import NotFoundError

from .framework import Simulator


class NamespaceSimulator(Simulator):
    name = "kube-controller-manager"
    watches = {"Namespace": "v1"}

    def _namespaced_resources(self):
        for res in self.dyn.resources.search():
            if res.namespaced and "delete" in (res.verbs or []) and "list" in (res.verbs or []) \
                    and "/" not in res.name and res.kind != "Event":
                yield res

    def reconcile(self, kind, key, obj):
        if obj is None or not obj.metadata.deletionTimestamp:
            return
        ns = obj.metadata.name
        remaining = 0
        for res in self._namespaced_resources():
            try:
                items = res.get(namespace=ns).items
            except Exception:  # a kind the server lists but cannot list here (aggregated, gone): skip it
                continue
            for item in items:
                remaining += 1
                try:
                    res.delete(name=item.metadata.name, namespace=ns)
                except NotFoundError:
                    pass
        if remaining:
            return self.requeue("Namespace", None, ns, after=0.5)
        body = obj.to_dict()
        body["spec"]["finalizers"] = [f for f in body["spec"].get("finalizers", []) if f != "kubernetes"]
        self.dyn.request("PUT", f"/api/v1/namespaces/{ns}/finalize", body=body)
