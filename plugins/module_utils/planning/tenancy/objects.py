# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The objects the tenancy stage writes for a quota plan (quotas.py), in apply order (docs/tenancy.md).

With Kueue: the teams' Namespaces, PriorityClasses and WorkloadPriorityClasses, a ResourceFlavor per pool (its nodes
by the node-pool label) and one for cpu and memory (KUEUE_NODE_FLAVOR, no node labels), a ClusterQueue per team in
one cohort, nominal quotas in the pool's resource names plus a cpu/memory group (plan["node_quotas"]), plus the
shared ClusterQueue holding what no team was given, and a LocalQueue named after the team in each of its namespaces.
Without Kueue: Namespaces, PriorityClasses and a ResourceQuota per namespace (requests.<resource>, or
<class>.deviceclass.resource.k8s.io/devices for DRA), the team's quota divided among its namespaces.

    desired_objects(settings, plan) -> [object]
    queue_of(settings, namespace) -> (LocalQueue name, priority class) or None: what serving labels a model with.
    KINDS: (apiVersion, kind) of every kind the stage writes, in prune order (dependents first).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    KUEUE_API,
    KUEUE_NODE_FLAVOR,
    MANAGED_BY,
    PART_OF_LABEL,
    POOL_LABEL,
    TEAM_LABEL,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.quotas import DRA_RESOURCE
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.spec import NODE_RESOURCES

PART_OF = "kubegpu-tenancy"
LABELS = dict(MANAGED_BY, **{PART_OF_LABEL: PART_OF})
RESOURCE_QUOTA = "kubegpu-gpu-quota"
KINDS = (("v1", "ResourceQuota"), (KUEUE_API, "LocalQueue"), (KUEUE_API, "ClusterQueue"),
         (KUEUE_API, "ResourceFlavor"), (KUEUE_API, "WorkloadPriorityClass"), ("scheduling.k8s.io/v1", "PriorityClass"))


def _labels(team=None):
    return dict(LABELS, **{TEAM_LABEL: team}) if team else dict(LABELS)


