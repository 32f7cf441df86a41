"""The charts' RBAC rules (plugins/module_utils/planning/access/chart_rules.py) are derived from the rendered charts by
tools/awx/chart_rules.py: its reading of manifests is checked here on small inline charts, and the generated module
must be what the generator writes from the real charts (when helm and the charts are on this machine)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "awx"))
import chart_rules  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.access.rbac_rules import (  # noqa: E402
    HELM,
    covers,
)

NS = "demo"


def obj(api_version, kind, name, namespace=None, **fields):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    annotations = fields.pop("annotations", None)
    if annotations:
        meta["annotations"] = annotations
    return dict({"apiVersion": api_version, "kind": kind, "metadata": meta}, **fields)


def role(kind, name, rules, namespace=None, **fields):
    return obj("rbac.authorization.k8s.io/v1", kind, name, namespace, rules=rules, **fields)


def binding(kind, name, ref_kind, ref_name, namespace=None):
    return obj("rbac.authorization.k8s.io/v1", kind, name, namespace,
               roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": ref_kind, "name": ref_name},
               subjects=[{"kind": "ServiceAccount", "name": "demo", "namespace": NS}])


CRD = obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.com",
          spec={"group": "example.com", "scope": "Cluster",
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"}})
HOOK_JOB = obj("batch/v1", "Job", "cleanup", NS, annotations={"helm.sh/hook": "pre-delete"})
CHART = [
    CRD,
    obj("example.com/v1", "Widget", "w"),
    obj("apps/v1", "Deployment", "demo", NS),
    obj("v1", "ServiceAccount", "demo", NS),
    role("ClusterRole", "demo", [{"apiGroups": ["example.com"], "resources": ["widgets", "widgets/status"],
                                  "verbs": ["get", "list", "watch", "update"]},
                                 {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]),
    binding("ClusterRoleBinding", "demo", "ClusterRole", "demo"),
    # Bound, not made: kube-system's reader and a cluster-wide role.
    binding("RoleBinding", "demo-reader", "Role", "extension-apiserver-authentication-reader", "kube-system"),
    binding("ClusterRoleBinding", "demo-delegator", "ClusterRole", "system:auth-delegator"),
    role("ClusterRole", "demo-aggregate", None,
         aggregationRule={"clusterRoleSelectors": [{"matchLabels": {"demo/aggregate": "true"}}]}),
    HOOK_JOB,
    role("ClusterRole", "demo-prune", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}],
         annotations={"helm.sh/hook": "post-delete"}),
]


def _flat(reasons, why_part=""):
    return [r for reason in reasons if why_part in reason["why"] for r in reason["rules"]]


def test_kinds_come_from_the_table_and_the_charts_crds():
    kinds = chart_rules.kinds_of(CHART)
    assert kinds[("example.com", "Widget")] == ("widgets", False)
    assert kinds[("apps", "Deployment")] == ("deployments", True)


def test_an_unknown_kind_stops_the_generator_naming_it():
    with pytest.raises(ValueError, match=r"chart demo makes Gadget g \(example.org/v1\).*add it to KINDS"):
        chart_rules.resource_of(obj("example.org/v1", "Gadget", "g"), chart_rules.kinds_of([]), "demo")


def test_hooks_are_read_from_the_annotation():
    assert chart_rules.hooks(obj("v1", "Pod", "p", annotations={"helm.sh/hook": "pre-install, post-upgrade"})) == \
        ("pre-install", "post-upgrade")
    assert chart_rules.hooks(obj("v1", "Pod", "p")) == ()


def test_install_has_helms_verbs_on_every_kind_and_watches_hook_jobs():
    got = chart_rules.chart_rules("demo", CHART, chart_rules.kinds_of(CHART), NS)
    objects = _flat(got["install"], "what helm installs")
    for group, resource in (("apiextensions.k8s.io", "customresourcedefinitions"), ("example.com", "widgets"),
                            ("apps", "deployments"), ("", "serviceaccounts"), ("batch", "jobs"),
                            ("rbac.authorization.k8s.io", "clusterroles"),
                            ("rbac.authorization.k8s.io", "clusterrolebindings"),
                            ("rbac.authorization.k8s.io", "rolebindings")):
        assert covers(objects, [{"apiGroups": [group], "resources": [resource], "verbs": list(HELM)}]), resource
    assert covers(objects, [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list", "watch"]}])
    assert not covers(objects, [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["watch"]}])
    assert got["kinds"] == {"namespaced": ["Deployment", "Job", "RoleBinding", "ServiceAccount"],
                            "cluster": ["ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "Widget"]}


def test_install_holds_what_the_charts_roles_grant_beyond_helms_own_rights():
    got = chart_rules.chart_rules("demo", CHART, chart_rules.kinds_of(CHART), NS)
    # Every rule of every role (the hook's too), without what the objects' rule already grants.
    assert _flat(got["install"], "held to create chart demo's roles") == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
        {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["watch"]},
        {"apiGroups": ["example.com"], "resources": ["widgets/status"], "verbs": ["get", "list", "watch", "update"]},
    ]
    assert covers(_flat(got["install"]), CHART[4]["rules"])


def test_roles_bound_but_not_made_get_bind_by_name_and_aggregated_roles_are_named():
    got = chart_rules.chart_rules("demo", CHART, chart_rules.kinds_of(CHART), NS)
    assert _flat(got["install"], "binds these roles") == [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"],
         "resourceNames": ["system:auth-delegator"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["bind"],
         "resourceNames": ["extension-apiserver-authentication-reader"]},
    ]
    # Its own roles by name too: helm may create a hook's binding before its role, which only bind allows.
    assert _flat(got["install"], "binds its own roles") == [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"],
         "resourceNames": ["demo"]}]
    assert got["aggregated_roles"] == ["demo-aggregate"]


def test_uninstall_deletes_every_kind_and_runs_the_delete_hooks():
    got = chart_rules.chart_rules("demo", CHART, chart_rules.kinds_of(CHART), NS)
    gone = _flat(got["uninstall"], "what helm uninstall deletes")
    assert covers(gone, [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list", "delete"]}])
    assert not covers(gone, [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create"]}])
    uninstall = _flat(got["uninstall"])
    # The pre-delete Job is created and watched, the post-delete hook's role created: its rights held.
    assert covers(uninstall, [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "watch"]},
                              {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                               "verbs": ["create"]},
                              {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}])
    assert not covers(uninstall, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}])


def test_a_chart_without_delete_hooks_is_uninstalled_with_reads_and_deletes_only():
    plain = [obj("apps/v1", "Deployment", "demo", NS)]
    got = chart_rules.chart_rules("demo", plain, chart_rules.kinds_of(plain), NS)
    assert got["uninstall"] == [{"why": "what helm uninstall deletes of chart demo", "rules": [
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "delete"]}]}]


def test_wide_role_rules_say_so():
    wide = [role("ClusterRole", "scaler", [{"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["get"]},
                                           {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["get"]}])]
    got = chart_rules.chart_rules("demo", wide, chart_rules.kinds_of(wide), NS)
    whys = {reason["why"]: reason["rules"] for reason in got["install"]}
    assert whys["held to create chart demo's roles; wide: the chart's role grants it on every resource"] == [
        {"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["get"]}]


def test_the_module_text_is_python_that_reads_back_as_the_data():
    entries = [{"stage": "demo", "chart": "demo", "install": [{"why": "x" * 200, "rules": [{"verbs": ["get"]}]}]}]
    text = chart_rules.module_text(entries)
    assert text.startswith("# -*- coding: utf-8 -*-") and "Generated by tools/awx/chart_rules.py" in text
    tree = ast.parse(text)
    assigned = [n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "CHARTS"]
    assert ast.literal_eval(assigned[0].value) == entries


def test_the_generated_module_is_what_the_charts_give():
    if not chart_rules.find_helm() or not chart_rules.paths.charts_dir().is_dir():
        pytest.skip("helm or the charts are not on this machine (make binaries; tools/devcluster/fetch-charts.sh)")
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "awx" / "chart_rules.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
