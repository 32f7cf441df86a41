"""The demo inventory's whole life on one cluster of this file's own, as users and AWX run it.

1. Fresh: every bad input of bad_input_cases.py is refused before any write (issue 9).
2. What a user had before (the GPU Operator's namespace, a ConfigMap of theirs), and the automation_access role run
   as the admin (twice: the second writes nothing). The snapshot of every object (snapshots.py) is taken here.
3. `site` as AWX runs it: ansible-runner, a ServiceAccount with the automation_access role's rules, its token in the
   only variables AWX's "OpenShift or Kubernetes API Bearer Token" credential injects. The audit log keeps the body
   of every request the ServiceAccount sends (Secrets excepted, as Kubernetes' example policy does). It converges
   every stage; every request is the ServiceAccount's and none is refused; the secrets passed in (the bearer token, a
   registry pull secret, an NGC API key) appear in no line of output, no artifact and no request body. Then one
   rule less, and the run fails naming the verb, resource, namespace and the rule.
4. Converged: the bad-input table again, no write.
5. `uninstall`: check mode lists what would go and writes nothing; an uninstall killed halfway (SIGKILL once the
   models are being deleted) and run again leaves every object as the snapshot had it, but for what is left on
   purpose (plan.KEPT), each named with why; what OpenShift AI's operator made by itself from the collection's
   install goes too; a second uninstall changes and writes nothing (writes counted in the audit log, the admin
   user's: the modules' and helm's own).

One cluster for all of it because each step is a converge of the whole demo (operators, models, queues): three
clusters converged three times cost CI about five minutes more for no more truth.
"""
from __future__ import annotations

import base64
import json
import os
import sys
import time
from pathlib import Path

import pytest
import yaml

import bad_input_cases
from conftest import REPO, Devcluster, kill_playbook, task_result, wait_for
from kubegpu_devcluster import paths, testing
from snapshots import differences, kept_on_purpose, snapshot

sys.path.insert(0, str(Path(__file__).parent / "automation"))
import awx_run  # noqa: E402  pylint: disable=wrong-import-position

NAMESPACE = "kubegpu-automation"
ACCOUNT = "kubegpu-automation"
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
DEMO = REPO / "examples" / "demo" / "inventory.yml"
# Values no run could produce by chance: each must reach the cluster only inside a Secret, and nothing else.
PULL_SECRET_PASSWORD = "pull-secret-7f3c9e1ad0b24b6f"
NGC_API_KEY = "nvapi-kubegpu-test-5d8e2b71c4a94f06"
CHARTS = paths.charts_dir()

pytestmark = pytest.mark.skipif(not (CHARTS / "dra-driver-nvidia-gpu").is_dir(),
                                reason=f"the DRA driver chart is not at {CHARTS}")


@pytest.fixture(scope="module")
def cluster():
    """A cluster of this file's own, its audit log keeping the ServiceAccount's request bodies."""
    saved = os.environ.get("DEVCLUSTER_AUDIT_REQUEST_USERS")
    os.environ["DEVCLUSTER_AUDIT_REQUEST_USERS"] = USER
    try:
        with testing.own_cluster(REPO / ".cache" / "lifecycle-cluster", Devcluster) as dc:
            yield dc
    finally:
        if saved is None:
            os.environ.pop("DEVCLUSTER_AUDIT_REQUEST_USERS", None)
        else:
            os.environ["DEVCLUSTER_AUDIT_REQUEST_USERS"] = saved


def _json_playbook(dc, *args):
    proc = dc.playbook(*args)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc, json.loads(proc.stdout)


def _server(dc) -> str:
    return yaml.safe_load(Path(dc.kubeconfig).read_text())["clusters"][0]["cluster"]["server"]


def _token(dc) -> str:
    secret = dc.admin.resources.get(api_version="v1", kind="Secret").get(name=f"{ACCOUNT}-token", namespace=NAMESPACE)
    return base64.b64decode(secret.data["token"]).decode()


def _run(dc, tmp, playbook, token, extravars=None):
    return awx_run.run(tmp, playbook, str(DEMO), extravars or {},
                       awx_run.credential_env(_server(dc), token, str(dc.state / "pki" / "ca.crt")))


