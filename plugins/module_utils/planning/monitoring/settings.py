# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubegpu_monitoring: its shape (OPTIONS, which inventory.py's INVENTORY uses) and the checks of its values.

parse_settings takes the variable as the user wrote it (shape already checked by inventory.check_value, or by the
module's argument spec) and returns it with every default filled in, refusing values out of range with the path,
the value and what is valid. Pure.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.suggest import did_you_mean


class MonitoringError(ValueError):
    """kubegpu_monitoring is refused; the message names the key, the value and what is valid."""


# Prometheus' duration syntax (model.ParseDuration): units from largest to smallest, each at most once.
DURATION = re.compile(r"^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$")

# The alert thresholds: key -> (default, minimum, maximum, unit). Durations are Prometheus durations.
THRESHOLDS = {
    "gpu_memory_used_percent": (90, 1, 100, "percent"),
    "gpu_memory_used_for": ("5m", None, None, "duration"),
    "gpu_idle_percent": (20, 1, 100, "percent"),
    "gpu_idle_for": ("10m", None, None, "duration"),
    "gpu_temperature_celsius": (85, 40, 120, "celsius"),
    "gpu_temperature_for": ("5m", None, None, "duration"),
    "xid_errors_for": ("0s", None, None, "duration"),
    "mig_config_failed_for": ("5m", None, None, "duration"),
    "cluster_policy_not_ready_for": ("30m", None, None, "duration"),
    "pods_pending_for": ("10m", None, None, "duration"),
}

# The alerts the stage writes (rules.py builds each; a unit test keeps the two in step).
ALERT_NAMES = ("GPUMemoryAlmostFull", "GPUAllocatedButIdle", "GPUXidError", "GPUTemperatureHigh",
               "GPUMigConfigFailed", "GPUClusterPolicyNotReady", "GPUPodsPending")

OPTIONS = {
    # Where the PrometheusRule goes; empty: the GPU Operator's namespace (on OpenShift labelled for monitoring).
    "namespace": {"type": "str", "default": ""},
    "service_monitor": {"type": "dict", "default": {}, "options": {
        "enabled": {"type": "bool", "default": True},
        "interval": {"type": "str", "default": "15s"},
        "honor_labels": {"type": "bool", "default": False},
        "additional_labels": {"type": "dict", "default": {}},
    }},
    "alerts": {"type": "dict", "default": {}, "options": dict([
        ("enabled", {"type": "bool", "default": True}),
        # Labels of the PrometheusRule, for a Prometheus whose ruleSelector wants some (release: <name>).
        ("labels", {"type": "dict", "default": {}}),
        # Alert names to leave out of the PrometheusRule.
        ("disabled", {"type": "list", "elements": "str", "default": []}),
    ] + [(key, {"type": "int" if unit != "duration" else "str", "default": default})
         for key, (default, dummy, dummy2, unit) in THRESHOLDS.items()])},
    "dashboard": {"type": "dict", "default": {}, "options": {
        "enabled": {"type": "bool", "default": True},
        # Empty: the platform's convention (Kubernetes: Grafana's sidecar label grafana_dashboard=1 in the
        # PrometheusRule's namespace; OpenShift: console.openshift.io/dashboard=true in openshift-config-managed).
        "namespace": {"type": "str", "default": ""},
        "label": {"type": "str", "default": ""},
        "label_value": {"type": "str", "default": ""},
        "annotations": {"type": "dict", "default": {}},
    }},
    "openshift": {"type": "dict", "default": {}, "options": {
        # Label the GPU Operator's namespace openshift.io/cluster-monitoring=true (NVIDIA's OpenShift guide).
        "cluster_monitoring": {"type": "bool", "default": True},
        # Cluster-wide: set enableUserWorkload in openshift-monitoring/cluster-monitoring-config. Only on request.
        "user_workload_monitoring": {"type": "bool", "default": False},
        # NVIDIA's GPU console plugin as its chart (rh-ecosystem-edge/console-plugin-nvidia-gpu) installs it: the
        # Deployment serving it, its Service (certificate from the service CA) and the ConsolePlugin.
        "console_plugin": {"type": "bool", "default": True},
        # The plugin's image; 0.3 serves OpenShift 4.19 and later (0.2.6 before).
        "console_plugin_image": {"type": "str",
                                 "default": "quay.io/edge-infrastructure/console-plugin-nvidia-gpu:release-0.3.0"},
        # Cluster-wide: add the plugin to the console operator's Console "cluster" spec.plugins (kept with the
        # others there), so that every console user sees it. NVIDIA's guide enables it; false leaves the list alone.
        "enable_console_plugin": {"type": "bool", "default": True},
    }},
}

# A Kubernetes label key: optional DNS prefix, then a name of at most 63 characters.
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# An image reference: registry/path[:tag][@digest], no spaces.
IMAGE = re.compile(r"^[a-z0-9][a-z0-9._-]*(:[0-9]+)?(/[a-z0-9._-]+)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$")


def defaults(options=None):
    """The whole variable with every default, as a user who sets nothing gets it."""
    out = {}
    for key, spec in (options or OPTIONS).items():
        if spec.get("options") is not None:
            out[key] = defaults(spec["options"])
        else:
            out[key] = copy.deepcopy(spec.get("default"))
    return out


def _filled(value, options, path):
    value = dict(value or {})
    for key in value:
        if key not in options:
            raise MonitoringError("%s: unknown key '%s'%s; valid: %s"
                                  % (path, key, did_you_mean(key, options), ", ".join(options)))
    out = {}
    for key, spec in options.items():
        given = value.get(key)
        if spec.get("options") is not None:
            out[key] = _filled(given, spec["options"], "%s.%s" % (path, key))
        else:
            out[key] = copy.deepcopy(spec.get("default")) if given is None else given
    return out


def parse_settings(raw, path="kubegpu_monitoring"):
    """kubegpu_monitoring with defaults filled in. Raises MonitoringError naming the first value refused."""
    problems = settings_problems(raw, path)
    if problems:
        raise MonitoringError("; ".join(problems))
    return _normalised(_filled(raw, OPTIONS, path))


def _normalised(settings):
    alerts = settings["alerts"]
    for key, (dummy, dummy2, dummy3, unit) in THRESHOLDS.items():
        alerts[key] = str(alerts[key]) if unit == "duration" else int(alerts[key])
    settings["service_monitor"]["interval"] = str(settings["service_monitor"]["interval"])
    for key in ("enabled", "honor_labels"):
        settings["service_monitor"][key] = _bool(settings["service_monitor"][key])
    for section, keys in (("alerts", ("enabled",)), ("dashboard", ("enabled",)),
                          ("openshift", ("cluster_monitoring", "user_workload_monitoring", "console_plugin",
                                         "enable_console_plugin"))):
        for key in keys:
            settings[section][key] = _bool(settings[section][key])
    return settings


def _bool(value):
    if isinstance(value, str):
        return value.strip().lower() in ("y", "yes", "on", "1", "true", "t")
    return bool(value)


def settings_problems(raw, path="kubegpu_monitoring"):
    """Every value of kubegpu_monitoring that is out of range, each message starting with its path ([] if none)."""
    try:
        settings = _filled(raw, OPTIONS, path)
    except MonitoringError as e:
        return [str(e)]
    problems = []
    alerts = settings["alerts"]
    for key, (dummy, low, high, unit) in THRESHOLDS.items():
        where = "%s.alerts.%s" % (path, key)
        value = alerts[key]
        if unit == "duration":
            if not isinstance(value, str) or not value or not DURATION.match(value):
                problems.append("%s: %r is not a Prometheus duration; valid: e.g. 30s, 5m, 1h30m" % (where, value))
            continue
        try:
            number = int(value)
        except (TypeError, ValueError):
            problems.append("%s: expected an integer, got %r" % (where, value))
            continue
        if isinstance(value, bool) or not low <= number <= high:
            problems.append("%s: %r is out of range; valid: %d to %d (%s)" % (where, value, low, high, unit))
    for name in alerts["disabled"] or []:
        if name not in ALERT_NAMES:
            problems.append("%s.alerts.disabled: '%s' is not an alert of this collection%s; valid: %s"
                            % (path, name, did_you_mean(name, ALERT_NAMES), ", ".join(ALERT_NAMES)))
    interval = settings["service_monitor"]["interval"]
    if not isinstance(interval, str) or not interval or interval == "0" or not DURATION.match(interval):
        problems.append("%s.service_monitor.interval: %r is not a Prometheus duration; valid: e.g. 15s, 1m"
                        % (path, interval))
    for section, key in (("service_monitor", "additional_labels"), ("alerts", "labels")):
        problems.extend(_label_problems("%s.%s.%s" % (path, section, key), settings[section][key] or {}))
    for section in ("dashboard",):
        namespace = settings[section]["namespace"]
        if namespace and not NAMESPACE.match(namespace):
            problems.append("%s.%s.namespace: %r is not a namespace name (lowercase letters, digits and -)"
                            % (path, section, namespace))
        label, value = settings[section]["label"], settings[section]["label_value"]
        problems.extend(_label_problems("%s.%s.label" % (path, section), {label: value} if label else {}))
        if value and not label:
            problems.append("%s.%s.label_value: set with no label; set dashboard.label too" % (path, section))
    image = settings["openshift"]["console_plugin_image"]
    if not isinstance(image, str) or not IMAGE.match(image):
        problems.append("%s.openshift.console_plugin_image: %r is not an image reference; valid: e.g. "
                        "quay.io/edge-infrastructure/console-plugin-nvidia-gpu:release-0.3.0" % (path, image))
    namespace = settings["namespace"]
    if namespace and not NAMESPACE.match(namespace):
        problems.append("%s.namespace: %r is not a namespace name (lowercase letters, digits and -)" % (path, namespace))
    return problems


def _label_problems(where, labels):
    problems = []
    for key in sorted(labels, key=str):
        value = labels[key]
        if not isinstance(key, str) or not LABEL_KEY.match(key):
            problems.append("%s: %r is not a valid label key" % (where, key))
        elif not isinstance(value, str) or not LABEL_VALUE.match(value):
            problems.append("%s: %s: %r is not a valid label value (a string of at most 63 letters, digits, -, _ "
                            "and .; quote true, 1...)" % (where, key, value))
    return problems
