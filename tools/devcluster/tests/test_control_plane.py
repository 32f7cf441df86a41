"""The local cluster's control plane is real: the scheduler places pods against what the GPU simulators publish,
the controller-manager runs Deployments, Jobs, service accounts and DRA claims, and KWOK plays the kubelets
without undoing what the simulators write on nodes.

Each test works in a namespace of its own (deleted by the real namespace controller afterwards) and puts back
what it changes on shared nodes.
"""
from __future__ import annotations

import base64
import uuid

import pytest
from kubernetes.dynamic.exceptions import NotFoundError

from kubegpu_devcluster.testing import wait_for
from kubegpu_devcluster import control_plane
from kubegpu_devcluster.fleet import FLEET_LABEL

CP = "nvidia.com/v1"
DRA = "resource.k8s.io/v1"
MIG_NODE = "gpu-h100-000"
MIG_RESOURCE = "nvidia.com/mig-3g.40gb"
# Under load (2 busy cores) the controllers take their time; a wait that passes in 2 s may need 60.
SLOW = 120


def _api(dc, kind, api_version="v1"):
    return dc.admin.resources.get(api_version=api_version, kind=kind)


@pytest.fixture
def namespace(dc):
    """A fresh namespace, ready for pods (its `default` service account exists); deleted afterwards."""
    name = f"cp-{uuid.uuid4().hex[:6]}"
    _api(dc, "Namespace").create(body={"metadata": {"name": name}})
    control_plane.wait_default_service_account(dc.admin, SLOW, namespace=name)
    yield name
    _api(dc, "Namespace").delete(name=name)


def _deployment(name, resources, node_selector=None) -> dict:
    spec = {"containers": [{"name": "vllm", "image": "vllm/vllm-openai", "resources": {"limits": resources}}],
            "terminationGracePeriodSeconds": 0}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def _pods(dc, namespace, selector=None) -> list:
    return [p.to_dict() for p in _api(dc, "Pod").get(namespace=namespace, label_selector=selector).items]


def _condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def _node(dc, name) -> dict:
    return _api(dc, "Node").get(name=name).to_dict()


def _published(node: dict) -> dict:
    """What the fleet loader and the GPU simulators own on a node (KWOK must leave it alone)."""
    return {"labels": node["metadata"].get("labels"), "capacity": node["status"]["capacity"],
            "allocatable": node["status"]["allocatable"]}