def _secret_extravars():
    """The gpu_operator stage's registry inputs: a pull secret for a private registry and an NGC API key."""
    return {"kubegpu_gpu_operator": {
        "version": "v26.7.0",
        "registry_credentials": [
            {"registry": "registry.example.com", "username": "mirror", "password": PULL_SECRET_PASSWORD},
            {"registry": "nvcr.io", "username": "$oauthtoken", "password": NGC_API_KEY},
        ]}}


def users_own(dc):
    """What a user made before site, as NVIDIA's OpenShift guide has it: the GPU Operator's namespace with the
    cluster-monitoring label, and a ConfigMap of theirs in it. The uninstall must leave both (the snapshot shows it)."""
    for body in ({"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": "nvidia-gpu-operator", "labels": {"openshift.io/cluster-monitoring": "true"}}},
                 {"apiVersion": "v1", "kind": "ConfigMap", "data": {"note": "mine"},
                  "metadata": {"name": "team-notes", "namespace": "nvidia-gpu-operator"}}):
        api = dc.admin.resources.get(api_version=body["apiVersion"], kind=body["kind"])
        api.create(body=body, namespace=body["metadata"].get("namespace"), field_manager="kubectl-create")


@pytest.fixture(scope="module")
def fresh(cluster):
    """Before anything of the collection's: the bad-input table; the user's own objects; automation_access as the
    admin (twice); the snapshot the uninstall must come back to."""
    dc = cluster
    assert not bad_input_cases.touched(dc), "a new cluster has a ClusterPolicy or node labels of ours"
    refused = bad_input_cases.table(dc, "fresh")
    users_own(dc)
    t0 = time.monotonic()
    first, out = _json_playbook(dc, "playbooks/automation_access.yml")
    mark = dc.audit.mark()
    _second, out2 = _json_playbook(dc, "playbooks/automation_access.yml")
    again = {"changed": out2["stats"]["localhost"]["changed"], "writes": dc.audit.writes(since=mark)}
    print(f"automation_access twice: {time.monotonic() - t0:.1f} s")
    return {"dc": dc, "refused": refused, "access": (first, out), "again": again, "before": snapshot(dc)}


@pytest.fixture(scope="module")
def converged(fresh, tmp_path_factory):
    """`site` as the ServiceAccount, through ansible-runner."""
    dc = fresh["dc"]
    token = _token(dc)
    tmp = tmp_path_factory.mktemp("awx") / "job"
    mark = dc.audit.mark()
    t0 = time.monotonic()
    proc = _run(dc, tmp, "kubegpu.platform.site", token, _secret_extravars())
    events = dc.audit.events(since=mark, user=None)
    print(f"\nsite as the ServiceAccount: {time.monotonic() - t0:.1f} s")
    return {"dc": dc, "token": token, "proc": proc, "dir": tmp, "events": events, "mark": mark}


def test_bad_input_is_refused_on_a_fresh_cluster_before_any_write(fresh):
    assert len(bad_input_cases.CASES) >= 40
    problems, writes = fresh["refused"]
    assert problems == [], "\n".join(problems)
    assert writes == [], writes


def test_automation_access_is_idempotent_and_never_prints_the_token(fresh):
    first, out = fresh["access"]
    assert out["stats"]["localhost"]["changed"] > 0
    assert fresh["again"]["changed"] == 0 and fresh["again"]["writes"] == [], fresh["again"]
    assert _token(fresh["dc"]) not in first.stdout + first.stderr
    rules = task_result(out, "Show the account's rights")["msg"][1]
    assert any(r.startswith("node_pools: ") for r in rules) and any(r.startswith("preflight: ") for r in rules)


