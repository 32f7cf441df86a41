"""The alert rules as Prometheus users test theirs: the rule set rendered by planning/monitoring/rules.py is checked
with `promtool check rules` and unit-tested with `promtool test rules`, one case that fires and one that does not
for every alert, each with the labels and annotations Prometheus would send."""

import copy

import pytest
from promtool_runner import promtool_test, run, series, write_rules

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.rules import rule_groups
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.settings import (
    ALERT_NAMES,
    parse_settings,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import parse_pools

GPU = {"gpu": "0", "UUID": "GPU-8f6f3c1e", "device": "nvidia0", "modelName": "NVIDIA H100 80GB HBM3",
       "Hostname": "gpu-node-1", "namespace": "llm", "pod": "llama-8b-predictor-0", "container": "kserve-container"}
IDLE_GPU = dict(GPU, gpu="1", UUID="GPU-2a7d")
POOLS = [
    {"name": "llm-h100", "selector": {"matchLabels": {"pool": "h100"}},
     "sharing": {"strategy": "mig", "mig": {"layout": {"3g.40gb": 1, "1g.10gb": 2}}}},
    {"name": "embed-l40s", "selector": {"matchLabels": {"pool": "l40s"}},
     "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}},
]


def pending_pod(namespace, pod, resource, phase="Pending"):
    return [
        series("kube_pod_container_resource_requests",
               {"namespace": namespace, "pod": pod, "container": "c", "resource": resource, "unit": "integer",
                "node": ""}, "1x30"),
        series("kube_pod_status_phase", {"namespace": namespace, "pod": pod, "phase": phase}, "1x30"),
        series("kube_pod_status_phase", {"namespace": namespace, "pod": pod, "phase": "Running"}, "0x30"),
    ]


# alert -> {"fires": case, "quiet": case}; a case: input series, eval time, and for "fires" the expected alerts as
# (labels of the alert besides alertname and severity, the value its annotations show).
CASES = {
    "GPUMemoryAlmostFull": {
        "fires": {"input": [series("DCGM_FI_DEV_FB_USED", GPU, "76000x20"), series("DCGM_FI_DEV_FB_FREE", GPU, "4000x20")],
                  "at": "10m", "alerts": [(GPU, 95)]},
        # 85% used: below 90.
        "quiet": {"input": [series("DCGM_FI_DEV_FB_USED", GPU, "68000x20"), series("DCGM_FI_DEV_FB_FREE", GPU, "12000x20")],
                  "at": "10m"},
    },
    "GPUAllocatedButIdle": {
        "fires": {"input": [series("DCGM_FI_DEV_GPU_UTIL", IDLE_GPU, "5x30")], "at": "15m", "alerts": [(IDLE_GPU, 5)]},
        # Idle but held by no pod (the exporter's pod mapping leaves pod empty): not this alert's business.
        "quiet": {"input": [series("DCGM_FI_DEV_GPU_UTIL", dict(IDLE_GPU, pod="", namespace="", container=""), "5x30"),
                            series("DCGM_FI_DEV_GPU_UTIL", GPU, "60x30")], "at": "15m"},
    },
    "GPUXidError": {
        "fires": {"input": [series("DCGM_FI_DEV_XID_ERRORS", GPU, "0 0 79 79 79")], "at": "3m", "alerts": [(GPU, 79)]},
        "quiet": {"input": [series("DCGM_FI_DEV_XID_ERRORS", GPU, "0x10")], "at": "5m"},
    },
    "GPUTemperatureHigh": {
        "fires": {"input": [series("DCGM_FI_DEV_GPU_TEMP", GPU, "91x20")], "at": "10m", "alerts": [(GPU, 91)]},
        # Hot for 3 minutes only (the alert waits 5), then cool again.
        "quiet": {"input": [series("DCGM_FI_DEV_GPU_TEMP", GPU, "70 91 91 91 70x10")], "at": "5m"},
    },
    "GPUMigConfigFailed": {
        "fires": {"input": [series("kube_node_labels", {"node": "gpu-node-1", "label_nvidia_com_mig_config_state": "failed"},
                                   "1x20")],
                  "at": "10m", "alerts": [({"node": "gpu-node-1", "label_nvidia_com_mig_config_state": "failed"}, 1)]},
        "quiet": {"input": [series("kube_node_labels", {"node": "gpu-node-1", "label_nvidia_com_mig_config_state": "success"},
                                   "1x20")], "at": "10m"},
    },
    "GPUClusterPolicyNotReady": {
        "fires": {"input": [series("gpu_operator_reconciliation_status", {"job": "gpu-operator"}, "0x60")],
                  "at": "45m", "alerts": [({"job": "gpu-operator"}, 0)]},
        # Not ready for 20 minutes while operands roll out, then reconciled.
        "quiet": {"input": [series("gpu_operator_reconciliation_status", {"job": "gpu-operator"}, "0x20 1x40")],
                  "at": "45m"},
    },
    "GPUPodsPending": {
        "fires": {"input": pending_pod("llm", "a", "nvidia_com_mig_3g_40gb") + pending_pod("llm", "b", "nvidia_com_mig_3g_40gb")
                  + pending_pod("llm", "c", "nvidia_com_gpu", phase="Running"),
                  "at": "15m", "alerts": [({"resource": "nvidia.com/mig-3g.40gb", "pools": "llm-h100"}, 2)]},
        # Pending for 5 minutes only, then scheduled; and a Running pod on the time-sliced pool.
        "quiet": {"input": [series("kube_pod_container_resource_requests",
                                   {"namespace": "llm", "pod": "a", "container": "c", "resource": "nvidia_com_gpu",
                                    "unit": "integer", "node": ""}, "1x30"),
                            series("kube_pod_status_phase", {"namespace": "llm", "pod": "a", "phase": "Pending"},
                                   "1x5 0x25")] + pending_pod("llm", "c", "nvidia_com_gpu", phase="Running"),
                  "at": "15m"},
    },
}


@pytest.fixture(scope="module")
def default_groups():
    return rule_groups(parse_settings({}), parse_pools(POOLS))


def test_every_alert_has_a_case_that_fires_and_one_that_does_not(default_groups):
    built = set(rule["alert"] for rule in default_groups[0]["rules"])
    assert built == set(ALERT_NAMES)
    for alert in ALERT_NAMES:
        assert set(CASES.get(alert, {})) == {"fires", "quiet"}, "alert %s needs a firing and a quiet case" % alert
        assert CASES[alert]["fires"]["alerts"], "the firing case of %s expects no alert" % alert
        assert not CASES[alert]["quiet"].get("alerts"), "the quiet case of %s expects an alert" % alert


def test_promtool_check_rules_accepts_the_rule_set(tmp_path, default_groups):
    path = write_rules(tmp_path, default_groups)
    code, out = run("check", "rules", path, cwd=str(tmp_path))
    assert code == 0, out
    assert "SUCCESS: %d rules found" % len(default_groups[0]["rules"]) in out, out


def test_promtool_test_rules_every_alert_fires_and_stays_quiet(tmp_path, default_groups):
    cases = [(alert, kind, CASES[alert][kind]) for alert in ALERT_NAMES for kind in ("fires", "quiet")]
    code, out = promtool_test(tmp_path, default_groups, cases)
    assert code == 0, out
    assert "SUCCESS" in out, out


def test_promtool_fails_when_an_expectation_is_wrong(tmp_path, default_groups):
    """The harness can fail: a quiet case that claims an alert is refused by promtool."""
    wrong = copy.deepcopy(CASES["GPUTemperatureHigh"]["quiet"])
    wrong["alerts"] = [(GPU, 91)]
    code, out = promtool_test(tmp_path, default_groups, [("GPUTemperatureHigh", "quiet", wrong)])
    assert code != 0
    assert "GPUTemperatureHigh" in out


def test_thresholds_the_user_sets_change_what_fires(tmp_path):
    """95% memory fires under the default 90 but not at 96; 84 C fires at a threshold of 80, not the default 85."""
    memory = {"input": [series("DCGM_FI_DEV_FB_USED", GPU, "76000x20"), series("DCGM_FI_DEV_FB_FREE", GPU, "4000x20")],
              "at": "10m"}
    warm = {"input": [series("DCGM_FI_DEV_GPU_TEMP", GPU, "84x20")], "at": "10m"}
    default = rule_groups(parse_settings({}))
    code, out = promtool_test(tmp_path, default, [("GPUMemoryAlmostFull", "default", dict(memory, alerts=[(GPU, 95)])),
                                                  ("GPUTemperatureHigh", "default", warm)])
    assert code == 0, out
    tuned = rule_groups(parse_settings({"alerts": {"gpu_memory_used_percent": 96, "gpu_temperature_celsius": 80,
                                                   "gpu_temperature_for": "2m"}}))
    code, out = promtool_test(tmp_path, tuned, [("GPUMemoryAlmostFull", "tuned", memory),
                                                ("GPUTemperatureHigh", "tuned", dict(warm, alerts=[(GPU, 84)]))])
    assert code == 0, out


def test_disabled_alerts_are_left_out():
    groups = rule_groups(parse_settings({"alerts": {"disabled": ["GPUAllocatedButIdle"]}}))
    assert "GPUAllocatedButIdle" not in [r["alert"] for r in groups[0]["rules"]]
