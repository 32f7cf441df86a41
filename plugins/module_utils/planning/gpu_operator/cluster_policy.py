# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator's ClusterPolicy and NVIDIADriver objects: base, user settings, and what is refused.

The desired ClusterPolicy spec is a base deep-merged with the user's settings (upstream field names):
on OpenShift the base is the ClusterPolicy of the installed CSV's alm-examples (an empty spec fails, and OLM never
updates the policy on upgrade, so the collection reconciles it); on Kubernetes it is what the Helm chart renders
from its default values. Dead fields and enum values the operator would reject or ignore are refused before
anything is written (shared/reference/gpu-operator.md). Pure: plain dicts in, plain dicts out.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.objects import merged as deep_merge
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.olm import csv_version, version_key
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.suggest import did_you_mean

CLUSTER_POLICY_API = "nvidia.com/v1"
NVIDIA_DRIVER_API = "nvidia.com/v1alpha1"
OPENSHIFT_DEFAULT_NAME = "gpu-cluster-policy"   # alm-examples of gpu-operator-certified
KUBERNETES_DEFAULT_NAME = "cluster-policy"      # the Helm chart's
OLM_PACKAGE = "gpu-operator-certified"

# Values of the upstream Helm chart (deployments/gpu-operator/values.yaml, v26.7.0, commit a22dbf6) that
# reach the ClusterPolicy: reference "Vanilla k8s (Helm)" plus the `enabled` switches of the sections the CRD
# requires. Images, probes and resources are left out: the chart sets them and they are not ours to reconcile.
# Keys that only steer the chart (nfd, nvidiaDriverCRD.deployDefaultCR/driverType/nodeSelector, config.create,
# config.data) are mapped or dropped by `chart_spec`, as the chart's templates/clusterpolicy.yaml does.
CHART_VALUES = {
    "nfd": {"enabled": True},
    "psa": {"enabled": False},
    "cdi": {"enabled": True, "nriPluginEnabled": False},
    "sandboxWorkloads": {"enabled": False, "defaultWorkload": "container"},
    "daemonsets": {"priorityClassName": "system-node-critical", "updateStrategy": "RollingUpdate",
                   "rollingUpdate": {"maxUnavailable": "1"},
                   "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    "operator": {},
    "mig": {"strategy": "single"},
    "driver": {
        "enabled": True,
        "nvidiaDriverCRD": {"enabled": False, "deployDefaultCR": True, "driverType": "gpu", "nodeSelector": {}},
        "kernelModuleType": "auto",
        "usePrecompiled": False,
        "rdma": {"enabled": False, "useHostMofed": False},
        "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%"},
    },
    "toolkit": {"enabled": True},
    "devicePlugin": {"enabled": True, "config": {"create": False, "name": "", "default": "", "data": {}}},
    "dcgm": {"enabled": False},
    "dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": True}},
    "gfd": {"enabled": True},
    "migManager": {"enabled": True, "config": {"default": "all-disabled", "create": False, "name": "", "data": {}}},
    "nodeStatusExporter": {"enabled": False},
    "gds": {"enabled": False},
    "gdrcopy": {"enabled": False},
    "vgpuManager": {"enabled": False},
    "vgpuDeviceManager": {"enabled": True},
    "vfioManager": {"enabled": True},
    "sandboxDevicePlugin": {"enabled": True},
}

# api/nvidia/v1/clusterpolicy_types.go v26.7.0
SECTIONS = ("operator", "daemonsets", "driver", "toolkit", "devicePlugin", "dcgmExporter", "dcgm",
            "nodeStatusExporter", "gfd", "mig", "migManager", "psp", "psa", "validator", "gds", "gdrcopy",
            "sandboxWorkloads", "vfioManager", "sandboxDevicePlugin", "vgpuManager", "vgpuDeviceManager", "cdi",
            "kataManager", "ccManager", "hostPaths", "kataSandboxDevicePlugin")