def _meta(name, namespace=None, team=None):
    meta = {"name": name, "labels": _labels(team)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def queue_of(settings, namespace):
    """(LocalQueue name, priority class or None) for workloads in namespace, None when no Kueue team owns it."""
    team = settings.team_of_namespace(namespace)
    if team is None or not settings.kueue:
        return None
    return team.name, team.priority


def desired_objects(settings, plan):
    """Every object, in apply order (namespaces and classes before the queues that name them)."""
    objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
               for team in settings.teams for ns in team.namespaces]
    for cls in settings.priority_classes:
        objects.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": _meta(cls.name),
                        "value": cls.value, "preemptionPolicy": cls.preemption,
                        "description": cls.description or cls.name})
    if not settings.kueue:
        return objects + _resource_quotas(settings, plan)
    for cls in settings.priority_classes:
        objects.append({"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": _meta(cls.name),
                        "value": cls.value, "description": cls.description or cls.name})
    pools = [pool for pool in sorted(plan["capacity"]) if plan["capacity"][pool]["resources"]]
    for pool in pools:
        objects.append({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": _meta(pool),
                        "spec": {"nodeLabels": {POOL_LABEL: pool}}})
    if pools:
        # Kueue admits a workload only when its ClusterQueue covers every resource it asks for: a model asks for cpu
        # and memory too. A flavor belongs to one resource group, so cpu and memory get a flavor of their own, with
        # no node labels (it adds nothing to the pod's nodeSelector beside its pool's flavor).
        # No spec at all: an empty one might not come back from the server, and the diff would see a change.
        objects.append({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": _meta(KUEUE_NODE_FLAVOR)})
    groups = _resource_groups(plan["capacity"], pools)
    node_quotas = plan.get("node_quotas") or {}
    for team in settings.teams:
        objects.append(_cluster_queue(settings, team.name, groups, plan["teams"][team.name], team.borrow, team.lend,
                                      node_quotas.get(team.name)))
    objects.append(_cluster_queue(settings, settings.shared_queue, groups, plan["unassigned"], True, True,
                                  node_quotas.get(settings.shared_queue)))
    for team in settings.teams:
        for namespace in team.namespaces:
            objects.append({"apiVersion": KUEUE_API, "kind": "LocalQueue",
                            "metadata": _meta(team.name, namespace, team.name),
                            "spec": {"clusterQueue": team.name}})
    return objects


def _resource_groups(capacity, pools):
    """[(covered resources, [pools])]: pools that share a resource name share a resource group (Kueue allows a
    resource in one group of a ClusterQueue, and every flavor of a group lists every covered resource)."""
    groups = []
    for pool in pools:
        names = set(capacity[pool]["resources"])
        joined = [g for g in groups if g[0] & names]
        merged = (names.union(*[g[0] for g in joined]), [p for g in joined for p in g[1]] + [pool])
        groups = [g for g in groups if g not in joined] + [merged]
    return [(sorted(names), sorted(members)) for names, members in sorted(groups, key=lambda g: sorted(g[0]))]


def _quota_entry(resource, nominal, borrow, lend):
    entry = {"name": resource, "nominalQuota": nominal}
    if not borrow:
        entry["borrowingLimit"] = 0
    if not lend:
        entry["lendingLimit"] = 0
    return entry


def _cluster_queue(settings, name, groups, quotas, borrow, lend, node_quota=None):
    resource_groups = []
    for covered, pools in groups:
        flavors = []
        for pool in pools:
            flavors.append({"name": pool, "resources": [
                _quota_entry(resource, (quotas.get(pool) or {}).get(resource, 0), borrow, lend) for resource in covered]})
        resource_groups.append({"coveredResources": covered, "flavors": flavors})
    if groups:
        node_quota = node_quota or {}
        resource_groups.append({"coveredResources": list(NODE_RESOURCES), "flavors": [
            {"name": KUEUE_NODE_FLAVOR, "resources": [_quota_entry(resource, node_quota.get(resource, "0"), borrow, lend)
                                                      for resource in NODE_RESOURCES]}]})
    team = name if name != settings.shared_queue else None
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": _meta(name, team=team),
            "spec": {"cohortName": settings.cohort, "namespaceSelector": {} if team is None else
                     {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                            "values": sorted(_team(settings, name).namespaces)}]},
                     "queueingStrategy": "BestEffortFIFO",
                     "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                                    "borrowWithinCohort": {"policy": "LowerPriority"}},
                     "resourceGroups": resource_groups}}


def _team(settings, name):
    return next(team for team in settings.teams if team.name == name)


def quota_resource(resource):
    """The ResourceQuota key for a pool resource: requests.<extended resource>, or DRA devices of a DeviceClass."""
    if resource == DRA_RESOURCE:
        return "%s.deviceclass.resource.k8s.io/devices" % resource
    return "requests.%s" % resource


def _resource_quotas(settings, plan):
    out = []
    for team in settings.teams:
        # ResourceQuota counts per resource name, not per pool: pools that offer the same name add up.
        totals = {}
        for pool in sorted(plan["capacity"]):
            for resource in plan["capacity"][pool]["resources"]:
                totals[resource] = totals.get(resource, 0) + (plan["teams"][team.name].get(pool) or {}).get(resource, 0)
        count = len(team.namespaces)
        for index, namespace in enumerate(team.namespaces):
            # The team's quota divided among its namespaces; the first ones take the remainder.
            hard = dict((quota_resource(resource), str(total // count + (1 if index < total % count else 0)))
                        for resource, total in sorted(totals.items()))
            out.append({"apiVersion": "v1", "kind": "ResourceQuota",
                        "metadata": _meta(RESOURCE_QUOTA, namespace, team.name), "spec": {"hard": hard}})
    return out