def test_site_as_the_service_account_converges_every_stage(converged):
    dc, proc = converged["dc"], converged["proc"]
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "failed=0" in proc.stdout.rsplit("PLAY RECAP", 1)[-1]
    ours = [e for e in converged["events"] if e.user == USER]
    others = {e.user for e in converged["events"] if e.user.startswith("kubegpu-admin")}
    assert not others, f"requests by the admin during the ServiceAccount's run: {others}"
    refused = [str(e) for e in ours if e.code == 403]
    assert not refused, "\n".join(refused)
    writes = [e for e in ours if e.is_write]
    written = {e.resource for e in writes}
    # Every stage wrote as the ServiceAccount: OLM installs, the ClusterPolicy, node labels, the DRA chart and claim
    # templates, the served models.
    assert {"subscriptions", "clusterpolicies", "nodes", "clusterroles", "deviceclasses",
            "inferenceservices"} <= written, sorted(written)
    ready = dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy").get().items
    assert [p.status.state for p in ready] == ["ready"]
    isvcs = dc.admin.resources.get(api_version="serving.kserve.io/v1beta1", kind="InferenceService").get(namespace="llm")
    assert len(isvcs.items) == 4


def _artifacts(root: Path):
    return sorted(p for p in (root / "artifacts").rglob("*") if p.is_file())


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _forms(value: str):
    """A secret as it could appear: itself, base64 (a Secret's data, a docker config's auth) and in user:password."""
    return {value, _b64(value), _b64(f"mirror:{value}"), _b64(f"$oauthtoken:{value}")}


def test_secrets_appear_in_no_output_artifact_or_request(converged):
    dc, proc, root = converged["dc"], converged["proc"], converged["dir"]
    secrets = {"bearer token": converged["token"], "pull secret": PULL_SECRET_PASSWORD, "NGC API key": NGC_API_KEY}
    # The values did reach the cluster, in the one Secret they belong in (the test could find them).
    stored = dc.admin.resources.get(api_version="v1", kind="Secret").get(
        name="kubegpu-registry-credentials", namespace="nvidia-gpu-operator")
    config = base64.b64decode(stored.data[".dockerconfigjson"]).decode()
    assert PULL_SECRET_PASSWORD in json.dumps(json.loads(config)) or any(
        f in config for f in _forms(PULL_SECRET_PASSWORD))
    found = []
    texts = {"stdout": proc.stdout, "stderr": proc.stderr}
    for path in _artifacts(root):
        rel = str(path.relative_to(root))
        text = path.read_text(errors="replace")
        if rel == "artifacts/job/command":
            # ansible-runner records the environment it was given (the credential's variables) in this file by
            # design; AWX keeps it inside the job's container. It holds the token as given, and nothing else secret.
            env = json.loads(text)["env"]
            assert env["K8S_AUTH_API_KEY"] == converged["token"]
            text = json.dumps(dict(env, K8S_AUTH_API_KEY=""))
        texts[rel] = text
    assert any(k.startswith("artifacts/job/job_events/") for k in texts), sorted(texts)
    # The audit log holds the body of every request the ServiceAccount sent, except Secrets' (Metadata level).
    texts["audit log"] = Path(dc.audit.path).read_text(errors="replace")
    bodies = [e for e in map(json.loads, texts["audit log"].splitlines())
              if e.get("user", {}).get("username") == USER and e.get("requestObject")]
    assert bodies, "the audit log kept no request body of the ServiceAccount's (policy not in force?)"
    for where, text in texts.items():
        for what, value in secrets.items():
            if any(form in text for form in _forms(value)):
                found.append(f"{what} in {where}")
    assert not found, found


def test_one_rule_less_fails_naming_verb_resource_namespace_and_rule(converged, tmp_path):
    dc = converged["dc"]
    roles = dc.admin.resources.get(api_version="rbac.authorization.k8s.io/v1", kind="ClusterRole")
    rules = roles.get(name=ACCOUNT).to_dict()["rules"]
    index = next(i for i, r in enumerate(rules) if r.get("resources") == ["packagemanifests"])
    roles.patch(name=ACCOUNT, body=[{"op": "remove", "path": f"/rules/{index}"}],
                content_type="application/json-patch+json")
    try:
        proc = _run(dc, tmp_path / "job", "kubegpu.platform.gpu_operator", converged["token"])
        assert proc.returncode != 0
        expected = (f"forbidden: get packagemanifests (API group packages.operators.coreos.com) in namespace "
                    f"openshift-marketplace for {USER}: grant it with the automation_access role "
                    f"(rule \"OLM channels and CSVs (OpenShift)\" of stage preflight)")
        assert expected in proc.stdout, proc.stdout[-4000:]
    finally:
        # The role puts the rule back: drift is repaired by a run, with one write.
        mark = dc.audit.mark()
        _json_playbook(dc, "playbooks/automation_access.yml")
        repaired = [(e.verb, e.resource, e.name) for e in dc.audit.writes(since=mark)]
    assert repaired == [("patch", "clusterroles", ACCOUNT)]
    assert roles.get(name=ACCOUNT).to_dict()["rules"] == rules