# Fields the operator no longer reads: path -> what to use instead.
DEAD_FIELDS = {
    "cdi.default": "cdi.enabled (CDI is on by default since v25.10)",
    "operator.defaultRuntime": "nothing: the operator detects the container runtime itself",
    "driver.useOpenKernelModules": "driver.kernelModuleType: open, proprietary or auto (ignored since v25.3)",
}

POLICY_ENUMS = {
    "driver.kernelModuleType": ("auto", "open", "proprietary"),
    "mig.strategy": ("none", "single", "mixed"),
    "sandboxWorkloads.defaultWorkload": ("container", "vm-passthrough", "vm-vgpu"),
}
DRIVER_ENUMS = {
    "driverType": ("gpu", "vgpu", "vgpu-host-manager"),
    "kernelModuleType": ("auto", "open", "proprietary"),
}
# NVIDIADriver fields the CRD declares immutable (x-kubernetes-validations self == oldSelf), with their defaults.
IMMUTABLE_DRIVER_FIELDS = {"driverType": "gpu", "usePrecompiled": False}

# Set by other stages (gpu_node_pools points them at its ConfigMaps; the dra stage adds its entry to the driver
# manager's env): kept as the cluster has them unless the task's settings name them, so that the stages never
# undo each other.
KEEP_LIVE_DEFAULT = ("devicePlugin.config", "migManager.config", "driver.manager.env")


class PolicyError(Exception):
    """The desired policy is refused; the message names the field, the value, what is valid and what to do."""


def get_path(obj, path, default=None):
    """obj['a']['b'] for path 'a.b', or default when any step is missing."""
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return default
        obj = obj[key]
    return obj


def has_path(obj, path):
    marker = object()
    return get_path(obj, path, marker) is not marker


def set_path(obj, path, value):
    keys = path.split(".")
    for key in keys[:-1]:
        obj = obj.setdefault(key, {})
    obj[keys[-1]] = copy.deepcopy(value)


def drop_path(obj, path):
    keys = path.split(".")
    parent = get_path(obj, ".".join(keys[:-1])) if len(keys) > 1 else obj
    if isinstance(parent, dict):
        parent.pop(keys[-1], None)


def chart_spec(values=None):
    """The ClusterPolicy spec the Helm chart renders from `values` (default: CHART_VALUES)."""
    values = copy.deepcopy(CHART_VALUES if values is None else values)
    values.pop("nfd", None)
    driver = values.get("driver") or {}
    crd = driver.pop("nvidiaDriverCRD", None) or {}
    driver["useNvidiaDriverCRD"] = bool(crd.get("enabled"))
    if driver["useNvidiaDriverCRD"]:  # the chart leaves these to the NVIDIADriver CRs
        driver.pop("kernelModuleType", None)
        driver.pop("usePrecompiled", None)
    for section in ("devicePlugin", "migManager"):
        config = (values.get(section) or {}).get("config")
        if isinstance(config, dict):
            config.pop("create", None)
            config.pop("data", None)
            if section == "migManager" and not config.get("name"):
                config.pop("name", None)
    cdi = values.get("cdi") or {}
    if not (cdi.get("enabled") and cdi.get("nriPluginEnabled")):
        cdi.pop("nriPluginEnabled", None)
    return values


def alm_examples(csv):
    """The alm-examples annotation of a CSV, parsed. Raises PolicyError naming the CSV when it is absent or broken."""
    meta = csv.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get("alm-examples")
    if not raw:
        raise PolicyError("ClusterServiceVersion {0}/{1} has no alm-examples annotation: cannot build the "
                          "ClusterPolicy from it; pass the full spec in settings".format(meta.get("namespace"),
                                                                                         meta.get("name")))
    try:
        examples = json.loads(raw)
    except ValueError as e:
        raise PolicyError("ClusterServiceVersion {0}/{1}: alm-examples is not valid JSON ({2})".format(
            meta.get("namespace"), meta.get("name"), e))
    if not isinstance(examples, list):
        raise PolicyError("ClusterServiceVersion {0}/{1}: alm-examples is not a list of objects".format(
            meta.get("namespace"), meta.get("name")))
    return examples


