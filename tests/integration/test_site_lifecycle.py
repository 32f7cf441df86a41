"""The collection as AWX runs it: a ServiceAccount with the automation_access role's rules, its token in the only
variables AWX's "OpenShift or Kubernetes API Bearer Token" credential injects, the job run through ansible-runner.

One cluster of this file's own, whose audit log keeps the body of every request the ServiceAccount sends (Secrets
excepted, as Kubernetes' example policy does). One `site` run as the ServiceAccount, asserted on from several sides:
it converges every stage; every request is the ServiceAccount's and none is refused; the secrets passed in (the
bearer token, a registry pull secret, an NGC API key) appear in no line of output, no artifact and no request body.
Then one rule less, and the run fails naming the verb, resource, namespace and the rule.
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

from conftest import REPO, Devcluster, task_result

sys.path.insert(0, str(Path(__file__).parent / "automation"))
import awx_run  # noqa: E402  pylint: disable=wrong-import-position

from kubegpu_devcluster import testing  # noqa: E402  pylint: disable=wrong-import-position

NAMESPACE = "kubegpu-automation"
ACCOUNT = "kubegpu-automation"
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
DEMO = REPO / "examples" / "demo" / "inventory.yml"
# Values no run could produce by chance: each must reach the cluster only inside a Secret, and nothing else.
PULL_SECRET_PASSWORD = "pull-secret-7f3c9e1ad0b24b6f"
NGC_API_KEY = "nvapi-kubegpu-test-5d8e2b71c4a94f06"


@pytest.fixture(scope="module")
def access_cluster():
    """A cluster of this file's own, its audit log keeping the ServiceAccount's request bodies (the session's cluster
    is not started for this file)."""
    saved = {k: os.environ.get(k) for k in ("DEVCLUSTER_DIR", "DEVCLUSTER_AUDIT_REQUEST_USERS")}
    os.environ["DEVCLUSTER_AUDIT_REQUEST_USERS"] = USER
    own = testing.session(REPO / ".cache" / "access-cluster", Devcluster)
    try:
        cluster = next(own, None)
        assert cluster is not None, "the local cluster did not start"
        yield cluster
    finally:
        own.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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


@pytest.fixture(scope="module")
def converged(access_cluster, tmp_path_factory):
    """automation_access as the admin (twice: the second writes nothing), then `site` as the ServiceAccount."""
    dc = access_cluster
    t0 = time.monotonic()
    first, out = _json_playbook(dc, "playbooks/automation_access.yml")
    mark = dc.audit.mark()
    second, out2 = _json_playbook(dc, "playbooks/automation_access.yml")
    again = {"changed": out2["stats"]["localhost"]["changed"], "writes": dc.audit.writes(since=mark)}
    token = _token(dc)
    tmp = tmp_path_factory.mktemp("awx") / "job"
    mark = dc.audit.mark()
    proc = _run(dc, tmp, "kubegpu.platform.site", token, _secret_extravars())
    events = dc.audit.events(since=mark, user=None)
    print(f"\nautomation_access and site as the ServiceAccount: {time.monotonic() - t0:.1f} s")
    return {"dc": dc, "access": (first, out), "again": again, "token": token, "proc": proc, "dir": tmp,
            "events": events, "mark": mark}


def test_automation_access_is_idempotent_and_never_prints_the_token(converged):
    first, out = converged["access"]
    assert out["stats"]["localhost"]["changed"] > 0
    assert converged["again"]["changed"] == 0 and converged["again"]["writes"] == [], converged["again"]
    assert converged["token"] not in first.stdout + first.stderr
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
