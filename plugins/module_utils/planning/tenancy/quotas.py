# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each pool offers, in its own resource names, and each team's quota of it (docs/tenancy.md, "The rule").

    pool_capacity(pools, nodes) -> {pool: {"strategy", "nodes", "resources": {resource: units}}}
      Computed from the pool plan, not restated: the device plugin's resources of a MIG layout, time-slicing or
      MPS replicas per node (serving/slices.py over mig_layout and device_plugin_config) times the pool's nodes
      (pool_selection), and for a DRA pool its physical GPUs (node_pools.physical_gpus), one DRA device each
      under the driver's class gpu.nvidia.com.
    plan_quotas(settings, capacity) -> {"teams": {team: {pool: {resource: n}}}, "unassigned": {pool: {resource: n}},
                                        "capacity": capacity}
      A share is floor(share x capacity), per resource of the pool; units are taken as given. For every pool and
      resource, the teams' quotas plus the unassigned remainder equal the capacity: the remainder is the nominal
      quota of the shared ClusterQueue (or nobody's without Kueue). Raises TenancyError listing every unknown pool,
      unknown resource and over-subscribed resource (with the teams that ask for it) before anything is written.
      "node_quotas" (node_quotas): every queue's cpu and memory, which Kueue counts as well.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from fractions import Fraction

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.device_plugin_config import DRA
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DRA_DRIVER, PRODUCT_LABEL
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import physical_gpus
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.selection import resolve_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import Pool, parse_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import SizingError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.slices import pool_slices
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.suggest import did_you_mean
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.spec import (
    NODE_RESOURCES,
    TenancyError,
    node_quantity,
)

# The resource a DRA pool's quota is written in: the NVIDIA DRA driver's whole-GPU DeviceClass (one device per GPU).
DRA_RESOURCE = DRA_DRIVER


def pool_capacity(pools, nodes):
    """{pool: {strategy, nodes, resources}} of every pool (see the module docstring); raises PoolError/SizingError."""
    if pools is None or not all(isinstance(pool, Pool) for pool in pools):
        pools = parse_pools(pools)
    selected = resolve_pools(pools, nodes or [])
    out = {}
    for pool in pools:
        members = selected[pool.name]
        resources = {}
        if pool.strategy == DRA:
            counts = [(node, physical_gpus(node)) for node in members]
            unknown = [(node.get("metadata") or {}).get("name") for node, count in counts if count is None]
            if unknown:
                raise SizingError("pool '%s': node %s does not tell its GPUs yet (no %s label: GPU Feature Discovery "
                                  "labels it once the GPU Operator runs)" % (pool.name, unknown[0], PRODUCT_LABEL))
            if members:
                resources[DRA_RESOURCE] = sum(count for dummy, count in counts)
        elif members:
            for piece in pool_slices([pool], members):
                resources[piece.resource_name] = (resources.get(piece.resource_name, 0)
                                                  + (piece.units_per_node or 0) * (piece.nodes or 0))
        out[pool.name] = {"strategy": pool.strategy, "nodes": len(members), "resources": resources,
                          "allocatable": _allocatable(members)}
    return out


def _allocatable(nodes):
    """{cpu, memory}: what the nodes offer to pods (status.allocatable), summed, as quantities."""
    totals = dict((name, Fraction(0)) for name in NODE_RESOURCES)
    for node in nodes:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for name in NODE_RESOURCES:
            totals[name] += node_quantity(allocatable.get(name, 0)) or 0
    return dict((name, quantity_text(name, total)) for name, total in totals.items())


def quantity_text(name, amount):
    """A Fraction as a quantity: cpu in cores or millicores (rounded down), memory in bytes (or Ki/Mi/Gi when
    exact)."""
    if name == "cpu":
        return str(int(amount)) if amount == int(amount) else "%dm" % int(amount * 1000)
    amount = int(amount)
    for suffix, unit in (("Gi", 2 ** 30), ("Mi", 2 ** 20), ("Ki", 2 ** 10)):
        if amount and amount % unit == 0:
            return "%d%s" % (amount // unit, suffix)
    return str(amount)


def node_quotas(settings, capacity):
    """{holder: {cpu, memory}} for every team and the shared queue: the team's own cpu/memory when given, else what
    the nodes of the pools with GPUs offer (their allocatable, summed): Kueue then never holds back for cpu or memory
    a workload the GPU quota admits, and the kube-scheduler still places pods by the nodes' real free room."""
    totals = dict((name, Fraction(0)) for name in NODE_RESOURCES)
    for pool in capacity.values():
        if pool["resources"]:
            for name in NODE_RESOURCES:
                totals[name] += node_quantity((pool.get("allocatable") or {}).get(name, 0)) or 0
    offered = dict((name, quantity_text(name, total)) for name, total in totals.items())
    out = dict((team.name, dict((name, getattr(team, name) or offered[name]) for name in NODE_RESOURCES))
               for team in settings.teams)
    out[settings.shared_queue] = dict(offered)
    return out


def plan_quotas(settings, capacity):
    """Each team's quota per pool and resource, and what is left unassigned; raises TenancyError (all problems)."""
    problems = []
    teams = {}
    pools = sorted(capacity)
    for team in settings.teams:
        wanted = {}
        for quota in team.quotas:
            where = "team '%s': quotas (pool '%s')" % (team.name, quota.pool)
            if quota.pool not in capacity:
                problems.append("%s: no such pool%s (pools: %s)"
                                % (where, did_you_mean(quota.pool, pools), ", ".join(pools) or "none"))
                continue
            offered = capacity[quota.pool]["resources"]
            if not offered:
                problems.append("%s: the pool selects no node with GPUs, so it offers nothing to share" % where)
                continue
            if quota.share is not None:
                share = Fraction(str(quota.share))
                wanted[quota.pool] = dict((name, int(share * units)) for name, units in sorted(offered.items()))
                continue
            units = quota.units
            if not isinstance(units, dict):
                if len(offered) > 1:
                    problems.append("%s: units is %d but the pool offers several resources (%s); give units as "
                                    "{resource: count}" % (where, units, ", ".join(sorted(offered))))
                    continue
                units = {next(iter(offered)): units}
            unknown = [name for name in units if name not in offered]
            for name in unknown:
                problems.append("%s: units name resource '%s', which the pool does not offer%s (it offers %s)"
                                % (where, name, did_you_mean(name, list(offered)),
                                   ", ".join("%s: %d" % item for item in sorted(offered.items()))))
            if not unknown:
                wanted[quota.pool] = dict(sorted(units.items()))
        teams[team.name] = wanted
    unassigned = {}
    for pool in pools:
        for name, units in sorted(capacity[pool]["resources"].items()):
            asked = [(team, wanted[pool][name]) for team, wanted in teams.items() if name in wanted.get(pool, {})]
            total = sum(count for dummy, count in asked)
            if total > units:
                problems.append(
                    "pool '%s' %s: the teams' quotas add up to %d (%s), above the %d the pool offers (%d node%s); "
                    "lower the shares or units of these teams, or grow the pool"
                    % (pool, name, total, ", ".join("%s: %d" % item for item in asked), units,
                       capacity[pool]["nodes"], "" if capacity[pool]["nodes"] == 1 else "s"))
            unassigned.setdefault(pool, {})[name] = max(units - total, 0)
    if problems:
        raise TenancyError("kubegpu_tenancy: " + "; ".join(problems))
    return {"teams": teams, "unassigned": unassigned, "capacity": capacity,
            "node_quotas": node_quotas(settings, capacity)}
