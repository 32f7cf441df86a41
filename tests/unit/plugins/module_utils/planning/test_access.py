# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The automation_access rules: every kind the collection's code names is granted, and a 403 reads as what is missing."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os
import re
import tokenize

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.access import rules as access
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.access.chart_rules import CHARTS
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.access.rbac_rules import covers, self_granting

PLUGINS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "plugins")
API_VERSION = re.compile(r"^(?:(?P<group>[a-z0-9.-]+)/)?v\d+(?:(?:alpha|beta)\d+)?$")
KIND = re.compile(r"^[A-Z][A-Za-z]+$")
# Kinds the code names without reading or writing them on a cluster (messages, Helm templates it renders for charts).
# Kueue's Configuration is a file format (in a ConfigMap or the chart's values), not a kind the API server serves.
NOT_REQUESTED = {("", "Status"), ("", "List"), ("config.kueue.x-k8s.io", "Configuration")}
# Kinds sent to a subresource of another kind: (group, resource, verb) of the request.
SUBRESOURCES = {("policy", "Eviction"): ("", "pods/eviction", "create")}


def _resource(kind):
    """The plural resource of a kind, as the API server names it (enough for the kinds the collection uses)."""
    lower = kind.lower()
    if lower.endswith("y") and not lower.endswith("ey"):
        return lower[:-1] + "ies"
    if lower.endswith("s"):
        return lower + "es"
    return lower + "s"


def _tokens():
    for root, _dirs, files in os.walk(PLUGINS):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path) as f:
                    yield path, [t for t in tokenize.generate_tokens(io.StringIO(f.read()).readline)
                                 if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT,
                                                   tokenize.DEDENT)]


def kinds_in_code():
    """(group, Kind) of every apiVersion and Kind side by side in plugins/ (a read, a write or a wait target:
    list("v1", "Node"), Target(CLUSTER_POLICY_API, "ClusterPolicy"), {"apiVersion": "apps/v1", "kind": ...}), the
    apiVersion a string or a constant assigned one (CLUSTER_POLICY_API = "nvidia.com/v1")."""
    files = list(_tokens())
    constants = {}
    for _path, tokens in files:
        for i in range(len(tokens) - 2):
            a, eq, b = tokens[i], tokens[i + 1], tokens[i + 2]
            if a.type == tokenize.NAME and eq.string == "=" and b.type == tokenize.STRING:
                if API_VERSION.match(b.string.strip("\"'")):
                    constants[a.string] = b.string.strip("\"'")
    found = {}
    for path, tokens in files:
        values = [constants.get(t.string) if t.type == tokenize.NAME else
                  t.string.strip("\"'") if t.type == tokenize.STRING else None for t in tokens]
        for i in range(len(tokens) - 2):
            version, sep, kind = values[i], tokens[i + 1].string, values[i + 2]
            if sep != "," or not version or not kind or tokens[i + 2].type != tokenize.STRING:
                continue
            if i + 4 < len(tokens) and tokens[i + 3].string == ":":
                # {"apiVersion": X, "kind": "Y"}: the kind is the value after "kind":
                if kind != "kind" or tokens[i + 4].type != tokenize.STRING:
                    continue
                kind = values[i + 4]
            m = API_VERSION.match(version)
            if m and KIND.match(kind):
                found.setdefault((m.group("group") or "", kind), os.path.relpath(path, PLUGINS))
    return found


def test_the_code_names_kinds():
    kinds = kinds_in_code()
    assert ("", "Node") in kinds and ("nvidia.com", "ClusterPolicy") in kinds and ("apps", "DaemonSet") in kinds
    assert len(kinds) > 20, sorted(kinds)


def test_every_kind_the_code_names_is_granted_to_some_stage():
    missing = []
    for (group, kind), where in sorted(kinds_in_code().items()):
        if (group, kind) in SUBRESOURCES:
            ok = access.granting(*SUBRESOURCES[(group, kind)])
        else:
            ok = (group, kind) in NOT_REQUESTED or access.granting(group, _resource(kind), "get") or \
                access.granting(group, _resource(kind), "list")
        if not ok:
            missing.append("%s %s (%s)" % (group or "core", kind, where))
    assert missing == [], "kinds no rule of planning/access/rules.py lets the collection read: %s" % missing


def test_every_rule_says_why_and_uses_real_verbs():
    verbs = {"get", "list", "watch", "create", "patch", "update", "delete", "deletecollection", "bind", "use"}
    for stage, rules in access.STAGE_RULES.items():
        for r in rules:
            assert r["why"] and ((r["apiGroups"] and r["resources"]) or r.get("nonResourceURLs")), (stage, r)
            assert set(r["verbs"]) <= verbs, (stage, r)


def test_rules_for_always_includes_preflight_and_refuses_unknown_stages():
    stages = {r["why"].split(":")[0] for r in access.rules_for(["report"])}
    assert stages == {"preflight", "report"}
    with pytest.raises(ValueError, match="unknown stage.*reprot.*known: doctor, dra"):
        access.rules_for(["reprot"])
    assert all("why" not in r for r in access.cluster_role_rules(access.stages_known()))


USER = "system:serviceaccount:kubegpu-automation:kubegpu-automation"


