"""The gpu_operator playbook (roles nfd and gpu_operator) against the local cluster, OpenShift and Kubernetes.

OpenShift: NFD and the GPU Operator through OLM, then the ClusterPolicy from the CSV's alm-examples.
Kubernetes: NVIDIA's gpu-operator chart v26.7.0 (../shared/charts or KUBEGPU_CHARTS_DIR) installed with the Go-built
helm, then the ClusterPolicy reconciled over what the chart created. For each: check mode on a cluster without the operator
writes nothing, the install converges, a second run reports changed=0 and writes nothing (helm's own requests
included: it uses the same admin kubeconfig), and on Kubernetes the release has the expected name, namespace, chart
version and values, drift in the ClusterPolicy is put back and a changed setting upgrades the release (which runs
the chart's pre-upgrade hook Job: skipped where the local cluster has nothing to run it). The Helm release's own
life (hook, repair of a failed or interrupted upgrade, version checks) is in test_gpu_operator_helm.py.
"""
from __future__ import annotations

import pytest

from conftest import task_result
from gpu_operator_playbook import (CP, EXPECTED_VALUES, _changed_tasks, _extra_vars, _failure, _helm, _reset, _run,
                                   job_runner_missing)

V1A1 = "operators.coreos.com/v1alpha1"


@pytest.fixture(scope="module", autouse=True)
def cleanup(devcluster_session):
    """Leave the cluster as other test modules expect it: no operator namespaces, no ClusterPolicy."""
    yield
    _reset(devcluster_session)


def _policy(dc, name):
    return dc.admin.resources.get(api_version=CP, kind="ClusterPolicy").get(name=name).to_dict()


# -- OpenShift (OLM)


def test_openshift_check_mode_on_a_new_cluster_writes_nothing(dc, helm_bin):
    dc.fleet("default")
    _reset(dc)
    mark = dc.audit.mark()
    out, stats, seconds = _run(dc, helm_bin, "--check")
    assert stats["failures"] == 0, _failure(out)
    assert dc.audit.writes(mark) == []
    olm = task_result(out, "Install or upgrade the GPU Operator through OLM")
    assert olm["csv"] == "gpu-operator-certified.v26.7.0" and olm["channel"] == "v26.7"
    assert not olm["installed_csv"]
    nfd = task_result(out, "Install the NFD operator through OLM")
    assert nfd["channel"] == "stable" and not nfd["installed_csv"]
    assert task_result(out, "Reconcile the ClusterPolicy").get("skipped")
    print(f"\nOpenShift check mode on a new cluster: {seconds:.1f} s, changed={stats['changed']}, 0 writes")


def test_openshift_install_converges(dc, helm_bin):
    dc.fleet("default")
    out, stats, seconds = _run(dc, helm_bin)
    assert stats["failures"] == 0, _failure(out)
    csvs = {c.metadata.name: c.status.phase
            for c in dc.admin.resources.get(api_version=V1A1, kind="ClusterServiceVersion").get(
                namespace="nvidia-gpu-operator").items}
    assert csvs == {"gpu-operator-certified.v26.7.0": "Succeeded"}
    sub = dc.admin.resources.get(api_version=V1A1, kind="Subscription").get(
        namespace="nvidia-gpu-operator").items[0].to_dict()
    assert sub["spec"]["channel"] == "v26.7" and sub["spec"]["installPlanApproval"] == "Manual"
    assert sub["spec"]["source"] == "certified-operators"
    nfd_csvs = dc.admin.resources.get(api_version=V1A1, kind="ClusterServiceVersion").get(namespace="openshift-nfd")
    assert [c.status.phase for c in nfd_csvs.items] == ["Succeeded"]
    nfd_ns = dc.admin.resources.get(api_version="v1", kind="Namespace").get(name="openshift-nfd")
    assert nfd_ns.metadata.labels["openshift.io/cluster-monitoring"] == "true"
    instance = dc.admin.resources.get(api_version="nfd.openshift.io/v1", kind="NodeFeatureDiscovery").get(
        name="nfd-instance", namespace="openshift-nfd").to_dict()
    assert instance["spec"]["operand"]["image"] == \
        "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.20"
    policy = _policy(dc, "gpu-cluster-policy")
    assert policy["status"]["state"] == "ready"
    spec = policy["spec"]
    assert spec["operator"]["use_ocp_driver_toolkit"] is True      # from the CSV's alm-examples
    assert spec["driver"]["kernelModuleType"] == "open" and spec["mig"]["strategy"] == "mixed"   # the inventory's
    assert spec["cdi"]["enabled"] is True and spec["cdi"]["nriPluginEnabled"] is False   # false: the CRD's default
    print(f"\nOpenShift install: {seconds:.1f} s, changed={stats['changed']} ({', '.join(_changed_tasks(out))})")


