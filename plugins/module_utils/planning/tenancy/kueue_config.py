# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What Kueue's own configuration must say for the DRA quotas here to count (docs/tenancy.md, "What Kueue counts").

Kueue counts a pod's ResourceClaims against a ClusterQueue only through resources.deviceClassMappings of its
Configuration: a claim of DeviceClass c is charged to the resource name of the mapping that lists c. The quotas of
DRA pools are written in gpu.nvidia.com (quotas.DRA_RESOURCE), so one mapping of that name lists the NVIDIA driver's
whole-GPU class (gpu.nvidia.com) and the claim templates' classes (kubegpu-<template>). Kueue's KueueDRAIntegration
feature gate (so named since Kueue 0.18, beta and on by default there) needs nothing more on the pinned chart.

    device_class_mappings(capacity, templates) -> ([{"name", "deviceClassNames"}], [warning])
    chart_values(values, mappings) -> the chart's values with managerConfig.controllerManagerConfigYaml carrying them
    operand_resources(mappings) -> spec.config.resources of the Red Hat build's Kueue CR, or None
    configured_mappings(text_or_dict) -> the mappings of a Configuration (YAML text or dict)
    missing_classes(mappings, configured) -> [class names not mapped onto the quota's resource]
    missing_warning(mappings, missing, where) -> str
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

try:
    import yaml
    YAML_IMPORT_ERROR = None
except ImportError as exc:  # modules report it with missing_required_lib
    yaml = None
    YAML_IMPORT_ERROR = exc

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.device_plugin_config import DRA
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DRA_DRIVER
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.quotas import DRA_RESOURCE

# The Red Hat build's operand (kueue.openshift.io/v1 Kueue) takes at most 8 classes per mapping.
MAX_CLASSES = 8
CONFIG_KEY = "controller_manager_config.yaml"      # the chart's manager ConfigMap key
MANAGER_CONFIGMAP = "%s-manager-config"           # the chart's ConfigMap, by release name (fullname)
# The chart (0.19.2) takes the whole Configuration as one YAML text (managerConfig.controllerManagerConfigYaml): a
# mapping cannot be added alone. When the user gives no text, this one is written: the chart's own default settings
# (probes, metrics, webhook port, leader election, client rates, integrations) with the mappings added.
CHART_CONFIGURATION = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "health": {"healthProbeBindAddress": ":8081"},
    "metrics": {"bindAddress": ":8443"},
    "webhook": {"port": 9443},
    "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
    "controller": {"groupKindConcurrency": {"Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10,
                                            "LocalQueue.kueue.x-k8s.io": 5, "ClusterQueue.kueue.x-k8s.io": 5,
                                            "ResourceFlavor.kueue.x-k8s.io": 1}},
    "clientConnection": {"qps": 300, "burst": 500},
    "integrations": {"frameworks": ["batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/rayservice",
                                    "ray.io/raycluster", "jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper",
                                    "trainer.kubeflow.org/trainjob", "pod", "deployment", "statefulset",
                                    "leaderworkerset.x-k8s.io/leaderworkerset"]},
}


def device_class_mappings(capacity, templates):
    """The mapping Kueue needs when a DRA pool has GPUs: gpu.nvidia.com's class and the claim templates' classes
    onto the quota's resource name. A MIG template's device counts as one device of the quota, as Kueue counts DRA
    devices by number (it does not count partitions of a GPU yet)."""
    if not any(pool.get("strategy") == DRA and pool.get("resources") for pool in capacity.values()):
        return [], []
    names = [DRA_DRIVER] + sorted(template.class_name for template in templates or [])
    warnings = []
    if len(names) > MAX_CLASSES:
        warnings.append("Kueue takes at most %d DeviceClasses per resource name: claims of %s are not counted against "
                        "the %s quotas and stay queued; use fewer claim templates"
                        % (MAX_CLASSES, ", ".join(names[MAX_CLASSES:]), DRA_RESOURCE))
        names = names[:MAX_CLASSES]
    return [{"name": DRA_RESOURCE, "deviceClassNames": names}], warnings


def _merge(existing, mappings):
    """existing mappings without ours (by name or by class), then ours."""
    ours = set(m["name"] for m in mappings)
    classes = set(c for m in mappings for c in m["deviceClassNames"])
    kept = []
    for entry in existing or []:
        if not isinstance(entry, Mapping) or entry.get("name") in ours:
            continue
        left = [c for c in entry.get("deviceClassNames") or [] if c not in classes]
        if left:
            kept.append(dict(entry, deviceClassNames=left))
    return kept + [dict(m, deviceClassNames=list(m["deviceClassNames"])) for m in mappings]


def chart_values(values, mappings):
    """The chart's values: unchanged without mappings, else managerConfig.controllerManagerConfigYaml (the user's
    own text, or CHART_CONFIGURATION) with resources.deviceClassMappings carrying them."""
    values = dict(values or {})
    if not mappings:
        return values
    manager = dict(values.get("managerConfig") or {})
    text = manager.get("controllerManagerConfigYaml")
    config = yaml.safe_load(text) if text else None
    config = dict(config) if isinstance(config, Mapping) else dict(CHART_CONFIGURATION)
    resources = dict(config.get("resources") or {})
    resources["deviceClassMappings"] = _merge(resources.get("deviceClassMappings"), mappings)
    config["resources"] = resources
    manager["controllerManagerConfigYaml"] = yaml.safe_dump(config, default_flow_style=False, sort_keys=False)
    values["managerConfig"] = manager
    return values


def operand_resources(mappings):
    """spec.config.resources of the Kueue CR (kueue.openshift.io/v1), None without mappings."""
    if not mappings:
        return None
    return {"deviceClassMappings": [dict(m, deviceClassNames=list(m["deviceClassNames"])) for m in mappings]}


def configured_mappings(config):
    """resources.deviceClassMappings of a Configuration, given as YAML text or as a dict; [] when none."""
    if isinstance(config, str):
        try:
            config = yaml.safe_load(config)
        except yaml.YAMLError:
            return []
    if not isinstance(config, Mapping):
        return []
    found = (config.get("resources") or {}).get("deviceClassMappings") or []
    return [m for m in found if isinstance(m, Mapping)]


def missing_classes(mappings, configured):
    """The classes of mappings that configured does not map onto the same resource name."""
    mapped = set((m.get("name"), c) for m in configured for c in m.get("deviceClassNames") or [])
    return [c for m in mappings for c in m["deviceClassNames"] if (m["name"], c) not in mapped]


def missing_warning(mappings, missing, where):
    """What the user must add to a Kueue the collection did not configure (a class may be in one mapping only, so
    the entry lists every class)."""
    entries = "; ".join("{name: %s, deviceClassNames: [%s]}" % (m["name"], ", ".join(m["deviceClassNames"]))
                        for m in mappings)
    return ("Kueue does not count DRA claims of DeviceClass %s against the %s quotas, so workloads that ask for them "
            "stay queued: set %s resources.deviceClassMappings to hold %s"
            % (", ".join(missing), DRA_RESOURCE, where, entries))
