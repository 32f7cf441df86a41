# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubegpu_tenancy, checked: teams (namespaces, a share of each pool, borrowing, lending, default priority) and
priority classes. See docs/tenancy.md.

    parse_settings(raw) -> Settings; raises TenancyError naming the team, the field, the value and what is valid.

A share of a pool is either `share` (a fraction of every resource the pool offers, 0 < share <= 1) or `units`
(a whole number when the pool offers one resource, else {resource: count}); which pools and resources exist is
checked against the pools' capacity (quotas.py), not here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple, Union

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.quantity import parse_quantity
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.suggest import did_you_mean

PREEMPTION = ("PreemptLowerPriority", "Never")
SHARED_QUEUE = "unassigned"
COHORT = "gpu"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
SETTINGS_KEYS = ("kueue", "install", "cohort", "shared_queue", "teams", "priority_classes", "helm", "kueue_operator",
                 "timeout")
TEAM_KEYS = ("name", "namespaces", "quotas", "borrow", "lend", "priority", "cpu", "memory")
# What a pod asks for beside its GPUs that Kueue counts too: every ClusterQueue covers them (quotas.py).
NODE_RESOURCES = ("cpu", "memory")
QUOTA_KEYS = ("pool", "share", "units")
PRIORITY_KEYS = ("name", "value", "preemption", "description")
DEFAULT_PRIORITY_CLASSES = (
    {"name": "interactive", "value": 1000, "preemption": "PreemptLowerPriority",
     "description": "Interactive agents and notebooks: admitted first, may preempt batch."},
    {"name": "serving", "value": 500, "preemption": "PreemptLowerPriority",
     "description": "Model servers (InferenceServices)."},
    {"name": "batch", "value": 100, "preemption": "Never",
     "description": "Batch jobs: wait for free quota, never preempt."},
)


class TenancyError(ValueError):
    """A refusal of kubegpu_tenancy or of its quotas, before anything is written."""


@dataclass(frozen=True)
class Quota:
    pool: str
    share: Optional[float] = None
    units: Union[None, int, Dict[str, int]] = None


@dataclass(frozen=True)
class Team:
    name: str
    namespaces: Tuple[str, ...]
    quotas: Tuple[Quota, ...]
    borrow: bool = True
    lend: bool = True
    priority: Optional[str] = None
    # The team's Kueue quota of cpu and memory (quantities, e.g. "64", "500m", "512Gi"); None: what the GPU pools'
    # nodes offer (allocatable), so that cpu and memory never hold back what the GPU quota admits.
    cpu: Optional[str] = None
    memory: Optional[str] = None


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    preemption: str = "PreemptLowerPriority"
    description: str = ""


@dataclass(frozen=True)
class Settings:
    kueue: bool = True
    install: bool = True
    cohort: str = COHORT
    shared_queue: str = SHARED_QUEUE
    teams: Tuple[Team, ...] = ()
    priority_classes: Tuple[PriorityClass, ...] = ()
    helm: Dict = field(default_factory=dict)
    kueue_operator: Dict = field(default_factory=dict)
    timeout: int = 900

    def team_of_namespace(self, namespace):
        """The Team whose namespaces hold namespace, or None."""
        return next((team for team in self.teams if namespace in team.namespaces), None)


def _unknown(where, raw, valid):
    unknown = sorted(str(key) for key in raw if key not in valid)
    if unknown:
        raise TenancyError("%s: unknown key %r%s (valid: %s)"
                           % (where, unknown[0], did_you_mean(unknown[0], valid), ", ".join(valid)))


def _name(where, value):
    if not isinstance(value, str) or not DNS_LABEL.match(value):
        raise TenancyError("%s is %r; expected a DNS label (lower case letters, digits and '-', at most 63)"
                           % (where, value))
    return value


def _bool(where, value, default):
    if value is None:
        return default
    if not isinstance(value, bool):
        raise TenancyError("%s is %r; expected true or false" % (where, value))
    return value


