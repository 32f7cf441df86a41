"""The charts' RBAC rules (planning/access/chart_rules.py, derived by tools/awx/chart_rules.py) against the real API server.

A cluster of this file's own: plain Kubernetes without the CRDs the charts bring (Kueue's, KServe's, KEDA's,
Knative's). One ServiceAccount per stage that installs charts, each with that stage's rules and the preflight reads
only (automation_access run as the administrator for the tenancy stage's), and one with the uninstall stage's. Then,
with each account's token and the Go-built helm, every chart as its stage installs it (the stage's values, computed
by the same code the generator renders with):
- each chart the account is meant to install: `helm upgrade --install` (what kubernetes.core.helm runs), then
  `helm upgrade` that changes every object but CRDs (patched, roles included; the gpu-operator chart's pre-upgrade
  hook Job);
- Kueue, left to an administrator (docs/awx.md): an account holding every rule derived for the chart is refused its
  aggregated ClusterRoles, while one with `escalate` may create such a role; the administrator installs Kueue with
  the stage's values; the tenancy playbook run as the tenancy account, as AWX runs it, finds Kueue served and
  installs nothing;
- `helm uninstall` of every release by the uninstall account, delete hooks included, Kueue's too.
"""
from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient

from conftest import REPO, Devcluster, task_result
from kubegpu_devcluster import paths, testing

sys.path.insert(0, str(REPO / "tools" / "awx"))
sys.path.insert(0, str(Path(__file__).parent / "automation"))
import awx_run  # noqa: E402  pylint: disable=wrong-import-position
import chart_rules  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.access import rules as access  # noqa: E402
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.access.chart_rules import (  # noqa: E402
    CHARTS as CHARTS_DERIVED,
)

CHARTS = paths.charts_dir()
NAMESPACE = "kubegpu-automation"
STAGES = ("gpu_operator", "dra", "serving", "tenancy", "uninstall")
HELM_TIMEOUT = "240s"
FLEET = {"platform": "kubernetes", "version": "1.34.4", "without_crds": ["kueue", "kserve", "keda", "knative"],
         "node_groups": [{"name": "gpu-t4", "count": 1, "gpu": "T4", "gpus_per_node": 4,
                          "instance_type": "g4dn.12xlarge"},
                         {"name": "worker", "count": 1, "instance_type": "m6i.2xlarge"}]}
RBAC = "rbac.authorization.k8s.io/v1"

pytestmark = pytest.mark.skipif(
    not all((CHARTS / c).is_dir() for c in ("gpu-operator", "dra-driver-nvidia-gpu", "kueue", "kserve", "keda")),
    reason=f"the charts are not at {CHARTS}")


def _account(stage: str) -> str:
    return "kubegpu-" + stage.replace("_", "-")


def _user(stage: str) -> str:
    return f"system:serviceaccount:{NAMESPACE}:{_account(stage)}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    fleet = tmp_path_factory.mktemp("fleet") / "charts-fresh.yaml"
    fleet.write_text(yaml.safe_dump(FLEET))
    with testing.own_cluster(REPO / ".cache" / "chart-rules-cluster", Devcluster, fleet) as dc:
        yield dc


def _kubeconfig(path: Path, server: str, ca: Path, token: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "account",
        "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "account", "user": {"token": token}}],
        "contexts": [{"name": "account", "context": {"cluster": "local", "user": "account"}}]}))
    return path


def _account_with(dc, name: str, rules: list) -> str:
    """A ServiceAccount bound to a ClusterRole of `rules`, and a token of it (TokenRequest)."""
    labels = {"app.kubernetes.io/part-of": "kubegpu-test"}
    for body in ({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": NAMESPACE}},
                 {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": name, "labels": labels},
                  "rules": rules},
                 {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": name, "labels": labels},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                  "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]}):
        dc.admin.resources.get(api_version=body["apiVersion"], kind=body["kind"]).create(
            body=body, namespace=body["metadata"].get("namespace"))
    return client.CoreV1Api(dc.admin.client).create_namespaced_service_account_token(
        name, NAMESPACE, {"spec": {"expirationSeconds": 3600}}).status.token


