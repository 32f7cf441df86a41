# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventory variables users write, and every check of them that needs no cluster.

INVENTORY is the one description of kubegpu_platform, kubegpu_gpu_operator, kubegpu_node_pools, kubegpu_dra and
kubegpu_serving:
keys, types, choices, suboptions and defaults, in Ansible argument-spec terms. The roles map these variables into
their own prefixed defaults (roles/*/defaults/main.yml) and validate those with meta/argument_specs.yml; a unit test
keeps the three in step. check_inventory walks the variables against INVENTORY (unknown keys anywhere, with the
closest valid key; types; choices) and then hands each variable that passed to the checks of the stage that owns
it (pool_spec for the pools, cluster_policy for ClusterPolicy fields, the DRA claim templates and driver values,
serving/spec.py for kubegpu_serving, and serving/models.py for the models' placement and sizing that the inventory
alone decides), so each rule stays where it lives. Errors are collected, not raised: {variable: [message, ...]}, each message
starting with the path the user wrote (kubegpu_gpu_operator.timeout: expected an integer, got 'soon'). An unknown
key is reported and the rest judged without it (judge_inventory), so what its absence causes shows in the same run.

A variable of a stage still being built (FUTURE) is accepted as it is until its entry joins INVENTORY.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import inspect
from collections import namedtuple
from collections.abc import Mapping

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator import cluster_policy, support
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import (
    needed_gates,
    parse_claim_templates,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.driver_values import (
    DRIVER_ROOTS,
    GPU_OPERATOR,
    driver_values,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring import settings as monitoring_settings
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import COLLECTION
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import (
    POOL_OPTIONS,
    PoolError,
    parse_pools,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving import spec as serving_spec
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.errors import ServingError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.models import offline_problems
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import SizingError, size_model
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.suggest import did_you_mean
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy import spec as tenancy_spec

PLATFORMS = ["auto", "openshift", "kubernetes"]
APPROVALS = ["Manual", "Automatic"]

# Stages a playbook can run, and the variables each reads.
STAGES = {
    "gpu_operator": ("kubegpu_platform", "kubegpu_gpu_operator"),
    "node_pools": ("kubegpu_node_pools", "kubegpu_api"),
    "dra": ("kubegpu_platform", "kubegpu_node_pools", "kubegpu_dra"),
    # Models name pools of kubegpu_node_pools and claim templates of kubegpu_dra.
    "serving": ("kubegpu_platform", "kubegpu_node_pools", "kubegpu_dra", "kubegpu_serving"),
    # The operator's namespace and service_monitor come from kubegpu_gpu_operator; pools name the pending-pods alerts.
    "monitoring": ("kubegpu_platform", "kubegpu_gpu_operator", "kubegpu_node_pools", "kubegpu_monitoring"),
    # Quotas are shares of the pools of kubegpu_node_pools; Kueue maps the claim templates' DeviceClasses of kubegpu_dra.
    "tenancy": ("kubegpu_platform", "kubegpu_node_pools", "kubegpu_dra", "kubegpu_tenancy"),
    # The uninstall finds what is ours in the cluster; it reads the helm binary of these (docs/uninstall.md).
    "uninstall": ("kubegpu_dra", "kubegpu_serving", "kubegpu_tenancy"),
}
# Variables of stages not described here yet: accepted unchecked (add the stage to INVENTORY and STAGES to check it).
FUTURE = ()

# A model's sizing: the keyword arguments of size_model (the model_sizing module's options).
_SIZING_KEYS = tuple(inspect.signature(size_model).parameters)

_HELM_COMMON = {
    "chart": {"type": "str"},
    "values": {"type": "dict"},
    "binary": {"type": "str", "default": ""},
    "wait": {"type": "bool", "default": False},
}

INVENTORY = {
    "kubegpu_platform": {"type": "str", "choices": PLATFORMS, "default": "auto"},
    "kubegpu_gpu_operator": {"type": "dict", "default": {}, "options": {
        "version": {"type": "str", "default": "v26.7.0"},
        # An end-of-support version (gpu_operator/support.py) is refused unless this acknowledges it.
        "allow_end_of_support": {"type": "bool", "default": False},
        "namespace": {"type": "str", "default": ""},
        "driver": {"type": "dict", "options": {
            "enabled": {"type": "bool", "default": True},
            "kernel_module_type": {"type": "str", "choices": list(cluster_policy.POLICY_ENUMS["driver.kernelModuleType"]),
                                   "default": "auto"},
            "precompiled": {"type": "bool", "default": False},
            "per_node_pool": {"type": "bool", "default": False},
            # NVIDIADriver objects in upstream names, checked by cluster_policy.driver_objects.
            "nvidia_drivers": {"type": "list", "elements": "dict", "default": []},
        }},
        "toolkit": {"type": "dict", "options": {"enabled": {"type": "bool", "default": True}}},
        "cdi": {"type": "dict", "options": {
            "enabled": {"type": "bool", "default": True},
            "nri_plugin": {"type": "bool", "default": False},
        }},
        "mig_strategy": {"type": "str", "choices": list(cluster_policy.POLICY_ENUMS["mig.strategy"]), "default": "single"},
        "service_monitor": {"type": "bool", "default": True},
        # Upstream ClusterPolicy spec fields, checked by cluster_policy (sections, dead fields, enums).
        "cluster_policy": {"type": "dict", "default": {}},
        "channel": {"type": "str", "default": ""},
        "approval": {"type": "str", "choices": APPROVALS, "default": "Manual"},
        "catalog_source": {"type": "str", "default": ""},
        # Private registries and NGC (username $oauthtoken, password the NGC API key): one pull Secret for the driver.
        "registry_credentials": {"type": "list", "elements": "dict", "default": [], "options": {
            "registry": {"type": "str", "required": True},
            "username": {"type": "str", "required": True},
            "password": {"type": "str", "required": True, "no_log": True},
        }},
        "helm": {"type": "dict", "options": dict(_HELM_COMMON, **{
            "chart": {"type": "str", "default": "nvidia/gpu-operator"},
            "repo_url": {"type": "str", "default": "https://helm.ngc.nvidia.com/nvidia"},
            "values": {"type": "dict", "default": {}},
        })},
        "nfd": {"type": "dict", "options": {
            "enabled": {"type": "bool", "default": True},
            "namespace": {"type": "str", "default": "openshift-nfd"},
            "channel": {"type": "str", "default": "stable"},
            "source": {"type": "str", "default": "redhat-operators"},
            "approval": {"type": "str", "choices": APPROVALS, "default": "Automatic"},
            "operand_image": {"type": "str",
                              "default": "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.20"},
            "instance_spec": {"type": "dict", "default": {}},
            "timeout": {"type": "int", "default": 600},
        }},
        "wait": {"type": "bool", "default": True},
        "timeout": {"type": "int", "default": 1200},
        # Seconds one call of a waiting task waits before it reports progress and is called again.
        "wait_round": {"type": "int", "default": 30},
    }},
    "kubegpu_node_pools": {"type": "list", "elements": "dict", "default": [], "options": POOL_OPTIONS},
    # How the collection talks to the API server (docs/performance.md): writes sent at once, each with its retries.
    "kubegpu_api": {"type": "dict", "default": {}, "options": {
        "parallel_writes": {"type": "int", "default": 40},
    }},
    "kubegpu_dra": {"type": "dict", "default": {}, "options": {
        # Claim templates: keys and values checked by dra/claim_templates.py.
        "claim_templates": {"type": "list", "elements": "dict", "default": []},
        "driver": {"type": "dict", "default": {}, "options": {
            "chart_version": {"type": "str"},
            "driver_owner": {"type": "str", "choices": sorted(DRIVER_ROOTS)},
            "compute_domains": {"type": "bool", "default": False},
            "log_verbosity": {"type": "int"},
            # gate: true|false, checked per driver release by dra/driver_values.py.
            "feature_gates": {"type": "dict"},
        }},
        "acknowledge_tech_preview_no_upgrade": {"type": "bool", "default": False},
        "openshift_scc": {"type": "bool", "default": True},
        "helm": {"type": "dict", "options": dict(_HELM_COMMON, **{
            "chart": {"type": "str", "default": ""},
            "values": {"type": "dict", "default": {"webhook": {"enabled": False}}},
        })},
        "wait": {"type": "bool", "default": True},
        "timeout": {"type": "int", "default": 600},
        "wait_round": {"type": "int", "default": 30},
    }},
    # The serving stage (docs/serving.md); serving/spec.py's parse_settings checks values, names and references.
    "kubegpu_serving": {"type": "dict", "default": {}, "options": {
        "platform": {"type": "str", "choices": list(serving_spec.PLATFORMS), "default": serving_spec.AUTO},
        "mode": {"type": "str", "choices": list(serving_spec.MODES), "default": serving_spec.AUTO},
        "install": {"type": "bool", "default": True},
        "namespace": {"type": "str", "default": serving_spec.DEFAULT_NAMESPACE},
        "openshift_ai": {"type": "dict", "default": {}, "options": {
            "channel": {"type": "str", "default": ""},
            "approval": {"type": "str", "choices": list(serving_spec.APPROVALS)},
            "source": {"type": "str", "default": ""},
        }},
        "kserve": {"type": "dict", "default": {}, "options": {
            "namespace": {"type": "str", "default": "kserve"},
            "values": {"type": "dict", "default": {}},
        }},
        "keda": {"type": "dict", "default": {}, "options": {
            "namespace": {"type": "str", "default": "keda"},
            "values": {"type": "dict", "default": {}},
        }},
        "helm": {"type": "dict", "default": {}, "options": {
            "charts_dir": {"type": "str", "default": ""},
            "binary": {"type": "str", "default": ""},
            "wait": {"type": "bool", "default": False},
        }},
        "scale_to_zero": {"type": "dict", "default": {}, "options": {
            "retention_period": {"type": "str", "default": serving_spec.DEFAULT_RETENTION},
            "prometheus": {"type": "str", "default": ""},
            "query": {"type": "str", "default": ""},
            "threshold": {"type": "int", "default": 1},
        }},
        "cold_start_timeout": {"type": "int", "default": serving_spec.DEFAULT_COLD_START},
        "wait": {"type": "bool", "default": True},
        "timeout": {"type": "int", "default": serving_spec.DEFAULT_COLD_START},
        "runtimes": {"type": "list", "elements": "dict", "default": [], "options": {
            "name": {"type": "str", "required": True},
            "type": {"type": "str", "choices": list(serving_spec.RUNTIME_TYPES), "default": serving_spec.VLLM},
            "image": {"type": "str", "default": ""},
            "args": {"type": "list", "elements": "str", "default": []},
            "env": {"type": "list", "elements": "dict", "default": []},
            "resources": {"type": "dict"},
        }},
        "models": {"type": "list", "elements": "dict", "default": [], "options": {
            "name": {"type": "str", "required": True},
            "namespace": {"type": "str"},
            "runtime": {"type": "str", "required": True},
            "storage_uri": {"type": "str", "required": True},
            # One of pool (kubegpu_node_pools) and claim_template (kubegpu_dra.claim_templates).
            "pool": {"type": "str"},
            "claim_template": {"type": "str"},
            "mig_profile": {"type": "str"},
            "gpus": {"type": "int"},
            "min_replicas": {"type": "int", "default": 0},
            "max_replicas": {"type": "int"},
            "mode": {"type": "str", "choices": list(serving_spec.MODES), "default": serving_spec.AUTO},
            # The model_sizing module's options; values checked by serving/sizing.py.
            "sizing": {"type": "dict", "options": dict((key, {"type": "raw"}) for key in _SIZING_KEYS)},
            "args": {"type": "list", "elements": "str", "default": []},
            "env": {"type": "list", "elements": "dict", "default": []},
            "resources": {"type": "dict"},
            "tolerations": {"type": "list", "elements": "dict", "default": []},
        }},
    }},
    # The monitoring stage (docs/monitoring.md); monitoring/settings.py checks ranges, durations and labels.
    "kubegpu_monitoring": {"type": "dict", "default": {}, "options": monitoring_settings.OPTIONS},
    "kubegpu_tenancy": {"type": "dict", "default": {}, "options": {
        "kueue": {"type": "bool", "default": True},
        "install": {"type": "bool", "default": True},
        "cohort": {"type": "str", "default": tenancy_spec.COHORT},
        "shared_queue": {"type": "str", "default": tenancy_spec.SHARED_QUEUE},
        "timeout": {"type": "int", "default": 900},
        "helm": {"type": "dict", "default": {}, "options": {
            "charts_dir": {"type": "str", "default": ""},
            "binary": {"type": "str", "default": ""},
            "namespace": {"type": "str", "default": ""},
            "values": {"type": "dict", "default": {}},
            "wait": {"type": "bool", "default": False},
        }},
        "kueue_operator": {"type": "dict", "default": {}, "options": {
            "channel": {"type": "str", "default": ""},
            "source": {"type": "str", "default": ""},
            "approval": {"type": "str", "choices": list(serving_spec.APPROVALS)},
        }},
        "priority_classes": {"type": "list", "elements": "dict", "options": {
            "name": {"type": "str", "required": True},
            "value": {"type": "int", "required": True},
            "preemption": {"type": "str", "choices": list(tenancy_spec.PREEMPTION), "default": "PreemptLowerPriority"},
            "description": {"type": "str", "default": ""},
        }},
        "teams": {"type": "list", "elements": "dict", "default": [], "options": {
            "name": {"type": "str", "required": True},
            "namespaces": {"type": "list", "elements": "str"},
            "quotas": {"type": "list", "elements": "dict", "default": [], "options": {
                "pool": {"type": "str", "required": True},
                "share": {"type": "raw"},
                "units": {"type": "raw"},
            }},
            "borrow": {"type": "bool", "default": True},
            "lend": {"type": "bool", "default": True},
            "priority": {"type": "str"},
            "cpu": {"type": "raw"},
            "memory": {"type": "raw"},
        }},
    }},
}

# Ansible's spellings of true and false (module_utils.parsing.convert_bool), which the roles' argument specs accept.
_TRUE = ("y", "yes", "on", "1", "true", "t", 1, 1.0)
_FALSE = ("n", "no", "off", "0", "false", "f", 0, 0.0)
_EXPECTED = {"str": "a string", "int": "an integer", "bool": "true or false", "dict": "a mapping", "list": "a list"}


def variables_of(stages):
    """The inventory variables the stages read, in INVENTORY order."""
    wanted = set(name for stage in stages for name in STAGES[stage])
    return [name for name in INVENTORY if name in wanted]


def check_inventory(variables, stages):
    """Check the kubegpu_* variables (name -> value as the play sees it) that the stages read.

    Returns {variable: [message, ...]} for the variables with problems ({} when all are fine). A variable that is
    absent takes its defaults. A kubegpu_* name that is not a variable of the collection but close to one is a
    misspelling, reported under that name.
    """
    return judge_inventory(variables, stages).errors


# errors: check_inventory's. variables: the variables as the stages will read them, every unknown key left out.
# unjudged: the variables with a problem other than unknown keys, which later checks skip (they would only repeat it).
Judgement = namedtuple("Judgement", "errors variables unjudged")


def judge_inventory(variables, stages):
    """check_inventory, with the variables as judged and the ones that could not be (a Judgement).

    An unknown key (a misspelling, most often) is reported, and the rest is judged as if it were absent: the
    collection ignores it, so the problems its absence causes (an acknowledgement that did not take, a default that
    does not fit) belong to the same run, not to the next one.
    """
    variables = dict(variables or {})
    errors, unjudged = {}, set()
    known = list(INVENTORY) + list(FUTURE)
    for name in sorted(variables):
        if name not in known:
            hint = did_you_mean(name, known, cutoff=0.8)
            if hint:
                errors[name] = ["%s: not a variable of %s%s; its value is ignored" % (name, COLLECTION, hint)]
    for name in variables_of(stages):
        if name not in variables or variables[name] is None:
            continue
        problems = check_value(name, variables[name], INVENTORY[name])
        variables[name] = known_part(variables[name], INVENTORY[name])
        if check_value(name, variables[name], INVENTORY[name]):
            unjudged.add(name)  # its shape is wrong: the stage's own checks need it right
        else:
            stage_problems = _STAGE_CHECKS.get(name, lambda value: [])(variables[name])
            if stage_problems:
                unjudged.add(name)
                problems = problems + stage_problems
        if problems:
            errors[name] = problems
    checked = variables_of(stages)
    for name, reads, check in _CROSS_CHECKS:
        if name in checked and name not in unjudged and not unjudged.intersection(reads):
            problems = check(variables)
            if problems:
                errors.setdefault(name, []).extend(problems)
                unjudged.add(name)
    return Judgement(errors, variables, unjudged)


def known_part(value, spec):
    """value without the keys its spec entry does not know, at any depth: what the collection reads of it."""
    options = spec.get("options")
    if options is None:
        return value
    if spec.get("type") == "dict" and isinstance(value, Mapping):
        return dict((key, known_part(item, options[key])) for key, item in value.items() if key in options)
    if spec.get("type") == "list" and spec.get("elements") == "dict" and isinstance(value, (list, tuple)):
        entry = {"type": "dict", "options": options}
        return [known_part(item, entry) for item in value]
    return value


def check_value(path, value, spec):
    """Problems of value against one spec entry (type, choices, keys and suboptions), each starting with path."""
    if value is None:
        return []
    kind = spec.get("type", "raw")
    value, problem = _typed(kind, value)
    if problem:
        return ["%s: expected %s, got %r" % (path, _EXPECTED[kind], problem[0])]
    if "choices" in spec and value not in spec["choices"]:
        valid = ", ".join(str(choice) for choice in spec["choices"])
        return ["%s: %r is not valid%s; valid: %s" % (path, value, did_you_mean(value, spec["choices"]), valid)]
    options = spec.get("options")
    if kind == "dict" and options is not None:
        return _check_options(path, value, options)
    if kind == "list":
        problems = []
        for index, item in enumerate(value):
            where = "%s[%d]" % (path, index)
            element = spec.get("elements")
            if element is None:
                continue
            item, problem = _typed(element, item)
            if problem:
                problems.append("%s: expected %s, got %r" % (where, _EXPECTED[element], problem[0]))
            elif element == "dict" and spec.get("options") is not None:
                problems.extend(_check_options(_element_name(where, item), item, spec["options"]))
        return problems
    return []


def _element_name(where, item):
    """kubegpu_node_pools[0] (llm-h100): the index and, when the entry has one, its name."""
    name = item.get("name") if isinstance(item, Mapping) else None
    return "%s (%s)" % (where, name) if isinstance(name, str) and name else where


def _check_options(path, value, options):
    problems = []
    for key in sorted(value, key=str):
        if key not in options:
            problems.append("%s: unknown key '%s'%s; valid: %s"
                            % (path, key, did_you_mean(key, options), ", ".join(options)))
    for key, spec in options.items():
        where = "%s.%s" % (path, key)
        if value.get(key) is None:
            if spec.get("required"):
                problems.append("%s: missing; it is required" % where)
            continue
        problems.extend(check_value(where, value[key], spec))
    return problems


def _typed(kind, value):
    """(value, None) when value is of kind (as Ansible's argument spec would take it), else (None, (value,))."""
    if kind == "raw":
        return value, None
    if kind == "str":
        if isinstance(value, str):
            return value, None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value), None
    elif kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value, None
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value), None
    elif kind == "bool":
        if isinstance(value, bool):
            return value, None
        folded = value.lower() if isinstance(value, str) else value
        if folded in _TRUE:
            return True, None
        if folded in _FALSE:
            return False, None
    elif kind == "dict":
        if isinstance(value, Mapping):
            return value, None
    elif kind == "list":
        if isinstance(value, (list, tuple)):
            return value, None
    return None, (value,)


def as_bool(value):
    """value as Ansible's bool type takes it (True for "yes"); None for what is no bool."""
    return _typed("bool", value)[0]


# -- the stages' own checks, run once a variable has the right shape


def _pools_problems(pools):
    """pool_spec's checks, pool by pool so that every pool's problem is reported, then across pools."""
    problems = []
    for index, pool in enumerate(pools):
        try:
            parse_pools([pool])
        except PoolError as e:
            problems.append("kubegpu_node_pools[%d]: %s" % (index, _renumbered(str(e), index)))
    if not problems:
        try:
            parse_pools(pools)
        except PoolError as e:
            problems.append("kubegpu_node_pools: %s" % e)
    return problems


def _renumbered(message, index):
    """pool_spec names a pool parsed alone pools[0]; give it its place in the list."""
    return message.replace("pools[0]", "pools[%d]" % index)


def _gpu_operator_problems(settings):
    problems = []
    policy = settings.get("cluster_policy") or {}
    prefix = "kubegpu_gpu_operator.cluster_policy."
    problems.extend(cluster_policy.settings_problems(policy, prefix))
    if not problems:
        problems.extend(cluster_policy.enum_problems(policy, cluster_policy.POLICY_ENUMS, prefix))
    drivers = (settings.get("driver") or {}).get("nvidia_drivers") or []
    per_node_pool = _typed("bool", (settings.get("driver") or {}).get("per_node_pool", False))[0]
    try:
        cluster_policy.driver_objects(drivers, {"driver": {"useNvidiaDriverCRD": per_node_pool}})
    except cluster_policy.PolicyError as e:
        problems.append("kubegpu_gpu_operator.driver.nvidia_drivers: %s" % _driver_message(str(e)))
    refusal = operator_support(settings)[0]
    if refusal:
        problems.append(refusal)
    return problems


def operator_support(settings):
    """support.judge of the release kubegpu_gpu_operator asks for: its version, or its OLM channel when the version
    is empty (the channel's head). (refusal, warning), each a message or None."""
    settings = settings or {}
    version = settings.get("version", INVENTORY["kubegpu_gpu_operator"]["options"]["version"]["default"])
    where = "kubegpu_gpu_operator.version"
    if not version and settings.get("channel"):
        version, where = settings["channel"], "kubegpu_gpu_operator.channel"
    allowed = _typed("bool", settings.get("allow_end_of_support", False))[0]
    return support.judge(version, allow_end_of_support=allowed is True, where=where)


def _driver_message(message):
    """cluster_policy speaks of the cluster_policy module's options; say it in inventory keys."""
    return message.replace("settings.driver.useNvidiaDriverCRD: true", "kubegpu_gpu_operator.driver.per_node_pool: true")


def _dra_problems(settings):
    problems, templates = [], []
    raw_templates = settings.get("claim_templates") or []
    for index, entry in enumerate(raw_templates):
        try:
            parse_claim_templates([entry])
        except DraError as e:
            message = str(e).replace("claim_templates[0]", "claim_templates[%d]" % index)
            problems.append("kubegpu_dra.claim_templates[%d]: %s" % (index, message))
    if not problems:
        try:
            templates = parse_claim_templates(raw_templates)
        except DraError as e:
            problems.append(str(e))
    driver = dict(settings.get("driver") or {})
    # Who installs the NVIDIA driver is read from the DRA nodes when unset (dra_platform); any valid owner does here.
    driver.setdefault("driver_owner", GPU_OPERATOR)
    if driver["driver_owner"] is None:
        driver["driver_owner"] = GPU_OPERATOR
    if driver.get("chart_version") is not None:
        driver["chart_version"] = str(driver["chart_version"])
    if driver.get("compute_domains") is not None:
        driver["compute_domains"] = _typed("bool", driver["compute_domains"])[0]
    if "log_verbosity" in driver and driver["log_verbosity"] is not None:
        driver["log_verbosity"] = _typed("int", driver["log_verbosity"])[0]
    try:
        driver_values(driver, None, needed_gates(templates))
    except DraError as e:
        problems.append(str(e))
    return problems


def _serving_problems(settings):
    """serving/spec.py's checks: the settings and runtimes first, then model by model, so that every model's problem
    is reported (parse_settings stops at the first)."""
    try:
        serving_spec.parse_settings(dict(settings, models=None))
    except ServingError as e:
        return [serving_message(str(e), settings)]
    problems = []
    for index, model in enumerate(settings.get("models") or []):
        try:
            serving_spec.parse_settings(dict(settings, models=[model]))
        except ServingError as e:
            problems.append(serving_message(str(e).replace("models[0]", "models[%d]" % index), settings))
    if not problems:
        try:
            serving_spec.parse_settings(settings)
        except ServingError as e:
            problems.append(serving_message(str(e), settings))
    return problems


def _tenancy_problems(settings):
    """tenancy/spec.py's checks (teams, namespaces, shares, priority classes); quotas against the pools' capacity
    need the nodes: the preflight's cluster check and the stage do them."""
    try:
        tenancy_spec.parse_settings(settings)
    except tenancy_spec.TenancyError as e:
        return [str(e) if str(e).startswith("kubegpu_tenancy") else "kubegpu_tenancy: %s" % e]
    return []


def serving_message(message, settings):
    """spec.py and models.py name a model or runtime by its name (model 'llama-8b': ...); say where it is in the
    inventory (kubegpu_serving.models[1] (llama-8b): ...)."""
    settings = settings if isinstance(settings, Mapping) else {}
    for kind, key in (("model", "models"), ("runtime", "runtimes")):
        for index, entry in enumerate(settings.get(key) or []):
            name = entry.get("name") if isinstance(entry, Mapping) else None
            subject = "%s '%s': " % (kind, name)
            if isinstance(name, str) and message.startswith(subject):
                return "kubegpu_serving.%s[%d] (%s): %s" % (key, index, name, message[len(subject):])
    return message if message.startswith("kubegpu_serving") else "kubegpu_serving: %s" % message


def _serving_placement(variables):
    """The models against the pools and claim templates of the inventory (serving/models.py): unknown pools and
    templates, DRA claims in Knative mode, MIG profiles a pool does not offer, and sizing where the slice is known
    without the cluster (a claim template, a pool whose selector names its GPU model and count)."""
    settings = serving_spec.parse_settings(variables.get("kubegpu_serving"))
    try:
        refused = offline_problems(settings, variables.get("kubegpu_node_pools") or [],
                                   (variables.get("kubegpu_dra") or {}).get("claim_templates") or [])
    except (ServingError, SizingError, PoolError, DraError) as e:
        return [serving_message(str(e), variables.get("kubegpu_serving"))]
    return [serving_message(message, variables.get("kubegpu_serving")) for message in refused]


def _monitoring_conflict(variables):
    """The gpu_operator stage writes dcgmExporter.serviceMonitor.enabled from kubegpu_gpu_operator.service_monitor and
    the monitoring stage from kubegpu_monitoring.service_monitor.enabled: two different values would flip the field
    on every run."""
    operator = as_bool((variables.get("kubegpu_gpu_operator") or {}).get("service_monitor", True))
    wanted = as_bool(((variables.get("kubegpu_monitoring") or {}).get("service_monitor") or {}).get("enabled", True))
    if operator is not None and wanted is not None and operator != wanted:
        return ["kubegpu_monitoring.service_monitor.enabled: %s, but kubegpu_gpu_operator.service_monitor is %s; both set "
                "the ClusterPolicy's dcgmExporter.serviceMonitor.enabled, so set them alike"
                % (str(wanted).lower(), str(operator).lower())]
    return []


def _driver_mode(variables):
    """Pools that name a driver need the gpu_operator stage to put the operator in NVIDIADriver mode: refused here,
    before the gpu_operator stage writes, rather than by the node_pools stage after it (docs/gpu-operator.md)."""
    driver = (variables.get("kubegpu_gpu_operator") or {}).get("driver") or {}
    pools = [p.get("name") for p in variables.get("kubegpu_node_pools") or []
             if isinstance(p, dict) and p.get("driver") is not None]
    if pools and not as_bool(driver.get("per_node_pool", False)):
        return ["kubegpu_gpu_operator.driver.per_node_pool: false, but pool%s %s of kubegpu_node_pools name%s a driver; "
                "the GPU Operator reads NVIDIADriver objects only in NVIDIADriver mode: set per_node_pool: true, or "
                "remove the pools' driver" % ("s" if len(pools) > 1 else "", ", ".join("'%s'" % p for p in pools),
                                              "" if len(pools) > 1 else "s")]
    return []


_STAGE_CHECKS = {
    "kubegpu_monitoring": monitoring_settings.settings_problems,
    "kubegpu_gpu_operator": _gpu_operator_problems,
    "kubegpu_node_pools": _pools_problems,
    "kubegpu_dra": _dra_problems,
    "kubegpu_serving": _serving_problems,
    "kubegpu_tenancy": _tenancy_problems,
}
# Checks across variables, run when every variable they read passed its own: (the variable whose problem it is,
# the variables read, the check).
_CROSS_CHECKS = (
    ("kubegpu_serving", ("kubegpu_node_pools", "kubegpu_dra", "kubegpu_serving"), _serving_placement),
    ("kubegpu_monitoring", ("kubegpu_gpu_operator", "kubegpu_monitoring"), _monitoring_conflict),
    ("kubegpu_gpu_operator", ("kubegpu_gpu_operator", "kubegpu_node_pools"), _driver_mode),
)


def leaf_paths(spec=None, prefix=""):
    """{dotted path: spec entry} of every option of INVENTORY (dicts with options are walked, lists are leaves)."""
    spec = INVENTORY if spec is None else spec
    out = {}
    for key, entry in spec.items():
        path = "%s.%s" % (prefix, key) if prefix else key
        if entry.get("type") == "dict" and entry.get("options") is not None:
            out.update(leaf_paths(entry["options"], path))
        else:
            out[path] = entry
    return out


def spec_at(path):
    """The INVENTORY entry of a dotted path (kubegpu_gpu_operator.nfd.timeout). Raises KeyError."""
    parts = path.split(".")
    spec = INVENTORY[parts[0]]
    for part in parts[1:]:
        spec = spec["options"][part]
    return spec


def describe(errors):
    """The errors as one message, grouped per variable."""
    lines = []
    for name in sorted(errors):
        lines.append("%s:" % name)
        lines.extend("  - %s" % message for message in errors[name])
    return "\n".join(lines)
