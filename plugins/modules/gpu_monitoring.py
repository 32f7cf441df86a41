#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_monitoring
short_description: Scrape the DCGM exporter, publish GPU alert rules and a GPU dashboard
version_added: 0.1.0
description:
  - Sets the GPU Operator ClusterPolicy's C(spec.dcgmExporter.serviceMonitor) (C(enabled), C(interval),
    C(honorLabels), C(additionalLabels)) with its own field manager, so that the operator creates the DCGM
    exporter's ServiceMonitor and the gpu_operator stage's own apply leaves these fields alone.
  - Writes PrometheusRule C(kubegpu-gpu-alerts) (monitoring.coreos.com/v1) whose alerts are built from the
    thresholds in C(settings.alerts) - GPU memory almost full, a GPU allocated to a pod but idle, XID errors, GPU
    temperature, a failed MIG configuration, the ClusterPolicy not ready, pods pending for a pool's GPU resource.
  - Writes the dashboard ConfigMap C(kubegpu-gpu-dashboard) (a Grafana JSON model) - on Kubernetes labelled for
    Grafana's dashboard sidecar (C(grafana_dashboard=1)), on OpenShift in C(openshift-config-managed) labelled
    C(console.openshift.io/dashboard=true) for the console's Observe > Dashboards.
  - On OpenShift labels the GPU Operator's namespace C(openshift.io/cluster-monitoring=true); only when asked,
    enables user-workload monitoring (cluster-wide).
  - On OpenShift (unless C(settings.openshift.console_plugin=false)) installs NVIDIA's GPU console plugin as its
    chart does - Deployment, Service C(console-plugin-nvidia-gpu) with a serving certificate from the service CA, and
    the ConsolePlugin - in the GPU Operator's namespace, and (unless C(settings.openshift.enable_console_plugin=false))
    adds it to the console operator's Console C(cluster) C(spec.plugins), keeping the plugins already there. When
    the plugin is turned off, its objects are deleted and its name taken out of that list.
  - Every object that differs is validated by the API server with a server-side dry run before the first write, so
    a refusal writes nothing. Objects of earlier runs (labelled C(app.kubernetes.io/managed-by=kubegpu.platform) and
    C(kubegpu.io/monitoring)) no longer wanted are deleted. See docs/monitoring.md.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  settings:
    description:
      - The inventory variable C(kubegpu_monitoring) - C(namespace), C(service_monitor) (C(enabled), C(interval),
        C(honor_labels), C(additional_labels)), C(alerts) (C(enabled), C(labels), C(disabled) and the thresholds
        C(gpu_memory_used_percent), C(gpu_memory_used_for), C(gpu_idle_percent), C(gpu_idle_for),
        C(gpu_temperature_celsius), C(gpu_temperature_for), C(xid_errors_for), C(mig_config_failed_for),
        C(cluster_policy_not_ready_for), C(pods_pending_for)), C(dashboard) (C(enabled), C(namespace), C(label),
        C(label_value), C(annotations)) and C(openshift) (C(cluster_monitoring), C(user_workload_monitoring),
        C(console_plugin), C(console_plugin_image), C(enable_console_plugin)). Unknown keys and values out of range
        are refused. Defaults in docs/monitoring.md.
    type: dict
    default: {}
  platform:
    description: V(auto) asks the cluster (OpenShift serves ClusterVersion C(version)).
  operator_namespace:
    description:
      - The GPU Operator's namespace. Unset or empty, the namespace the ClusterPolicy reports in C(status.namespace);
        without a ClusterPolicy or before it reports one, C(nvidia-gpu-operator) (OpenShift) or C(gpu-operator)
        (Kubernetes).
  pools:
    description:
      - The node pools (C(kubegpu_node_pools)); each pool's GPU resource name gets a pending-pods alert naming the pool.
  prune:
    description:
      - Delete the stage's objects of earlier runs that are no longer wanted (an alert set, the dashboard or the
        console plugin turned off).
    type: bool
    default: true
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubegpu.platform.inputs.pools
  - kubegpu.platform.inputs.platform
  - kubegpu.platform.inputs.operator_namespace
attributes:
  check_mode:
    support: full
    description: Plans every object, sends each that differs as a server-side dry run, writes nothing.
  diff_mode:
    support: full
    description: Shows each object's fields before and after.
requirements:
  - kubernetes >= 24.2.0
  - PyYAML
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: GPU alerts and dashboard with tighter memory and temperature thresholds
  kubegpu.platform.gpu_monitoring:
    settings:
      service_monitor: {interval: 30s, additional_labels: {release: kube-prometheus-stack}}
      alerts:
        labels: {release: kube-prometheus-stack}
        gpu_memory_used_percent: 95
        gpu_temperature_celsius: 80
    pools: "{{ kubegpu_node_pools }}"
  register: monitoring
"""

RETURN = r"""
platform:
  description: openshift or kubernetes.
  returned: always
  type: str
namespace:
  description: The namespace of the PrometheusRule.
  returned: always
  type: str