def example_of(csv, kind):
    """(name, spec) of the first alm-examples entry of `kind`, or raises PolicyError."""
    for example in alm_examples(csv):
        if isinstance(example, dict) and example.get("kind") == kind:
            return (example.get("metadata") or {}).get("name"), copy.deepcopy(example.get("spec") or {})
    meta = csv.get("metadata") or {}
    raise PolicyError("ClusterServiceVersion {0}/{1}: alm-examples has no {2} entry".format(
        meta.get("namespace"), meta.get("name"), kind))


def pick_operator_csv(csvs):
    """The GPU Operator CSV among a namespace's CSVs: Succeeded first, then the newest version; None if none."""
    mine = [c for c in csvs if c["metadata"]["name"].startswith(OLM_PACKAGE + ".")]
    if not mine:
        return None

    def key(c):
        version = (c.get("spec") or {}).get("version") or csv_version(c["metadata"]["name"])
        return ((c.get("status") or {}).get("phase") == "Succeeded"), version_key(version)
    return sorted(mine, key=key)[-1]


def strip_dead_fields(spec):
    """A copy of spec without the dead fields, and a warning for each one removed (old alm-examples carry them)."""
    out = copy.deepcopy(spec)
    warnings = []
    for path, instead in sorted(DEAD_FIELDS.items()):
        if has_path(out, path):
            drop_path(out, path)
            warnings.append("base ClusterPolicy: dropped {0}, which the operator ignores (use {1})".format(path, instead))
    return out, warnings


def settings_problems(settings, prefix="settings."):
    """Every reason to refuse settings (unknown sections, non-mapping sections, dead fields), each naming
    prefix + the field, the value and what is valid; [] when none."""
    if not isinstance(settings, dict):
        return ["{0}: must be a mapping of ClusterPolicy spec sections (e.g. cdi: {{enabled: true}}), got "
                "{1!r}".format(prefix.rstrip("."), settings)]
    problems = []
    for key in sorted(settings, key=str):
        if key not in SECTIONS:
            problems.append("{0}{1}: not a ClusterPolicy spec section (the API server would drop it){2}; valid: "
                            "{3}".format(prefix, key, did_you_mean(key, SECTIONS), ", ".join(sorted(SECTIONS))))
        elif settings[key] is not None and not isinstance(settings[key], dict):
            problems.append("{0}{1}: must be a mapping of its fields (e.g. {1}: {{enabled: true}}), got "
                            "{2!r}".format(prefix, key, settings[key]))
    for path, instead in sorted(DEAD_FIELDS.items()):
        if has_path(settings, path):
            problems.append("{0}{1}: dead field, the operator ignores it ({1}: {2!r}); use {3}".format(
                prefix, path, get_path(settings, path), instead))
    return problems


_SCHEMA_TYPES = {"boolean": (bool,), "integer": (int,), "string": (str,), "object": (dict,), "array": (list,)}
_SCHEMA_WORDS = {"boolean": "true or false", "integer": "an integer", "string": "a string", "object": "a mapping",
                 "array": "a list"}


