# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Quota, usage and borrowing per team and pool, from the quota plan and what the cluster reports.

    usage_rows(settings, plan, queues, quotas) -> [{team, pool, resource, quota, used, borrowed}]
      queues: live ClusterQueues (Kueue mode: status.flavorsUsage, per flavor = pool, with borrowed);
      quotas: live ResourceQuotas (plain mode: status.used, summed over the team's namespaces; a resource name
      shared by several pools is reported on the first of them, as the quota cannot tell them apart).
    report_lines(rows) -> [str]
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.quantity import parse_quantity
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import TEAM_LABEL
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.objects import quota_resource


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
            status = (by_queue.get(holder) or {}).get("status") or {}
            for flavor in status.get("flavorsUsage") or []:
                for resource in flavor.get("resources") or []:
                    used[(flavor.get("name"), resource.get("name"))] = (_amount(resource.get("total")),
                                                                        _amount(resource.get("borrowed")))
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
