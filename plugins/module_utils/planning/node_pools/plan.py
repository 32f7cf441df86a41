# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node pools: the plan that takes each pool's nodes to the pool's sharing.

parse_pools (pool_spec.py) checks the pools; resolve_pools (pool_selection.py) finds each pool's
nodes. plan_pools checks every layout against every node's GPU and returns the plan (node labels,
batches, the mig-parted and device plugin ConfigMap contents); check_gpu_pods lists the GPU
workloads that a MIG change would disrupt. Every function is pure: nodes and pods are the plain
dicts the access layer returns. Errors are PoolError.

Labels the plan sets, per strategy (every pool also gets kubegpu.io/node-pool=<pool>):
  mig:                nvidia.com/mig.config and nvidia.com/device-plugin.config = kubegpu-<pool>
  time-slicing/mps/none: nvidia.com/device-plugin.config = kubegpu-<pool>, and on MIG-capable nodes
                      nvidia.com/mig.config = all-disabled (a node leaving a MIG pool gets whole GPUs back)
  dra:                only the pool label; the DRA stage owns the rest. Values of ours (kubegpu-*)
                      left from an earlier pool are taken back, since their configs are dropped.
Nodes that carry kubegpu.io/node-pool but no pool selects any more are "released": the pool label
and our device-plugin config go, and nvidia.com/mig.config=kubegpu-* becomes all-disabled.

What a node will advertise (allocatable_after) starts from its physical GPU count:
nvidia.com/gpu.count, except under MIG strategy single (gpu.product <model>-MIG-<profile>), where
that label counts MIG devices; the count is then divided by the MIG devices per GPU of the
node's current mig.config (a config of the existing mig-parted document, or a named layout). When
that does not add up the node gets a warning and allocatable_after None. MIG pools advertise what
mig_layout.resources_for says; time-slicing and MPS multiply by replicas (rename_by_default: the
resource <name>.shared, <name> at 0); resources no longer advertised stay at 0, as the kubelet
keeps them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Dict, Optional

try:
    import yaml
    YAML_IMPORT_ERROR = None
