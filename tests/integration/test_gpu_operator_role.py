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

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError

from conftest import REPO, task_name, task_result, wait_for
from kubegpu_devcluster import cluster, paths

PLAYBOOK = "playbooks/gpu_operator.yml"
INVENTORY = Path(__file__).parent / "gpu_operator" / "inventory.yml"
OPERATOR_NAMESPACES = ("nvidia-gpu-operator", "openshift-nfd", "gpu-operator")
V1A1 = "operators.coreos.com/v1alpha1"
CP = "nvidia.com/v1"

# What the role passes to the chart for the test inventory (kernel_module_type open and mig_strategy mixed, the
# rest defaults), written out by hand from the reference's "Vanilla k8s (Helm)" value keys.
EXPECTED_VALUES = {
    "nfd": {"enabled": True},
    "driver": {"enabled": True, "kernelModuleType": "open", "usePrecompiled": False,
               "nvidiaDriverCRD": {"enabled": False, "deployDefaultCR": True}},
    "toolkit": {"enabled": True},
    "cdi": {"enabled": True, "nriPluginEnabled": False},
    "mig": {"strategy": "mixed"},
    "dcgmExporter": {"serviceMonitor": {"enabled": True}},
}


@pytest.fixture(scope="module")
def helm_bin():
    """The Go-built helm (tools/devcluster/build.sh builds it once; afterwards the call is a no-op)."""
    out = subprocess.run([str(REPO / "tools" / "devcluster" / "build.sh")], check=True, capture_output=True,
                         text=True).stdout.strip().splitlines()[-1]
    path = Path(out) / "helm"
    assert path.exists(), f"build.sh did not leave helm in {out}"
    return path


@pytest.fixture(scope="module", autouse=True)
def cleanup(devcluster_session):
    """Leave the cluster as other test modules expect it: no operator namespaces, no ClusterPolicy."""
    yield
    _reset(devcluster_session)


def _reset(dc):
    """Remove what an install left: ClusterPolicies, NVIDIADrivers and the operator namespaces (with their OLM
    objects, NFD instance, helm release secrets and hook Jobs), as on a cluster where the operator was never
    installed."""
    for api_version, kind in ((CP, "ClusterPolicy"), ("nvidia.com/v1alpha1", "NVIDIADriver")):
        api = dc.admin.resources.get(api_version=api_version, kind=kind)
        for item in api.get().items:
            api.delete(name=item.metadata.name)
    # A Job deleted without a propagation policy gets the `orphan` finalizer, which only the garbage collector of
    # kube-controller-manager removes: delete the chart's hook Jobs (left by a failed upgrade) in the background.
    jobs = dc.admin.resources.get(api_version="batch/v1", kind="Job")
    for job in jobs.get(namespace="gpu-operator").items:
        jobs.delete(name=job.metadata.name, namespace="gpu-operator", propagation_policy="Background")
    ns_api = dc.admin.resources.get(api_version="v1", kind="Namespace")
    for name in OPERATOR_NAMESPACES:
        try:
            ns_api.delete(name=name)
        except NotFoundError:
            pass

    def gone():
        return not [n for n in ns_api.get().items if n.metadata.name in OPERATOR_NAMESPACES]

    def why():
        return {n.metadata.name: [f"{c.type}: {c.message}" for c in (n.status.conditions or []) if c.status == "True"]
                for n in ns_api.get().items if n.metadata.name in OPERATOR_NAMESPACES}
    try:
        # The controller-manager's namespace controller (or its simulator) empties and finalizes them; on a busy
        # machine that has taken over a minute.
        wait_for(gone, timeout=180, what="operator namespaces to be deleted")
    except pytest.fail.Exception as e:
        raise AssertionError(f"{e}: {why()}") from None


def _run(dc, helm_bin, *args):
    """ansible-playbook gpu_operator.yml with the test inventory: (json result, stats of localhost, seconds)."""
    t0 = time.monotonic()
    proc = dc.playbook(PLAYBOOK, "-i", str(INVENTORY), *args,
                       env={"KUBEGPU_TEST_HELM": str(helm_bin), "KUBEGPU_TEST_CHARTS": str(paths.charts_dir())})
    seconds = time.monotonic() - t0
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"ansible-playbook printed no JSON (rc {proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    stats = out["stats"]["localhost"]
    return out, stats, seconds


def _failure(out):
    """The failure that ended the run: the last failed task (one rescued by a block shows its failure later)."""
    failed = [f"{task_name(task)}: {task['hosts']['localhost'].get('msg')}" for play in out["plays"]
              for task in play["tasks"] if task["hosts"].get("localhost", {}).get("failed")]
    return failed[-1] if failed else None


def job_runner_missing(dc):
    """Why the local cluster cannot run a Job's pod to completion (a helm hook), or None when it can.

    That takes the Job controller (kube-controller-manager), the scheduler and a kubelet (KWOK); the cluster records
    the processes it started in its state file."""
    started = cluster.read_state(dc.state).get("pids") or {}
    missing = [name for name in ("kube-controller-manager", "kube-scheduler", "kwok") if name not in started]
    if missing:
        return (f"the local cluster runs no {', '.join(missing)}: nothing runs the chart's pre-upgrade hook Job "
                "(gpu-operator-upgrade-crd), so helm upgrade cannot complete")
    return None


def _changed_tasks(out):
    return [task_name(t) for p in out["plays"] for t in p["tasks"] if t["hosts"]["localhost"].get("changed")]


def _helm(dc, helm_bin, *args):
    proc = subprocess.run([str(helm_bin), *args, "--kubeconfig", str(dc.kubeconfig)], capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout)


def _policy(dc, name):
    return dc.admin.resources.get(api_version=CP, kind="ClusterPolicy").get(name=name).to_dict()


def _extra_vars(**changes):
    """kubegpu_gpu_operator of the test inventory with some keys changed, as one JSON extra-vars argument."""
    inventory = yaml.safe_load(INVENTORY.read_text())
    settings = dict(inventory["all"]["vars"]["kubegpu_gpu_operator"], **changes)
    return ["-e", json.dumps({"kubegpu_gpu_operator": settings})]


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
