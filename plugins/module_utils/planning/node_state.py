# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one Node object says about its GPUs: GFD's facts, its GPU allocatable, its MIG state and paused operands.

Pure functions over a Node as the access layer returns it (a plain dict). The planners, the roll-out and the
cluster report all read nodes through these, so a rule such as "which resources are GPUs" is written once.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import base_product
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import ALL_DISABLED
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    COUNT_LABEL,
    DEPLOY_LABEL_PREFIX,
    DEVICE_PLUGIN_CONFIG_LABEL,
    FAMILY_LABEL,
    GPU_PRESENT_LABEL,
    GPU_RESOURCE_PREFIXES,
    MEMORY_LABEL,
    MIG_CAPABLE_LABEL,
    MIG_CONFIG_LABEL,
    MIG_PRODUCT_INFIX,
    MIG_STATE_LABEL,
    PAUSED_FOR_MIG_CHANGE,
    PCI_PRESENT_LABELS,
    PRODUCT_LABEL,
    SHARING_STRATEGY_LABEL,
)

NO_SHARING = "none"
UNKNOWN = "unknown"


def node_name(node):
    """Return a Node's metadata.name."""
    return node["metadata"]["name"]


def node_labels(node):
    """Return a Node's labels, {} when it has none."""
    return (node.get("metadata") or {}).get("labels") or {}


def node_annotations(node):
    """Return a Node's annotations, {} when it has none."""
    return (node.get("metadata") or {}).get("annotations") or {}


def is_gpu_node(node):
    """A node with an NVIDIA GPU, as the GPU Operator decides it: GFD's label or one of NFD's PCI labels."""
    labels = node_labels(node)
    return labels.get(GPU_PRESENT_LABEL) == "true" or any(labels.get(k) == "true" for k in PCI_PRESENT_LABELS)


def gpu_allocatable(node):
    """Return the node's GPU resources in status.allocatable ({resource: int}, keys sorted).

    GPU resources are nvidia.com/gpu (and nvidia.com/gpu.shared) and every nvidia.com/mig-<profile>; values that
    are not plain integers are left out.
    """
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return dict((name, int(value)) for name, value in sorted(allocatable.items())
                if name.startswith(GPU_RESOURCE_PREFIXES) and str(value).isdigit())


def mig_config(labels):
    """The mig-parted config the node asks for (label nvidia.com/mig.config), None when it has none."""
    return labels.get(MIG_CONFIG_LABEL)


def mig_state(labels, default=None):
    """mig-manager's progress on the node's config: pending, success, failed (rebooting); default when unset."""
    return labels.get(MIG_STATE_LABEL, default)


def paused_operands(labels):
    """The operands mig-manager paused for a MIG change (gpu.deploy.<operand>=paused-for-mig-change), sorted."""
    return sorted(key[len(DEPLOY_LABEL_PREFIX):] for key, value in labels.items()
                  if key.startswith(DEPLOY_LABEL_PREFIX) and value == PAUSED_FOR_MIG_CHANGE)


def _int_or_none(value):
    text = str(value if value is not None else "")
    return int(text) if text.isdigit() else None


def gfd_facts(labels):
    """What GPU Feature Discovery says about the node's GPUs.

    Returns {product (as labelled), physical_product (without GFD's -SHARED and -MIG-<profile> suffixes),
    count (gpu.count as an int, None when absent), physical_count (count, except None under MIG strategy single,
    where gpu.count counts MIG devices), memory_mib, family, mig_capable}.
    """
    product = labels.get(PRODUCT_LABEL, "")
    count = _int_or_none(labels.get(COUNT_LABEL))
    return {
        "product": product,
        "physical_product": base_product(product),
        "count": count,
        "physical_count": None if MIG_PRODUCT_INFIX in product else count,
        "memory_mib": _int_or_none(labels.get(MEMORY_LABEL)),
        "family": labels.get(FAMILY_LABEL),
        "mig_capable": labels.get(MIG_CAPABLE_LABEL) == "true",
    }


def sharing_state(labels):
    """How a node's GPUs are shared now, read from the labels GFD and mig-manager write.

    Returns {strategy (none, mig, time-slicing, mps, mig+time-slicing...), mig_config and mig_state when the
    node has a MIG config, device_plugin_config when it has one, paused_operands when any}.
    """
    strategy = labels.get(SHARING_STRATEGY_LABEL, NO_SHARING)
    config = mig_config(labels)
    if config and config != ALL_DISABLED:
        strategy = "mig" if strategy == NO_SHARING else "mig+" + strategy
    state = {"strategy": strategy}
    if config:
        state["mig_config"] = config
        state["mig_state"] = mig_state(labels, UNKNOWN)
    if labels.get(DEVICE_PLUGIN_CONFIG_LABEL):
        state["device_plugin_config"] = labels[DEVICE_PLUGIN_CONFIG_LABEL]
    paused = paused_operands(labels)
    if paused:
        state["paused_operands"] = paused
    return state
