# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""RBAC rules as the API server reads them: split into atoms, merged back, and whether one set covers another.

The API server lets an account create a Role or ClusterRole only with rights it holds itself (its escalation check,
k8s.io/component-helpers auth/rbac/validation): it breaks the new role's rules into atoms, one per API group,
resource, verb and resource name (or per non-resource URL and verb), and looks for a rule of the account's that
covers each. A `*` verb, resource or group in the account's rules covers any; a `*` in the new role's rules is
covered only by a `*` (a role granting every resource needs an account holding every resource); `*/scale` covers
the scale subresource of any resource; a rule limited to names covers only those names; a non-resource URL ending
in `*` covers every URL it prefixes.

    atoms(rules) -> set of Atom                  covers(held, wanted) -> bool
    merge(rules) -> compact rules                missing(held, wanted) -> the rules of `wanted` not covered
    self_granting(rules) -> the rules that would let their holder grant itself any right

Pure: no network, no Ansible.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import defaultdict, namedtuple

ALL = "*"
RBAC_GROUP = "rbac.authorization.k8s.io"

# One right: a verb on one resource of one API group (name "" for every object), or on one non-resource URL
# (url, the other fields "").
Atom = namedtuple("Atom", "group resource name url verb")

# The order verbs are written in: reads, writes, then the RBAC and SCC special verbs.
VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "use", "bind",
              "escalate", "impersonate", ALL)

# What Helm sends for the objects of a release: it reads each before it creates, patches (upgrade), updates (a
# forced upgrade) or deletes it (an object the new chart version dropped, an uninstall).
HELM = ("get", "list", "create", "patch", "update", "delete")

# What the API server asks of an account that creates a ClusterRole with an aggregationRule (which can gather any
# right): every verb on every resource and non-resource URL, or `escalate` (clusterrole policybased storage).
FULL_AUTHORITY = [{"apiGroups": [ALL], "resources": [ALL], "verbs": [ALL]}, {"nonResourceURLs": [ALL], "verbs": [ALL]}]

# Rights that let their holder give itself any other right: make roles beyond what it holds, bind any role,
# act as another user or account, mint any ServiceAccount's token.
_SELF_GRANTING = [
    Atom(RBAC_GROUP, "clusterroles", "", "", "escalate"),
    Atom(RBAC_GROUP, "roles", "", "", "escalate"),
    Atom(RBAC_GROUP, "clusterroles", "", "", "bind"),
    Atom(RBAC_GROUP, "roles", "", "", "bind"),
    Atom("", "users", "", "", "impersonate"),
    Atom("", "groups", "", "", "impersonate"),
    Atom("", "serviceaccounts", "", "", "impersonate"),
    Atom("", "serviceaccounts/token", "", "", "create"),
]


def atoms(rules):
    """Every atom of `rules` (PolicyRule dicts: apiGroups, resources, verbs, resourceNames, nonResourceURLs)."""
    out = set()
    for r in rules:
        verbs = r.get("verbs") or []
        names = r.get("resourceNames") or [""]
        for group in r.get("apiGroups") or []:
            for resource in r.get("resources") or []:
                for name in names:
                    for verb in verbs:
                        out.add(Atom(group, resource, name, "", verb))
        for url in r.get("nonResourceURLs") or []:
            for verb in verbs:
                out.add(Atom("", "", "", url, verb))
    return out


def _one_of(held, wanted):
    return ALL in held or wanted in held


def _resource_covered(held, wanted):
    if _one_of(held, wanted):
        return True
    # "*/scale" covers the scale subresource of every resource.
    return "/" in wanted and "*/" + wanted.split("/", 1)[1] in held


def _url_covered(held_url, wanted_url):
    return held_url == wanted_url or (held_url.endswith(ALL) and wanted_url.startswith(held_url.rstrip(ALL)))


def rule_covers(rule, atom):
    """Whether one rule grants the right `atom`, as the API server's escalation check decides."""
    if not _one_of(rule.get("verbs") or [], atom.verb):
        return False
    if atom.url:
        return any(_url_covered(u, atom.url) for u in rule.get("nonResourceURLs") or [])
    names = rule.get("resourceNames") or []
    return (_one_of(rule.get("apiGroups") or [], atom.group)
            and _resource_covered(rule.get("resources") or [], atom.resource)
            and (not names or (atom.name != "" and atom.name in names)))