def test_bad_input_is_refused_on_the_converged_cluster_before_any_write(converged):
    problems, writes = bad_input_cases.table(converged["dc"], "converged")
    assert problems == [], "\n".join(problems)
    assert writes == [], writes


def _uninstall(dc, *args):
    """uninstall with the demo inventory as the admin: (ansible's JSON, its stats, seconds); fails on a failed task."""
    t0 = time.monotonic()
    proc = dc.playbook("playbooks/uninstall.yml", "-i", str(DEMO), *args)
    seconds = time.monotonic() - t0
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"uninstall: no JSON (rc {proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    failures = [(t["task"]["name"], t["hosts"]["localhost"].get("msg"))
                for p in out["plays"] for t in p["tasks"] if t["hosts"].get("localhost", {}).get("failed")]
    assert not failures, f"uninstall {args}: {failures}"
    return out, out["stats"]["localhost"], seconds


def removed(out) -> list:
    """The keys every gpu_uninstall task removed (or would), in order."""
    return [c["key"] for p in out["plays"] for t in p["tasks"]
            if t["task"]["name"].split(" : ", 1)[-1].startswith("Remove what was written by stage")
            for c in t["hosts"]["localhost"].get("changes") or []]


def _kill_uninstall_halfway(dc):
    """Start uninstall and kill it (its whole process tree, the module included: no handler, no cleanup) once the
    serving stage has begun deleting the models, as a cancelled AWX job or a lost CI runner stops it. Returns the
    deletes it sent."""
    mark = dc.audit.mark()
    proc = dc.start_playbook("playbooks/uninstall.yml", "-i", str(DEMO))
    try:
        wait_for(lambda: proc.poll() is not None or any(
            e.verb == "delete" and e.resource == "inferenceservices" for e in dc.audit.writes(mark)),
            timeout=300, interval=0.5, what="the uninstall's first InferenceService deletion")
    finally:
        ended = proc.poll()
        if ended is None:
            kill_playbook(proc)
    assert ended is None, f"the uninstall ended (rc {ended}) before it was killed"
    return [str(e) for e in dc.audit.writes(mark) if e.verb == "delete"]