def test_openshift_second_run_changes_and_writes_nothing(dc, helm_bin):
    dc.fleet("default")
    mark = dc.audit.mark()
    out, stats, seconds = _run(dc, helm_bin)
    assert stats["failures"] == 0, _failure(out)
    assert stats["changed"] == 0, _changed_tasks(out)
    assert [str(e) for e in dc.audit.writes(mark)] == []
    print(f"\nOpenShift second run: {seconds:.1f} s, {len(dc.audit.events(mark))} requests, 0 writes")


# -- Kubernetes (Helm)


def test_kubernetes_check_mode_on_a_new_cluster_writes_nothing(dc, helm_bin):
    dc.fleet("kubernetes")
    _reset(dc)
    mark = dc.audit.mark()
    out, stats, seconds = _run(dc, helm_bin, "--check")
    assert stats["failures"] == 0, _failure(out)
    assert dc.audit.writes(mark) == []
    assert task_result(out, "Install or upgrade the gpu-operator release")["changed"] is True
    assert task_result(out, "Reconcile the ClusterPolicy").get("skipped")
    assert _helm(dc, helm_bin, "list", "-A", "-o", "json") == []
    print(f"\nKubernetes check mode on a new cluster: {seconds:.1f} s, changed={stats['changed']}, 0 writes")


def test_kubernetes_install_converges(dc, helm_bin):
    dc.fleet("kubernetes")
    out, stats, seconds = _run(dc, helm_bin)
    assert stats["failures"] == 0, _failure(out)
    [release] = _helm(dc, helm_bin, "list", "-n", "gpu-operator", "-o", "json")
    assert (release["name"], release["namespace"], release["chart"], release["app_version"], release["status"],
            release["revision"]) == ("gpu-operator", "gpu-operator", "gpu-operator-v26.7.0", "v26.7.0", "deployed", "1")
    assert _helm(dc, helm_bin, "get", "values", "gpu-operator", "-n", "gpu-operator", "-o", "json") == EXPECTED_VALUES
    ns = dc.admin.resources.get(api_version="v1", kind="Namespace").get(name="gpu-operator")
    assert ns.metadata.labels["pod-security.kubernetes.io/enforce"] == "privileged"
    # Created by this run: marked, so that the uninstall takes it back with the release.
    assert ns.metadata.labels["app.kubernetes.io/managed-by"] == "kubegpu.platform"
    deployments = dc.admin.resources.get(api_version="apps/v1", kind="Deployment")
    deploy = deployments.get(name="gpu-operator", namespace="gpu-operator")
    assert deploy.metadata.labels["helm.sh/chart"] == "gpu-operator-v26.7.0"
    policy = _policy(dc, "cluster-policy")
    assert policy["status"]["state"] == "ready"
    spec = policy["spec"]
    assert spec["driver"]["kernelModuleType"] == "open" and spec["mig"]["strategy"] == "mixed"
    assert spec["driver"]["useNvidiaDriverCRD"] is False
    assert spec["cdi"]["enabled"] is True and spec["cdi"]["nriPluginEnabled"] is False
    assert spec["dcgmExporter"]["serviceMonitor"]["enabled"] is True
    assert spec["validator"]["version"] == "v26.7.0"        # rendered by the chart, untouched by the role
    print(f"\nKubernetes install: {seconds:.1f} s, changed={stats['changed']} ({', '.join(_changed_tasks(out))})")


def test_kubernetes_second_run_changes_and_writes_nothing(dc, helm_bin):
    """No helm upgrade on the second run: kubernetes.core.helm sees the same chart version and values."""
    dc.fleet("kubernetes")
    mark = dc.audit.mark()
    out, stats, seconds = _run(dc, helm_bin)
    assert stats["failures"] == 0, _failure(out)
    assert stats["changed"] == 0, (_changed_tasks(out), task_result(out, "Reconcile the ClusterPolicy").get("diff"))
    assert [str(e) for e in dc.audit.writes(mark)] == []
    assert _helm(dc, helm_bin, "list", "-n", "gpu-operator", "-o", "json")[0]["revision"] == "1"
    print(f"\nKubernetes second run: {seconds:.1f} s, {len(dc.audit.events(mark))} requests, 0 writes")