def test_components_use_their_builtin_users_and_service_accounts(dc):
    """Each controller runs as its own service account; tokens are signed with the cluster's key and accepted."""
    sas = {sa.metadata.name for sa in _api(dc, "ServiceAccount").get(namespace="kube-system").items}
    assert {"deployment-controller", "job-controller", "namespace-controller", "resource-claim-controller"} <= sas
    assert _api(dc, "ConfigMap").get(name="kube-root-ca.crt", namespace="default").data["ca.crt"] == \
        (dc.state / "pki" / "ca.crt").read_text()
    # A legacy token Secret is filled in by the controller-manager's token controller (signing with sa.key)
    # and the API server authenticates it (verifying with sa.pub).
    secrets = _api(dc, "Secret")
    name = f"token-{uuid.uuid4().hex[:6]}"
    secrets.create(namespace="default", body={
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": name, "annotations": {"kubernetes.io/service-account.name": "default"}}})
    try:
        token = wait_for(lambda: (secrets.get(name=name, namespace="default").data or {}).get("token"),
                         timeout=SLOW, what="the token controller to fill in the Secret")
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": base64.b64decode(token).decode()}}

        # The API server checks a legacy token against the Secret in its informer cache, which may lag the
        # Secret's creation by a moment on a loaded machine: until then the review says not authenticated.
        def authenticated():
            review = _api(dc, "TokenReview", "authentication.k8s.io/v1").create(body=body).to_dict()
            return review if review["status"].get("authenticated") else None

        review = wait_for(authenticated, timeout=SLOW, what="the API server to authenticate the token")
        assert review["status"]["authenticated"] is True
        assert review["status"]["user"]["username"] == "system:serviceaccount:default:default"
    finally:
        secrets.delete(name=name, namespace="default")


def test_kwok_keeps_labels_capacity_and_allocatable(dc):
    """A node that stops reporting Ready is made Ready again by KWOK, which writes conditions only."""
    node = "worker-002"
    nodes = _api(dc, "Node")
    nodes.status.patch(name=node, content_type="application/strategic-merge-patch+json", body={"status": {
        "capacity": {"example.com/widget": "3"}, "allocatable": {"example.com/widget": "3"},
        "conditions": [{"type": "Ready", "status": "False", "reason": "Test", "message": "made NotReady by a test"}]}})
    try:
        before = _published(_node(dc, node))
        assert before["allocatable"]["example.com/widget"] == "3"
        ready = wait_for(lambda: _condition(_node(dc, node), "Ready").get("status") == "True" and _node(dc, node),
                         timeout=SLOW, what=f"KWOK to report {node} Ready again")
        assert _condition(ready, "Ready")["reason"] == "KubeletReady"
        assert _published(ready) == before
        lease = _api(dc, "Lease", "coordination.k8s.io/v1").get(name=node, namespace="kube-node-lease")
        assert [r.uid for r in lease.metadata.ownerReferences] == [ready["metadata"]["uid"]]
    finally:
        nodes.status.patch(name=node, content_type="application/merge-patch+json", body={"status": {
            "capacity": {"example.com/widget": None}, "allocatable": {"example.com/widget": None}}})
    # The node lifecycle controller taints a NotReady node; the taints go once it is Ready again.
    wait_for(lambda: not _node(dc, node)["spec"].get("taints"), timeout=SLOW, what=f"{node} untainted")


def test_pod_asking_more_gpus_than_any_node_has_stays_pending(dc, namespace):
    _api(dc, "Deployment", "apps/v1").create(namespace=namespace, body=_deployment("too-big", {"nvidia.com/gpu": 64}))
    pod = wait_for(lambda: next((p for p in _pods(dc, namespace, "app=too-big")
                                 if _condition(p, "PodScheduled").get("reason") == "Unschedulable"), None),
                   timeout=SLOW, what="the scheduler to give up on the pod")
    assert "Insufficient nvidia.com/gpu" in _condition(pod, "PodScheduled")["message"]
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    events = wait_for(lambda: [e for e in _api(dc, "Event").get(namespace=namespace).items
                               if e.reason == "FailedScheduling" and e.involvedObject.name == pod["metadata"]["name"]],
                      timeout=SLOW, what="a FailedScheduling event")
    assert "Insufficient nvidia.com/gpu" in events[0].message


def test_job_runs_to_completion(dc, namespace):
    jobs = _api(dc, "Job", "batch/v1")
    jobs.create(namespace=namespace, body={
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "smoke"},
        "spec": {"completions": 2, "parallelism": 2, "backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "smoke", "image": "busybox"}]}}}})
    job = wait_for(lambda: _condition(jobs.get(name="smoke", namespace=namespace).to_dict(), "Complete")
                   .get("status") == "True" and jobs.get(name="smoke", namespace=namespace).to_dict(),
                   timeout=SLOW, what="Job smoke Complete")
    assert job["status"]["succeeded"] == 2
    pods = _pods(dc, namespace, "job-name=smoke")
    assert sorted(p["status"]["phase"] for p in pods) == ["Succeeded", "Succeeded"]
    # The ServiceAccount admission plugin gave the pods the namespace's service account and its token volume.
    for p in pods:
        assert p["spec"]["serviceAccountName"] == "default"
        assert any("serviceAccountToken" in str(v.get("projected")) for v in p["spec"]["volumes"])


def test_deleted_pod_goes_away(dc, namespace):
    pods = _api(dc, "Pod")
    pods.create(namespace=namespace, body={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "short"},
                                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    wait_for(lambda: pods.get(name="short", namespace=namespace).status.phase == "Running", timeout=SLOW,
             what="pod short Running")
    pods.delete(name="short", namespace=namespace)   # the default 30 s grace: KWOK stops it at once
    wait_for(lambda: not pods.get(namespace=namespace, field_selector="metadata.name=short").items, timeout=SLOW,
             what="pod short gone")


@pytest.fixture
def mig_pool(dc):
    """gpu-h100-000 split into 3g.40gb slices by the GPU Operator simulators (a Helm-style operator Deployment,
    a ClusterPolicy with the mixed strategy); afterwards the fleet is reloaded as its file describes it."""
    suffix = uuid.uuid4().hex[:6]
    ns, policy = f"gpu-operator-{suffix}", f"cp-mig-{suffix}"
    policies = _api(dc, "ClusterPolicy", CP)
    for cp in policies.get().items:   # only the oldest policy is reconciled: make ours the only one
        policies.delete(name=cp.metadata.name)
    _api(dc, "Namespace").create(body={"metadata": {"name": ns}})
    deploy = _deployment("gpu-operator", {})
    deploy["metadata"]["labels"] = {"app.kubernetes.io/component": "gpu-operator"}
    _api(dc, "Deployment", "apps/v1").create(namespace=ns, body=deploy)
    spec = {"operator": {}, "daemonsets": {}, "driver": {}, "toolkit": {}, "devicePlugin": {}, "dcgm": {},
            "dcgmExporter": {}, "gfd": {}, "nodeStatusExporter": {}, "mig": {"strategy": "mixed"}}
    policies.create(body={"apiVersion": CP, "kind": "ClusterPolicy", "metadata": {"name": policy}, "spec": spec})
    nodes = _api(dc, "Node")
    try:
        wait_for(lambda: (policies.get(name=policy).status or {}).get("state") == "ready", timeout=SLOW,
                 what="ClusterPolicy ready")
        nodes.patch(name=MIG_NODE, content_type="application/merge-patch+json",
                    body={"metadata": {"labels": {"nvidia.com/mig.config": "all-3g.40gb"}}})
        wait_for(lambda: int(_node(dc, MIG_NODE)["status"]["allocatable"].get(MIG_RESOURCE, "0")) > 0,
                 timeout=SLOW, what=f"{MIG_NODE}: {MIG_RESOURCE} allocatable")
        yield MIG_NODE
    finally:
        nodes.patch(name=MIG_NODE, content_type="application/merge-patch+json",
                    body={"metadata": {"labels": {"nvidia.com/mig.config": "all-disabled"}}})
        wait_for(lambda: _node(dc, MIG_NODE)["status"]["allocatable"].get("nvidia.com/gpu") == "8", timeout=SLOW,
                 what=f"{MIG_NODE}: 8 whole GPUs again")
        policies.delete(name=policy)
        wait_for(lambda: not _api(dc, "DaemonSet", "apps/v1").get(
            label_selector="app.kubernetes.io/managed-by=gpu-operator").items, timeout=SLOW,
            what="operands garbage-collected with their ClusterPolicy")
        _api(dc, "Namespace").delete(name=ns)
        # The device plugin leaves resources it no longer advertises at 0; later tests expect the fleet's nodes.
        loaded, dc.fleet_file = dc.fleet_file, None
        dc.fleet(str(loaded))


def test_mig_deployment_lands_on_the_mig_node(dc, namespace, mig_pool):
    node = _node(dc, mig_pool)
    assert int(node["status"]["allocatable"][MIG_RESOURCE]) == 16          # 8 GPUs x 2 slices
    _api(dc, "Deployment", "apps/v1").create(namespace=namespace,
                                             body=_deployment("llm", {MIG_RESOURCE: 1}))
    deployments = _api(dc, "Deployment", "apps/v1")
    wait_for(lambda: (deployments.get(name="llm", namespace=namespace).status.readyReplicas or 0) == 1,
             timeout=SLOW, what="Deployment llm ready")
    [pod] = _pods(dc, namespace, "app=llm")
    assert pod["spec"]["nodeName"] == mig_pool
    assert _condition(pod, "Ready")["status"] == "True"
    # KWOK's heartbeats left the simulators' allocatable as it was.
    assert _published(_node(dc, mig_pool))["allocatable"] == node["status"]["allocatable"]


def test_resource_claim_template_is_allocated_by_the_scheduler(dc, namespace):
    """A fake DRA driver publishes one device on one node; the claim made from the template gets it."""
    driver = f"gpu-{uuid.uuid4().hex[:6]}.devcluster.kubegpu.io"
    node = "worker-001"
    classes, slices = _api(dc, "DeviceClass", DRA), _api(dc, "ResourceSlice", DRA)
    classes.create(body={"apiVersion": DRA, "kind": "DeviceClass", "metadata": {"name": driver},
                         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})
    slices.create(body={"apiVersion": DRA, "kind": "ResourceSlice", "metadata": {"name": f"{node}-{driver}"},
                        "spec": {"driver": driver, "nodeName": node,
                                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                                 "devices": [{"name": "gpu-0", "attributes": {
                                     "model": {"string": "H100-80GB"}}}]}})
    try:
        _api(dc, "ResourceClaimTemplate", DRA).create(namespace=namespace, body={
            "apiVersion": DRA, "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]}}}})
        pods = _api(dc, "Pod")
        pods.create(namespace=namespace, body={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dra"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                     "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}]}})
        pod = wait_for(lambda: pods.get(name="dra", namespace=namespace).to_dict()["status"].get("phase") == "Running"
                       and pods.get(name="dra", namespace=namespace).to_dict(), timeout=SLOW, what="pod dra Running")
        assert pod["spec"]["nodeName"] == node
        [status] = pod["status"]["resourceClaimStatuses"]
        claim = _api(dc, "ResourceClaim", DRA).get(name=status["resourceClaimName"], namespace=namespace).to_dict()
        assert claim["metadata"]["ownerReferences"][0]["name"] == "dra"
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["pool"], result["device"]) == (driver, node, "gpu-0")
        assert [r["name"] for r in claim["status"]["reservedFor"]] == ["dra"]
    finally:
        for api, name in ((slices, f"{node}-{driver}"), (classes, driver)):
            try:
                api.delete(name=name)
            except NotFoundError:
                pass


def test_kwok_restarted_takes_every_node_again(dc):
    """The way out of KWOK 0.8 dropping a node recreated under its old name (__main__._restart_kwok): a new KWOK
    process, recorded in the state, holds every fleet node again."""
    from kubegpu_devcluster import __main__ as devcluster, cluster
    old = cluster.read_state(dc.state)["pids"]["kwok"]
    devcluster._restart_kwok(dc.state)
    new = cluster.read_state(dc.state)["pids"]["kwok"]
    assert new != old and cluster._alive(new) and not cluster._alive(old)
    total = control_plane.wait_nodes_managed(dc.admin, SLOW)
    assert total == control_plane.nodes_managed(dc.admin)[0] > 0
    # Held, not only leased: a pod bound to a node runs (the old KWOK's leases would keep the new one off the nodes).
    node = sorted(n.metadata.name for n in dc.admin.resources.get(api_version="v1", kind="Node").get(
        label_selector=FLEET_LABEL).items)[0]
    pods = dc.admin.resources.get(api_version="v1", kind="Pod")
    pods.create(namespace="default", body={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "after-restart"},
                                           "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}})
    try:
        wait_for(lambda: pods.get(name="after-restart", namespace="default").status.phase == "Running", timeout=SLOW,
                 what=f"a pod on {node} running under the new KWOK")
    finally:
        pods.delete(name="after-restart", namespace="default", grace_period_seconds=0)


def test_a_stalled_node_wait_calls_on_stall_once(monkeypatch):
    counts = iter([(3, 1)] * 4 + [(3, 3)])
    monkeypatch.setattr(control_plane, "nodes_managed", lambda dyn: next(counts))
    monkeypatch.setattr(control_plane.time, "sleep", lambda s: None)
    calls = []
    assert control_plane.wait_nodes_managed(None, 60, on_stall=lambda: calls.append(1), stall=-1.0) == 3
    assert calls == [1]
