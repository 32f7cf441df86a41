# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every object the monitoring stage writes, planned from kubegpu_monitoring, the platform and what the cluster has.

- the ClusterPolicy's spec.dcgmExporter.serviceMonitor (enabled, interval, honorLabels, additionalLabels): the GPU
  Operator then creates the DCGM exporter's ServiceMonitor itself. Written as a partial object with the stage's own
  field manager, like the node-pools stage's devicePlugin.config, so the gpu_operator stage's apply (which names
  only serviceMonitor.enabled) never removes the other fields;
- OpenShift: the label openshift.io/cluster-monitoring=true on the GPU Operator's namespace (the platform Prometheus
  then scrapes the exporter and evaluates the PrometheusRule there), and on request only the cluster-wide
  enableUserWorkload of openshift-monitoring/cluster-monitoring-config; NVIDIA's GPU console plugin as its chart
  installs it (Deployment, Service with a service-CA certificate, ConsolePlugin) and its name added to the console
  operator's Console "cluster" spec.plugins (console_plugins: the list with it, the user's other plugins kept);
- the PrometheusRule of rules.py;
- the dashboard ConfigMap of dashboard.py (Grafana's sidecar label on Kubernetes; the console's dashboard label in
  openshift-config-managed on OpenShift).
Pure: plain dicts in, plain dicts out.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    import yaml
    YAML_IMPORT_ERROR = None
except ImportError as exc:  # the module reports it with missing_required_lib
    yaml = None
    YAML_IMPORT_ERROR = exc

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.dashboard import dashboard_json
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.rules import rule_groups
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.settings import defaults
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    GRAFANA_DASHBOARD_LABEL,
    MANAGED_BY,
    MONITORING_LABEL,
    NAME_PREFIX,
    OPENSHIFT,
    OPENSHIFT_CLUSTER_MONITORING_LABEL,
    OPENSHIFT_CONSOLE_DASHBOARD_LABEL,
    OPENSHIFT_CONSOLE_DASHBOARD_NAMESPACE,
    OPENSHIFT_CONSOLE_OPERATOR_API,
    OPENSHIFT_CONSOLE_OPERATOR_NAME,
    OPENSHIFT_MONITORING_CONFIGMAP,
    OPENSHIFT_MONITORING_NAMESPACE,
    OPENSHIFT_SERVING_CERT_ANNOTATION,
)

PROMETHEUS_RULE_API = "monitoring.coreos.com/v1"
CONSOLE_PLUGIN_API = "console.openshift.io/v1"
RULE_NAME = NAME_PREFIX + "gpu-alerts"
DASHBOARD_NAME = NAME_PREFIX + "gpu-dashboard"
DASHBOARD_KEY = "kubegpu-gpu.json"
# NVIDIA's console plugin as its chart (rh-ecosystem-edge/console-plugin-nvidia-gpu) names it and serves it.
CONSOLE_PLUGIN_NAME = "console-plugin-nvidia-gpu"
CONSOLE_PLUGIN_PORT = 9443
# The Secret OpenShift's service CA fills with the Service's serving certificate; nginx in the image reads it here.
CONSOLE_PLUGIN_CERT_SECRET = CONSOLE_PLUGIN_NAME + "-serving-cert"
CONSOLE_PLUGIN_CERT_PATH = "/var/serving-cert"
ALERTS, DASHBOARD, CONSOLE_PLUGIN = "alerts", "dashboard", "console-plugin"
# The kinds the stage creates and prunes (by MANAGED_BY and MONITORING_LABEL).
OWNED = ((PROMETHEUS_RULE_API, "PrometheusRule"), ("v1", "ConfigMap"), (CONSOLE_PLUGIN_API, "ConsolePlugin"),
         ("apps/v1", "Deployment"), ("v1", "Service"))


def _labels(role, extra=None):
    labels = dict(MANAGED_BY)
    labels[MONITORING_LABEL] = role
    labels.update(extra or {})
    return labels


def service_monitor_spec(settings):
    """spec.dcgmExporter.serviceMonitor in the ClusterPolicy's field names."""
    sm = settings["service_monitor"]
    return {"enabled": sm["enabled"], "interval": sm["interval"], "honorLabels": sm["honor_labels"],
            "additionalLabels": dict((str(k), str(v)) for k, v in (sm["additional_labels"] or {}).items())}


def prometheus_rule(settings, namespace, pools=()):
    return {"apiVersion": PROMETHEUS_RULE_API, "kind": "PrometheusRule",
            "metadata": {"name": RULE_NAME, "namespace": namespace,
                         "labels": _labels(ALERTS, settings["alerts"]["labels"])},
            "spec": {"groups": rule_groups(settings, pools)}}


