# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU capacity per node pool from one list of nodes and one of pods: what is there, what is held, what is idle,
who waits, and what changed since the previous report.

Pure functions over plain dicts, so every figure of the capacity report is unit-tested without a cluster.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.attribution import unattributed_notes
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import POOL_LABEL
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_state import (
    gfd_facts,
    gpu_allocatable,
    is_gpu_node,
    node_labels,
    node_name,
    sharing_state,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.pods import (
    gpu_requests,
    is_finished,
    is_pending_for_gpu,
)

# GPU nodes that no pool selects still hold capacity: they are reported under this name, after the pools.
NO_POOL = "(no pool)"
# Bump when a field of the report document changes meaning; an older previous report is then not compared.
REPORT_SCHEMA = 1


def _bump(counter, key, by=1):
    counter[key] = counter.get(key, 0) + by


def _pod_name(pod):
    meta = pod.get("metadata") or {}
    return "{0}/{1}".format(meta.get("namespace"), meta.get("name"))


def _layout(allocatable, gpus):
    """Units per physical GPU of each resource ({resource: units}), where the division is exact: the pool's layout
    as the device plugin advertises it (MIG slices per GPU, time-sliced replicas per GPU)."""
    if not gpus:
        return {}
    return dict((name, units // gpus) for name, units in allocatable.items() if units and units % gpus == 0)


def _matches(labels, selector):
    return all(labels.get(key) == value for key, value in (selector or {}).items())


def pool_capacity(nodes, pods):
    """Capacity of every node pool: one entry per pool (sorted by name), then GPU nodes in no pool as NO_POOL.

    Each entry: name, pooled, nodes, gpu_models, physical_gpus, sharing ({strategy: nodes}), mig_states
    ({state: nodes}), layout ({resource: units per GPU}), allocatable, requested and idle ({resource: units};
    requested counts pods bound to the pool's nodes that have not finished), pending ([{pod, resources}]: pods
    not bound yet that ask for a resource the pool offers and whose nodeSelector one of its nodes matches).
    Returns {"pools": [...], "unplaceable": [{pod, resources}]}: pending GPU pods that no pool could take; and
    "notes" when a pool's GPU use cannot be seen per pod (its DRA nodes: monitoring/attribution.py).
    """
    pools = {}
    node_pool = {}
    pool_nodes = {}
    for node in nodes:
        labels = node_labels(node)
        name = labels.get(POOL_LABEL) or (NO_POOL if is_gpu_node(node) else None)
        if name is None:
            continue
        node_pool[node_name(node)] = name
        pool_nodes.setdefault(name, []).append(node)
        entry = pools.setdefault(name, {
            "name": name, "pooled": name != NO_POOL, "nodes": 0, "gpu_models": [], "physical_gpus": 0,
            "sharing": {}, "mig_states": {}, "layout": {}, "allocatable": {}, "requested": {}, "idle": {},
            "pending": []})
        entry["nodes"] += 1
        gfd = gfd_facts(labels)
        model = gfd["physical_product"] or "unknown"
        if model not in entry["gpu_models"]:
            entry["gpu_models"].append(model)
        entry["physical_gpus"] += gfd["physical_count"] or 0
        for resource, units in gpu_allocatable(node).items():
            _bump(entry["allocatable"], resource, units)
        state = sharing_state(labels)
        _bump(entry["sharing"], state["strategy"])
        if "mig_state" in state:
            _bump(entry["mig_states"], "{0}={1}".format(state["mig_config"], state["mig_state"]))
    unplaceable = []
    for pod in pods:
        units = gpu_requests(pod)
        if not units:
            continue
        bound = (pod.get("spec") or {}).get("nodeName")
        if bound:
            if bound in node_pool and not is_finished(pod):
                for resource, value in units.items():
                    _bump(pools[node_pool[bound]]["requested"], resource, value)
            continue
        if not is_pending_for_gpu(pod):
            continue
        selector = (pod.get("spec") or {}).get("nodeSelector") or {}
        waiting = {"pod": _pod_name(pod), "resources": units}
        takers = [name for name, members in pool_nodes.items()
                  if any(_matches(node_labels(n), selector) and all(gpu_allocatable(n).get(r) for r in units)
                         for n in members)]
        for name in takers:
            pools[name]["pending"].append(waiting)
        if not takers:
            unplaceable.append(waiting)
    ordered = sorted(pools.values(), key=lambda p: (not p["pooled"], p["name"]))
    for entry in ordered:
        entry["gpu_models"].sort()
        # A resource advertised at 0 (nvidia.com/gpu under MIG mixed) is no capacity: left out, as in the summaries.
        entry["allocatable"] = dict(sorted((r, n) for r, n in entry["allocatable"].items() if n))
        entry["requested"] = dict(sorted(entry["requested"].items()))
        resources = sorted(set(entry["allocatable"]) | set(entry["requested"]))
        # Negative when pods hold more than is advertised now (units withdrawn under running pods).
        entry["idle"] = dict((r, entry["allocatable"].get(r, 0) - entry["requested"].get(r, 0)) for r in resources)
        entry["layout"] = _layout(entry["allocatable"], entry["physical_gpus"])
        entry["pending"].sort(key=lambda w: w["pod"])
    unplaceable.sort(key=lambda w: w["pod"])
    result = {"pools": ordered, "unplaceable": unplaceable}
    notes = unattributed_notes(nodes)
    if notes:
        result["notes"] = notes
    return result


def _flat(pool):
    """The figures of one pool that a change is reported on: {(field, resource or None): value}."""
    flat = {("nodes", None): pool.get("nodes", 0), ("physical_gpus", None): pool.get("physical_gpus", 0),
            ("pending", None): len(pool.get("pending") or [])}
    for field in ("allocatable", "requested", "idle"):
        for resource, value in (pool.get(field) or {}).items():
            flat[(field, resource)] = value
    flat[("sharing", None)] = ", ".join(sorted(pool.get("sharing") or {})) or None
    flat[("gpu_models", None)] = ", ".join(pool.get("gpu_models") or []) or None
    return flat


ZERO_WHEN_ABSENT = ("allocatable", "requested", "idle")


def capacity_changes(previous, pools):
    """What changed between the previous report's pools and these: a list of {pool, field, resource, before,
    after}, pools in order, a pool that appears or goes as one entry with field 'pool'. None when there is no
    previous report to compare with (first run, or a report of another schema)."""
    if not previous or previous.get("schema") != REPORT_SCHEMA:
        return None
    before = dict((p["name"], p) for p in previous.get("pools") or [])
    after = dict((p["name"], p) for p in pools)
    changes = []
    for name in sorted(set(before) | set(after), key=lambda n: (n == NO_POOL, n)):
        if name not in before:
            changes.append({"pool": name, "field": "pool", "resource": None, "before": None, "after": "added"})
            continue
        if name not in after:
            changes.append({"pool": name, "field": "pool", "resource": None, "before": "present", "after": "removed"})
            continue
        old, new = _flat(before[name]), _flat(after[name])
        for key in sorted(set(old) | set(new), key=lambda k: (k[0], k[1] or "")):
            default = 0 if key[0] in ZERO_WHEN_ABSENT else None
            was, now = old.get(key, default), new.get(key, default)
            if was != now:
                changes.append({"pool": name, "field": key[0], "resource": key[1], "before": was, "after": now})
    return changes


def _team_key(row):
    return row["pool"], row["team"], row["resource"]


def team_changes(previous, teams):
    """What changed in the teams' quota and use since the previous report: {pool, field ('team <name> quota' or
    'team <name> used'), resource, before, after}. Nothing when the previous report had no team section."""
    if not previous or previous.get("teams") is None:
        return []
    before = dict((_team_key(r), r) for r in previous["teams"])
    after = dict((_team_key(r), r) for r in teams)
    changes = []
    for pool, team, resource in sorted(set(before) | set(after)):
        for field in ("quota", "used"):
            was = (before.get((pool, team, resource)) or {}).get(field, 0)
            now = (after.get((pool, team, resource)) or {}).get(field, 0)
            if was != now:
                changes.append({"pool": pool, "field": "team {0} {1}".format(team, field), "resource": resource,
                                "before": was, "after": now})
    return changes


def report_document(capacity, generated_at, cluster=None, previous=None, teams=None):
    """The report as one JSON-ready document: schema, generated_at, cluster (platform facts), pools, unplaceable,
    teams (quota, used and borrowed per team, pool and resource: tenancy/report.live_rows), changes (see
    capacity_changes and team_changes) and previous_generated_at (None on a first report); notes when the capacity
    has some (what cannot be measured: per-pod GPU metrics on DRA pools)."""
    teams = list(teams or [])
    changes = capacity_changes(previous, capacity["pools"])
    if changes is not None:
        changes += team_changes(previous, teams)
    document = {
        "schema": REPORT_SCHEMA,
        "generated_at": generated_at,
        "cluster": cluster or {},
        "pools": capacity["pools"],
        "unplaceable": capacity["unplaceable"],
        "teams": teams,
        "previous_generated_at": previous.get("generated_at") if changes is not None else None,
        "changes": changes,
    }
    if capacity.get("notes"):
        document["notes"] = capacity["notes"]
    return document


def pool_summary(document):
    """One line per pool for AWX's job summary (set_stats): {pool: 'resource idle/allocatable, ...; N pending'}."""
    summary = {}
    for pool in document["pools"]:
        units = ", ".join("{0} {1}/{2} idle".format(resource.split("/", 1)[-1], pool["idle"].get(resource, 0), total)
                          for resource, total in pool["allocatable"].items()) or "no GPU units"
        summary[pool["name"]] = "{0}; {1} pending".format(units, len(pool["pending"]))
    return summary


def team_summary(document):
    """One line per team for AWX's job summary: {team: 'pool resource used/quota (borrowed n), ...'}."""
    summary = {}
    for row in document.get("teams") or []:
        borrowed = " (borrowed {0})".format(row["borrowed"]) if row["borrowed"] else ""
        part = "{0} {1} {2}/{3} used{4}".format(
            row["pool"], row["resource"].split("/", 1)[-1], row["used"], row["quota"], borrowed)
        summary[row["team"]] = summary[row["team"]] + ", " + part if row["team"] in summary else part
    return summary
