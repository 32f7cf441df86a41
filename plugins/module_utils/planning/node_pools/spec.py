# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node pools as the user writes them: parse_pools checks them and returns Pools.

The user describes pools (inventory variable kubegpu_node_pools)::

    - name: llm-h100            # [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 40 characters, unique
      selector:                 # a Kubernetes LabelSelector over node labels
        matchLabels: {node.kubernetes.io/instance-type: p5.48xlarge}
        matchExpressions:       # operators In, NotIn (values), Exists, DoesNotExist (no values)
          - {key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H100-80GB-HBM3]}
      machinesets: [demo-gpu-h100-us-east-1a]   # OpenShift: the MachineSets whose machines join the pool
      max_unavailable: 1        # nodes changed at once: a whole number >= 1 or a percentage of the
                                # pool's nodes ("25%", rounded up, at least 1); default 1
      sharing:
        strategy: mig           # none | mig | time-slicing | mps | dra (required)
        mig:                    # strategy mig only
          layout: all-balanced  # named layout, {profile: count} per GPU, or per-GPU entries (mig_layout.py)
          strategy: mixed       # mixed | single; default: what the layout needs
        time_slicing:           # strategy time-slicing, or strategy mig to time-slice every MIG device
          replicas: 4           # >= 2
          rename_by_default: false
          fail_requests_greater_than_one: false
        mps:                    # strategy mps only; MPS cannot share MIG devices
          replicas: 4           # >= 2
          rename_by_default: false
          fail_requests_greater_than_one: true   # the default; false needs device plugin v0.20.0+
      driver:                   # optional: the pool's own NVIDIA driver (drivers.py says what is rendered)
        version: "580.173.02"   # or a branch ("580") with precompiled: true

A pool needs a selector, machinesets, or both (pool_selection.py says how they match nodes).
An empty selector ({}) is refused: it would take every node of the cluster.