def test_kubernetes_drift_in_the_cluster_policy_is_put_back(dc, helm_bin):
    dc.fleet("kubernetes")
    dc.admin.resources.get(api_version=CP, kind="ClusterPolicy").patch(
        name="cluster-policy", body={"spec": {"mig": {"strategy": "single"}, "cdi": {"enabled": False}}},
        content_type="application/merge-patch+json")
    mark = dc.audit.mark()
    out, stats, _seconds = _run(dc, helm_bin)
    assert stats["failures"] == 0, _failure(out)
    assert _changed_tasks(out) == ["Reconcile the ClusterPolicy and wait until it is ready"]
    assert {(e.verb, e.resource) for e in dc.audit.writes(mark)} == {("patch", "clusterpolicies")}
    spec = _policy(dc, "cluster-policy")["spec"]
    assert spec["mig"]["strategy"] == "mixed" and spec["cdi"]["enabled"] is True
    assert _helm(dc, helm_bin, "list", "-n", "gpu-operator", "-o", "json")[0]["revision"] == "1"


# A relabeling as a user writes it: its `action` is left to the CRD's default (replace), which the API server adds.
RELABELING = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}


def _managed_by_us(policy):
    """The spec fields the collection's field manager owns on the ClusterPolicy (fieldsV1 of its apply entry)."""
    return [m["fieldsV1"].get("f:spec", {}) for m in policy["metadata"]["managedFields"]
            if m["manager"] == "kubegpu.platform" and m["operation"] == "Apply"]


def test_kubernetes_two_drift_runs_after_the_api_server_defaulted_fields_write_nothing(dc, helm_bin):
    """cdi.default: deprecated, its CRD default (false) kept after gpu-operator#2796 was reverted (#2866, #2903):
    the API server fills it in and the collection never sends it. A relabeling's action: the API server fills in
    its default inside a list the collection sends whole. Neither is drift: the run that puts a hand edit back
    writes only that, and the run after it writes nothing."""
    dc.fleet("kubernetes")
    settings = _extra_vars(cluster_policy={"dcgmExporter": {"serviceMonitor": {"relabelings": [RELABELING]}}})
    out, stats, _seconds = _run(dc, helm_bin, *settings)
    assert stats["failures"] == 0, _failure(out)
    policy = _policy(dc, "cluster-policy")
    assert policy["spec"]["cdi"]["default"] is False                                  # the API server's default
    assert [r.get("action") for r in policy["spec"]["dcgmExporter"]["serviceMonitor"]["relabelings"]] == ["replace"]
    [ours] = _managed_by_us(policy)
    assert "f:default" not in ours["f:cdi"] and "f:enabled" in ours["f:cdi"]
    # Drift by hand, then two runs in a row.
    dc.admin.resources.get(api_version=CP, kind="ClusterPolicy").patch(
        name="cluster-policy", body={"spec": {"mig": {"strategy": "single"}}}, content_type="application/merge-patch+json")
    mark = dc.audit.mark()
    out, stats, _seconds = _run(dc, helm_bin, *settings)
    assert stats["failures"] == 0, _failure(out)
    assert [(e.verb, e.resource) for e in dc.audit.writes(mark)] == [("patch", "clusterpolicies")]
    assert task_result(out, "Reconcile the ClusterPolicy")["changes"][0]["fields"] == ["spec.mig.strategy"]
    mark = dc.audit.mark()
    out, stats, _seconds = _run(dc, helm_bin, *settings)
    assert stats["failures"] == 0, _failure(out)
    assert stats["changed"] == 0, (_changed_tasks(out), task_result(out, "Reconcile the ClusterPolicy").get("changes"))
    assert [str(e) for e in dc.audit.writes(mark)] == []
    assert _policy(dc, "cluster-policy")["spec"]["cdi"]["default"] is False