@pytest.mark.parametrize("message, expected", [
    ('nodes is forbidden: User "%s" cannot patch resource "nodes" in API group "" at the cluster scope' % USER,
     'forbidden: patch nodes (API group core) at the cluster scope for %s: grant it with the automation_access role '
     '(rule "the DRA pool\'s nodes labelled for the driver" of stage dra or "pool labels, MIG configuration, cordon '
     'for a MIG change" of stage node_pools or "pool labels, MIG off, our annotations removed" of stage uninstall)'
     % USER),
    ('packagemanifests.packages.operators.coreos.com "gpu-operator-certified" is forbidden: User "%s" cannot get '
     'resource "packagemanifests" in API group "packages.operators.coreos.com" in the namespace "openshift-marketplace"'
     % USER,
     'forbidden: get packagemanifests (API group packages.operators.coreos.com) in namespace openshift-marketplace for '
     '%s: grant it with the automation_access role (rule "OLM channels and CSVs (OpenShift)" of stage preflight)'
     % USER),
    ('pods "p" is forbidden: User "u" cannot create resource "pods/eviction" in API group "" in the namespace "llm"',
     'forbidden: create pods/eviction (API group core) in namespace llm for u: grant it with the automation_access '
     'role (rule "drain a node before its MIG change" of stage node_pools or "drain a node before MIG off '
     '(uninstall_drain_gpu_pods)" of stage uninstall)'),
    ('foos.example.com is forbidden: User "u" cannot list resource "foos" in API group "example.com" at the cluster '
     'scope',
     'forbidden: list foos (API group example.com) at the cluster scope for u: no stage of automation_access grants '
     'it: add a rule to the stage that needs it (plugins/module_utils/planning/access/rules.py)'),
    ('clusterroles.rbac.authorization.k8s.io "x" is forbidden: user "u" (groups=["a"]) is attempting to grant RBAC '
     'permissions not currently held:\n{APIGroups:["security.openshift.io"], Resources:["securitycontextconstraints"], '
     'ResourceNames:["privileged"], Verbs:["use"]}',
     'forbidden: clusterroles.rbac.authorization.k8s.io "x" grants rights u does not hold itself: '
     '{APIGroups:["security.openshift.io"], Resources:["securitycontextconstraints"], ResourceNames:["privileged"], '
     'Verbs:["use"]}; the API server lets an account create a role only with rights it holds: add them to the '
     'automation_access rules of the stage that writes this role (plugins/module_utils/planning/access/rules.py)'),
    ("Unauthorized", None),
])
def test_forbidden_messages_name_verb_resource_namespace_and_rule(message, expected):
    assert access.forbidden_message(message) == expected


def _chart(name):
    return next(c for c in CHARTS if c["chart"] == name)


def _rules(reasons):
    return [r for reason in reasons for r in reason["rules"]]


def test_no_stage_grants_a_right_to_grant_itself_any_other():
    # escalate, bind of any role, impersonate, any ServiceAccount's token, `*` on everything: none, by default.
    assert self_granting(access.cluster_role_rules(access.stages_known())) == []


def test_each_stage_holds_what_its_charts_need_but_kueue_and_keda_are_left_to_an_administrator():
    assert set(access.ADMIN_INSTALLS) == {"kueue", "keda"}
    assert "kueue-batch-admin-role" in access.ADMIN_INSTALLS["kueue"]
    assert "read the whole cluster" in access.ADMIN_INSTALLS["keda"]
    for chart in CHARTS:
        stage = access.rules_for([chart["stage"]])
        assert covers(access.rules_for(["uninstall"]), _rules(chart["uninstall"])), chart["chart"]
        assert covers(stage, _rules(chart["install"])) is (chart["chart"] not in access.ADMIN_INSTALLS), chart["chart"]


def test_no_stage_reads_every_object_of_the_cluster():
    # KEDA's role would need it (get on * in every API group): KEDA is an administrator's install (ADMIN_INSTALLS).
    assert access.reads_everything(access.cluster_role_rules(access.stages_known())) == []
    assert access.reads_everything([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]}])
    assert not access.reads_everything([{"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["get"]}])


def test_rules_held_only_to_create_a_charts_roles_say_so():
    whys = [r["why"] for r in access.STAGE_RULES["serving"]]
    assert any(w.startswith("held to create chart kserve-resources's roles") for w in whys)
    wide = [r for stage in access.stages_known() for r in access.STAGE_RULES[stage] if "*" in r.get("apiGroups", [])]
    assert all("wide" in r["why"] for r in wide)


def test_dra_keeps_its_openshift_scc_grant_and_binds_only_the_scc_roles_its_chart_binds():
    dra = access.STAGE_RULES["dra"]
    assert any(r["resources"] == ["securitycontextconstraints"] and r["verbs"] == ["use"]
               and r["resourceNames"] == ["privileged"] for r in dra)
    bind = [r for r in dra if r["verbs"] == ["bind"] and r["resources"] == ["clusterroles"]]
    names = {n for r in bind for n in r["resourceNames"]}
    assert {"system:openshift:scc:privileged", "system:openshift:scc:anyuid"} <= names
    assert all(r.get("resourceNames") for r in bind)