def dashboard_configmap(settings, platform, namespace, pools=()):
    d = settings["dashboard"]
    if platform == OPENSHIFT:
        label, value, where = OPENSHIFT_CONSOLE_DASHBOARD_LABEL, "true", OPENSHIFT_CONSOLE_DASHBOARD_NAMESPACE
    else:
        label, value, where = GRAFANA_DASHBOARD_LABEL, "1", namespace
    label, value, where = d["label"] or label, d["label_value"] or value, d["namespace"] or where
    metadata = {"name": DASHBOARD_NAME, "namespace": where, "labels": _labels(DASHBOARD, {label: value})}
    if d["annotations"]:
        metadata["annotations"] = dict((str(k), str(v)) for k, v in d["annotations"].items())
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": {DASHBOARD_KEY: dashboard_json(settings, pools)}}


def console_plugin(namespace):
    return {"apiVersion": CONSOLE_PLUGIN_API, "kind": "ConsolePlugin",
            "metadata": {"name": CONSOLE_PLUGIN_NAME, "labels": _labels(CONSOLE_PLUGIN)},
            "spec": {"displayName": "NVIDIA GPU", "backend": {"type": "Service", "service": {
                "name": CONSOLE_PLUGIN_NAME, "namespace": namespace, "port": CONSOLE_PLUGIN_PORT, "basePath": "/"}}}}


def console_plugin_service(namespace):
    """The Service the ConsolePlugin points at; its annotation makes the service CA issue its TLS Secret."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": CONSOLE_PLUGIN_NAME, "namespace": namespace, "labels": _labels(CONSOLE_PLUGIN),
                         "annotations": {OPENSHIFT_SERVING_CERT_ANNOTATION: CONSOLE_PLUGIN_CERT_SECRET}},
            "spec": {"type": "ClusterIP", "selector": _labels(CONSOLE_PLUGIN),
                     "ports": [{"name": "%d-tcp" % CONSOLE_PLUGIN_PORT, "protocol": "TCP",
                                "port": CONSOLE_PLUGIN_PORT, "targetPort": CONSOLE_PLUGIN_PORT}]}}


def console_plugin_deployment(namespace, image):
    """The plugin's nginx (its configuration is in the image: TLS on 9443 from CONSOLE_PLUGIN_CERT_PATH)."""
    labels = _labels(CONSOLE_PLUGIN)
    # Lists are compared whole (planning/objects.py), so the container names the fields the API server defaults.
    container = {
        "name": CONSOLE_PLUGIN_NAME, "image": image, "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "ports": [{"containerPort": CONSOLE_PLUGIN_PORT, "protocol": "TCP"}],
        # OpenShift's restricted-v2 SCC and the restricted pod security level both accept this.
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "plugin-serving-cert", "mountPath": CONSOLE_PLUGIN_CERT_PATH, "readOnly": True}],
        "resources": {"requests": {"cpu": "10m", "memory": "50Mi"}},
    }
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": CONSOLE_PLUGIN_NAME, "namespace": namespace, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": dict(labels)},
                     "template": {"metadata": {"labels": dict(labels)}, "spec": {
                         "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                         "containers": [container],
                         "volumes": [{"name": "plugin-serving-cert",
                                      "secret": {"secretName": CONSOLE_PLUGIN_CERT_SECRET, "defaultMode": 420}}]}}}}


def console_plugins(live_console, enable=True):
    """The console operator's Console spec.plugins with NVIDIA's plugin added (enable) or taken out (not enable),
    every other plugin kept in its place; None when the list already says so. The list is atomic for server-side
    apply, so it is written whole, read-modify-write."""
    plugins = list(((live_console or {}).get("spec") or {}).get("plugins") or [])
    if enable:
        return None if CONSOLE_PLUGIN_NAME in plugins else plugins + [CONSOLE_PLUGIN_NAME]
    return [p for p in plugins if p != CONSOLE_PLUGIN_NAME] if CONSOLE_PLUGIN_NAME in plugins else None


def set_console_plugins(live_console, enable):
    """Change the live Console in place: NVIDIA's plugin added to (enable) or taken out of spec.plugins, the user's
    plugins kept; an emptied list goes as a field, as a Console without plugins has it. Returns whether it changed
    (the mutation of a read-modify-write)."""
    plugins = console_plugins(live_console, enable)
    if plugins is None:
        return False
    spec = live_console.setdefault("spec", {})
    if plugins:
        spec["plugins"] = plugins
    else:
        spec.pop("plugins", None)
    return True