def _as_rule(atom):
    if atom.url:
        return {"nonResourceURLs": [atom.url], "verbs": [atom.verb]}
    out = {"apiGroups": [atom.group], "resources": [atom.resource], "verbs": [atom.verb]}
    if atom.name:
        out["resourceNames"] = [atom.name]
    return out


def uncovered(held, wanted):
    """The atoms of `wanted` (rules) that no rule of `held` covers, sorted."""
    return sorted(a for a in atoms(wanted) if not any(rule_covers(r, a) for r in held))


def covers(held, wanted):
    """Whether an account holding the rules `held` may create a role with the rules `wanted`."""
    return not uncovered(held, wanted)


def missing(held, wanted):
    """The rules of `wanted` that `held` does not cover, merged; [] when it covers them all."""
    return _regroup(uncovered(held, wanted))


def _wide(atom):
    return ALL in (atom.group, atom.resource, atom.verb) or atom.resource.startswith("*/") or atom.url.endswith(ALL)


def _minimal(found):
    """`found` without the atoms another atom of it covers (get on secrets "x" when get on every secret is there)."""
    wide = [a for a in found if _wide(a)]
    out = set()
    for a in found:
        if a.name and a._replace(name="") in found:
            continue
        if any(w != a and rule_covers(_as_rule(w), a) for w in wide):
            continue
        out.add(a)
    return out


def _verbs(verbs):
    return sorted(verbs, key=lambda v: (VERB_ORDER.index(v) if v in VERB_ORDER else len(VERB_ORDER), v))


def _regroup(found):
    """Atoms back into rules: resources sharing verbs and names in one rule, then groups sharing all three."""
    verbs_of = defaultdict(set)
    urls = defaultdict(set)
    for a in found:
        if a.url:
            urls[a.url].add(a.verb)
        else:
            verbs_of[(a.group, a.resource, a.name)].add(a.verb)
    names_of = defaultdict(set)
    for (group, resource, name), verbs in verbs_of.items():
        names_of[(group, resource, frozenset(verbs))].add(name)
    resources_of = defaultdict(set)
    for (group, resource, verbs), names in names_of.items():
        resources_of[(group, verbs, frozenset(names))].add(resource)
    groups_of = defaultdict(set)
    for (group, verbs, names), resources in resources_of.items():
        groups_of[(frozenset(resources), verbs, names)].add(group)
    out = []
    for (resources, verbs, names), groups in groups_of.items():
        r = {"apiGroups": sorted(groups), "resources": sorted(resources), "verbs": _verbs(verbs)}
        if names != frozenset([""]):
            r["resourceNames"] = sorted(names)
        out.append(r)
    out.sort(key=lambda r: (r["apiGroups"], r["resources"], r.get("resourceNames", []), r["verbs"]))
    by_verbs = defaultdict(set)
    for url, verbs in urls.items():
        by_verbs[frozenset(verbs)].add(url)
    out += sorted(({"nonResourceURLs": sorted(u), "verbs": _verbs(v)} for v, u in by_verbs.items()),
                  key=lambda r: r["nonResourceURLs"])
    return out


def merge(rules):
    """`rules` deduplicated and compacted: the same rights in as few rules as the atoms allow, in a stable order."""
    return _regroup(_minimal(atoms(rules)))


def self_granting(rules):
    """The rules among `rules` that would let their holder grant itself any right (escalate or bind any role,
    impersonate, mint any ServiceAccount's token; `*` on everything does all of these); [] when none does."""
    return [r for r in rules if any(rule_covers(r, a) for a in _SELF_GRANTING)]


# get on every resource of every API group: a holder reads every object of the cluster (Secrets included).
_READS_EVERYTHING = Atom(ALL, ALL, "", "", "get")


def reads_everything(rules):
    """The rules among `rules` that grant get on every resource of every API group; [] when none does."""
    return [r for r in rules if rule_covers(r, _READS_EVERYTHING)]