parse_pools checks what needs no cluster: shapes, names, selectors, machinesets, max_unavailable
and the sharing block. MIG layouts depend on each node's GPU, so plan_pools (node_pools.py)
checks them. Errors are PoolError, naming pool, field, value, what is valid and what to do;
pool_selection and node_pools raise it too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple, Union

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.device_plugin_config import (
    DRA,
    MIG,
    MPS,
    TIME_SLICING,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.drivers import (
    DRIVER_OPTIONS,
    DriverError,
    PoolDriver,
    parse_driver,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import STRATEGIES as MIG_STRATEGIES
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import GPU_PRESENT_LABEL, MACHINE_API_NAMESPACE, NAME_PREFIX

NONE = "none"
STRATEGIES = (NONE, MIG, TIME_SLICING, MPS, DRA)
# Configs (mig-parted and device plugin) named so are ours: replaced on every run, others kept.
CONFIG_PREFIX = NAME_PREFIX
# max_unavailable as a percentage of the pool's nodes; node_pools reads the number back.
PERCENT = re.compile(r"^([0-9]+)%$")

_OPERATORS_WITH_VALUES = ("In", "NotIn")
_OPERATORS = _OPERATORS_WITH_VALUES + ("Exists", "DoesNotExist")


def _replicas_options():
    """Options of sharing.time_slicing and sharing.mps (fail_requests_greater_than_one: unset keeps the mode's default)."""
    return {
        "replicas": {"type": "int", "required": True},
        "rename_by_default": {"type": "bool", "default": False},
        "fail_requests_greater_than_one": {"type": "bool"},
    }


# The shape of one pool, in Ansible argument-spec terms: the one source of the keys, types and choices that the
# gpu_node_pools module's argument_spec, its DOCUMENTATION, the node_pools role's meta/argument_specs.yml and the
# inventory check (inventory.py) use. parse_pools checks the values themselves. "raw" marks a value of several
# shapes (max_unavailable: 2 or "25%"; layout: a name, {profile: count} or per-GPU entries).
POOL_OPTIONS = {
    "name": {"type": "str", "required": True},
    "selector": {"type": "dict", "options": {
        "matchLabels": {"type": "dict"},
        "matchExpressions": {"type": "list", "elements": "dict", "options": {
            # A label key, not a secret (Ansible's sanity test asks about options named key).
            "key": {"type": "str", "required": True, "no_log": False},
            "operator": {"type": "str", "required": True, "choices": list(_OPERATORS)},
            "values": {"type": "list", "elements": "str"},
        }},
    }},
    "machinesets": {"type": "list", "elements": "str"},
    "max_unavailable": {"type": "raw", "default": 1},
    "sharing": {"type": "dict", "required": True, "options": {
        "strategy": {"type": "str", "required": True, "choices": list(STRATEGIES)},
        "mig": {"type": "dict", "options": {
            "layout": {"type": "raw", "required": True},
            "strategy": {"type": "str", "choices": list(MIG_STRATEGIES)},
        }},
        "time_slicing": {"type": "dict", "options": _replicas_options()},
        "mps": {"type": "dict", "options": _replicas_options()},
    }},
    # The pool's own NVIDIA driver (drivers.py); without it the pool's nodes take the default one.
    "driver": {"type": "dict", "options": DRIVER_OPTIONS},
}

_POOL_KEYS = tuple(POOL_OPTIONS)
_SELECTOR_KEYS = tuple(POOL_OPTIONS["selector"]["options"])
_EXPRESSION_KEYS = tuple(POOL_OPTIONS["selector"]["options"]["matchExpressions"]["options"])
_SHARING_KEYS = tuple(POOL_OPTIONS["sharing"]["options"])
_MIG_KEYS = tuple(POOL_OPTIONS["sharing"]["options"]["mig"]["options"])
_TIME_SLICING_KEYS = tuple(POOL_OPTIONS["sharing"]["options"]["time_slicing"]["options"])
_MPS_KEYS = tuple(POOL_OPTIONS["sharing"]["options"]["mps"]["options"])

# 40 characters keep kubegpu-<name> within the 63 of a label value.
_POOL_NAME_MAX = 40
_POOL_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?" + _LABEL_NAME + "$")
_LABEL_VALUE = re.compile("^(" + _LABEL_NAME + ")?$")


class PoolError(ValueError):
    """Pools that cannot be applied; the message names pool, field, value, what is valid and what to do."""


@dataclass(frozen=True)
class Sharing:
    """Time-slicing or MPS of a pool: each device advertised replicas times.

    fail_requests_greater_than_one: None leaves the device plugin's default, which differs by
    mode: time-slicing lets a container ask for several replicas (false); MPS refuses it
    (true; before device plugin v0.20.0 MPS always refused it, whatever the config said).
    """

    replicas: int
    rename_by_default: bool = False
    fail_requests_greater_than_one: Optional[bool] = None


@dataclass(frozen=True)
class MigSharing:
    """The MIG part of a pool: the layout as the user wrote it, checked per GPU model by plan_pools.

    strategy: mixed or single; None means what the layout needs (mig_layout.required_strategy).
    """

    layout: Any
    strategy: Optional[str] = None


@dataclass(frozen=True)
class Pool:
    """One node pool as parse_pools accepted it.

    selector: {"matchLabels": {...}, "matchExpressions": [{key, operator, values}]} or None.
    machinesets: MachineSet names, () for none.
    max_unavailable: a whole number, or a percentage string such as "25%".
    """

    name: str
    strategy: str
    selector: Optional[Dict[str, Any]] = None
    machinesets: Tuple[str, ...] = ()
    max_unavailable: Union[int, str] = 1
    mig: Optional[MigSharing] = None
    time_slicing: Optional[Sharing] = None
    mps: Optional[Sharing] = None
    driver: Optional[PoolDriver] = None

    @property
    def config_name(self):
        """The name of the pool's mig-parted config and device plugin config key: kubegpu-<pool>."""
        return CONFIG_PREFIX + self.name


def parse_pools(raw_pools):
    """Return a Pool for each raw pool, checking what needs no cluster.

    Shapes, names (unique), selectors, machinesets, max_unavailable and the sharing block are
    checked here; MIG layouts are not, since they depend on each node's GPU (plan_pools checks
    them). None means no pools. Raises PoolError.
    """
    if raw_pools is None:
        return []
    if not isinstance(raw_pools, (list, tuple)):
        raise PoolError(
            "node pools are %r; expected a list of pools, each with name, selector and/or machinesets, "
            "and sharing" % (raw_pools,)
        )
    pools = []
    first_index = {}
    for index, raw in enumerate(raw_pools):
        pool = _parse_pool(index, raw)
        if pool.name in first_index:
            raise PoolError(
                "pool '%s' (pools[%d]): name '%s' is already used by pools[%d]; pool names must be unique "
                "(rename one, or merge the two)" % (pool.name, index, pool.name, first_index[pool.name])
            )
        first_index[pool.name] = index
        pools.append(pool)
    return pools


def _parse_pool(index, raw):
    """Return the Pool of pools[index]."""
    where = "pools[%d]" % index
    if not isinstance(raw, Mapping):
        raise PoolError("%s is %r; expected a mapping with keys %s" % (where, raw, ", ".join(_POOL_KEYS)))
    name = _parse_name(where, raw.get("name"))
    subject = "pool '%s'" % name
    _check_keys(subject, None, raw, _POOL_KEYS)
    selector = _parse_selector(subject, raw.get("selector"))
    machinesets = _parse_machinesets(subject, raw.get("machinesets"))
    if selector is None and not machinesets:
        raise PoolError(
            "%s: selects nothing: it has neither selector nor machinesets; give a selector "
            "(matchLabels and/or matchExpressions), machinesets, or both" % subject
        )
    return Pool(
        name=name,
        selector=selector,
        machinesets=machinesets,
        max_unavailable=_parse_max_unavailable(subject, raw.get("max_unavailable")),
        driver=_parse_driver(subject, raw.get("driver")),
        **_parse_sharing(subject, raw.get("sharing"))
    )


def _parse_driver(subject, driver):
    try:
        return parse_driver(subject, driver)
    except DriverError as err:
        raise PoolError(str(err))


def _parse_name(where, name):
    """Return a valid pool name; where ("pools[2]") names the pool while it has no name."""
    if name is None:
        raise PoolError(
            "%s has no name; every pool needs one: lowercase letters, digits and '-', at most %d characters"
            % (where, _POOL_NAME_MAX)
        )
    if not isinstance(name, str) or len(name) > _POOL_NAME_MAX or not _POOL_NAME.match(name):
        raise PoolError(
            "%s: name is %r; expected lowercase letters, digits and '-', starting and ending with a letter "
            "or digit, at most %d characters (it becomes the config name %s<name>)"
            % (where, name, _POOL_NAME_MAX, CONFIG_PREFIX)
        )
    return name


def _check_keys(subject, field, raw, valid):
    """Refuse keys of raw that are not in valid; field is None for the pool itself."""
    unknown = sorted(str(key) for key in raw if key not in valid)
    if unknown:
        raise PoolError(
            "%s: unknown key%s %s%s (valid: %s)"
            % (subject, "s" if len(unknown) > 1 else "", ", ".join(unknown),
               "" if field is None else " in " + field, ", ".join(valid))
        )


def _parse_selector(subject, selector):
    """Return the selector as {"matchLabels": {...}, "matchExpressions": [...]}, or None when absent."""
    if selector is None:
        return None
    if not isinstance(selector, Mapping):
        raise PoolError(
            "%s: selector is %r; expected a LabelSelector mapping with matchLabels and/or matchExpressions"
            % (subject, selector)
        )
    _check_keys(subject, "selector", selector, _SELECTOR_KEYS)
    labels = _parse_match_labels(subject, selector.get("matchLabels"))
    expressions = _parse_match_expressions(subject, selector.get("matchExpressions"))
    if not labels and not expressions:
        raise PoolError(
            "%s: selector is empty; an empty selector takes every node of the cluster (give matchLabels or "
            "matchExpressions, e.g. {key: %s, operator: Exists})" % (subject, GPU_PRESENT_LABEL)
        )
    return {"matchLabels": labels, "matchExpressions": expressions}


def _parse_match_labels(subject, labels):
    """Return matchLabels as {key: value}, each a valid label key and value."""
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise PoolError("%s: selector.matchLabels is %r; expected a mapping {label: value}" % (subject, labels))
    for key, value in labels.items():
        field = "selector.matchLabels[%r]" % (key,)
        _check_label_key(subject, field, key)
        _check_label_value(subject, field, value)
    return dict(labels)


def _parse_match_expressions(subject, expressions):
    """Return matchExpressions as a list of {key, operator, values}."""
    if expressions is None:
        return []
    if not isinstance(expressions, (list, tuple)):
        raise PoolError(
            "%s: selector.matchExpressions is %r; expected a list of {key, operator, values}" % (subject, expressions)
        )
    return [_parse_expression(subject, "selector.matchExpressions[%d]" % index, expression)
            for index, expression in enumerate(expressions)]


def _parse_expression(subject, field, expression):
    """Return one requirement; In/NotIn need values, Exists/DoesNotExist take none."""
    if not isinstance(expression, Mapping):
        raise PoolError(
            "%s: %s is %r; expected a mapping with keys %s" % (subject, field, expression, ", ".join(_EXPRESSION_KEYS))
        )
    _check_keys(subject, field, expression, _EXPRESSION_KEYS)
    key = expression.get("key")
    _check_label_key(subject, field + ".key", key)
    operator = expression.get("operator")
    if operator not in _OPERATORS:
        raise PoolError(
            "%s: %s.operator is %r; expected one of %s" % (subject, field, operator, ", ".join(_OPERATORS))
        )
    values = expression.get("values")
    if operator in _OPERATORS_WITH_VALUES:
        if not isinstance(values, (list, tuple)) or not values:
            raise PoolError(
                "%s: %s.values is %r; operator %s needs a non-empty list of label values"
                % (subject, field, values, operator)
            )
        for position, value in enumerate(values):
            _check_label_value(subject, "%s.values[%d]" % (field, position), value)
        return {"key": key, "operator": operator, "values": list(values)}
    if values:
        raise PoolError(
            "%s: %s.values is %r; operator %s takes no values (drop values, or use In / NotIn)"
            % (subject, field, values, operator)
        )
    return {"key": key, "operator": operator, "values": []}


def _check_label_key(subject, field, key):
    """Refuse what cannot be a label key ([prefix/]name)."""
    if not isinstance(key, str) or not _LABEL_KEY.match(key):
        raise PoolError(
            "%s: %s: label key %r is not valid; expected [DNS-subdomain/]name, the name 1-63 of "
            "A-Z a-z 0-9 - _ . starting and ending with a letter or digit" % (subject, field, key)
        )


def _check_label_value(subject, field, value):
    """Refuse what cannot be a label value; YAML's true or 8 must be quoted to be a label's text."""
    if not isinstance(value, str) or not _LABEL_VALUE.match(value):
        raise PoolError(
            "%s: %s is %r; expected a label value: a string (quote true, false and numbers) of at most 63 "
            "A-Z a-z 0-9 - _ . starting and ending with a letter or digit" % (subject, field, value)
        )


def _parse_machinesets(subject, machinesets):
    """Return the MachineSet names as a tuple, () when absent."""
    if machinesets is None:
        return ()
    if (
        not isinstance(machinesets, (list, tuple))
        or not all(isinstance(name, str) and name for name in machinesets)
        or len(set(machinesets)) != len(machinesets)
    ):
        raise PoolError(
            "%s: machinesets is %r; expected a list of distinct MachineSet names (namespace %s)"
            % (subject, machinesets, MACHINE_API_NAMESPACE)
        )
    return tuple(machinesets)


def _parse_max_unavailable(subject, value):
    """Return max_unavailable as a whole number >= 1 or a percentage string "1%".."100%"; default 1."""
    if value is None:
        return 1
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, str):
        match = PERCENT.match(value)
        if match and 1 <= int(match.group(1)) <= 100:
            return value
    raise PoolError(
        "%s: max_unavailable is %r; expected a whole number >= 1 or a percentage of the pool's nodes "
        "from '1%%' to '100%%' (e.g. '25%%')" % (subject, value)
    )


def _parse_sharing(subject, sharing):
    """Return the Pool fields of the sharing block: strategy, mig, time_slicing, mps."""
    if sharing is None:
        raise PoolError("%s: sharing is missing; give sharing.strategy: one of %s" % (subject, ", ".join(STRATEGIES)))
    if not isinstance(sharing, Mapping):
        raise PoolError(
            "%s: sharing is %r; expected a mapping with keys %s" % (subject, sharing, ", ".join(_SHARING_KEYS))
        )
    _check_keys(subject, "sharing", sharing, _SHARING_KEYS)
    strategy = sharing.get("strategy")
    if strategy not in STRATEGIES:
        raise PoolError(
            "%s: sharing.strategy is %r; expected one of %s" % (subject, strategy, ", ".join(STRATEGIES))
        )
    _check_sharing_blocks(subject, strategy, sharing)
    return {
        "strategy": strategy,
        "mig": _parse_mig(subject, sharing.get("mig")) if strategy == MIG else None,
        "time_slicing": _parse_replicas(subject, "time_slicing", sharing.get("time_slicing"), strategy),
        "mps": _parse_replicas(subject, "mps", sharing.get("mps"), strategy),
    }


def _check_sharing_blocks(subject, strategy, sharing):
    """Refuse blocks that do not go with the strategy, and missing blocks it needs."""
    mig, time_slicing, mps = (sharing.get(key) for key in ("mig", "time_slicing", "mps"))
    if mps is not None and strategy == MIG:
        raise PoolError(
            "%s: sharing.mps is set with strategy mig; MPS cannot share MIG devices (use time_slicing to share "
            "MIG devices, or strategy mps on whole GPUs)" % subject
        )
    if mps is not None and time_slicing is not None:
        raise PoolError(
            "%s: sharing has both time_slicing and mps; a node shares its GPUs one way (keep the one that "
            "matches sharing.strategy)" % subject
        )
    if mig is not None and strategy != MIG:
        raise PoolError(
            "%s: sharing.mig is set but sharing.strategy is %s; a MIG layout needs strategy mig (set "
            "strategy: mig, or drop sharing.mig)" % (subject, strategy)
        )
    if time_slicing is not None and strategy not in (TIME_SLICING, MIG):
        raise PoolError(
            "%s: sharing.time_slicing is set but sharing.strategy is %s; time-slicing goes with strategy "
            "time-slicing, or mig to time-slice MIG devices" % (subject, strategy)
        )
    if mps is not None and strategy != MPS:
        raise PoolError(
            "%s: sharing.mps is set but sharing.strategy is %s; set strategy: mps, or drop sharing.mps"
            % (subject, strategy)
        )
    for needed in (MIG, TIME_SLICING, MPS):
        field = needed.replace("-", "_")
        if strategy == needed and sharing.get(field) is None:
            raise PoolError(
                "%s: sharing.%s is missing; strategy %s needs it (see the node pool documentation)"
                % (subject, field, strategy)
            )


def _parse_mig(subject, mig):
    """Return the MigSharing of sharing.mig; the layout's shape only, its fit is checked per node."""
    if not isinstance(mig, Mapping):
        raise PoolError("%s: sharing.mig is %r; expected a mapping with keys %s" % (subject, mig, ", ".join(_MIG_KEYS)))
    _check_keys(subject, "sharing.mig", mig, _MIG_KEYS)
    layout = mig.get("layout")
    if layout is None:
        raise PoolError(
            "%s: sharing.mig.layout is missing; give a named layout (e.g. all-balanced), {profile: count} or a "
            "list of {devices, profiles} entries" % subject
        )
    if not (isinstance(layout, str) and layout) and not isinstance(layout, (Mapping, list, tuple)):
        raise PoolError(
            "%s: sharing.mig.layout is %r; expected a named layout (e.g. all-balanced), {profile: count} or a "
            "list of {devices, profiles} entries" % (subject, layout)
        )
    strategy = mig.get("strategy")
    if strategy is not None and strategy not in MIG_STRATEGIES:
        raise PoolError(
            "%s: sharing.mig.strategy is %r; expected mixed or single, or leave it out for what the layout needs"
            % (subject, strategy)
        )
    return MigSharing(layout=_plain(layout), strategy=strategy)


def _parse_replicas(subject, field, raw, strategy):
    """Return the Sharing of sharing.time_slicing or sharing.mps, None when absent."""
    if raw is None:
        return None
    keys = _TIME_SLICING_KEYS if field == "time_slicing" else _MPS_KEYS
    if not isinstance(raw, Mapping):
        raise PoolError("%s: sharing.%s is %r; expected a mapping with keys %s" % (subject, field, raw, ", ".join(keys)))
    _check_keys(subject, "sharing." + field, raw, keys)
    replicas = raw.get("replicas")
    mode = "MPS" if field == "mps" else "time-slicing"
    hint = ("leave sharing.time_slicing out for unshared MIG devices" if strategy == MIG
            else "use strategy none for unshared GPUs")
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise PoolError(
            "%s: sharing.%s.replicas is %r; %s needs a whole number of replicas >= 2 (%s)"
            % (subject, field, replicas, mode, hint)
        )
    if replicas < 2:
        raise PoolError("%s: sharing.%s.replicas is %d; %s needs replicas >= 2 (%s)" % (subject, field, replicas, mode, hint))
    flags = {}
    for key in keys[1:]:
        value = raw.get(key)
        if value is None:
            # An absent fail_requests_greater_than_one keeps the device plugin's default for the mode.
            value = None if key == "fail_requests_greater_than_one" else False
        elif not isinstance(value, bool):
            raise PoolError("%s: sharing.%s.%s is %r; expected true or false" % (subject, field, key, value))
        flags[key] = value
    return Sharing(replicas=replicas, **flags)


def _plain(value):
    """Return a copy of value made of plain dicts and lists, so the Pool never shares the caller's data."""
    if isinstance(value, Mapping):
        return dict((key, _plain(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value
