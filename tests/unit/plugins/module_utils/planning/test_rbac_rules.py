# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""RBAC rules split, merged and compared the way the API server's escalation check compares them."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.access.rbac_rules import (
    FULL_AUTHORITY,
    Atom,
    atoms,
    covers,
    merge,
    missing,
    self_granting,
)


def rule(groups, resources, verbs, names=None):
    out = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        out["resourceNames"] = names
    return out


def test_atoms_are_one_per_group_resource_name_and_verb():
    found = atoms([rule(["", "apps"], ["pods", "deployments"], ["get", "list"], names=["a"]),
                   {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
    assert len(found) == 2 * 2 * 2 + 1
    assert Atom("apps", "pods", "a", "", "list") in found
    assert Atom("", "", "", "/metrics", "get") in found


@pytest.mark.parametrize("held, wanted, expected", [
    ([rule([""], ["pods"], ["get", "list"])], [rule([""], ["pods"], ["get"])], True),
    ([rule([""], ["pods"], ["get"])], [rule([""], ["pods"], ["get", "list"])], False),
    # A held `*` covers any verb, resource or group...
    ([rule(["*"], ["*"], ["*"])], [rule(["apps"], ["deployments/scale"], ["patch"], names=["x"])], True),
    ([rule(["apps"], ["*"], ["get"])], [rule(["apps"], ["deployments", "statefulsets/scale"], ["get"])], True),
    # ...but a wanted `*` only by a held `*`: a role granting every resource needs an account holding every one.
    ([rule(["apps", "batch", ""], ["deployments", "jobs", "pods"], ["get"])], [rule(["*"], ["*"], ["get"])], False),
    ([rule([""], ["pods"], ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"])],
     [rule([""], ["pods"], ["*"])], False),
    # "*/scale" covers every scale subresource, and nothing else.
    ([rule(["*"], ["*/scale"], ["get"])], [rule(["apps"], ["deployments/scale"], ["get"])], True),
    ([rule(["*"], ["*/scale"], ["get"])], [rule(["apps"], ["deployments"], ["get"])], False),
    ([rule(["apps"], ["deployments/scale"], ["get"])], [rule(["*"], ["*/scale"], ["get"])], False),
    # Names: a held rule for every object covers a named one, a named one covers only its names.
    ([rule([""], ["secrets"], ["get"])], [rule([""], ["secrets"], ["get"], names=["a", "b"])], True),
    ([rule([""], ["secrets"], ["get"], names=["a"])], [rule([""], ["secrets"], ["get"], names=["a", "b"])], False),
    ([rule([""], ["secrets"], ["get"], names=["a"])], [rule([""], ["secrets"], ["get"])], False),
    # Non-resource URLs: exact, or a held prefix ending in `*`; resources never cover them.
    ([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}], [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
     True),
    ([{"nonResourceURLs": ["/debug/*"], "verbs": ["get"]}], [{"nonResourceURLs": ["/debug/pprof"], "verbs": ["get"]}],
     True),
    ([rule(["*"], ["*"], ["*"])], [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}], False),
    ([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}], [{"nonResourceURLs": ["/metricsz"], "verbs": ["get"]}],
     False),
    (FULL_AUTHORITY, FULL_AUTHORITY, True),
    ([rule(["*"], ["*"], ["*"])], FULL_AUTHORITY, False),
    # Atoms covered across several held rules.
    ([rule([""], ["pods"], ["get"]), rule([""], ["pods"], ["list"])], [rule([""], ["pods"], ["get", "list"])], True),
    ([], [], True),
])
def test_covers_as_the_api_servers_escalation_check(held, wanted, expected):
    assert covers(held, wanted) is expected


def test_missing_names_only_what_is_not_held():
    held = [rule([""], ["pods"], ["get", "list"]), rule(["apps"], ["deployments"], ["*"])]
    wanted = [rule(["", "apps"], ["pods", "deployments"], ["get", "watch"])]
    assert missing(held, wanted) == [rule([""], ["deployments"], ["get", "watch"]),
                                     rule([""], ["pods"], ["watch"]),
                                     rule(["apps"], ["pods"], ["get", "watch"])]
    assert missing(wanted, wanted) == []


def test_merge_deduplicates_and_compacts():
    rules = [
        rule([""], ["pods"], ["list", "get"]),
        rule([""], ["pods"], ["get"]),
        rule([""], ["services"], ["get", "list"]),
        rule(["apps"], ["pods", "services"], ["get", "list"]),
        rule([""], ["secrets"], ["get"], names=["b", "a"]),
        rule([""], ["secrets"], ["get"], names=["a"]),
        rule([""], ["configmaps"], ["get"], names=["c"]),
        rule([""], ["configmaps"], ["get"]),
        {"nonResourceURLs": ["/metrics", "/healthz"], "verbs": ["get"]},
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
    ]
    assert merge(rules) == [
        rule([""], ["configmaps"], ["get"]),
        rule([""], ["secrets"], ["get"], names=["a", "b"]),
        rule(["", "apps"], ["pods", "services"], ["get", "list"]),
        {"nonResourceURLs": ["/healthz", "/metrics"], "verbs": ["get"]},
    ]


def test_merge_drops_what_a_wildcard_already_grants():
    rules = [rule(["*"], ["*"], ["get"]), rule(["apps"], ["deployments"], ["get", "patch"]),
             rule(["*"], ["*/scale"], ["get", "patch"]), rule(["apps"], ["deployments/scale"], ["patch", "update"]),
             rule([""], ["pods"], ["*"]), rule([""], ["pods"], ["delete"])]
    assert merge(rules) == [
        rule([""], ["pods"], ["*"]),
        rule(["*"], ["*"], ["get"]),
        rule(["*"], ["*/scale"], ["patch"]),
        rule(["apps"], ["deployments"], ["patch"]),
        rule(["apps"], ["deployments/scale"], ["update"]),
    ]
    # Merging changes the rules' shape, never what they grant.
    assert covers(merge(rules), rules) and covers(rules, merge(rules))


def test_merge_keeps_verbs_in_reading_order():
    assert merge([rule([""], ["pods"], ["delete", "watch", "create", "get", "use", "list"])])[0]["verbs"] == \
        ["get", "list", "watch", "create", "delete", "use"]


@pytest.mark.parametrize("rules, wide", [
    ([rule(["*"], ["*"], ["*"])], True),
    ([rule(["rbac.authorization.k8s.io"], ["clusterroles"], ["escalate"])], True),
    ([rule(["rbac.authorization.k8s.io"], ["roles", "rolebindings"], ["*"])], True),
    ([rule(["rbac.authorization.k8s.io"], ["clusterroles"], ["bind"])], True),
    ([rule([""], ["users", "groups"], ["impersonate"])], True),
    ([rule([""], ["serviceaccounts/token"], ["create"])], True),
    # Binding named roles only, or managing roles under the escalation check, grants nothing beyond what is held.
    ([rule(["rbac.authorization.k8s.io"], ["clusterroles"], ["bind"], names=["system:auth-delegator"])], False),
    ([rule(["rbac.authorization.k8s.io"], ["clusterroles", "clusterrolebindings"],
           ["get", "list", "create", "update", "patch", "delete"])], False),
    ([rule(["*"], ["*"], ["get"]), rule(["*"], ["*/scale"], ["get", "patch"])], False),
])
def test_self_granting_rights_are_found(rules, wide):
    assert bool(self_granting(rules)) is wide