@pytest.fixture(scope="module")
def accounts(cluster, tmp_path_factory):
    """{stage: {kubeconfig, token, server}} of an account per stage. The tenancy stage's is automation_access's own
    (the administrator runs the role for that stage; the account then runs the tenancy playbook as AWX would); the
    others get the same rules from the role's lookup, made directly (the role's run per account costs ~15 s here)."""
    dc = cluster
    tmp = tmp_path_factory.mktemp("accounts")
    t0 = time.monotonic()
    proc = dc.playbook("kubegpu.platform.automation_access", "-e", json.dumps({
        "automation_access_namespace": NAMESPACE, "automation_access_service_account": _account("tenancy"),
        "automation_access_role_name": _account("tenancy"), "automation_access_stages": ["tenancy"]}))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    print(f"\nautomation_access for the tenancy stage: {time.monotonic() - t0:.1f} s")
    secrets = dc.admin.resources.get(api_version="v1", kind="Secret")
    secret = secrets.get(name=f"{_account('tenancy')}-token", namespace=NAMESPACE)
    tokens = {"tenancy": base64.b64decode(secret.data["token"]).decode()}
    tokens.update((stage, _account_with(dc, _account(stage), access.cluster_role_rules([stage])))
                  for stage in STAGES if stage != "tenancy")
    server = yaml.safe_load(Path(dc.kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
    ca = dc.state / "pki" / "ca.crt"
    return {stage: {"kubeconfig": _kubeconfig(tmp / f"{stage}.kubeconfig", server, ca, token), "token": token,
                    "server": server} for stage, token in tokens.items()}


@pytest.fixture(scope="module")
def helm():
    found = chart_rules.find_helm()
    assert found, "no helm: make binaries"
    return found


def _helm(helm, kubeconfig, *args, values=None, tmp=None):
    """helm as the account of `kubeconfig` only: no other kubeconfig, no home of the caller's."""
    cmd = [helm, *args, "--kubeconfig", str(kubeconfig)]
    if values is not None:
        path = tmp / f"values-{int(time.monotonic() * 1000)}.json"
        path.write_text(json.dumps(values))
        cmd += ["--values", str(path)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp or Path(kubeconfig).parent)}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=False)


def _install_args(release, *extra):
    return ["upgrade", "--install", release["release"], str(release["path"]), "--namespace", release["namespace"],
            "--create-namespace", "--timeout", HELM_TIMEOUT, *extra]


def _uninstall_args(release):
    """helm uninstall as the uninstall stage runs it, but for --wait: the deletes and the delete hooks (which helm
    waits for all the same) are what the rules must allow. A CRD the chart deletes can keep the API server's CRD
    finalizer waiting for its informer's resync (minutes) after one transient "storage is (re)initializing" error:
    its retry meets a conflict with its own status write and leaves the requeue to an update event it then ignores
    (apiextensions-apiserver 0.34, crd_finalizer.go), which --wait would wait out."""
    return ["uninstall", release["release"], "--namespace", release["namespace"], "--timeout", HELM_TIMEOUT]


# An upgrade that changes every object, as a new chart version does: helm patches each one (roles included, which
# the API server checks again). A post-renderer adds an annotation. Not to CRDs: a CRD changed re-initialises its
# storage, which the uninstall right after need not meet (_uninstall_args). `--force` would replace every object
# instead, and race the CRD controller's status writes (a conflict, not a refusal).
POST_RENDERER = """#!%s
import sys
import yaml
docs = [d for d in yaml.load_all(sys.stdin, Loader=yaml.CSafeLoader) if d]
for d in docs:
    if d.get("kind") == "CustomResourceDefinition":
        continue
    meta = d.setdefault("metadata", {})
    meta["annotations"] = dict(meta.get("annotations") or {}, **{"kubegpu.io/test-upgrade": "true"})
sys.stdout.write(yaml.dump_all(docs, Dumper=yaml.CSafeDumper))
""" % sys.executable


def _post_renderer(tmp: Path) -> str:
    path = tmp / "annotate.py"
    path.write_text(POST_RENDERER)
    path.chmod(0o755)
    return str(path)


def _defaults(release):
    """The values the stage passes by default (the first variant the generator renders)."""
    values = dict(next(iter(release["variants"].values())))
    values.pop("_api_versions", None)
    return values


def test_each_stage_account_installs_upgrades_and_the_uninstall_account_removes_its_charts(accounts, helm, tmp_path):
    releases = chart_rules.releases(CHARTS)
    assert [r["chart"] for r in releases] == ["gpu-operator", "dra-driver-nvidia-gpu", "kserve-crd",
                                              "kserve-resources", "keda", "kueue"]
    assert set(access.ADMIN_INSTALLS) == {"kueue", "keda"}
    timings = {}
    installed = [r for r in releases if r["chart"] not in access.ADMIN_INSTALLS]
    for release in installed:
        kubeconfig = accounts[release["stage"]]["kubeconfig"]
        t0 = time.monotonic()
        proc = _helm(helm, kubeconfig, *_install_args(release), values=_defaults(release), tmp=tmp_path)
        assert proc.returncode == 0, f"{release['chart']} as {_user(release['stage'])}: {proc.stderr}"
        proc = _helm(helm, kubeconfig, *_install_args(release, "--post-renderer", _post_renderer(tmp_path)),
                     values=_defaults(release), tmp=tmp_path)
        assert proc.returncode == 0, f"{release['chart']} upgrade as {_user(release['stage'])}: {proc.stderr}"
        timings[release["chart"]] = [time.monotonic() - t0]
    listed = json.loads(_helm(helm, accounts["uninstall"]["kubeconfig"], "list", "-A", "-o", "json",
                              tmp=tmp_path).stdout)
    assert {(r["name"], r["revision"], r["status"]) for r in listed} == \
        {(r["release"], "2", "deployed") for r in installed}
    for release in reversed(installed):
        t0 = time.monotonic()
        proc = _helm(helm, accounts["uninstall"]["kubeconfig"], *_uninstall_args(release), tmp=tmp_path)
        assert proc.returncode == 0, f"uninstall {release['chart']} as {_user('uninstall')}: {proc.stderr}"
        timings[release["chart"]].append(time.monotonic() - t0)
    assert json.loads(_helm(helm, accounts["uninstall"]["kubeconfig"], "list", "-A", "-o", "json",
                            tmp=tmp_path).stdout) == []
    print("\ninstall and upgrade / uninstall: " + ", ".join(f"{c} {a:.1f} / {b:.1f} s" for c, (a, b) in timings.items()))