def _count(where, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TenancyError("%s is %r; expected a whole number >= 0" % (where, value))
    return value


def parse_settings(raw):
    """Return Settings from kubegpu_tenancy (None or {} gives no team); raises TenancyError."""
    raw = {} if raw is None else raw
    if not isinstance(raw, Mapping):
        raise TenancyError("kubegpu_tenancy is %r; expected a mapping with keys %s" % (raw, ", ".join(SETTINGS_KEYS)))
    _unknown("kubegpu_tenancy", raw, SETTINGS_KEYS)
    classes = raw.get("priority_classes")
    classes = tuple(_priority_class(i, c) for i, c in enumerate(DEFAULT_PRIORITY_CLASSES if classes is None
                                                                else classes))
    _unique("kubegpu_tenancy.priority_classes", [c.name for c in classes])
    teams = raw.get("teams") or []
    if not isinstance(teams, (list, tuple)):
        raise TenancyError("kubegpu_tenancy.teams is %r; expected a list of teams" % (teams,))
    teams = tuple(_team(i, t, [c.name for c in classes]) for i, t in enumerate(teams))
    _unique("kubegpu_tenancy.teams", [t.name for t in teams])
    owners = {}
    for team in teams:
        for namespace in team.namespaces:
            if namespace in owners:
                raise TenancyError("team '%s': namespace '%s' is already team '%s''s; a namespace belongs to one team"
                                   % (team.name, namespace, owners[namespace]))
            owners[namespace] = team.name
    shared = _name("kubegpu_tenancy.shared_queue", raw.get("shared_queue") or SHARED_QUEUE)
    if shared in [t.name for t in teams]:
        raise TenancyError("kubegpu_tenancy.shared_queue is '%s', also a team's name; name the queue of unassigned "
                           "capacity otherwise" % shared)
    timeout = raw.get("timeout", 900)
    return Settings(kueue=_bool("kubegpu_tenancy.kueue", raw.get("kueue"), True),
                    install=_bool("kubegpu_tenancy.install", raw.get("install"), True),
                    cohort=_name("kubegpu_tenancy.cohort", raw.get("cohort") or COHORT),
                    shared_queue=shared, teams=teams, priority_classes=classes,
                    helm=dict(raw.get("helm") or {}), kueue_operator=dict(raw.get("kueue_operator") or {}),
                    timeout=_count("kubegpu_tenancy.timeout", timeout))


def _unique(where, names):
    seen = set()
    for name in names:
        if name in seen:
            raise TenancyError("%s: '%s' is listed twice" % (where, name))
        seen.add(name)


def _priority_class(index, raw):
    where = "kubegpu_tenancy.priority_classes[%d]" % index
    if not isinstance(raw, Mapping):
        raise TenancyError("%s is %r; expected {name, value, preemption, description}" % (where, raw))
    _unknown(where, raw, PRIORITY_KEYS)
    name = _name(where + ".name", raw.get("name"))
    value = raw.get("value")
    if isinstance(value, bool) or not isinstance(value, int) or not -2147483648 <= value <= 1000000000:
        raise TenancyError("%s (%s): value is %r; expected a whole number up to 1000000000 (higher values are the "
                           "system's)" % (where, name, value))
    preemption = raw.get("preemption") or "PreemptLowerPriority"
    if preemption not in PREEMPTION:
        raise TenancyError("%s (%s): preemption is %r; expected one of %s"
                           % (where, name, preemption, ", ".join(PREEMPTION)))
    return PriorityClass(name, value, preemption, str(raw.get("description") or ""))


def _team(index, raw, classes):
    where = "kubegpu_tenancy.teams[%d]" % index
    if not isinstance(raw, Mapping):
        raise TenancyError("%s is %r; expected {name, namespaces, quotas, borrow, lend, priority}" % (where, raw))
    _unknown(where, raw, TEAM_KEYS)
    name = _name(where + ".name", raw.get("name"))
    where = "team '%s'" % name
    namespaces = raw.get("namespaces") or [name]
    if not isinstance(namespaces, (list, tuple)):
        raise TenancyError("%s: namespaces is %r; expected a list of namespace names" % (where, namespaces))
    namespaces = tuple(_name("%s: namespaces[%d]" % (where, i), ns) for i, ns in enumerate(namespaces))
    quotas = raw.get("quotas") or []
    if not isinstance(quotas, (list, tuple)):
        raise TenancyError("%s: quotas is %r; expected a list of {pool, share or units}" % (where, quotas))
    quotas = tuple(_quota("%s: quotas[%d]" % (where, i), q) for i, q in enumerate(quotas))
    _unique("%s: quotas" % where, [q.pool for q in quotas])
    priority = raw.get("priority")
    if priority is not None and priority not in classes:
        raise TenancyError("%s: priority is %r; expected one of the priority classes (%s)%s"
                           % (where, priority, ", ".join(classes), did_you_mean(str(priority), classes)))
    return Team(name, namespaces, quotas, _bool(where + ": borrow", raw.get("borrow"), True),
                _bool(where + ": lend", raw.get("lend"), True), priority,
                _quantity(where + ": cpu", raw.get("cpu"), "64 or 500m"),
                _quantity(where + ": memory", raw.get("memory"), "512Gi"))


def node_quantity(text):
    """A cpu or memory quantity ("64", "7910m", "263839996Ki", 8) as a Fraction, None when it is not one."""
    text = str(text).strip() if isinstance(text, (str, int)) and not isinstance(text, bool) else None
    if text and text.endswith("m"):  # millicores, as kubelets publish allocatable cpu
        parsed = parse_quantity(text[:-1])
        return None if parsed is None else parsed / 1000
    return parse_quantity(text) if text else None


def _quantity(where, value, example):
    if value is None:
        return None
    if isinstance(value, float):  # YAML's 0.5 (cpu) as the quantity "0.5"
        value = ("%f" % value).rstrip("0").rstrip(".")
    parsed = node_quantity(value)
    if parsed is None:
        raise TenancyError("%s is %r; expected a Kubernetes quantity >= 0 (e.g. %s)" % (where, value, example))
    return str(value)


def _quota(where, raw):
    if not isinstance(raw, Mapping):
        raise TenancyError("%s is %r; expected {pool, share} or {pool, units}" % (where, raw))
    _unknown(where, raw, QUOTA_KEYS)
    pool = raw.get("pool")
    if not isinstance(pool, str) or not pool:
        raise TenancyError("%s: pool is %r; expected the name of a pool of kubegpu_node_pools" % (where, pool))
    where = "%s (pool '%s')" % (where, pool)
    share, units = raw.get("share"), raw.get("units")
    if (share is None) == (units is None):
        raise TenancyError("%s: give one of share (a fraction of the pool, e.g. 0.5) and units (a number of the "
                           "pool's devices)" % where)
    if share is not None:
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            raise TenancyError("%s: share is %r; expected a fraction above 0 and at most 1" % (where, share))
        return Quota(pool, share=float(share))
    if isinstance(units, Mapping):
        return Quota(pool, units=dict((str(k), _count("%s: units[%s]" % (where, k), v)) for k, v in units.items()))
    return Quota(pool, units=_count(where + ": units", units))
