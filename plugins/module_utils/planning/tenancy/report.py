# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Quota, usage and borrowing per team and pool, from the quota plan and what the cluster reports.

    usage_rows(settings, plan, queues, quotas) -> [{team, pool, resource, quota, used, borrowed}]
      queues: live ClusterQueues (Kueue mode: status.flavorsUsage, per flavor = pool, with borrowed);
      quotas: live ResourceQuotas (plain mode: status.used, summed over the team's namespaces; a resource name
      shared by several pools is reported on the first of them, as the quota cannot tell them apart).
    live_rows(queues, quotas, pools) -> [{team, pool, resource, quota, used, borrowed}]
      the same rows from what is on the cluster alone (no inventory): the capacity report's team section. Quotas
      from the collection's ClusterQueues' spec (per flavor = pool) or its ResourceQuotas' spec.hard (summed over a
      team's namespaces, the pool named by the pools of the capacity report that offer the resource).
    report_lines(rows) -> [str]
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.quantity import parse_quantity
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import KUEUE_NODE_FLAVOR, TEAM_LABEL
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.objects import quota_resource
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.quotas import DRA_RESOURCE


def _amount(value):
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    parsed = parse_quantity(str(value))
    return int(parsed) if parsed is not None else 0


def usage_rows(settings, plan, queues, quotas):
    """One row per team (and the shared queue), pool and resource the plan gives it."""
    by_queue = dict(((q.get("metadata") or {}).get("name"), q) for q in queues or [])
    rows = []
    holders = [(team.name, plan["teams"][team.name]) for team in settings.teams]
    if settings.kueue:
        holders.append((settings.shared_queue, plan["unassigned"]))
    for holder, given in holders:
        used = {}
        if settings.kueue:
            used = _queue_usage(by_queue.get(holder))
        else:
            used = _quota_usage(holder, plan, quotas)
        for pool in sorted(plan["capacity"]):
            for resource in sorted(plan["capacity"][pool]["resources"]):
                quota = (given.get(pool) or {}).get(resource, 0)
                total, borrowed = used.get((pool, resource), (0, 0))
                if quota or total:
                    rows.append({"team": holder, "pool": pool, "resource": resource, "quota": quota, "used": total,
                                 "borrowed": borrowed})
    return rows


def _queue_usage(queue):
    """{(flavor, resource): (used, borrowed)} from a ClusterQueue's status, as Kueue's controller keeps it."""
    used = {}
    for flavor in (((queue or {}).get("status") or {}).get("flavorsUsage")) or []:
        for resource in flavor.get("resources") or []:
            used[(flavor.get("name"), resource.get("name"))] = (_amount(resource.get("total")),
                                                                _amount(resource.get("borrowed")))
    return used


def _holder(obj):
    """The team an object of the stage belongs to: its team label, or its name (the shared ClusterQueue)."""
    meta = obj.get("metadata") or {}
    return (meta.get("labels") or {}).get(TEAM_LABEL) or meta.get("name")


def _pool_resource(key):
    """The pool resource a ResourceQuota key counts (quota_resource's inverse), or None for another key."""
    if key == quota_resource(DRA_RESOURCE):
        return DRA_RESOURCE
    # Extended resources only (a domain-prefixed name): requests.cpu and requests.memory are no GPU pool's.
    if key.startswith("requests.") and "/" in key:
        return key[len("requests."):]
    return None


def live_rows(queues, quotas, pools):
    """Quota, usage and borrowing per team, pool and GPU resource from the stage's live objects (see the module
    docstring); pools: the capacity report's pools ({name, allocatable}). Rows with neither quota nor use are left
    out; the cpu and memory flavor is not a GPU pool and is left out too."""
    rows = []
    for queue in sorted(queues or [], key=_holder):
        used = _queue_usage(queue)
        given = {}
        for group in ((queue.get("spec") or {}).get("resourceGroups")) or []:
            for flavor in group.get("flavors") or []:
                if flavor.get("name") == KUEUE_NODE_FLAVOR:
                    continue
                for resource in flavor.get("resources") or []:
                    given[(flavor.get("name"), resource.get("name"))] = _amount(resource.get("nominalQuota"))
        for pool, resource in sorted(set(given) | set(k for k in used if k[0] != KUEUE_NODE_FLAVOR)):
            quota, (total, borrowed) = given.get((pool, resource), 0), used.get((pool, resource), (0, 0))
            if quota or total:
                rows.append({"team": _holder(queue), "pool": pool, "resource": resource, "quota": quota,
                             "used": total, "borrowed": borrowed})
    # ResourceQuota counts per resource name over every pool that offers it: the row names all of them.
    sums = {}
    for quota in quotas or []:
        spec, status = quota.get("spec") or {}, quota.get("status") or {}
        for field, index in (((spec.get("hard") or {}), 0), ((status.get("used") or {}), 1)):
            for key, value in field.items():
                resource = _pool_resource(key)
                if resource is not None:
                    sums.setdefault((_holder(quota), resource), [0, 0])[index] += _amount(value)
    for (team, resource), (quota, total) in sorted(sums.items()):
        offering = [p["name"] for p in pools or [] if resource in (p.get("allocatable") or {})]
        if quota or total:
            rows.append({"team": team, "pool": ", ".join(offering) or "-", "resource": resource, "quota": quota,
                         "used": total, "borrowed": 0})
    return rows


def _quota_usage(team, plan, quotas):
    used = {}
    for quota in quotas or []:
        if ((quota.get("metadata") or {}).get("labels") or {}).get(TEAM_LABEL) != team:
            continue
        for key, value in ((quota.get("status") or {}).get("used") or {}).items():
            used[key] = used.get(key, 0) + _amount(value)
    out = {}
    for pool in sorted(plan["capacity"]):
        for resource in sorted(plan["capacity"][pool]["resources"]):
            key = quota_resource(resource)
            if key in used:
                out[(pool, resource)] = (used.pop(key), 0)
    return out


def report_lines(rows):
    """"team research: pool llm-h100 nvidia.com/mig-3g.40gb used 1 of 2 (borrowed 0)" per row."""
    lines = []
    for r in rows:
        borrowed = " (borrowed %d)" % r["borrowed"] if r["borrowed"] else ""
        lines.append("team %s: pool %s %s used %d of %d%s"
                     % (r["team"], r["pool"], r["resource"], r["used"], r["quota"], borrowed))
    return lines or ["no team quota"]