def test_uninstall_leaves_the_cluster_as_before_site(fresh, converged):
    dc, before = converged["dc"], fresh["before"]
    assert "Namespace//nvidia-gpu-operator" in before
    assert not [k for k in before if k.startswith("ClusterPolicy/")], "a fresh cluster has a ClusterPolicy"
    now = snapshot(dc)
    installed = differences(before, now)
    assert "ClusterPolicy//gpu-cluster-policy" in installed and "InferenceService/llm/llama-8b" in installed

    # Check mode: everything listed, nothing written.
    mark = dc.audit.mark()
    out, stats, seconds = _uninstall(dc, "--check")
    dc.audit.settle()
    writes = [str(e) for e in dc.audit.writes(mark)]
    listed = removed(out)
    print(f"\nuninstall --check in {seconds:.1f} s: {len(listed)} objects listed, {len(writes)} writes")
    assert writes == [], writes
    for key in ("InferenceService/llm/llama-8b", "ServingRuntime/llm/vllm", "DataScienceCluster/default-dsc",
                "ClusterQueue/serving", "ResourceClaimTemplate/llm/gpu-80g",
                "HelmRelease/dra-driver-nvidia-gpu/dra-driver-nvidia-gpu",
                "ConfigMap/nvidia-gpu-operator/kubegpu-mig-parted-config", "ClusterPolicy/gpu-cluster-policy",
                "Subscription/nvidia-gpu-operator/gpu-operator-certified", "Namespace/openshift-nfd",
                "PrometheusRule/nvidia-gpu-operator/kubegpu-gpu-alerts",
                "Secret/nvidia-gpu-operator/kubegpu-registry-credentials"):
        assert key in listed, f"{key} not listed by uninstall --check: {listed}"
    # OpenShift AI, which the collection installed, in the order of Red Hat's uninstall: its DataScienceCluster, its
    # DSCInitialization, the operator, then the namespace the operator made (its own namespace goes last, with the
    # other namespaces the collection created).
    rhods = [k for k in listed if k.startswith("Subscription/redhat-ods-operator/")]
    assert rhods, listed
    assert listed.index("DataScienceCluster/default-dsc") < listed.index("DSCInitialization/default-dsci") < \
        listed.index(rhods[0]) < listed.index("Namespace/redhat-ods-applications") < \
        listed.index("Namespace/redhat-ods-operator"), listed
    assert "ValidatingAdmissionPolicy//kubegpu-devcluster-odh-acceleratorprofile-webhook" in now
    # Reverse order of site: monitoring's first, the GPU Operator's last, models before their runtimes.
    assert listed.index("PrometheusRule/nvidia-gpu-operator/kubegpu-gpu-alerts") < listed.index(
        "InferenceService/llm/llama-8b") < listed.index("ServingRuntime/llm/vllm") < listed.index(
        "ClusterQueue/serving") < listed.index("ResourceClaimTemplate/llm/gpu-80g") < listed.index(
        "ClusterPolicy/gpu-cluster-policy")

    # Killed halfway: monitoring's objects gone, the models going, the GPU Operator still there. The next run finishes.
    deleted = _kill_uninstall_halfway(dc)
    print(f"uninstall killed halfway, {len(deleted)} deletes sent")
    assert any("/prometheusrules/" in d for d in deleted), deleted
    assert dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy").get().items, \
        "the killed uninstall had already removed the ClusterPolicy: it was not halfway"

    out, stats, seconds = _uninstall(dc)
    print(f"uninstall after the killed one in {seconds:.1f} s: {stats['changed']} tasks changed, "
          f"{len(removed(out))} objects removed")
    assert stats["changed"] > 0
    after = snapshot(dc)
    left = differences(before, after)
    unexpected = {k: v for k, v in left.items() if not kept_on_purpose(k)}
    print(f"left on purpose: {sorted(left)}")
    assert unexpected == {}, "\n".join(f"{k}: {v}" for k, v in unexpected.items())
    # What is kept on purpose is there (the test sees it), and is only that.
    assert any(k.startswith("CustomResourceDefinition/") for k in left), left
    assert "FeatureGate//cluster" in left, left
    # The user's namespace and ConfigMap stayed (equal to before); the namespaces the collection created went, and
    # so did the pull Secret it wrote into the user's namespace. The automation account stays: not site's.
    assert "Namespace//nvidia-gpu-operator" in after and "ConfigMap/nvidia-gpu-operator/team-notes" in after
    assert "Secret/nvidia-gpu-operator/kubegpu-registry-credentials" not in after
    assert f"ServiceAccount/{NAMESPACE}/{ACCOUNT}" in after
    assert "Namespace//openshift-nfd" not in after and "Namespace//openshift-keda" not in after
    # What OpenShift AI's operator made by itself went with it (the snapshot's equality says so too).
    assert not [k for k in after if k.startswith(("DSCInitialization/", "ValidatingAdmissionPolicy/"))
                or "redhat-ods" in k], [k for k in after if "redhat-ods" in k]

    mark = dc.audit.mark()
    out, stats, seconds = _uninstall(dc)
    dc.audit.settle()
    writes = [str(e) for e in dc.audit.writes(mark)]
    print(f"second uninstall in {seconds:.1f} s: {stats['changed']} changed, {len(writes)} writes")
    assert stats["changed"] == 0 and removed(out) == []
    assert writes == [], writes
