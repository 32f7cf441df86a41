"""The objects the monitoring stage writes, per platform, and the dashboard model."""

import json

import pytest
import yaml

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.dashboard import dashboard_model
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.objects import (
    console_plan,
    console_plugins,
    set_console_plugins,
    plan_objects,
    user_workload_configmap,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.rules import metric_label, pool_resources
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.settings import parse_settings
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import parse_pools


def kinds(plan):
    return [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in plan["objects"]]


def test_kubernetes_rule_and_grafana_dashboard_in_the_operator_namespace():
    settings = parse_settings({"service_monitor": {"interval": "30s", "additional_labels": {"release": "kps"}},
                               "alerts": {"labels": {"release": "kps"}}})
    plan = plan_objects(settings, "kubernetes", "gpu-operator", "cluster-policy")
    assert kinds(plan) == [("PrometheusRule", "gpu-operator", "kubegpu-gpu-alerts"),
                           ("ConfigMap", "gpu-operator", "kubegpu-gpu-dashboard")]
    assert plan["policy"]["spec"] == {"dcgmExporter": {"serviceMonitor": {
        "enabled": True, "interval": "30s", "honorLabels": False, "additionalLabels": {"release": "kps"}}}}
    rule, dashboard = plan["objects"]
    assert rule["metadata"]["labels"]["release"] == "kps"
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["kubegpu-gpu.json"])["uid"] == "kubegpu-gpu"
    assert plan["namespace_labels"] == {} and plan["settings_objects"] == []


def test_openshift_labels_the_namespace_and_uses_the_console_dashboard():
    plan = plan_objects(parse_settings({}), "openshift", "nvidia-gpu-operator", "gpu-cluster-policy")
    assert plan["namespace_labels"] == {"nvidia-gpu-operator": {"openshift.io/cluster-monitoring": "true"}}
    assert kinds(plan) == [("PrometheusRule", "nvidia-gpu-operator", "kubegpu-gpu-alerts"),
                           ("ConfigMap", "openshift-config-managed", "kubegpu-gpu-dashboard"),
                           ("Service", "nvidia-gpu-operator", "console-plugin-nvidia-gpu"),
                           ("Deployment", "nvidia-gpu-operator", "console-plugin-nvidia-gpu"),
                           ("ConsolePlugin", None, "console-plugin-nvidia-gpu")]
    assert plan["objects"][1]["metadata"]["labels"]["console.openshift.io/dashboard"] == "true"
    assert plan["warnings"] == []


def test_console_plugin_as_nvidias_chart_serves_it():
    settings = parse_settings({"openshift": {"console_plugin_image": "registry.example.com/nvidia/plugin:0.3.0"}})
    service, deployment, plugin = plan_objects(settings, "openshift", "gpu-ns", "p")["objects"][2:]
    # The ConsolePlugin's backend is the Service; the Service's port reaches the container's, and the service CA
    # writes the certificate into the Secret the pod mounts where the image's nginx reads it.
    backend = plugin["spec"]["backend"]["service"]
    assert (backend["name"], backend["namespace"], backend["port"]) == (service["metadata"]["name"], "gpu-ns", 9443)
    assert service["spec"]["ports"][0]["port"] == 9443 and service["spec"]["ports"][0]["targetPort"] == 9443
    pod = deployment["spec"]["template"]
    assert pod["spec"]["containers"][0]["ports"][0]["containerPort"] == 9443
    assert pod["spec"]["containers"][0]["image"] == "registry.example.com/nvidia/plugin:0.3.0"
    assert all(pod["metadata"]["labels"][k] == v for k, v in service["spec"]["selector"].items())
    assert deployment["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    secret = service["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"]
    assert pod["spec"]["volumes"][0]["secret"]["secretName"] == secret
    assert pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] == "/var/serving-cert"
    off = parse_settings({"openshift": {"console_plugin": False}})
    assert len(plan_objects(off, "openshift", "gpu-ns", "p")["objects"]) == 2
    # Kubernetes: no console; the OpenShift defaults raise no warning, a value the user set does.
    assert plan_objects(parse_settings({}), "kubernetes", "gpu-operator", "p")["warnings"] == []
    assert plan_objects(off, "kubernetes", "gpu-operator", "p")["warnings"]


def test_console_plugins_added_to_the_users_list_and_taken_out_alone():
    live = {"spec": {"plugins": ["monitoring-plugin", "acme-plugin"]}}
    assert console_plugins(live) == ["monitoring-plugin", "acme-plugin", "console-plugin-nvidia-gpu"]
    assert console_plugins({"spec": {}}) == ["console-plugin-nvidia-gpu"]
    enabled = {"spec": {"plugins": ["monitoring-plugin", "console-plugin-nvidia-gpu", "acme-plugin"]}}
    assert console_plugins(enabled) is None
    assert console_plugins(enabled, enable=False) == ["monitoring-plugin", "acme-plugin"]
    assert console_plugins(live, enable=False) is None


