"""cluster_policy on OpenShift (after an OLM install) and Kubernetes (operator faked by a Deployment)."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, wait_for

sys.path.insert(0, str(REPO / ".cache" / "collections"))
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.cluster_policy import chart_spec  # noqa: E402

CP = "nvidia.com/v1"
DRIVER = "nvidia.com/v1alpha1"
GPU = "gpu-operator-certified"
OPERATOR_NS = "nvidia-gpu-operator"
CATALOG = REPO / "tools" / "devcluster" / "catalog" / "packages.yaml"


def _writes(dc, mark):
    return [f"{e.verb} {e.resource}/{e.name}" for e in dc.audit.writes(mark)]


def _policy_api(dc):
    return dc.admin.resources.get(api_version=CP, kind="ClusterPolicy")


def _delete_all(dc):
    """The operator reconciles one ClusterPolicy: start each test without any (and without NVIDIADrivers)."""
    for api_version, kind in ((CP, "ClusterPolicy"), (DRIVER, "NVIDIADriver")):
        api = dc.admin.resources.get(api_version=api_version, kind=kind)
        for obj in api.get().items:
            api.delete(name=obj.metadata.name)
        wait_for(lambda: not api.get().items, what=f"{kind} objects deleted")


def _alm_policy_spec():
    pkg = next(p for p in yaml.safe_load(Path(CATALOG).read_text())["packages"] if p["name"] == GPU)
    return next(e for e in pkg["examples"] if e["kind"] == "ClusterPolicy")["spec"]


@pytest.fixture
def openshift(dc):
    """The default (OpenShift) fleet with the GPU Operator installed through OLM in nvidia-gpu-operator."""
    dc.fleet("default")
    result = dc.module("olm_operator", {"package": GPU, "namespace": OPERATOR_NS, "channel": "v26.3", "timeout": 120})
    assert not result.get("failed"), result.get("msg")
    _delete_all(dc)
    return dc


@pytest.fixture
def kubernetes(dc):
    """The Kubernetes fleet with the operator faked by a Deployment, as a Helm install leaves it."""
    dc.fleet("kubernetes")
    dc.admin.resources.get(api_version="v1", kind="Namespace").server_side_apply(
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}}, field_manager="tests")
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "gpu-operator", "namespace": "gpu-operator",
                           "labels": {"app.kubernetes.io/component": "gpu-operator"}},
              "spec": {"selector": {"matchLabels": {"app": "gpu-operator"}},
                       "template": {"metadata": {"labels": {"app": "gpu-operator"}},
                                    "spec": {"containers": [{"name": "gpu-operator", "image": "sim"}]}}}}
    dc.admin.resources.get(api_version="apps/v1", kind="Deployment").server_side_apply(
        body=deploy, namespace="gpu-operator", field_manager="tests")
    _delete_all(dc)
    yield dc
    dc.fleet("default")


def _policy(dc, args=None, check=False):
    return dc.module("cluster_policy", dict({"timeout": 60}, **(args or {})), check=check, diff=True)


def test_openshift_policy_from_alm_examples_converges_and_is_idempotent(openshift):
    dc = openshift
    mark = dc.audit.mark()
    result = _policy(dc)
    assert not result.get("failed"), result.get("msg")
    assert (result["name"], result["platform"], result["state"]) == ("gpu-cluster-policy", "openshift", "ready")
    assert result["base"] == f"alm-examples of ClusterServiceVersion {OPERATOR_NS}/{GPU}.v26.3.3"
    assert result["spec"] == _alm_policy_spec()
    assert result["changed"] is True
    key = "ClusterPolicy/gpu-cluster-policy"   # a new object: before is null, after is what was applied
    assert result["diff"]["after"][key]["spec"]["cdi"]["enabled"] is True and result["diff"]["before"][key] is None
    assert [(c["key"], c["fields"]) for c in result["changes"]] == [(key, ["(new object)"])]
    assert [c["reason"] for c in result["conditions"]] == ["Reconciled", "Reconciled"]
    assert _writes(dc, mark) == ["patch clusterpolicies/gpu-cluster-policy"]
    live = _policy_api(dc).get(name="gpu-cluster-policy").to_dict()
    assert live["spec"]["operator"]["use_ocp_driver_toolkit"] is True

    mark = dc.audit.mark()
    again = _policy(dc)
    assert not again.get("failed"), again.get("msg")
    assert again["changed"] is False and again["diff"] == {"before": {}, "after": {}}
    assert again["state"] == "ready"
    assert _writes(dc, mark) == []

    mark = dc.audit.mark()
    check = _policy(dc, {"settings": {"mig": {"strategy": "mixed"}, "driver": {"kernelModuleType": "open"}}}, check=True)
    assert not check.get("failed"), check.get("msg")
    assert check["changed"] is True
    key = "ClusterPolicy/gpu-cluster-policy"
    assert check["diff"] == {"before": {key: {"spec": {"driver": {"kernelModuleType": "auto"}, "mig": {"strategy": "single"}}}},
                             "after": {key: {"spec": {"driver": {"kernelModuleType": "open"}, "mig": {"strategy": "mixed"}}}}}
    assert check["changes"][0]["fields"] == ["spec.driver.kernelModuleType", "spec.mig.strategy"]
    assert _writes(dc, mark) == []      # the server-side dry run is not a write
    assert _policy_api(dc).get(name="gpu-cluster-policy").spec.mig.strategy == "single"


def test_hand_edit_is_put_back_and_the_diff_shows_it(openshift):
    dc = openshift
    assert _policy(dc)["state"] == "ready"
    _policy_api(dc).patch(name="gpu-cluster-policy", body={"spec": {"cdi": {"enabled": False}}},
                          content_type="application/merge-patch+json", field_manager="kubectl-edit")
    mark = dc.audit.mark()
    result = _policy(dc)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    key = "ClusterPolicy/gpu-cluster-policy"
    assert result["diff"] == {"before": {key: {"spec": {"cdi": {"enabled": False}}}},
                              "after": {key: {"spec": {"cdi": {"enabled": True}}}}}
    assert _writes(dc, mark) == ["patch clusterpolicies/gpu-cluster-policy"]
    assert _policy_api(dc).get(name="gpu-cluster-policy").spec.cdi.enabled is True
    assert result["state"] == "ready"


def test_fields_another_stage_set_are_kept(openshift):
    """gpu_node_pools points devicePlugin.config at its ConfigMap: the policy module must not reset it."""
    dc = openshift
    assert _policy(dc)["state"] == "ready"
    _policy_api(dc).server_side_apply(
        body={"apiVersion": CP, "kind": "ClusterPolicy", "metadata": {"name": "gpu-cluster-policy"},
              "spec": {"devicePlugin": {"config": {"name": "kubegpu-device-plugin-config", "default": "any"}}}},
        field_manager="node-pools-stand-in", force_conflicts=True)
    mark = dc.audit.mark()
    result = _policy(dc)
    assert result["changed"] is False and _writes(dc, mark) == []
    assert result["spec"]["devicePlugin"]["config"] == {"name": "kubegpu-device-plugin-config", "default": "any"}
    # ... unless the task names the field itself
    result = _policy(dc, {"keep_live_fields": []}, check=True)
    assert result["diff"]["after"] == {"ClusterPolicy/gpu-cluster-policy": {
        "spec": {"devicePlugin": {"config": {"default": "", "name": ""}}}}}


def test_never_ready_fails_naming_the_condition(openshift):
    dc = openshift
    dc.knobs({"gpu-operator.never_ready": "DriverNotReady"})
    result = _policy(dc, {"timeout": 5})
    assert result["failed"] is True
    # The object, what was expected, what was last seen and for how long.
    assert re.fullmatch(
        r"ClusterPolicy/gpu-cluster-policy: not ready after [56] s \(expected status.state == ready\); last seen: "
        r"state notReady: Ready=False \(reason DriverNotReady\): DriverNotReady: simulated failure; Error=True "
        r"\(reason DriverNotReady\): DriverNotReady: simulated failure for \d+ s", result["msg"]), result["msg"]
    assert result["progress"]["pending"] and result["ready"] is False
    assert result["state"] == "notReady"


@pytest.mark.parametrize("settings, expected", [
    ({"cdi": {"default": True}}, "settings.cdi.default: dead field, the operator ignores it (cdi.default: True); use "
                                 "cdi.enabled"),
    ({"operator": {"defaultRuntime": "crio"}}, "settings.operator.defaultRuntime: dead field"),
    ({"driver": {"useOpenKernelModules": True}}, "use driver.kernelModuleType: open, proprietary or auto"),
    ({"driver": {"kernelModuleType": "opensource"}},
     "spec.driver.kernelModuleType: 'opensource' is not valid; valid: auto, open, proprietary"),
    ({"mig": {"strategy": "both"}}, "spec.mig.strategy: 'both' is not valid; valid: none, single, mixed"),
    # Not checkable locally: the API server's strict field validation refuses it in the dry run.
    ({"driver": {"kernelModuleTyp": "open"}},
     "the API server refused it in a dry run (HTTP 500), so nothing was written: failed to create typed patch object "
     "(/gpu-cluster-policy; nvidia.com/v1, Kind=ClusterPolicy): .spec.driver.kernelModuleTyp: field not declared in "
     "schema"),
])
def test_bad_settings_fail_clearly_with_zero_writes(openshift, settings, expected):
    dc = openshift
    mark = dc.audit.mark()
    result = _policy(dc, {"settings": settings})
    assert result["failed"] is True
    assert expected in result["msg"], result["msg"]
    assert _writes(dc, mark) == []
    assert _policy_api(dc).get().items == []


def test_nvidia_driver_created_then_immutable_change_refused(openshift):
    dc = openshift
    args = {"settings": {"driver": {"useNvidiaDriverCRD": True}},
            "nvidia_drivers": [{"name": "h100", "spec": {"driverType": "gpu", "usePrecompiled": False,
                                                         "nodeSelector": {"nvidia.com/gpu.product":
                                                                          "NVIDIA-H100-80GB-HBM3"}}}]}
    result = _policy(dc, args)
    assert not result.get("failed"), result.get("msg")
    assert [(d["name"], d["changed"]) for d in result["drivers"]] == [("h100", True)]
    assert dc.admin.resources.get(api_version=DRIVER, kind="NVIDIADriver").get(name="h100").spec.driverType == "gpu"

    mark = dc.audit.mark()
    assert _policy(dc, args)["changed"] is False
    assert _writes(dc, mark) == []

    changed = json.loads(json.dumps(args))
    changed["nvidia_drivers"][0]["spec"]["usePrecompiled"] = True
    mark = dc.audit.mark()
    refused = _policy(dc, changed)
    assert refused["failed"] is True
    assert refused["msg"].startswith("NVIDIADriver h100: spec.usePrecompiled is False, the task wants True. "
                                     "driverType and usePrecompiled are immutable upstream: delete the NVIDIADriver")
    assert _writes(dc, mark) == []


def test_drivers_need_the_crd_switch(openshift):
    dc = openshift
    mark = dc.audit.mark()
    result = _policy(dc, {"nvidia_drivers": [{"name": "h100", "spec": {}}]})
    assert result["failed"] is True and "needs settings.driver.useNvidiaDriverCRD: true" in result["msg"]
    assert _writes(dc, mark) == []


def test_second_policy_is_refused(openshift):
    dc = openshift
    assert _policy(dc)["state"] == "ready"
    mark = dc.audit.mark()
    result = _policy(dc, {"name": "another-policy"})
    assert result["failed"] is True
    assert result["msg"].startswith("ClusterPolicy gpu-cluster-policy already exists and the GPU Operator reconciles "
                                    "only one")
    assert _writes(dc, mark) == []


def test_openshift_without_the_operator_csv_fails_before_writing(openshift):
    dc = openshift
    mark = dc.audit.mark()
    result = _policy(dc, {"csv_namespace": "no-operator-here"})
    assert result["failed"] is True
    assert result["msg"].startswith("no gpu-operator-certified ClusterServiceVersion in namespace no-operator-here: "
                                    "install the GPU Operator first")
    assert _writes(dc, mark) == []


def test_kubernetes_chart_defaults_converge_and_check_mode_writes_nothing(kubernetes):
    dc = kubernetes
    mark = dc.audit.mark()
    check = _policy(dc, {"settings": {"driver": {"enabled": False}}}, check=True)
    assert not check.get("failed"), check.get("msg")
    assert check["changed"] is True
    assert check["diff"]["after"]["ClusterPolicy/cluster-policy"]["spec"]["driver"]["enabled"] is False
    assert _writes(dc, mark) == [] and _policy_api(dc).get().items == []

    mark = dc.audit.mark()
    result = _policy(dc, {"settings": {"driver": {"enabled": False}}})
    assert not result.get("failed"), result.get("msg")
    assert (result["name"], result["platform"], result["state"]) == ("cluster-policy", "kubernetes", "ready")
    expected = chart_spec()
    expected["driver"]["enabled"] = False
    assert result["spec"] == expected
    assert _writes(dc, mark) == ["patch clusterpolicies/cluster-policy"]
    live = _policy_api(dc).get(name="cluster-policy").to_dict()["spec"]
    assert live["migManager"]["config"]["default"] == "all-disabled" and live["cdi"]["enabled"] is True

    mark = dc.audit.mark()
    again = _policy(dc, {"settings": {"driver": {"enabled": False}}})
    assert again["changed"] is False and _writes(dc, mark) == []
