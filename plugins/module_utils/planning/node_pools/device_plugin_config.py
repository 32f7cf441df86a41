# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA device plugin's config for one node pool, and what the plugin then advertises.

One ConfigMap key per pool; a node picks its key with the label nvidia.com/device-plugin.config
(reference gpu-operator.md, "Time-slicing / MPS"). A config says how MIG devices are exposed
(flags.migStrategy, per node since one ClusterPolicy strategy cannot fit every pool, gpu-operator#704)
and how devices are shared (sharing.timeSlicing or sharing.mps, never both).

The pool passed in is a pool_spec.Pool; only its attributes are read, so this module does not
import pool_spec (which imports it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    import yaml
    YAML_IMPORT_ERROR = None
except ImportError as exc:  # modules report it with missing_required_lib
    yaml = None
    YAML_IMPORT_ERROR = exc

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import GPU_RESOURCE, SHARED_RESOURCE_SUFFIX

# Pool strategies this module knows; pool_spec and node_pools take them from here so each is spelt once.
MIG = "mig"
TIME_SLICING = "time-slicing"
MPS = "mps"
DRA = "dra"

MIG_STRATEGY_NONE = "none"


def device_plugin_document(pool, mig_strategy=None, mig_resources=()):
    """Return the device plugin config of a pool as a dict, keys in the plugin's documented order.

    mig_strategy is the pool's MIG strategy (mixed or single) as resolved from its layout;
    it defaults to the pool's own sharing.mig.strategy. mig_resources are the resource names
    the pool's MIG layouts advertise, each time-sliced when the pool time-slices MIG devices.
    Raises ValueError for a dra pool, a mig pool without a strategy, or a pool that
    time-slices MIG devices without mig_resources: all mistakes of the caller, not the user.
    """
    if pool.strategy == DRA:
        raise ValueError(
            "pool '%s' has strategy dra: the NVIDIA DRA driver serves it, it has no device plugin config" % pool.name
        )
    document = {"version": "v1", "flags": {"migStrategy": MIG_STRATEGY_NONE}}
    if pool.strategy == MIG:
        document["flags"]["migStrategy"] = _mig_strategy(pool, mig_strategy)
        if pool.time_slicing is not None:
            if not mig_resources:
                raise ValueError(
                    "pool '%s' time-slices MIG devices: pass the MIG resource names its layout advertises" % pool.name
                )
            document["sharing"] = {"timeSlicing": _time_slicing(pool.time_slicing, sorted(set(mig_resources)))}
    elif pool.strategy == TIME_SLICING:
        document["sharing"] = {"timeSlicing": _time_slicing(pool.time_slicing, [GPU_RESOURCE])}
    elif pool.strategy == MPS:
        document["sharing"] = {"mps": _mps(pool.mps, [GPU_RESOURCE])}
    return document


def render_device_plugin_config(pool, mig_strategy=None, mig_resources=()):
    """Return the device plugin config of a pool as YAML text (see device_plugin_document).

    The same pool gives the same text, byte for byte, so a second run writes nothing.
    """
    return dump_yaml(device_plugin_document(pool, mig_strategy, mig_resources))


def shared_resources(resources, sharing):
    """Return {resource: count} as advertised once sharing (time-slicing or MPS) applies.

    Every resource is multiplied by sharing.replicas; with rename_by_default it is advertised
    as <name>.shared and <name> stays at 0. sharing None returns a copy of resources.
    """
    if sharing is None:
        return dict(resources)
    shared = {}
    for name, count in resources.items():
        if sharing.rename_by_default:
            shared[name] = 0
            shared[name + SHARED_RESOURCE_SUFFIX] = count * sharing.replicas
        else:
            shared[name] = count * sharing.replicas
    return shared


def dump_yaml(document):
    """Render a document as block YAML, keys in insertion order, so equal input gives equal text."""
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def _mig_strategy(pool, mig_strategy):
    """Return the MIG strategy for flags.migStrategy: the resolved one, else the pool's own."""
    strategy = mig_strategy or (pool.mig.strategy if pool.mig is not None else None)
    if strategy is None:
        raise ValueError(
            "pool '%s': its MIG strategy follows from its layout on each GPU model; pass mig_strategy" % pool.name
        )
    return strategy


def _time_slicing(sharing, names):
    """Return sharing.timeSlicing; renameByDefault belongs here, under flags it is ignored (k8s-device-plugin#1433).

    failRequestsGreaterThanOne is always written; unset (None) is the plugin's time-slicing default, false.
    """
    return {
        "renameByDefault": sharing.rename_by_default,
        "failRequestsGreaterThanOne": bool(sharing.fail_requests_greater_than_one),
        "resources": [{"name": name, "replicas": sharing.replicas} for name in names],
    }


def _mps(sharing, names):
    """Return sharing.mps; like timeSlicing, renameByDefault must sit here and not under flags.

    The device plugin fails MPS requests for more than one replica unless the config sets
    failRequestsGreaterThanOne: false (honoured from k8s-device-plugin v0.20.0; older plugins
    always fail them). So the key is written only for false: true and unset give the same text
    as before the field existed, and so the same config name, and no roll-out.
    """
    document = {"renameByDefault": sharing.rename_by_default}
    if sharing.fail_requests_greater_than_one is False:
        document["failRequestsGreaterThanOne"] = False
    document["resources"] = [{"name": name, "replicas": sharing.replicas} for name in names]
    return document