def schema_problems(value, schema, prefix):
    """Fields of value the ClusterPolicy CRD's schema (openAPIV3Schema of spec) does not declare, and values of
    the wrong type, each naming prefix + the field, the closest declared field and what is valid.

    The API server prunes undeclared fields without a word, so a misspelt field (driver.enabeld) would be dropped
    silently. A null value (which removes a field of the base) and schemas that keep unknown fields are passed.
    """
    problems = []
    if value is None or not isinstance(schema, dict):
        return problems
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        kind = None
    if kind in _SCHEMA_TYPES:
        wrong = not isinstance(value, _SCHEMA_TYPES[kind]) or (kind == "integer" and isinstance(value, bool))
        if wrong:
            return ["{0}: expected {1}, got {2!r}".format(prefix.rstrip("."), _SCHEMA_WORDS[kind], value)]
    if isinstance(value, dict) and "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        properties = schema["properties"]
        for key in sorted(value, key=str):
            if key not in properties:
                problems.append("{0}{1}: not a field of the ClusterPolicy (the API server would drop it){2}; valid: "
                                "{3}".format(prefix, key, did_you_mean(key, properties), ", ".join(sorted(properties))))
            else:
                problems.extend(schema_problems(value[key], properties[key], "{0}{1}.".format(prefix, key)))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            problems.extend(schema_problems(item, schema["items"], "{0}[{1}].".format(prefix.rstrip("."), index)))
    return problems