def console_plan(settings, platform, live_console, installed):
    """The console operator's Console to write, or None, and a warning or None.

    OpenShift only. With console_plugin and enable_console_plugin: NVIDIA's plugin added to spec.plugins. With
    console_plugin off while the stage's ConsolePlugin is still there (installed: it is about to be pruned): its name
    taken out, so the console does not list a plugin that is gone. Anything else: the list is left alone. No live
    Console (the console capability off): nothing to write, a warning when the plugin was to be enabled.
    """
    o = settings["openshift"]
    if platform != OPENSHIFT:
        return None, None
    if o["console_plugin"] and o["enable_console_plugin"]:
        enable = True
    elif not o["console_plugin"] and installed:
        enable = False
    else:
        return None, None
    if live_console is None:
        if not enable:
            return None, None
        return None, ("no Console %s (%s): the console operator is not installed (console capability off?), so plugin "
                      "%s is not enabled" % (OPENSHIFT_CONSOLE_OPERATOR_NAME, OPENSHIFT_CONSOLE_OPERATOR_API,
                                             CONSOLE_PLUGIN_NAME))
    plugins = console_plugins(live_console, enable)
    if plugins is None:
        return None, None
    return {"apiVersion": OPENSHIFT_CONSOLE_OPERATOR_API, "kind": "Console",
            "metadata": {"name": OPENSHIFT_CONSOLE_OPERATOR_NAME}, "spec": {"plugins": plugins}}, None


def user_workload_configmap(live):
    """openshift-monitoring/cluster-monitoring-config with enableUserWorkload: true and the rest of its config.yaml
    as it is, or None when it already says so. Raises ValueError when its config.yaml is no YAML mapping."""
    text = ((live or {}).get("data") or {}).get("config.yaml") or ""
    config = yaml.safe_load(text) if text.strip() else {}
    if not isinstance(config, dict):
        raise ValueError("ConfigMap %s/%s: config.yaml is not a YAML mapping, so enableUserWorkload cannot be added; "
                         "fix it or set kubegpu_monitoring.openshift.user_workload_monitoring: false"
                         % (OPENSHIFT_MONITORING_NAMESPACE, OPENSHIFT_MONITORING_CONFIGMAP))
    if config.get("enableUserWorkload") is True:
        return None
    config["enableUserWorkload"] = True
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": OPENSHIFT_MONITORING_CONFIGMAP, "namespace": OPENSHIFT_MONITORING_NAMESPACE},
            "data": {"config.yaml": yaml.safe_dump(config, default_flow_style=False, sort_keys=True)}}


def plan_objects(settings, platform, operator_namespace, policy_name=None, pools=(), monitoring_config=None):
    """What the stage writes.

    settings: parse_settings' result; platform: openshift | kubernetes; operator_namespace: the GPU Operator's;
    policy_name: the live ClusterPolicy's name (None: there is none yet); pools: pool_spec.Pool;
    monitoring_config: the live cluster-monitoring-config ConfigMap (OpenShift) or None.
    Returns {"policy": partial ClusterPolicy object or None, "namespace_labels": {namespace: {label: value}},
    "objects": [objects to apply, in order], "settings_objects": [config objects applied whole],
    "warnings": [...]}.
    """
    namespace = settings["namespace"] or operator_namespace
    out = {"policy": None, "namespace_labels": {}, "objects": [], "settings_objects": [], "warnings": []}
    if policy_name:
        out["policy"] = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": policy_name},
                         "spec": {"dcgmExporter": {"serviceMonitor": service_monitor_spec(settings)}}}
    else:
        out["warnings"].append("no ClusterPolicy yet: the DCGM exporter's ServiceMonitor settings are applied once the "
                               "gpu_operator stage has created it (run the monitoring stage again then)")
    openshift = platform == OPENSHIFT
    if openshift and settings["openshift"]["cluster_monitoring"]:
        for ns in sorted(set([operator_namespace, namespace])):
            out["namespace_labels"][ns] = {OPENSHIFT_CLUSTER_MONITORING_LABEL: "true"}
    if openshift and settings["openshift"]["user_workload_monitoring"]:
        config = user_workload_configmap(monitoring_config)
        if config is not None:
            out["settings_objects"].append(config)
    if settings["alerts"]["enabled"]:
        out["objects"].append(prometheus_rule(settings, namespace, pools))
    if settings["dashboard"]["enabled"]:
        out["objects"].append(dashboard_configmap(settings, platform, namespace, pools))
    if openshift and settings["openshift"]["console_plugin"]:
        out["objects"].extend([console_plugin_service(operator_namespace),
                               console_plugin_deployment(operator_namespace, settings["openshift"]["console_plugin_image"]),
                               console_plugin(operator_namespace)])
    if not openshift and settings["openshift"] != defaults()["openshift"]:
        out["warnings"].append("kubegpu_monitoring.openshift applies to OpenShift only; ignored on Kubernetes")
    return out
