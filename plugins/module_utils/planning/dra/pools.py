# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""DRA pools never share a node with the device plugin.

The NVIDIA DRA driver, once it allocates GPUs, must not run beside the k8s-device-plugin on the same
node: both would hand out the same GPUs (the chart refuses resources.gpus.enabled without
gpuResourcesEnabledOverride for that reason). A pool with sharing.strategy dra takes its nodes away
from the device plugin; every other strategy (none, mig, time-slicing, mps) is served by the device
plugin. check_dra_overlap refuses a node that is in a dra pool and in a device-plugin pool, or that
carries the DRA kubelet plugin's label while a device-plugin pool takes it.

Pure: the caller passes pools already resolved to node names (pool_selection.resolve_pools).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    DEPLOY_FALSE,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DRA_PLUGIN_LABEL,
    DRA_PLUGIN_LABEL_VALUE,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_state import node_labels, node_name
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.selection import pool_selects
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError, parse_pools

DRA = "dra"
# The GPU Operator adds an operand's deploy label only where it is missing: "false" set by us keeps the
# device plugin off that node (DEVICE_PLUGIN_DEPLOY_LABEL), and removing it lets the operator put "true" back.
_SHOWN = 5


def _names(nodes):
    """Node names from names or Node dicts."""
    return set(node if isinstance(node, str) else node["metadata"]["name"] for node in nodes)


def _listed(names):
    names = sorted(names)
    more = len(names) - _SHOWN
    return ", ".join(names[:_SHOWN]) + (" and %d more" % more if more > 0 else "")


def check_dra_overlap(pool_nodes, dra_labelled=()):
    """Refuse nodes shared by a dra pool and a device-plugin pool; return {dra pool: sorted node names}.

    pool_nodes: {pool name: (strategy, nodes)}, nodes as names or Node dicts, in pool order.
    dra_labelled: names of nodes labelled nvidia.com/dra-kubelet-plugin=true today; one of them in a
    device-plugin pool would get both plugins (the label is left from an earlier dra pool, or set by
    hand).
    Raises PoolError naming both pools (or the label) and up to five nodes.
    """
    if not isinstance(pool_nodes, Mapping):
        raise PoolError("pool nodes are %r; expected {pool: (strategy, nodes)}" % (pool_nodes,))
    dra, plugin = [], []
    for name, (strategy, nodes) in pool_nodes.items():
        (dra if strategy == DRA else plugin).append((name, strategy, _names(nodes)))
    for name, dummy, nodes in dra:
        for other, strategy, other_nodes in plugin:
            shared = nodes & other_nodes
            if shared:
                raise PoolError(
                    "pool '%s' (strategy dra) and pool '%s' (strategy %s) both take node%s %s; the DRA driver and the "
                    "device plugin cannot serve the same node (narrow one pool's selector or machinesets)"
                    % (name, other, strategy, "s" if len(shared) > 1 else "", _listed(shared)))
    labelled = _names(dra_labelled)
    for other, strategy, other_nodes in plugin:
        shared = labelled & other_nodes
        if shared:
            raise PoolError(
                "pool '%s' (strategy %s) takes node%s %s, which carr%s %s=%s: the DRA "
                "driver runs there; put the node%s in a dra pool, or remove the label once no DRA claim uses %s"
                % (other, strategy, "s" if len(shared) > 1 else "", _listed(shared),
                   "y" if len(shared) > 1 else "ies", DRA_PLUGIN_LABEL, DRA_PLUGIN_LABEL_VALUE,
                   "s" if len(shared) > 1 else "",
                   "them" if len(shared) > 1 else "it"))
    return dict((name, sorted(nodes)) for name, dummy, nodes in dra)


def check_resolved_pools(pools, selected, dra_labelled=()):
    """check_dra_overlap over parse_pools' Pools and resolve_pools' {pool name: [Node dicts]}."""
    return check_dra_overlap(
        dict((pool.name, (pool.strategy, selected.get(pool.name, []))) for pool in pools), dra_labelled)


def labelled_nodes(nodes):
    """Names of the nodes that carry the DRA kubelet plugin's label today."""
    return sorted(node_name(node) for node in nodes if node_labels(node).get(DRA_PLUGIN_LABEL) == DRA_PLUGIN_LABEL_VALUE)


def dra_pool_nodes(raw_pools, nodes):
    """Return {dra pool: sorted node names} for kubegpu_node_pools, refusing overlaps with device-plugin pools.

    Each pool takes the nodes its selector and machinesets select (pool_selection.pool_selects); overlaps
    between two device-plugin pools are the node pools stage's to refuse, not this one's. Raises PoolError.
    """
    pools = parse_pools(raw_pools)
    selected = dict((pool.name, [node for node in nodes if pool_selects(pool, node)]) for pool in pools)
    return check_resolved_pools(pools, selected, labelled_nodes(nodes))


def plan_node_labels(dra_pools, nodes):
    """Return {node name: {label: value, or None to remove}} for the nodes whose labels must change.

    Nodes of dra pools get the kubelet plugin's label and the device plugin turned off; nodes that carry the
    plugin's label but are in no dra pool any more lose it, and the device plugin's deploy label when it is
    the "false" this stage set, so the GPU Operator deploys the device plugin there again.
    """
    wanted = set(name for names in dra_pools.values() for name in names)
    changes = {}
    for node in sorted(nodes, key=node_name):
        name, labels = node_name(node), node_labels(node)
        if name in wanted:
            desired = {DRA_PLUGIN_LABEL: DRA_PLUGIN_LABEL_VALUE, DEVICE_PLUGIN_DEPLOY_LABEL: DEPLOY_FALSE}
        elif labels.get(DRA_PLUGIN_LABEL) == DRA_PLUGIN_LABEL_VALUE:
            desired = {DRA_PLUGIN_LABEL: None}
            if labels.get(DEVICE_PLUGIN_DEPLOY_LABEL) == DEPLOY_FALSE:
                desired[DEVICE_PLUGIN_DEPLOY_LABEL] = None
        else:
            continue
        differing = dict((key, value) for key, value in desired.items() if labels.get(key) != value)
        if differing:
            changes[name] = differing
    return changes