except ImportError as exc:  # modules report it with missing_required_lib
    yaml = None
    YAML_IMPORT_ERROR = exc

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.device_plugin_config import (
    DRA,
    MIG,
    MPS,
    TIME_SLICING,
    render_device_plugin_config,
    shared_resources,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import (
    MODELS,
    model_for_labels,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import (
    ALL_DISABLED,
    MIXED,
    SINGLE,
    LayoutError,
    resource_name,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_layout import (
    ALL_DEVICES,
    render_mig_parted_config,
    required_strategy,
    resources_for,
    validate_layout,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    COUNT_LABEL,
    DEVICE_PLUGIN_CONFIG_LABEL,
    DRAINED_ANNOTATION,
    GPU_COUNT_ANNOTATION,
    GPU_RESOURCE,
    MIG_CAPABLE_LABEL,
    MIG_CONFIG_LABEL,
    MIG_INVALID_SUFFIX,
    MIG_PRODUCT_INFIX,
    MIG_STATE_FAILED,
    MIG_STATE_LABEL,
    MIG_STATE_PENDING,
    NVIDIA_PREFIX,
    POOL_LABEL,
    PRODUCT_LABEL,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_state import (
    gpu_allocatable,
    node_annotations,
    node_labels,
    node_name,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.selection import resolve_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import (
    CONFIG_PREFIX,
    PERCENT,
    Pool,
    PoolError,
    parse_pools,
)

# Strategies whose configs depend on the GPU: their nodes must carry GFD's labels.
_GPU_STRATEGIES = (MIG, TIME_SLICING, MPS)

# The name the roll-out gives the nodes no pool selects any more.
RELEASED = "(released)"


@dataclass(frozen=True)
class _NodeFacts:
    """What the planner reads from one node.

    model: the GpuModel of gpu.product, None when the node has no such label or is in a dra pool.
    gpus: physical GPUs, None when the labels cannot tell.
    """

    name: str
    labels: Dict[str, str]
    annotations: Dict[str, str]
    model: Any
    mig_capable: bool
    gpus: Optional[int]
    allocatable_before: Dict[str, int]


# ---------------------------------------------------------------------------------------------
# The plan: plan_pools
# ---------------------------------------------------------------------------------------------

def plan_pools(pools, nodes, existing_mig_config_yaml=None, existing_device_plugin_data=None, rolling=()):
    """Return the JSON-serialisable plan that takes the nodes to their pools' sharing.

    pools: Pools from parse_pools, or the raw list (parsed here). nodes: every Node of the
    cluster as a dict. existing_mig_config_yaml: the text of key config.yaml of our mig-parted
    ConfigMap, None when there is none. existing_device_plugin_data: the data of our device
    plugin ConfigMap, None when there is none.

    Returns {"pools": [per pool: name, strategy, mig_strategy (mixed/single for mig pools),
    nodes, mig_config, device_plugin_config, labels (for new nodes, e.g. MachineSet
    templates), batch_size, batches, node_changes, warnings], "released": {nodes, batch_size (1), batches, node_changes,
    warnings}, "mig_parted_config", "mig_parted_config_final", "device_plugin_data",
    "device_plugin_data_final", "warnings"}.

    node_changes: {node: {"labels": {key: new value, None to remove}, "before": {key: old
    value, None when absent}, "mig_change", "allocatable_before", "allocatable_after"}}, where
    allocatable_after is None when not predicted (dra pools, released nodes, unknown GPUs).
    Only nodes whose labels change appear in node_changes and batches. A pool's MIG and device
    plugin configs are named after their content (kubegpu-<pool>-<digest>), so a changed
    configuration is a label change like any other. mig_parted_config and device_plugin_data
    keep our old configs that nodes still name (for the roll-out); the *_final variants drop
    them (for after it). The top-level warnings repeat every pool's warnings.

    A plan over nodes already at their labels, with the configs this plan rendered, has no
    changes and renders the same text. Raises PoolError, before anything is planned, when a
    pool does not fit a node, or when a node's MIG change failed on the config the plan wants
    again, unless the node is in `rolling`: nodes this run's roll-out started (the role's batch
    calls name them), whose failure is the roll-out's to report, not a refusal.
    """
    if pools is None or not all(isinstance(pool, Pool) for pool in pools):
        pools = parse_pools(pools)
    existing_configs = _existing_mig_configs(existing_mig_config_yaml)
    existing_data = dict(existing_device_plugin_data or {})
    selected = resolve_pools(pools, nodes)
    entries, mig_configs, device_plugin_texts = [], {}, {}
    for pool in pools:
        entry, mig_entries, text = _plan_pool(pool, selected[pool.name], existing_configs, rolling)
        entries.append(entry)
        if mig_entries is not None:
            mig_configs[entry["mig_config"]] = mig_entries
        if text is not None:
            device_plugin_texts[entry["device_plugin_config"]] = text
    taken = set(node_name(node) for members in selected.values() for node in members)
    released = _plan_released([node for node in nodes if node_name(node) not in taken])
    data = _merge_device_plugin_data(existing_data, device_plugin_texts, _referenced(nodes, DEVICE_PLUGIN_CONFIG_LABEL))
    data_final = _merge_device_plugin_data(existing_data, device_plugin_texts, ())
    warnings = [warning for entry in entries for warning in entry["warnings"]] + released["warnings"]
    return {
        "pools": entries,
        "released": released,
        "steps": _rollout_steps(entries, released),
        # Until every node has moved to its pool's new config, the configs nodes still name must stay.
        "mig_parted_config": mig_parted_yaml(_merge_mig_configs(existing_configs, mig_configs,
                                                                _referenced(nodes, MIG_CONFIG_LABEL))),
        "mig_parted_config_final": mig_parted_yaml(_merge_mig_configs(existing_configs, mig_configs, ())),
        "device_plugin_data": data,
        "device_plugin_data_final": data_final,
        "warnings": warnings,
    }


def empty_pools(pools, plan, node_count):
    """The refusal of each pool that selects no node and names no MachineSet (most often a typo in its selector),
    one line per pool. plan_pools only warns about such a pool; the preflight, and gpu_node_pools run by the
    node_pools role, refuse it before anything is written. pools: Pools from parse_pools; plan: their plan_pools."""
    return ["pool '%s': selects no node: its selector %s matches none of the cluster's %d nodes; correct the "
            "selector (node labels: kubectl get nodes --show-labels), or remove the pool"
            % (pool.name, _selector_text(pool.selector), node_count)
            for pool, entry in zip(pools, plan["pools"]) if not entry["nodes"] and not pool.machinesets]


def _selector_text(selector):
    parts = ["%s=%s" % item for item in sorted((selector or {}).get("matchLabels", {}).items())]
    parts += ["%s %s %s" % (e["key"], e["operator"], e.get("values") or "")
              for e in (selector or {}).get("matchExpressions", [])]
    return "{%s}" % ", ".join(parts)


def _rollout_steps(entries, released):
    """Return the roll-out in order, one entry per batch: {pool, batch (from 1), batches, nodes}.

    Pools in the order the user gave them, then the released nodes (pool "(released)").
    """
    steps = []
    for entry in list(entries) + [dict(released, name=RELEASED)]:
        for index, batch in enumerate(entry["batches"]):
            steps.append({"pool": entry["name"], "batch": index + 1, "batches": len(entry["batches"]),
                          "nodes": list(batch)})
    return steps


def _plan_pool(pool, nodes, existing_configs, rolling=()):
    """Return (plan entry, mig-parted entries or None, device plugin text or None) for one pool."""
    warnings = []
    if not nodes:
        warnings.append(
            "pool '%s' selects no node; no MIG or device plugin config is rendered for it (check its selector "
            "and machinesets)" % pool.name
        )
    facts = [_node_facts(pool, node, existing_configs, warnings) for node in nodes]
    layouts, mig_strategy = _pool_layouts(pool, facts) if pool.strategy == MIG else ({}, None)
    mig_entries = _pool_mig_entries(pool, layouts) if layouts else None
    mig_config = _content_name(pool, mig_parted_yaml(mig_entries)) if mig_entries is not None else None
    text = None
    if facts and pool.strategy != DRA:
        text = render_device_plugin_config(pool, mig_strategy, _mig_resource_names(layouts, mig_strategy))
    device_plugin_config = _content_name(pool, text) if text is not None else None
    changes = {}
    for node in facts:
        # Computed for every node, not only changed ones: it is where each node's GPU count is checked.
        after = _allocatable_after(pool, node, layouts, mig_strategy)
        desired = _desired_labels(pool, node, mig_config, device_plugin_config)
        if node.name not in rolling:
            _refuse_failed_again(pool.name, node, desired)
        change = _node_change(_label_changes(desired, node.labels), node, after)
        if change is not None:
            changes[node.name] = change
    batch_size = _batch_size(pool.max_unavailable, len(facts))
    return {
        "name": pool.name,
        "strategy": pool.strategy,
        "mig_strategy": mig_strategy,
        "nodes": [node.name for node in facts],
        "mig_config": mig_config,
        "device_plugin_config": device_plugin_config,
        "labels": _pool_labels(pool, mig_config, device_plugin_config),
        "batch_size": batch_size,
        "batches": _chunks(sorted(changes), batch_size),
        "node_changes": changes,
        "warnings": warnings,
    }, mig_entries, text


def _node_facts(pool, node, existing_configs, warnings):
    """Return the _NodeFacts of a node in pool; refuses GPU-less or unknown GPUs where the strategy needs them."""
    name, labels = node_name(node), node_labels(node)
    annotations = node_annotations(node)
    facts = dict(name=name, labels=labels, annotations=annotations, model=None, mig_capable=labels.get(MIG_CAPABLE_LABEL) == "true",
                 gpus=None, allocatable_before=gpu_allocatable(node))
    if pool.strategy == DRA:
        return _NodeFacts(**facts)
    product = labels.get(PRODUCT_LABEL)
    if not product:
        if pool.strategy in _GPU_STRATEGIES:
            raise PoolError(
                "pool '%s': node '%s' has no %s label, so its GPU is unknown; strategy %s needs GPU Feature "
                "Discovery's labels (install the GPU Operator first, or narrow the pool's selector to GPU nodes)"
                % (pool.name, name, PRODUCT_LABEL, pool.strategy)
            )
        warnings.append(
            "pool '%s': node '%s' has no %s label; it is labelled for the pool, what it will advertise is not "
            "predicted" % (pool.name, name, PRODUCT_LABEL)
        )
        return _NodeFacts(**facts)
    # A model the catalogue lacks is read from its GFD labels: it serves time-slicing, MPS and none;
    # a MIG pool of it was refused when the pool selected its nodes (pool_selection.check_pool_nodes).
    model = model_for_labels(labels)
    facts.update(model=model, mig_capable=model.mig_capable or facts["mig_capable"],
                 gpus=_physical_gpus(labels, model, existing_configs, annotations))
    if facts["gpus"] is None:
        warnings.append(
            "pool '%s': node '%s': cannot tell its physical GPU count (%s=%r, %s=%r); what it will advertise "
            "is not predicted" % (pool.name, name, COUNT_LABEL, labels.get(COUNT_LABEL), PRODUCT_LABEL, product)
        )
    return _NodeFacts(**facts)


def _pool_layouts(pool, facts):
    """Return ({model key: MigLayout}, MIG strategy) of a mig pool, checked on each node's GPU model."""
    layouts = {}
    for node in facts:
        if node.model.key in layouts:
            continue
        if not node.model.mig_capable:
            raise PoolError(
                "pool '%s': node '%s' has %s, which is not MIG-capable; strategy mig needs MIG-capable GPUs "
                "(narrow the pool's selector, or use strategy time-slicing)" % (pool.name, node.name, node.model.product)
            )
        try:
            layouts[node.model.key] = validate_layout(node.model, pool.mig.layout)
        except LayoutError as err:
            raise PoolError("pool '%s': node '%s': %s" % (pool.name, node.name, err)) from None
    if not layouts:
        return {}, pool.mig.strategy
    mixed = [key for key in sorted(layouts) if required_strategy(layouts[key]) == MIXED]
    if pool.mig.strategy == SINGLE and mixed:
        raise PoolError(
            "pool '%s': sharing.mig.strategy is single, but layout %r gives more than one kind of device per "
            "node on %s; single advertises one kind (use strategy mixed, or one profile on every GPU)"
            % (pool.name, pool.mig.layout, layouts[mixed[0]].model.product)
        )
    return layouts, pool.mig.strategy or (MIXED if mixed else SINGLE)


def _allocatable_after(pool, node, layouts, mig_strategy):
    """Return {resource: count} the node will advertise, None when not predicted (dra, unknown GPUs).

    Resources the node advertises now and will not any more stay at 0, as the kubelet keeps them.
    """
    if pool.strategy == DRA:
        return None
    if pool.strategy == MIG:
        resources = _mig_resources(pool, node, layouts[node.model.key], mig_strategy)
        sharing = pool.time_slicing
    else:
        resources = None if node.gpus is None else {GPU_RESOURCE: node.gpus}
        sharing = pool.time_slicing if pool.strategy == TIME_SLICING else pool.mps
    if resources is None:
        return None
    after = shared_resources(resources, sharing)
    for name in node.allocatable_before:
        after.setdefault(name, 0)
    return dict(sorted(after.items()))


def _mig_resources(pool, node, layout, mig_strategy):
    """Return what the layout advertises on this node; checks it against the node's GPU count.

    With the GPU count unknown the check still runs on the fewest GPUs the layout names (one for
    "all"), which every node of the pool must have, and None is returned.
    """
    gpus = node.gpus
    if gpus is None:
        first = layout.entries[0].devices
        gpus = 1 if first == ALL_DEVICES else max(index for entry in layout.entries for index in entry.devices) + 1
    try:
        resources = resources_for(node.model, layout, gpus, mig_strategy)
    except LayoutError as err:
        raise PoolError("pool '%s': node '%s': %s" % (pool.name, node.name, err)) from None
    return resources if node.gpus is not None else None


def _mig_resource_names(layouts, mig_strategy):
    """Return the resource names the layouts advertise, sorted; what time-slicing of MIG devices shares."""
    names = set()
    for layout in layouts.values():
        for entry in layout.entries:
            if not entry.mig_enabled:
                names.add(GPU_RESOURCE)
            names.update(resource_name(profile, mig_strategy) for profile, dummy in entry.profiles)
    return sorted(names)


def _content_name(pool, text):
    """kubegpu-<pool>-<digest of the config text>: a new configuration is a new label value.

    mig-manager applies a config when the node label changes, not when its ConfigMap does
    (gpu-operator#891), and the device plugin reads its ConfigMap only when it starts
    (gpu-operator#1144). Naming each configuration by its content makes every change reach the nodes
    through the ordinary label roll-out, batch by batch, while nodes not reached yet keep the config
    they run (switching a pool's MIG strategy for every node at once is gpu-operator#460).
    """
    return "%s-%s" % (pool.config_name, hashlib.sha256(text.encode("utf-8")).hexdigest()[:8])


def _referenced(nodes, label):
    """Return the config names the nodes' `label` names now."""
    return set(node_labels(node).get(label) for node in nodes) - set([None])


def _desired_labels(pool, node, mig_config, device_plugin_config):
    """Return {label: value or None to remove} a node of the pool must carry."""
    if pool.strategy == DRA:
        desired = _reclaimed_labels(node.labels)
    else:
        desired = {DEVICE_PLUGIN_CONFIG_LABEL: device_plugin_config}
        if pool.strategy == MIG:
            desired[MIG_CONFIG_LABEL] = mig_config
        elif node.mig_capable:
            desired[MIG_CONFIG_LABEL] = ALL_DISABLED
    desired[POOL_LABEL] = pool.name
    return desired


def _pool_labels(pool, mig_config, device_plugin_config):
    """Return the labels a new node of the pool can carry from birth (e.g. a MachineSet template).

    Only labels whose configs this plan renders: all-disabled on MIG-capable GPUs depends on
    the node, and a label naming a config that does not exist yet would fail mig-manager.
    """
    labels = {POOL_LABEL: pool.name}
    if device_plugin_config is not None:
        labels[DEVICE_PLUGIN_CONFIG_LABEL] = device_plugin_config
    if mig_config is not None:
        labels[MIG_CONFIG_LABEL] = mig_config
    return dict(sorted(labels.items()))


def _reclaimed_labels(labels):
    """Return the changes that take back our config labels: the configs they name are dropped."""
    desired = {}
    if str(labels.get(DEVICE_PLUGIN_CONFIG_LABEL, "")).startswith(CONFIG_PREFIX):
        desired[DEVICE_PLUGIN_CONFIG_LABEL] = None
    if str(labels.get(MIG_CONFIG_LABEL, "")).startswith(CONFIG_PREFIX):
        desired[MIG_CONFIG_LABEL] = ALL_DISABLED
    return desired


def _label_changes(desired, labels):
    """Return the desired labels whose value differs from the node's, keys sorted."""
    return dict((key, desired[key]) for key in sorted(desired) if labels.get(key) != desired[key])


def _node_change(labels, node, after):
    """Return one node_changes entry, None when the node has nothing left to do.

    A node is in node_changes when a label must change, and also when an earlier run left it
    midway: MIG change still pending, or cordoned by our drain. Its steps: mig_step (the MIG
    geometry, with the pool label and mig.config.state=pending, so that only mig-manager's verdict
    ends the wait), then device_plugin_step (the rest). annotations go with the first write (the
    physical GPU count, while the labels still tell it).
    """
    mig_change = MIG_CONFIG_LABEL in labels
    state = node.labels.get(MIG_STATE_LABEL)
    resume = []
    if not mig_change and state == MIG_STATE_PENDING:
        resume.append("MIG change to %s still pending" % node.labels.get(MIG_CONFIG_LABEL))
    uncordon = DRAINED_ANNOTATION in node.annotations
    if uncordon:
        resume.append("cordoned by an earlier run's drain")
    lagging = _lagging(node, after) if not labels and POOL_LABEL in node.labels else None
    if lagging:
        # Labels in place, the device plugin not there yet (a run stopped after its device plugin step): wait.
        resume.append("allocatable " + lagging)
    if not labels and not resume:
        return None
    # The pool label joins with the MIG step; a released node gives it back with its last step, so that until
    # then it is still found (and carried on) as released.
    mig_step = dict((key, value) for key, value in labels.items()
                    if key == MIG_CONFIG_LABEL or (key == POOL_LABEL and value is not None)) if mig_change else {}
    if mig_change:
        mig_step[MIG_STATE_LABEL] = MIG_STATE_PENDING
    annotations = {}
    if labels and node.gpus and node.annotations.get(GPU_COUNT_ANNOTATION) != str(node.gpus):
        annotations[GPU_COUNT_ANNOTATION] = str(node.gpus)
    return {
        "labels": labels,
        "before": dict((key, node.labels.get(key)) for key in labels),
        "mig_change": mig_change,
        "allocatable_before": node.allocatable_before,
        "allocatable_after": after,
        "mig_step": mig_step,
        "device_plugin_step": dict((key, value) for key, value in labels.items() if key not in mig_step),
        "annotations": annotations,
        # A failed MIG state is waited for too (judged failed at once): a node this run started and that failed
        # since (see plan_pools, rolling) must not get its device plugin step.
        "wait_mig": mig_change or state in (MIG_STATE_PENDING, MIG_STATE_FAILED),
        "uncordon": uncordon,
        "resume": "; ".join(resume) or None,
    }


def _lagging(node, after):
    """Describe the resources whose allocatable differs from the plan, None when all match or none is predicted."""
    if not after:
        return None
    have = node.allocatable_before
    differ = ["%s %d of %d" % (name, have.get(name, 0), want) for name, want in sorted(after.items())
              if have.get(name, 0) != want]
    return ", ".join(differ) or None


def _refuse_failed_again(pool_name, node, desired):
    """Refuse a node whose MIG change failed on the very config this plan wants again.

    mig-manager acts on a change of the label (and once when its pod starts): setting the same
    value again would wait for a verdict that never comes.
    """
    wanted = desired.get(MIG_CONFIG_LABEL)
    if wanted is None or node.labels.get(MIG_STATE_LABEL) != MIG_STATE_FAILED or node.labels.get(MIG_CONFIG_LABEL) != wanted:
        return
    raise PoolError(
        "pool '%s': node '%s': mig-manager failed to apply %s (%s=failed), the config this run wants again, and "
        "it does not retry by itself. Read the nvidia-mig-manager pod log on that node, fix the cause, then "
        "restart that pod (kubectl delete pod -n <GPU Operator namespace> -l app=nvidia-mig-manager "
        "--field-selector spec.nodeName=%s) and run again; or give the pool another layout, or leave the node "
        "out of the pool's selector" % (pool_name, node.name, wanted, MIG_STATE_LABEL, node.name)
    )


def _batch_size(max_unavailable, node_count):
    """Return how many nodes change at once: the number, or the percentage of node_count rounded up; at least 1."""
    if isinstance(max_unavailable, int):
        return max_unavailable
    percent = int(PERCENT.match(max_unavailable).group(1))
    return max(1, -(-node_count * percent // 100))


def _chunks(names, size):
    """Return names in consecutive lists of size (the last may be shorter)."""
    return [names[start:start + size] for start in range(0, len(names), size)]


def _plan_released(nodes):
    """Return the plan for nodes that carry our pool label but no pool selects any more, one at a time."""
    changes, warnings = {}, []
    for node in sorted(nodes, key=node_name):
        labels = node_labels(node)
        if POOL_LABEL not in labels:
            continue
        desired = _reclaimed_labels(labels)
        desired[POOL_LABEL] = None
        facts = _NodeFacts(node_name(node), labels, node_annotations(node), None,
                           False, None, gpu_allocatable(node))
        change = _node_change(_label_changes(desired, labels), facts, None)
        if change is None:
            continue
        changes[facts.name] = change
        warnings.append(
            "node '%s' was in pool '%s', which no pool selects any more; its pool labels are removed%s"
            % (facts.name, labels[POOL_LABEL], " and MIG is disabled" if changes[facts.name]["mig_change"] else "")
        )
    names = sorted(changes)
    return {"nodes": names, "batch_size": 1, "batches": _chunks(names, 1), "node_changes": changes,
            "warnings": warnings}


# ---------------------------------------------------------------------------------------------
# Physical GPUs: nvidia.com/gpu.count, except under MIG strategy single
# ---------------------------------------------------------------------------------------------

def _physical_gpus(labels, model, existing_configs, annotations=None):
    """Return the node's physical GPU count, None when its labels and our record cannot tell.

    nvidia.com/gpu.count is physical, except when gpu.product carries -MIG-<profile> (MIG
    strategy single): then it counts MIG devices, and the node's current nvidia.com/mig.config
    says how many each GPU holds: a config of the existing mig-parted document, else a named
    layout of the catalog (all-1g.10gb, ...). Under -MIG-INVALID (mixed profiles read with
    strategy single, e.g. a run stopped between its MIG step and its device plugin step) GFD
    writes gpu.count=0: then only the count this collection recorded on the node before its
    first change (annotation kubegpu.io/gpu-count) tells. That record comes first; without it, a node
    whose MIG change is pending (GFD paused, labels of the old geometry next to the new mig.config)
    cannot tell.
    """
    recorded = str((annotations or {}).get(GPU_COUNT_ANNOTATION, ""))
    if recorded.isdigit() and int(recorded) > 0:
        # Recorded from labels that told it: trusted over labels that may be midway (GFD paused while a MIG
        # change is pending keeps the old geometry's labels next to the new mig.config).
        return int(recorded)
    if labels.get(MIG_STATE_LABEL) == MIG_STATE_PENDING:
        return None
    recorded = None
    count = str(labels.get(COUNT_LABEL, ""))
    product = labels.get(PRODUCT_LABEL, "")
    if not count.isdigit() or product.endswith(MIG_INVALID_SUFFIX):
        return recorded
    if MIG_PRODUCT_INFIX not in product:
        return int(count) or recorded
    geometry = _mig_geometry(model, labels.get(MIG_CONFIG_LABEL), existing_configs)
    gpus = _gpus_from_geometry(int(count), geometry) if geometry else None
    return gpus or recorded


def _mig_geometry(model, config, existing_configs):
    """Return [(devices, MIG devices per GPU)] of the config named config for this model, None if unknown."""
    if not config:
        return None
    if config in existing_configs:
        try:
            return [(entry["devices"], sum(entry.get("mig-devices", {}).values()) if entry.get("mig-enabled") else 0)
                    for entry in existing_configs[config] if _filter_matches(entry, model)]
        except (AttributeError, KeyError, TypeError):  # a foreign config we cannot read
            return None
    try:
        layout = validate_layout(model, config)
    except LayoutError:
        return None
    return [(entry.devices, sum(count for dummy, count in entry.profiles)) for entry in layout.entries]


def _filter_matches(entry, model):
    """True when a mig-parted entry applies to the model: no device-filter, or one of its PCI ids."""
    wanted = entry.get("device-filter")
    if wanted is None:
        return True
    wanted = [wanted] if isinstance(wanted, str) else wanted
    return bool(set(str(item).upper() for item in wanted) & set(item.upper() for item in model.device_filter))


def _gpus_from_geometry(devices, geometry):
    """Return the GPU count that holds devices MIG devices in this geometry, None when it does not add up."""
    if len(geometry) == 1 and geometry[0][0] == ALL_DEVICES:
        per_gpu = geometry[0][1]
        return devices // per_gpu if per_gpu and devices % per_gpu == 0 else None
    if not all(isinstance(indices, (list, tuple)) and indices for indices, dummy in geometry):
        return None
    gpus = max(index for indices, dummy in geometry for index in indices) + 1
    return gpus if sum(len(indices) * per_gpu for indices, per_gpu in geometry) == devices else None


# ---------------------------------------------------------------------------------------------
# ConfigMap contents
# ---------------------------------------------------------------------------------------------

def mig_parted_yaml(document):
    """Render a mig-parted document as block YAML, keys in insertion order: equal input, equal text."""
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def _existing_mig_configs(text):
    """Return {config name: entries} of the existing mig-parted document, {} when there is none."""
    if text is None or not text.strip():
        return {}
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise PoolError(
            "the mig-parted ConfigMap's config.yaml is not valid YAML (%s); fix it or delete the ConfigMap" % err
        ) from None
    if document is None:
        return {}
    configs = document.get("mig-configs") if isinstance(document, Mapping) else False
    if configs is None:
        return {}
    if not isinstance(configs, Mapping):
        raise PoolError(
            "the mig-parted ConfigMap's config.yaml is not a mig-parted document: expected version: v1 and a "
            "mapping mig-configs; fix it or delete the ConfigMap"
        )
    return dict(configs)


def _pool_mig_entries(pool, layouts):
    """Return the mig-parted entries of a pool's config, one model after another (sorted by key).

    A pool over several GPU models gives each entry its model's device-filter, so mig-parted
    applies to each GPU the entry of its own model; a single-model pool needs none.
    """
    filtered = len(layouts) > 1
    entries = []
    for key in sorted(layouts):
        document = render_mig_parted_config({pool.config_name: layouts[key]}, device_filter=filtered)
        entries.extend(document["mig-configs"][pool.config_name])
    return entries


def _all_disabled_entries():
    """Return the all-disabled config's entries; that layout is the same for every model, MIG-capable or not."""
    return render_mig_parted_config({ALL_DISABLED: validate_layout(MODELS[0], ALL_DISABLED)})["mig-configs"][ALL_DISABLED]


def _merge_mig_configs(existing_configs, ours, referenced):
    """Return the mig-parted document: foreign configs as they were, all-disabled, then ours sorted by name.

    Configs named kubegpu-* are ours: those no pool renders any more are dropped, unless a node
    still names one in `referenced` (it would fail if mig-manager re-read it mid roll-out). The
    order is fixed so that a second plan over this document renders the same text.
    """
    configs = dict((name, entries) for name, entries in existing_configs.items()
                   if not str(name).startswith(CONFIG_PREFIX) or (name in referenced and name not in ours))
    # Pools other than mig label MIG-capable nodes all-disabled; the config must exist.
    configs.setdefault(ALL_DISABLED, _all_disabled_entries())
    for name in sorted(ours):
        configs[name] = ours[name]
    return {"version": "v1", "mig-configs": configs}


def _merge_device_plugin_data(existing, ours, referenced):
    """Return the device plugin ConfigMap data: foreign keys as they were, ours, and our old keys that nodes
    still name (`referenced`, kept until the roll-out moved them); keys sorted."""
    data = dict((key, text) for key, text in existing.items()
                if not str(key).startswith(CONFIG_PREFIX) or key in referenced)
    data.update(ours)
    return dict(sorted(data.items()))


# ---------------------------------------------------------------------------------------------
# Workloads in the way: check_gpu_pods
# ---------------------------------------------------------------------------------------------

def check_gpu_pods(plan, pods):
    """Return [{"node", "pods": ["namespace/name", ...]}] for nodes a MIG change would disrupt.

    Those are the nodes whose mig_change is true (in pools or released), and that run pods (not Succeeded or Failed) requesting or limiting
    any nvidia.com/ resource. mig-manager does not evict pods (gpu-operator#262), so the caller
    refuses or drains first. Sorted by node, then pod.
    """
    affected = set()
    for entry in list(plan.get("pools", [])) + [plan.get("released") or {}]:
        affected.update(name for name, change in entry.get("node_changes", {}).items() if change["mig_change"])
    found = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if node not in affected or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if _uses_gpu(spec):
            metadata = pod.get("metadata") or {}
            found.setdefault(node, []).append("%s/%s" % (metadata.get("namespace"), metadata.get("name")))
    return [{"node": node, "pods": sorted(found[node])} for node in sorted(found)]


def _uses_gpu(spec):
    """True when any container, init container or the pod itself requests or limits an nvidia.com/ resource."""
    holders = list(spec.get("containers") or []) + list(spec.get("initContainers") or []) + [spec]
    for holder in holders:
        resources = holder.get("resources") or {}
        for kind in ("requests", "limits"):
            if any(str(name).startswith(NVIDIA_PREFIX) for name in resources.get(kind) or {}):
                return True
    return False


def physical_gpus(node, existing_mig_config_yaml=None):
    """Return a Node's physical GPU count from its labels and our record, None when they cannot tell.

    The count the plan uses (see _physical_gpus); for callers outside the plan, such as the serving
    stage's slices. A node without a known gpu.product gives None.
    """
    labels = node_labels(node)
    if not labels.get(PRODUCT_LABEL):
        return None
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return _physical_gpus(labels, model_for_labels(labels), _existing_mig_configs(existing_mig_config_yaml),
                          annotations)