def spec_schema(crd):
    """The openAPIV3Schema of spec in a ClusterPolicy CustomResourceDefinition (its first served version), or None."""
    for version in ((crd or {}).get("spec") or {}).get("versions") or []:
        if version.get("served"):
            schema = ((version.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {}
            return schema.get("spec")
    return None


def as_stored(value, schema):
    """value as the API server stores it where that is ours to foresee: each list item with the CRD's defaults of
    the fields it leaves out.

    A list is compared and sent whole, and the API server defaults the fields of its items: without this, an item
    field the user never set (dcgmExporter.serviceMonitor.relabelings[].action, default replace) would differ on
    every run and be written on every run. A field absent from a mapping is left absent: it is not compared (the
    live cdi.default the CRD defaults to false is no drift), and a null in the settings already removed it from
    what is sent (objects.merged), so the API server's default takes its place without a difference.
    """
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        return dict((k, as_stored(v, properties.get(k))) for k, v in value.items())
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_filled(item, schema["items"]) for item in value]
    return value


def _filled(value, schema):
    """A list item as stored: as_stored, plus the defaults of the fields it leaves out (at any depth it has)."""
    value = as_stored(value, schema)
    if isinstance(value, dict):
        for key, prop in sorted((schema.get("properties") or {}).items()):
            if key not in value and isinstance(prop, dict) and "default" in prop:
                value[key] = copy.deepcopy(prop["default"])
            elif isinstance(value.get(key), dict):
                value[key] = _filled(value[key], prop)
    return value


def check_settings(settings):
    """Refuse settings the operator would ignore or that are not ClusterPolicy spec sections. Raises PolicyError."""
    problems = settings_problems(settings)
    if problems:
        raise PolicyError("; ".join(problems))


def enum_problems(spec, enums, prefix):
    """Enum values the CRD would reject, each naming prefix + field, the value and the valid values."""
    return ["{0}{1}: {2!r} is not valid; valid: {3}".format(prefix, path, get_path(spec, path), ", ".join(valid))
            for path, valid in sorted(enums.items()) if has_path(spec, path) and get_path(spec, path) not in valid]


def check_enums(spec, enums, prefix):
    """Refuse enum values the CRD would reject, naming field, value and the valid values. Raises PolicyError."""
    problems = enum_problems(spec, enums, prefix)
    if problems:
        raise PolicyError("; ".join(problems))


def desired_spec(base, settings, live_spec=None, keep_live=KEEP_LIVE_DEFAULT, schema=None):
    """The full ClusterPolicy spec to apply, and warnings. Raises PolicyError before anything is written.

    base deep-merged with settings; for each keep_live path the settings do not name, the live value (when the live
    policy has one) wins over the base, so fields another stage owns are carried, not reset. With the CRD's schema
    of spec, the result is as the API server will store it (as_stored), so that its defaults are never drift.
    """
    settings = settings or {}
    check_settings(settings)
    base, warnings = strip_dead_fields(base or {})
    spec = deep_merge(base, settings)
    for path in keep_live or ():
        if not has_path(settings, path) and has_path(live_spec or {}, path):
            set_path(spec, path, get_path(live_spec, path))
    if schema is not None:
        spec = as_stored(spec, schema)
    check_enums(spec, POLICY_ENUMS, "spec.")
    return spec, warnings


def policy_object(name, spec):
    return {"apiVersion": CLUSTER_POLICY_API, "kind": "ClusterPolicy", "metadata": {"name": name}, "spec": spec}


def check_single_policy(policies, name):
    """The GPU Operator reconciles one ClusterPolicy (others go `ignored`): refuse to create a second one."""
    others = sorted(p["metadata"]["name"] for p in policies if p["metadata"]["name"] != name)
    if others and not any(p["metadata"]["name"] == name for p in policies):
        raise PolicyError("ClusterPolicy {0} already exists and the GPU Operator reconciles only one (a second is set "
                          "to state ignored): set name: {0} to manage it, or delete it first".format(others[0]))


# -- NVIDIADriver


def driver_objects(drivers, spec):
    """NVIDIADriver objects for the `nvidia_drivers` option. Raises PolicyError on bad entries."""
    if not drivers:
        return []
    if not get_path(spec, "driver.useNvidiaDriverCRD"):
        raise PolicyError("nvidia_drivers needs settings.driver.useNvidiaDriverCRD: true; without it the operator "
                          "ignores NVIDIADriver objects and installs the driver from the ClusterPolicy")
    out, seen = [], set()
    for i, entry in enumerate(drivers):
        name = (entry or {}).get("name")
        if not name:
            raise PolicyError("nvidia_drivers[{0}]: name is required".format(i))
        if name in seen:
            raise PolicyError("nvidia_drivers: {0} is listed twice".format(name))
        seen.add(name)
        dspec = entry.get("spec") or {}
        if not isinstance(dspec, dict):
            raise PolicyError("nvidia_drivers[{0}] ({1}): spec must be a mapping, got {2!r}".format(i, name, dspec))
        if "useOpenKernelModules" in dspec:
            raise PolicyError("NVIDIADriver {0}: spec.useOpenKernelModules is a dead field; use spec.kernelModuleType: "
                              "open, proprietary or auto".format(name))
        check_enums(dspec, DRIVER_ENUMS, "NVIDIADriver {0}: spec.".format(name))
        out.append({"apiVersion": NVIDIA_DRIVER_API, "kind": "NVIDIADriver", "metadata": {"name": name},
                    "spec": copy.deepcopy(dspec)})
    return out


def immutable_changes(desired, current):
    """Immutable NVIDIADriver fields the desired object would change on the live one: [(field, live, wanted)]."""
    if current is None:
        return []
    out = []
    for field, default in sorted(IMMUTABLE_DRIVER_FIELDS.items()):
        if field not in desired.get("spec", {}):
            continue
        live = (current.get("spec") or {}).get(field, default)
        if desired["spec"][field] != live:
            out.append((field, live, desired["spec"][field]))
    return out


def check_immutable(desired_drivers, current_drivers):
    """Refuse changes to immutable NVIDIADriver fields, explaining what to do. Raises PolicyError."""
    problems = []
    for obj in desired_drivers:
        name = obj["metadata"]["name"]
        for field, live, wanted in immutable_changes(obj, current_drivers.get(name)):
            problems.append("NVIDIADriver {0}: spec.{1} is {2!r}, the task wants {3!r}".format(name, field, live, wanted))
    if problems:
        raise PolicyError("; ".join(problems) + ". driverType and usePrecompiled are immutable upstream: delete the "
                          "NVIDIADriver and let this task create it again, which rebuilds the driver on the nodes it "
                          "selects (their GPU workloads stop meanwhile)")


# -- comparing and describing


def policy_status(obj):
    """(state, conditions as type/status/reason/message) of a ClusterPolicy or NVIDIADriver."""
    status = (obj or {}).get("status") or {}
    return status.get("state"), [dict((k, c.get(k)) for k in ("type", "status", "reason", "message"))
                                 for c in status.get("conditions") or []]
