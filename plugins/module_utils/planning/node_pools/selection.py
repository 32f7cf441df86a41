# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which nodes each pool takes: selectors, machinesets, and pools that overlap.

A pool needs a selector, machinesets, or both; with both a node must match both. A selector is
matched with Kubernetes semantics (NotIn and DoesNotExist also match nodes without the key)
against the node's labels, nvidia.com/gpu.product taken without the suffixes GFD adds once a
node is shared (-SHARED, -MIG-<profile>), so that sharing never takes a node out of its pool.
A machineset matches the nodes whose annotation machine.openshift.io/machine is
openshift-machine-api/<machineset>-<suffix>.

resolve_pools finds each pool's nodes and refuses overlaps: a node belongs to one pool. It then
refuses, with check_pool_nodes, nodes that cannot carry their pool's sharing, naming every one:
nodes whose GFD labels give no GPU count, and in MIG pools nodes whose GPU model has no MIG (or no
catalog entry) or does not fit the layout, grouped by GPU model. Every function is pure: nodes are
the plain dicts the access layer returns.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.device_plugin_config import (
    MIG,
    MPS,
    TIME_SLICING,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import (
    base_product,
    gfd_gpu_count_problem,
    model_for_labels,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import LayoutError, catalog_for
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_layout import validate_layout
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    MACHINE_ANNOTATION,
    PRODUCT_LABEL,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_state import (
    node_annotations,
    node_labels,
    node_name,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import (
    MACHINE_API_NAMESPACE,
    PoolError,
)

_OVERLAP_NODES_SHOWN = 5
# Machine names are <machineset>-<random suffix>; a suffix without '-' keeps machineset "gpu"
# from claiming the machines of machineset "gpu-h100".
_MACHINE_SUFFIX = re.compile(r"^[a-z0-9]+$")


def selector_matches(selector, labels):
    """True when labels satisfy every matchLabels pair and every matchExpressions requirement.

    Kubernetes semantics: NotIn and DoesNotExist also match nodes without the key.
    """
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions", []):
        key, operator = expression["key"], expression["operator"]
        present = key in labels
        if operator == "In" and not (present and labels[key] in expression["values"]):
            return False
        if operator == "NotIn" and present and labels[key] in expression["values"]:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def machineset_of(node):
    """Return the MachineSet a node's machine belongs to, None when the node has no machine annotation.

    The annotation is openshift-machine-api/<machineset>-<suffix>; machines of another namespace
    are not MachineSet machines of the Machine API.
    """
    machine = node_annotations(node).get(MACHINE_ANNOTATION, "")
    namespace, dummy, name = machine.partition("/")
    if namespace != MACHINE_API_NAMESPACE:
        return None
    machineset, dummy, suffix = name.rpartition("-")
    return machineset if machineset and _MACHINE_SUFFIX.match(suffix) else None


def _selection_labels(labels):
    """The labels a pool selector is matched against: nvidia.com/gpu.product without GFD's suffixes.

    GFD renames the product once a node is shared (-SHARED, -MIG-<profile>): a pool that selects
    NVIDIA-L40S would lose its own nodes as soon as time-slicing applied, and release them on the
    next run. Selecting by the physical product keeps the pool stable.
    """
    product = labels.get(PRODUCT_LABEL)
    if not product:
        return labels
    return dict(labels, **{PRODUCT_LABEL: base_product(product)})


def pool_selects(pool, node):
    """True when the pool's selector and machinesets, those it has, all match the node."""
    if pool.selector is not None and not selector_matches(pool.selector, _selection_labels(node_labels(node))):
        return False
    return not pool.machinesets or machineset_of(node) in pool.machinesets


def resolve_pools(pools, nodes):
    """Return {pool name: [node dicts sorted by name]} in pool order; a pool may select no node.

    Raises PoolError when two pools select the same node, naming both pools and up to five of
    the nodes they share; then when a pool's nodes cannot carry its sharing (check_pool_nodes).
    """
    ordered = sorted(nodes, key=node_name)
    selected = dict((pool.name, [node for node in ordered if pool_selects(pool, node)]) for pool in pools)
    names = dict((pool.name, set(node_name(node) for node in selected[pool.name])) for pool in pools)
    for index, pool in enumerate(pools):
        for other in pools[index + 1:]:
            shared = sorted(names[pool.name] & names[other.name])
            if shared:
                more = len(shared) - _OVERLAP_NODES_SHOWN
                raise PoolError(
                    "pools '%s' and '%s' both select node%s %s%s; a node belongs to one pool (narrow one pool's "
                    "selector or machinesets, e.g. with a NotIn expression)"
                    % (pool.name, other.name, "s" if len(shared) > 1 else "",
                       ", ".join(shared[:_OVERLAP_NODES_SHOWN]), " and %d more" % more if more > 0 else "")
                )
    for pool in pools:
        check_pool_nodes(pool, selected[pool.name])
    return selected


def check_pool_nodes(pool, nodes):
    """Refuse nodes of a pool that cannot carry its sharing, naming every one of them.

    For strategies mig, time-slicing and mps: a node whose nvidia.com/gpu.count is there but is no
    count of 1 or more (the message names the node's GFD labels, the source of the value). For
    mig: nodes whose GPU model is not MIG-capable, is not in the MIG catalog, or does not fit the
    layout, grouped by GPU model, each group with its model's reason. Nodes without a gpu.product
    label are left to the planner, which names them. Raises PoolError; returns None otherwise.
    """
    if pool.strategy not in (MIG, TIME_SLICING, MPS):
        return
    odd = [(node_name(node), gfd_gpu_count_problem(node_labels(node))) for node in nodes]
    odd = [(name, problem) for name, problem in odd if problem]
    if odd:
        raise PoolError(
            "pool '%s': %s; strategy %s needs each node's GPU count from GPU Feature Discovery (check GFD on "
            "%s, or narrow the pool's selector)"
            % (pool.name, "; ".join("node '%s': %s" % item for item in odd), pool.strategy,
               "that node" if len(odd) == 1 else "those nodes")
        )
    if pool.strategy == MIG:
        _check_mig_models(pool, nodes)


def _check_mig_models(pool, nodes):
    """Refuse a MIG pool whose layout some of its nodes' GPU models cannot take, grouped by model."""
    groups = {}
    for node in nodes:
        labels = node_labels(node)
        if not labels.get(PRODUCT_LABEL):
            continue
        model = model_for_labels(labels)
        groups.setdefault(model, []).append(node_name(node))
    refusals = []
    for model in sorted(groups, key=lambda model: model.product):
        names = groups[model]
        if model.catalogued and not model.mig_capable:
            refusals.append("%s %s %s, which is not MIG-capable; strategy mig needs MIG-capable GPUs"
                            % (_nodes(names), "has" if len(names) == 1 else "have", model.product))
            continue
        try:
            # A model without a catalog is refused for what it is, whatever the layout.
            catalog_for(model)
            validate_layout(model, pool.mig.layout)
        except LayoutError as err:
            where = _nodes(names) if len(groups) == 1 else "%s (%s)" % (_nodes(names), model.product)
            refusals.append("%s: %s" % (where, err))
    if refusals:
        hint = ("" if len(refusals) == 1 and len(groups) == 1 else
                "; the pool mixes %d GPU models: narrow its selector to one model, or give it a layout every "
                "model takes" % len(groups))
        raise PoolError("pool '%s': %s%s" % (pool.name, "; ".join(refusals), hint))


def _nodes(names):
    """Render node names for messages: "node 'a'" or "nodes 'a', 'b'"."""
    return "%s %s" % ("node" if len(names) == 1 else "nodes", ", ".join("'%s'" % name for name in names))
