"""The gpu_operator playbook as its test modules run it (test_gpu_operator_role, test_gpu_operator_helm,
test_wait_progress): the test inventory, what the role passes to the chart for it, a run and its failure, helm's
view of the release, and the reset that leaves the cluster as if the operator was never installed."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError

from conftest import task_name, wait_for
from kubegpu_devcluster import cluster, paths

PLAYBOOK = "playbooks/gpu_operator.yml"
INVENTORY = Path(__file__).parent / "gpu_operator" / "inventory.yml"
OPERATOR_NAMESPACES = ("nvidia-gpu-operator", "openshift-nfd", "gpu-operator")
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


def _extra_vars(**changes):
    """kubegpu_gpu_operator of the test inventory with some keys changed, as one JSON extra-vars argument."""
    inventory = yaml.safe_load(INVENTORY.read_text())
    settings = dict(inventory["all"]["vars"]["kubegpu_gpu_operator"], **changes)
    return ["-e", json.dumps({"kubegpu_gpu_operator": settings})]