def test_kubernetes_changed_setting_upgrades_the_release(dc, helm_bin):
    reason = job_runner_missing(dc)
    if reason:
        pytest.skip(reason)
    dc.fleet("kubernetes")
    out, stats, _seconds = _run(dc, helm_bin, *_extra_vars(cdi={"nri_plugin": True}))
    assert stats["failures"] == 0, _failure(out)
    [release] = _helm(dc, helm_bin, "list", "-n", "gpu-operator", "-o", "json")
    assert release["revision"] == "2"
    values = _helm(dc, helm_bin, "get", "values", "gpu-operator", "-n", "gpu-operator", "-o", "json")
    assert values["cdi"] == {"enabled": True, "nriPluginEnabled": True}
    assert _policy(dc, "cluster-policy")["spec"]["cdi"]["nriPluginEnabled"] is True
    # Back to the inventory's settings: the release and the ClusterPolicy follow.
    out, stats, _seconds = _run(dc, helm_bin)
    assert stats["failures"] == 0, _failure(out)
    assert _helm(dc, helm_bin, "get", "values", "gpu-operator", "-n", "gpu-operator", "-o", "json") == EXPECTED_VALUES
    assert _policy(dc, "cluster-policy")["spec"]["cdi"]["nriPluginEnabled"] is False


def test_bad_input_is_refused_before_anything_is_written(dc, helm_bin):
    dc.fleet("kubernetes")
    mark = dc.audit.mark()
    out, stats, _seconds = _run(dc, helm_bin, *_extra_vars(mig_strategy="all-1g"))
    assert stats["failures"] == 1
    message = _failure(out)
    # Refused by the preflight play, in the inventory's words, before the stage starts.
    assert "kubegpu_gpu_operator.mig_strategy" in message and "all-1g" in message and "mixed" in message, message
    assert dc.audit.writes(mark) == []


# -- Support windows (docs/gpu-operator.md): the catalog offers an end-of-support CSV (v25.3.4) and a deprecated
# one (v26.3.3).


def _warnings(out, name):
    """The warnings of the last task named `name` (ansible-core gives them as text or as {'event': {'msg'}})."""
    found = task_result(out, name).get("warnings") or []
    return [w["event"]["msg"] if isinstance(w, dict) else w for w in found]


def test_an_end_of_support_version_is_refused_without_the_acknowledgement(dc, helm_bin):
    dc.fleet("default")
    _reset(dc)
    mark = dc.audit.mark()
    out, stats, _seconds = _run(dc, helm_bin, *_extra_vars(version="v25.3.4"))
    assert stats["failures"] == 1
    message = _failure(out)
    for part in ("kubegpu_gpu_operator.version: v25.3.4", "end of support since 2026-08-21", "platform-support.html",
                 "kubegpu_gpu_operator.allow_end_of_support: true", "Nothing was written."):
        assert part in message, message
    assert [str(e) for e in dc.audit.writes(mark)] == []


def test_a_deprecated_version_warns(dc, helm_bin):
    dc.fleet("default")
    mark = dc.audit.mark()
    out, stats, _seconds = _run(dc, helm_bin, "--check", *_extra_vars(version="v26.3.3"))
    assert stats["failures"] == 0, _failure(out)
    [warning] = _warnings(out, "Check the inventory and the cluster")
    assert "v26.3.3" in warning and "26.3.x is deprecated since 2026-08-21" in warning, warning
    assert task_result(out, "Install or upgrade the GPU Operator through OLM")["csv"] == "gpu-operator-certified.v26.3.3"
    assert dc.audit.writes(mark) == []


def test_an_end_of_support_version_is_installed_with_the_acknowledgement(dc, helm_bin):
    dc.fleet("default")
    mark = dc.audit.mark()
    out, stats, _seconds = _run(dc, helm_bin, *_extra_vars(version="v25.3.4", allow_end_of_support=True))
    assert stats["failures"] == 0, _failure(out)
    [warning] = _warnings(out, "Check the inventory and the cluster")
    assert "end of support" in warning and "allow_end_of_support" in warning, warning
    assert dc.audit.writes(mark)
    csvs = {c.metadata.name: c.status.phase
            for c in dc.admin.resources.get(api_version=V1A1, kind="ClusterServiceVersion").get(
                namespace="nvidia-gpu-operator").items}
    assert csvs == {"gpu-operator-certified.v25.3.4": "Succeeded"}
    assert _policy(dc, "gpu-cluster-policy")["status"]["state"] == "ready"
