"""The uninstall playbook against a local cluster of its own: site converged with the demo inventory, then undone.

Every object of every kind the API server serves (the stages' and what their operators, charts and simulators made
from them, and the nodes' labels and annotations) is read before `site`; after `site` and `uninstall` it must read
the same again, modulo what the server manages (resourceVersion, uid, managedFields, timestamps, generation, status)
and what is left on purpose (plan.KEPT: CRDs, OpenShift's FeatureGate), each named with why. What OpenShift AI's
operator made by itself from the collection's install (its DSCInitialization, its namespaces, the webhook OLM made
from its CSV, played by an admission policy) goes too: the collection installed OpenShift AI.
Check mode lists what would be removed and writes nothing; a second uninstall changes nothing and writes nothing
(writes counted in the audit log, the admin user's: the modules' and helm's own).
"""
from __future__ import annotations

import json
import tempfile
import time

import pytest
from kubernetes import dynamic
from kubernetes.config import new_client_from_config

from conftest import REPO
from kubegpu_devcluster import paths, testing

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.uninstall.plan import KEPT

INVENTORY = REPO / "examples" / "demo" / "inventory.yml"
# Kinds whose objects come and go with the control plane's own work, not with what the collection did.
VOLATILE = {"Event", "Lease", "EndpointSlice", "Endpoints", "ComponentStatus", "IPAddress", "ControllerRevision"}
# Server-managed metadata, and the simulated hardware's own bookkeeping on nodes (not the cluster's API state).
SERVER_FIELDS = ("resourceVersion", "uid", "managedFields", "creationTimestamp", "generation", "selfLink")
SIMULATOR_ANNOTATION = "devcluster.kubegpu.io/"
CHARTS = paths.charts_dir()

pytestmark = pytest.mark.skipif(not (CHARTS / "dra-driver-nvidia-gpu").is_dir(),
                                reason=f"the DRA driver chart is not at {CHARTS}")


@pytest.fixture(scope="module")
def cluster(devcluster_session):
    """A cluster of this file's own: site installs operators, serves models and changes MIG on it."""
    with testing.own_cluster(REPO / ".cache" / "uninstall-cluster", type(devcluster_session)) as dc:
        yield dc


def _client(dc):
    # A discovery cache of its own: the kinds the operators' CRDs bring must be seen at once.
    cache = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    return dynamic.DynamicClient(new_client_from_config(str(dc.kubeconfig)), cache_file=cache)


def _clean(obj: dict) -> dict:
    obj = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_FIELDS}
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith(SIMULATOR_ANNOTATION)}
    if notes:
        meta["annotations"] = notes
    else:
        meta.pop("annotations", None)
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


def run(dc, playbook, *args):
    t0 = time.monotonic()
    proc = dc.playbook(f"playbooks/{playbook}.yml", "-i", str(INVENTORY), *args)
    seconds = time.monotonic() - t0
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"{playbook}: no JSON (rc {proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    failures = [(t["task"]["name"], t["hosts"]["localhost"].get("msg"))
                for p in out["plays"] for t in p["tasks"] if t["hosts"].get("localhost", {}).get("failed")]
    assert not failures, f"{playbook} {args}: {failures}"
    return out, out["stats"]["localhost"], seconds


def removed(out) -> list:
    """The keys every gpu_uninstall task removed (or would), in order."""
    return [c["key"] for p in out["plays"] for t in p["tasks"]
            if t["task"]["name"].split(" : ", 1)[-1].startswith("Remove what was written by stage")
            for c in t["hosts"]["localhost"].get("changes") or []]


def users_own(dc):
    """What a user made before site, as NVIDIA's OpenShift guide has it: the GPU Operator's namespace with the
    cluster-monitoring label, and a ConfigMap of theirs in it. The uninstall must leave both (the snapshot shows it)."""
    for body in ({"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": "nvidia-gpu-operator", "labels": {"openshift.io/cluster-monitoring": "true"}}},
                 {"apiVersion": "v1", "kind": "ConfigMap", "data": {"note": "mine"},
                  "metadata": {"name": "team-notes", "namespace": "nvidia-gpu-operator"}}):
        api = dc.admin.resources.get(api_version=body["apiVersion"], kind=body["kind"])
        api.create(body=body, namespace=body["metadata"].get("namespace"), field_manager="kubectl-create")