def test_console_plan_enables_removes_or_leaves_the_list():
    live = {"spec": {"plugins": ["acme-plugin"]}}
    on, off = parse_settings({}), parse_settings({"openshift": {"console_plugin": False}})
    console, warning = console_plan(on, "openshift", live, installed=False)
    assert console == {"apiVersion": "operator.openshift.io/v1", "kind": "Console", "metadata": {"name": "cluster"},
                       "spec": {"plugins": ["acme-plugin", "console-plugin-nvidia-gpu"]}} and warning is None
    enabled = {"spec": {"plugins": ["acme-plugin", "console-plugin-nvidia-gpu"]}}
    assert console_plan(on, "openshift", enabled, installed=True) == (None, None)
    # Turned off: the name leaves the list only while the stage's own ConsolePlugin is there (it is being pruned).
    assert console_plan(off, "openshift", enabled, installed=True)[0]["spec"]["plugins"] == ["acme-plugin"]
    assert console_plan(off, "openshift", enabled, installed=False) == (None, None)
    # Not asked to enable it: the list is the user's.
    keep = parse_settings({"openshift": {"enable_console_plugin": False}})
    assert console_plan(keep, "openshift", live, installed=True) == (None, None)
    assert console_plan(on, "kubernetes", live, installed=False) == (None, None)
    console, warning = console_plan(on, "openshift", None, installed=False)
    assert console is None and "console operator is not installed" in warning


def test_user_workload_monitoring_only_when_asked_and_keeps_the_rest_of_the_config():
    assert plan_objects(parse_settings({}), "openshift", "ns", "p")["settings_objects"] == []
    live = {"data": {"config.yaml": "prometheusK8s:\n  retention: 7d\n"}}
    plan = plan_objects(parse_settings({"openshift": {"user_workload_monitoring": True}}), "openshift", "ns", "p",
                        monitoring_config=live)
    config = yaml.safe_load(plan["settings_objects"][0]["data"]["config.yaml"])
    assert config == {"enableUserWorkload": True, "prometheusK8s": {"retention": "7d"}}
    assert user_workload_configmap({"data": {"config.yaml": "enableUserWorkload: true\n"}}) is None
    with pytest.raises(ValueError):
        user_workload_configmap({"data": {"config.yaml": "- a list\n"}})


def test_no_cluster_policy_yet_is_a_warning_and_switches_leave_objects_out():
    plan = plan_objects(parse_settings({"alerts": {"enabled": False}, "dashboard": {"enabled": False}}),
                        "kubernetes", "gpu-operator", None)
    assert plan["policy"] is None and plan["objects"] == []
    assert "no ClusterPolicy yet" in plan["warnings"][0]


def test_pool_resources_per_sharing_strategy():
    pools = parse_pools([
        {"name": "mig-mixed", "selector": {"matchLabels": {"a": "1"}},
         "sharing": {"strategy": "mig", "mig": {"layout": {"3g.40gb": 1, "2g.20gb": 1}}}},
        {"name": "mig-single", "selector": {"matchLabels": {"a": "2"}},
         "sharing": {"strategy": "mig", "mig": {"layout": "all-1g.10gb"}}},
        {"name": "ts", "selector": {"matchLabels": {"a": "3"}},
         "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 2, "rename_by_default": True}}},
        {"name": "whole", "selector": {"matchLabels": {"a": "4"}}, "sharing": {"strategy": "none"}},
        {"name": "dra", "selector": {"matchLabels": {"a": "5"}}, "sharing": {"strategy": "dra"}},
    ])
    assert pool_resources(pools) == {"nvidia.com/mig-2g.20gb": ["mig-mixed"], "nvidia.com/mig-3g.40gb": ["mig-mixed"],
                                     "nvidia.com/gpu": ["mig-single", "whole"], "nvidia.com/gpu.shared": ["ts"]}
    assert pool_resources([]) == {"nvidia.com/gpu": []}
    assert metric_label("nvidia.com/mig-3g.40gb") == "nvidia_com_mig_3g_40gb"


def test_dashboard_draws_the_thresholds_and_is_stable():
    settings = parse_settings({"alerts": {"gpu_memory_used_percent": 95}})
    model = dashboard_model(settings)
    memory = next(p for p in model["panels"] if p["title"] == "GPU memory used")
    assert memory["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 95
    assert len(set(p["id"] for p in model["panels"])) == len(model["panels"])
    assert dashboard_model(settings) == model


def test_set_console_plugins_changes_the_live_console_in_place_and_drops_an_emptied_list():
    live = {"spec": {"managementState": "Managed", "plugins": ["acme-plugin"]}}
    assert set_console_plugins(live, True) is True
    assert live["spec"]["plugins"] == ["acme-plugin", "console-plugin-nvidia-gpu"]
    assert set_console_plugins(live, True) is False
    assert set_console_plugins(live, False) is True and live["spec"]["plugins"] == ["acme-plugin"]
    alone = {"spec": {"managementState": "Managed", "plugins": ["console-plugin-nvidia-gpu"]}}
    assert set_console_plugins(alone, False) is True and alone == {"spec": {"managementState": "Managed"}}
    assert set_console_plugins(alone, False) is False