def test_kueue_needs_every_right_or_escalate_and_is_installed_once_by_an_administrator(cluster, accounts, helm,
                                                                                       tmp_path):
    dc = cluster
    [kueue] = [r for r in chart_rules.releases(CHARTS) if r["chart"] == "kueue"]
    [derived] = [c for c in CHARTS_DERIVED if c["chart"] == "kueue"]
    tenancy = accounts["tenancy"]
    server, ca = tenancy["server"], dc.state / "pki" / "ca.crt"
    # An account with the tenancy stage's rules and every rule derived for the Kueue chart (what access.py leaves
    # out): the API server refuses the chart's aggregated ClusterRoles, in its own words.
    chart = access.cluster_role_rules(["tenancy"]) + [r for reason in derived["install"] for r in reason["rules"]]
    token = _account_with(dc, "kueue-without-escalate", chart)
    kubeconfig = _kubeconfig(tmp_path / "kueue.kubeconfig", server, ca, token)
    proc = _helm(helm, kubeconfig, *_install_args(kueue), values=_defaults(kueue), tmp=tmp_path)
    # Refused are exactly the aggregated roles (derived.aggregated_roles); every other object and role was accepted.
    assert proc.returncode != 0
    assert f"{len(derived['aggregated_roles'])} errors occurred" in proc.stderr, proc.stderr
    for name in derived["aggregated_roles"]:
        assert f'clusterroles.rbac.authorization.k8s.io "{name}" is forbidden: must have cluster-admin privileges ' \
               "to use the aggregationRule" in proc.stderr, proc.stderr
    # With escalate on ClusterRoles (a right to grant itself any other) the same role is accepted: that is the only
    # way short of every right, and no stage grants it.
    aggregated = {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "kubegpu-test-aggregated"},
                  "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"kubegpu-test/aggregate": "true"}}]}}
    escalating = _kubeconfig(tmp_path / "escalate.kubeconfig", server, ca, _account_with(
        dc, "kueue-with-escalate", [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                                     "verbs": ["create", "escalate"]}]))
    client_of = config.new_client_from_config(str(escalating))
    DynamicClient(client_of).resources.get(api_version=RBAC, kind="ClusterRole").create(body=aggregated)
    # The documented path: the administrator installs Kueue once with the stage's values (over the failed release
    # the refused install left)...
    t0 = time.monotonic()
    admin = _helm(helm, dc.kubeconfig, *_install_args(kueue), values=_defaults(kueue), tmp=tmp_path)
    assert admin.returncode == 0, admin.stderr
    # ...and the tenancy playbook as the tenancy account, as AWX runs it, finds Kueue served and installs nothing.
    env = dict(awx_run.execution_env(tmp_path / "job"), **awx_run.credential_env(server, tenancy["token"], str(ca)),
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    variables = {"kubegpu_platform": "kubernetes", "kubegpu_node_pools": [],
                 "kubegpu_tenancy": {"helm": {"charts_dir": str(CHARTS), "binary": helm}}}
    proc = subprocess.run(["ansible-playbook", "kubegpu.platform.tenancy", "-i", "localhost,", "-c", "local",
                           "-e", "ansible_python_interpreter={{ ansible_playbook_python }}", "-e",
                           json.dumps(variables)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    plan = task_result(out, "Plan the teams' quotas")
    assert plan["kueue_served"] is True and plan["charts"] == []
    assert task_result(out, "Install Kueue's chart")["skipped"] is True
    # The uninstall account takes Kueue away again, its aggregated roles too (deleting needs no escalation).
    proc = _helm(helm, accounts["uninstall"]["kubeconfig"], *_uninstall_args(kueue), tmp=tmp_path)
    assert proc.returncode == 0, proc.stderr
    print(f"\nKueue by the administrator, tenancy as the account, uninstall: {time.monotonic() - t0:.1f} s")