def test_uninstall_leaves_the_cluster_as_before_site(cluster):
    dc = cluster
    users_own(dc)
    before = snapshot(dc)
    assert "Namespace//nvidia-gpu-operator" in before
    assert not [k for k in before if k.startswith("ClusterPolicy/")], "a fresh cluster has a ClusterPolicy"

    _out, stats, seconds = run(dc, "site")
    print(f"\nsite converged in {seconds:.1f} s")
    converged = snapshot(dc)
    installed = differences(before, converged)
    assert "ClusterPolicy//gpu-cluster-policy" in installed and "InferenceService/llm/llama-8b" in installed

    # Check mode: everything listed, nothing written.
    mark = dc.audit.mark()
    out, stats, seconds = run(dc, "uninstall", "--check")
    dc.audit.settle()
    writes = [str(e) for e in dc.audit.writes(mark)]
    listed = removed(out)
    print(f"uninstall --check in {seconds:.1f} s: {len(listed)} objects listed, {len(writes)} writes")
    assert writes == [], writes
    for key in ("InferenceService/llm/llama-8b", "ServingRuntime/llm/vllm", "DataScienceCluster/default-dsc",
                "ClusterQueue/serving", "ResourceClaimTemplate/llm/gpu-80g",
                "HelmRelease/dra-driver-nvidia-gpu/dra-driver-nvidia-gpu",
                "ConfigMap/nvidia-gpu-operator/kubegpu-mig-parted-config", "ClusterPolicy/gpu-cluster-policy",
                "Subscription/nvidia-gpu-operator/gpu-operator-certified", "Namespace/openshift-nfd",
                "PrometheusRule/nvidia-gpu-operator/kubegpu-gpu-alerts"):
        assert key in listed, f"{key} not listed by uninstall --check: {listed}"
    # OpenShift AI, which the collection installed, in the order of Red Hat's uninstall: its DataScienceCluster, its
    # DSCInitialization, the operator, then the namespace the operator made (its own namespace goes last, with the
    # other namespaces the collection created).
    rhods = [k for k in listed if k.startswith("Subscription/redhat-ods-operator/")]
    assert rhods, listed
    assert listed.index("DataScienceCluster/default-dsc") < listed.index("DSCInitialization/default-dsci") < \
        listed.index(rhods[0]) < listed.index("Namespace/redhat-ods-applications") < \
        listed.index("Namespace/redhat-ods-operator"), listed
    assert "ValidatingAdmissionPolicy//kubegpu-devcluster-odh-acceleratorprofile-webhook" in converged
    # Reverse order of site: monitoring's first, the GPU Operator's last, models before their runtimes.
    assert listed.index("PrometheusRule/nvidia-gpu-operator/kubegpu-gpu-alerts") < listed.index(
        "InferenceService/llm/llama-8b") < listed.index("ServingRuntime/llm/vllm") < listed.index(
        "ClusterQueue/serving") < listed.index("ResourceClaimTemplate/llm/gpu-80g") < listed.index(
        "ClusterPolicy/gpu-cluster-policy")

    out, stats, seconds = run(dc, "uninstall")
    print(f"uninstall in {seconds:.1f} s: {stats['changed']} tasks changed, {len(removed(out))} objects removed")
    assert stats["changed"] > 0
    after = snapshot(dc)
    left = differences(before, after)
    unexpected = {k: v for k, v in left.items() if not kept_on_purpose(k)}
    print(f"left on purpose: {sorted(left)}")
    assert unexpected == {}, "\n".join(f"{k}: {v}" for k, v in unexpected.items())
    # What is kept on purpose is there (the test sees it), and is only that.
    assert any(k.startswith("CustomResourceDefinition/") for k in left), left
    assert "FeatureGate//cluster" in left, left
    # The user's namespace and ConfigMap stayed (equal to before); the namespaces the collection created went.
    assert "Namespace//nvidia-gpu-operator" in after and "ConfigMap/nvidia-gpu-operator/team-notes" in after
    assert "Namespace//openshift-nfd" not in after and "Namespace//openshift-keda" not in after
    # What OpenShift AI's operator made by itself went with it (the snapshot's equality says so too).
    assert not [k for k in after if k.startswith(("DSCInitialization/", "ValidatingAdmissionPolicy/"))
                or "redhat-ods" in k], [k for k in after if "redhat-ods" in k]

    mark = dc.audit.mark()
    out, stats, seconds = run(dc, "uninstall")
    dc.audit.settle()
    writes = [str(e) for e in dc.audit.writes(mark)]
    print(f"second uninstall in {seconds:.1f} s: {stats['changed']} changed, {len(writes)} writes")
    assert stats["changed"] == 0 and removed(out) == []
    assert writes == [], writes
