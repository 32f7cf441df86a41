"""Every object of a cluster, read at one moment and compared with another (the uninstall's measure).

A snapshot holds every object of every kind the API server serves (the stages' and what their operators, charts and
simulators made from them, and the nodes' labels and annotations), without what the server manages
(resourceVersion, uid, managedFields, timestamps, generation, status). After `site` and `uninstall` a cluster must
read as it did before `site`, but for what is left on purpose (plan.KEPT: CRDs, OpenShift's FeatureGate).
"""
from __future__ import annotations

import tempfile

from kubernetes import dynamic
from kubernetes.config import new_client_from_config

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.uninstall.plan import KEPT

# Kinds whose objects come and go with the control plane's own work, not with what the collection did.
VOLATILE = {"Event", "Lease", "EndpointSlice", "Endpoints", "ComponentStatus", "IPAddress", "ControllerRevision"}
# Server-managed metadata, and the simulated hardware's own bookkeeping on nodes (not the cluster's API state).
SERVER_FIELDS = ("resourceVersion", "uid", "managedFields", "creationTimestamp", "generation", "selfLink")
SIMULATOR_ANNOTATION = "devcluster.kubegpu.io/"
# Labels the API server itself sets: the day a Secret-backed ServiceAccount token was last used (the automation
# account's, by the runs).
SERVER_LABELS = ("kubernetes.io/legacy-token-last-used",)


def _client(dc):
    # A discovery cache of its own: the kinds the operators' CRDs bring must be seen at once.
    cache = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    return dynamic.DynamicClient(new_client_from_config(str(dc.kubeconfig)), cache_file=cache)


def _clean(obj: dict) -> dict:
    obj = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_FIELDS}
    for part, leave_out in (("annotations", lambda k: k.startswith(SIMULATOR_ANNOTATION)),
                            ("labels", lambda k: k in SERVER_LABELS)):
        kept = {k: v for k, v in (meta.get(part) or {}).items() if not leave_out(k)}
        if kept:
            meta[part] = kept
        else:
            meta.pop(part, None)
    obj["metadata"] = meta
    return obj


def snapshot(dc) -> dict:
    """{apiVersion/kind/namespace/name: the object without server-managed fields} of every listable kind."""
    client = _client(dc)
    out = {}
    for res in client.resources.search():
        if not res.verbs or "list" not in res.verbs or "/" in res.name or res.kind in VOLATILE \
                or res.kind.endswith("List") or res.kind.endswith("Review"):
            continue
        try:
            items = client.get(res).items
        except Exception:  # pylint: disable=broad-except  # a kind that cannot be listed as such (aggregated)
            continue
        for item in items:
            obj = item.to_dict()
            meta = obj["metadata"]
            out[f"{res.kind}/{meta.get('namespace') or ''}/{meta['name']}"] = _clean(obj)
    return out


def differences(before: dict, after: dict) -> dict:
    """{key: what differs} between two snapshots."""
    out = {}
    for key in sorted(set(before) | set(after)):
        if key not in after:
            out[key] = "gone"
        elif key not in before:
            out[key] = "new"
        elif before[key] != after[key]:
            b, a = before[key], after[key]
            fields = sorted(k for k in set(b) | set(a) if b.get(k) != a.get(k))
            if fields == ["metadata"]:
                fields = ["metadata." + k for k in sorted(set(b["metadata"]) | set(a["metadata"]))
                          if b["metadata"].get(k) != a["metadata"].get(k)]
                for part in ("labels", "annotations"):
                    if "metadata." + part in fields:
                        x, y = b["metadata"].get(part) or {}, a["metadata"].get(part) or {}
                        fields += ["%s %s: %r -> %r" % (part, k, x.get(k), y.get(k))
                                   for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]
            out[key] = fields
    return out


def kept_on_purpose(key: str) -> bool:
    kind = key.split("/", 1)[0]
    return kind in KEPT