service_monitor:
  description: The ClusterPolicy's C(spec.dcgmExporter.serviceMonitor) as planned, and C(policy), its ClusterPolicy (null if none yet).
  returned: always
  type: dict
rules:
  description: The PrometheusRule's C(spec.groups) (each alert's expression, C(for), labels and annotations).
  returned: always
  type: list
  elements: dict
objects:
  description: The key (C(kind/namespace/name) or C(kind/name)) of every object the stage wants.
  returned: always
  type: list
  elements: str
warnings_list:
  description: Every warning, also emitted as Ansible warnings.
  returned: always
  type: list
  elements: str
changes:
  description:
    - Each object written (or that would be, in check mode), in order, with C(key), C(kind), C(namespace), C(name),
      the dotted C(fields) that differ and their values C(before) and C(after) (C(after) null for a deleted one).
  returned: always
  type: list
  elements: dict
diff:
  description:
    - C(before) and C(after), each a mapping of object key (C(kind/name) or C(kind/namespace/name)) to the fields that
      differ; an object changed twice in a run shows its first before and its last after.
    - Only in diff mode (C(--diff)), built from RV(changes), which lists the same changes in every mode.
  returned: in diff mode
  type: dict
"""

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import (
    change_report,
    patch_labels,
    planned_change,
    update_object,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.args import (
    OPERATOR_NAMESPACE_ARG_SPEC,
    PLATFORM_ARG_SPEC,
    POOLS_ARG_SPEC,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.args import (
    operator_namespace as operator_namespace_of,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import ClusterError
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.converge import Converge, key
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.platform import detect_platform
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.cluster_policy import CLUSTER_POLICY_API
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.objects import (
    CONSOLE_PLUGIN_NAME,
    OWNED,
    YAML_IMPORT_ERROR,
    console_plan,
    set_console_plugins,
    plan_objects,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.settings import (
    MonitoringError,
    parse_settings,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    GPU_OPERATOR_NAMESPACE_KUBERNETES,
    GPU_OPERATOR_NAMESPACE_OPENSHIFT,
    MANAGED_BY,
    MONITORING_FIELD_MANAGER,
    MONITORING_LABEL,
    OPENSHIFT,
    OPENSHIFT_CONSOLE_OPERATOR_API,
    OPENSHIFT_CONSOLE_OPERATOR_NAME,
    OPENSHIFT_MONITORING_CONFIGMAP,
    OPENSHIFT_MONITORING_NAMESPACE,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError, parse_pools

SELECTOR = ",".join(["%s=%s" % item for item in MANAGED_BY.items()] + [MONITORING_LABEL])
# What to install when a kind the stage writes is not served.
MISSING = {
    "PrometheusRule": "install the Prometheus Operator (kube-prometheus-stack) or set kubegpu_monitoring.alerts.enabled: false",
    "ConsolePlugin": "this is no OpenShift console; set kubegpu_monitoring.openshift.console_plugin: false",
}


def observe(cluster, platform, settings):
    """The ClusterPolicy, the stage's objects of earlier runs, the namespaces, and OpenShift's monitoring config."""
    policies = sorted(cluster.list(CLUSTER_POLICY_API, "ClusterPolicy"), key=lambda p: p["metadata"]["name"])
    ours = {}
    for api_version, kind in OWNED:
        for obj in cluster.list(api_version, kind, label_selector=SELECTOR):
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
            ours[key(obj)] = obj
    namespaces = dict((n["metadata"]["name"], n) for n in cluster.list("v1", "Namespace"))
    config = None
    if platform == OPENSHIFT and settings["openshift"]["user_workload_monitoring"]:
        config = cluster.get("v1", "ConfigMap", OPENSHIFT_MONITORING_CONFIGMAP, OPENSHIFT_MONITORING_NAMESPACE)
    console = None
    if platform == OPENSHIFT and cluster.resource(OPENSHIFT_CONSOLE_OPERATOR_API, "Console") is not None:
        console = cluster.get(OPENSHIFT_CONSOLE_OPERATOR_API, "Console", OPENSHIFT_CONSOLE_OPERATOR_NAME)
    return {"policy": policies[0] if policies else None, "ours": ours, "namespaces": namespaces, "config": config,
            "console": console}


def console_change(settings, platform, seen):
    """console_plan on what observe saw: (Console object with the new spec.plugins, its Change) or (None, None), and
    a warning or None."""
    installed = key({"kind": "ConsolePlugin", "metadata": {"name": CONSOLE_PLUGIN_NAME}}) in seen["ours"]
    obj, warning = console_plan(settings, platform, seen["console"], installed)
    return obj, (planned_change(obj, seen["console"]) if obj else None), warning


def write_console(cluster, obj, check):
    """Read-modify-write of spec.plugins (atomic: apply would take the whole list over); on a conflict the list is
    read again, so a plugin another writer added in between is kept."""
    enable = CONSOLE_PLUGIN_NAME in obj["spec"]["plugins"]
    update_object(cluster, obj["apiVersion"], obj["kind"], obj["metadata"]["name"],
                  lambda live: set_console_plugins(live, enable),
                  field_manager=MONITORING_FIELD_MANAGER, check_mode=check)


def refused(obj, error):
    return MonitoringError("%s: %s" % (key(obj), error))


def label_namespaces(module, cluster, check, plan, namespaces, created):
    """The planned labels of the namespaces that exist (those the run creates carry them from the start); a
    missing GPU Operator namespace is a refusal in a real run, a warning in a check run. Returns the Changes."""
    changes = []
    for ns, labels in sorted(plan["namespace_labels"].items()):
        if ns in created:
            continue
        live = namespaces.get(ns)
        if live is None:
            # The GPU Operator's namespace, not there yet: in a check run of site the gpu_operator stage has not
            # created it; in a real run that stage has not run.
            if not check:
                module.fail_json(msg="namespace %s does not exist: run the gpu_operator stage first, or set "
                                     "kubegpu_gpu_operator.namespace to the GPU Operator's namespace" % ns,
                                 changed=False)
            plan["warnings"].append("namespace %s does not exist yet: it gets %s once the gpu_operator stage has "
                                    "created it" % (ns, ", ".join("%s=%s" % kv for kv in labels.items())))
            continue
        have = (live.get("metadata") or {}).get("labels") or {}
        changes.append(patch_labels(cluster, "v1", "Namespace", ns, labels, check, have))
    return changes


def run(module):
    if YAML_IMPORT_ERROR is not None:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=str(YAML_IMPORT_ERROR))
    cluster, check, p = module.cluster, module.check_mode, module.params
    try:
        settings = parse_settings(p["settings"])
        pools = parse_pools(p["pools"] or [])
    except (MonitoringError, PoolError) as e:
        module.fail_json(msg=str(e), changed=False)
    platform = detect_platform(cluster, p["platform"])
    seen = observe(cluster, platform, settings)
    policy = seen["policy"]
    # Unlike gpu_node_pools, this stage plans without a ClusterPolicy too: then the platform's default namespace.
    operator_namespace = operator_namespace_of(p, policy) or (
        GPU_OPERATOR_NAMESPACE_OPENSHIFT if platform == OPENSHIFT else GPU_OPERATOR_NAMESPACE_KUBERNETES)
    try:
        plan = plan_objects(settings, platform, operator_namespace, policy["metadata"]["name"] if policy else None,
                            pools, seen["config"])
    except ValueError as e:
        module.fail_json(msg=str(e), changed=False)
    wanted = plan["objects"] + plan["settings_objects"]
    desired = ([plan["policy"]] if plan["policy"] else []) + wanted
    current = dict(seen["ours"])
    if policy:
        current[key(plan["policy"])] = policy
    if seen["config"] is not None:
        current[key(seen["config"] if "kind" in seen["config"] else dict(seen["config"], kind="ConfigMap"))] = seen["config"]
    console, console_changed, console_warning = console_change(settings, platform, seen)
    if console_warning:
        plan["warnings"].append(console_warning)
    pipeline = Converge(cluster, check, MONITORING_FIELD_MANAGER, live=current,
                        ours=seen["ours"] if p["prune"] else {}, namespaces=seen["namespaces"],
                        namespace_labels=plan["namespace_labels"], refused=refused, missing=MISSING)

    def validated():
        if console is not None:
            write_console(cluster, console, True)

    def namespaces_ready():
        return label_namespaces(module, cluster, check, plan, seen["namespaces"], pipeline.created)

    def applied():
        # After the ConsolePlugin is applied and before it is pruned: the console never lists a plugin it has no
        # ConsolePlugin for.
        if console is None:
            return []
        if not check:
            write_console(cluster, console, False)
        return [console_changed]

    try:
        changes = pipeline.run(desired, validated=validated, namespaces_ready=namespaces_ready, applied=applied)
    except (MonitoringError, ClusterError) as e:
        module.fail_json(msg=str(e), changed=False)
    for warning in plan["warnings"]:
        module.warn(warning)
    rule = [o for o in plan["objects"] if o["kind"] == "PrometheusRule"]
    result = {
        "platform": platform,
        "namespace": settings["namespace"] or operator_namespace,
        "service_monitor": dict(plan["policy"]["spec"]["dcgmExporter"]["serviceMonitor"] if plan["policy"] else {},
                                policy=policy["metadata"]["name"] if policy else None),
        "rules": rule[0]["spec"]["groups"] if rule else [],
        "objects": [key(o) for o in desired],
        "warnings_list": plan["warnings"],
    }
    result.update(change_report(changes))
    return result


def main():
    module = KubegpuModule(
        argument_spec={
            "settings": {"type": "dict", "default": {}},
            "prune": {"type": "bool", "default": True},
        },
        shared=(POOLS_ARG_SPEC, PLATFORM_ARG_SPEC, OPERATOR_NAMESPACE_ARG_SPEC),
        supports_check_mode=True,
    )
    module.run(run)


if __name__ == "__main__":
    main()
