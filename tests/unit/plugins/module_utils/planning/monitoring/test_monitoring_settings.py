"""kubegpu_monitoring: defaults, the values refused (path, value, what is valid) and the inventory's view of it."""

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.preflight.inventory import INVENTORY, check_inventory
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.settings import (
    THRESHOLDS,
    MonitoringError,
    defaults,
    parse_settings,
)


def test_defaults_are_the_documented_ones():
    s = parse_settings({})
    assert s["alerts"]["gpu_memory_used_percent"] == 90 and s["alerts"]["gpu_memory_used_for"] == "5m"
    assert s["alerts"]["gpu_idle_percent"] == 20 and s["alerts"]["gpu_idle_for"] == "10m"
    assert s["service_monitor"] == {"enabled": True, "interval": "15s", "honor_labels": False, "additional_labels": {}}
    assert s["openshift"] == {"cluster_monitoring": True, "user_workload_monitoring": False, "console_plugin": True,
                              "console_plugin_image": "quay.io/edge-infrastructure/console-plugin-nvidia-gpu:release-0.3.0",
                              "enable_console_plugin": True}
    assert s == parse_settings(defaults())
    assert all(s["alerts"][key] == default for key, (default, low, high, unit) in THRESHOLDS.items())


@pytest.mark.parametrize("raw, message", [
    ({"alerts": {"gpu_memory_used_percent": 101}},
     "kubegpu_monitoring.alerts.gpu_memory_used_percent: 101 is out of range; valid: 1 to 100 (percent)"),
    ({"alerts": {"gpu_idle_percent": 0}}, "kubegpu_monitoring.alerts.gpu_idle_percent: 0 is out of range"),
    ({"alerts": {"gpu_temperature_celsius": 200}}, "valid: 40 to 120 (celsius)"),
    ({"alerts": {"gpu_idle_for": "10 minutes"}},
     "kubegpu_monitoring.alerts.gpu_idle_for: '10 minutes' is not a Prometheus duration"),
    ({"alerts": {"disabled": ["GPUHot"]}}, "kubegpu_monitoring.alerts.disabled: 'GPUHot' is not an alert"),
    ({"alerts": {"labels": {"release": "kube prometheus"}}}, "kubegpu_monitoring.alerts.labels: release: 'kube prometheus'"
                                                             " is not a valid label value"),
    ({"service_monitor": {"interval": "0"}}, "kubegpu_monitoring.service_monitor.interval: '0' is not a Prometheus"),
    ({"service_monitor": {"additional_labels": {"bad key!": "x"}}}, "'bad key!' is not a valid label key"),
    ({"dashboard": {"namespace": "Grafana"}}, "kubegpu_monitoring.dashboard.namespace: 'Grafana' is not a namespace"),
    ({"dashboard": {"label_value": "1"}}, "kubegpu_monitoring.dashboard.label_value: set with no label"),
    ({"openshift": {"console_plugin_image": "quay.io/x/plugin:bad tag"}},
     "kubegpu_monitoring.openshift.console_plugin_image: 'quay.io/x/plugin:bad tag' is not an image reference"),
    ({"alerts": {"gpu_memory_percent": 95}}, "kubegpu_monitoring.alerts: unknown key 'gpu_memory_percent' (did you mean "
                                             "'gpu_memory_used_percent'?)"),
])
def test_refused_values_name_path_value_and_what_is_valid(raw, message):
    with pytest.raises(MonitoringError) as e:
        parse_settings(raw)
    assert message in str(e.value)


def test_inventory_describes_the_variable_and_refuses_through_the_stage_checks():
    assert INVENTORY["kubegpu_monitoring"]["options"]["alerts"]["options"]["gpu_memory_used_percent"]["default"] == 90
    errors = check_inventory({"kubegpu_monitoring": {"alerts": {"gpu_memory_used_percent": "lots"}}}, ["monitoring"])
    assert errors == {"kubegpu_monitoring": ["kubegpu_monitoring.alerts.gpu_memory_used_percent: expected an integer, "
                                             "got 'lots'"]}
    errors = check_inventory({"kubegpu_monitoring": {"alerts": {"gpu_memory_used_percent": 0}}}, ["monitoring"])
    assert "out of range" in errors["kubegpu_monitoring"][0]
    # Two stages would set dcgmExporter.serviceMonitor.enabled differently.
    errors = check_inventory({"kubegpu_gpu_operator": {"service_monitor": False}}, ["monitoring"])
    assert "kubegpu_gpu_operator.service_monitor is false" in errors["kubegpu_monitoring"][0]
    assert check_inventory({"kubegpu_gpu_operator": {"service_monitor": False},
                            "kubegpu_monitoring": {"service_monitor": {"enabled": False}}}, ["monitoring"]) == {}
