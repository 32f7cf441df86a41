"""The gpu_operator playbook's Helm release on Kubernetes, with NVIDIA's real gpu-operator chart v26.7.0.

The chart comes from ../shared/charts (or KUBEGPU_CHARTS_DIR, see tools/devcluster/fetch-charts.sh) and is installed
the way users run it: ansible-playbook playbooks/gpu_operator.yml with the Go-built helm. What the release's life
needs to show: the install; a second run with changed=0 and no write in the audit log; a changed value upgrades the
release, which runs the chart's pre-upgrade hook Job gpu-operator-upgrade-crd to completion (skipped, naming what
is missing, where the local cluster runs no Job controller, scheduler and kubelet); a release an upgrade left
`failed` (its hook timed out) or `pending-upgrade` (helm killed midway) is repaired by the next run, and one left
`pending-install` is installed anew; check mode writes nothing; a local chart whose Chart.yaml declares another
version than the one asked for is refused before anything is written; a value that is a secret never appears in the
output.
"""
from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from conftest import task_result, wait_for
from gpu_operator_playbook import (EXPECTED_VALUES, _changed_tasks, _extra_vars, _failure, _helm, _reset, _run,
                                   job_runner_missing)
from kubegpu_devcluster import paths

NS = "gpu-operator"
RELEASE = "gpu-operator"
HOOK_JOB = "gpu-operator-upgrade-crd"
# A node selector no node matches: the pre-upgrade hook Job's pod (operator.nodeSelector) is never scheduled.
UNSCHEDULABLE = "operator.nodeSelector.kubegpu-test/nowhere=true"


@pytest.fixture(scope="module", autouse=True)
def fresh_cluster(devcluster_session):
    """Start and leave the cluster without the operator (as other test modules expect it)."""
    devcluster_session.fleet("kubernetes")
    _reset(devcluster_session)
    yield
    _reset(devcluster_session)


def _release(dc, helm_bin):
    [release] = _helm(dc, helm_bin, "list", "-n", NS, "--all", "-o", "json")
    return release


def _helm_cli(dc, helm_bin, *args, check=True, timeout=300):
    return subprocess.run([str(helm_bin), *args, "--kubeconfig", str(dc.kubeconfig)], capture_output=True, text=True,
                          check=check, timeout=timeout)


def _upgrade_args(*extra):
    """helm upgrade of the release with its own values (--reuse-values) plus `extra`, from the same chart."""
    return ["upgrade", RELEASE, str(paths.charts_dir() / "gpu-operator"), "-n", NS, "--reuse-values", *extra]


def _writes(dc, mark):
    return [str(e) for e in dc.audit.writes(mark)]


def _converged_and_idle(dc, helm_bin):
    """A run after the release settled: changed=0, no write by the admin user (helm's included)."""
    mark = dc.audit.mark()
    out, stats, seconds = _run(dc, helm_bin)
    assert stats["failures"] == 0, _failure(out)
    assert stats["changed"] == 0, _changed_tasks(out)
    assert _writes(dc, mark) == []
    return seconds, len(dc.audit.events(mark))


def test_install_of_the_real_chart(dc, helm_bin):
    mark = dc.audit.mark()
    out, stats, seconds = _run(dc, helm_bin)
    assert stats["failures"] == 0, _failure(out)
    release = _release(dc, helm_bin)
    assert (release["chart"], release["app_version"], release["status"], release["revision"]) == \
        ("gpu-operator-v26.7.0", "v26.7.0", "deployed", "1")
    assert _helm(dc, helm_bin, "get", "values", RELEASE, "-n", NS, "-o", "json") == EXPECTED_VALUES
    deployments = {d.metadata.name for d in dc.admin.resources.get(api_version="apps/v1", kind="Deployment").get(
        namespace=NS).items}
    assert "gpu-operator" in deployments                    # and the NFD subchart's
    assert any(name.endswith("node-feature-discovery-master") for name in deployments), deployments
    print(f"\nreal chart install: {seconds:.1f} s, changed={stats['changed']}, {len(_writes(dc, mark))} writes")


def test_second_run_changes_and_writes_nothing(dc, helm_bin):
    seconds, requests = _converged_and_idle(dc, helm_bin)
    assert _release(dc, helm_bin)["revision"] == "1"
    print(f"\nsecond run: {seconds:.1f} s, {requests} requests, 0 writes")


def test_version_mismatch_is_refused_before_any_write(dc, helm_bin):
    mark = dc.audit.mark()
    out, stats, _seconds = _run(dc, helm_bin, *_extra_vars(version="26.3.0"))
    assert stats["failures"] == 1
    message = _failure(out)
    assert "v26.3.0" in message and "v26.7.0" in message and "Chart.yaml" in message, message
    assert _writes(dc, mark) == []
    assert _release(dc, helm_bin)["revision"] == "1"


def test_check_mode_of_a_change_writes_nothing_and_shows_no_secret(dc, helm_bin):
    secret = "kubegpu-test-secret-4f1c9a"
    helm = {"chart": "{{ lookup('ansible.builtin.env', 'KUBEGPU_TEST_CHARTS') }}/gpu-operator", "repo_url": "",
            "binary": "{{ lookup('ansible.builtin.env', 'KUBEGPU_TEST_HELM') }}",
            "values": {"operator": {"env": [{"name": "KUBEGPU_TEST_TOKEN", "value": secret}]}}}
    mark = dc.audit.mark()
    out, stats, _seconds = _run(dc, helm_bin, "--check", *_extra_vars(helm=helm))
    assert stats["failures"] == 0, _failure(out)
    assert task_result(out, "Install or upgrade the gpu-operator release")["changed"] is True
    assert _writes(dc, mark) == []
    assert secret not in json.dumps(out)
    assert _release(dc, helm_bin)["revision"] == "1"


def test_upgrade_runs_the_pre_upgrade_hook_job(dc, helm_bin):
    reason = job_runner_missing(dc)
    if reason:
        pytest.skip(reason)
    mark = dc.audit.mark()
    out, stats, seconds = _run(dc, helm_bin, *_extra_vars(cdi={"nri_plugin": True}))
    assert stats["failures"] == 0, _failure(out)
    release = _release(dc, helm_bin)
    assert (release["status"], release["revision"]) == ("deployed", "2")
    hooks = {h["name"]: h for h in _helm(dc, helm_bin, "status", RELEASE, "-n", NS, "-o", "json")["hooks"]}
    assert hooks[HOOK_JOB]["last_run"]["phase"] == "Succeeded", hooks[HOOK_JOB]
    jobs = [e.verb for e in dc.audit.writes(mark) if e.resource == "jobs" and e.namespace == NS]
    # By helm (admin): the hook's before-hook-creation delete, the create, and the hook-succeeded delete once the
    # Job completed (the controller-manager's own writes are not logged).
    assert jobs[-2:] == ["create", "delete"], jobs
    writes = len(_writes(dc, mark))
    # Back to the inventory's values: a second upgrade, hook included; then nothing.
    out, stats, back = _run(dc, helm_bin)
    assert stats["failures"] == 0, _failure(out)
    assert _helm(dc, helm_bin, "get", "values", RELEASE, "-n", NS, "-o", "json") == EXPECTED_VALUES
    assert _release(dc, helm_bin)["revision"] == "3"
    idle, requests = _converged_and_idle(dc, helm_bin)
    print(f"\nupgrade with hook: {seconds:.1f} s, {writes} writes; back: {back:.1f} s; then {idle:.1f} s, "
          f"{requests} requests, 0 writes")


def test_release_left_failed_by_a_timed_out_upgrade_is_repaired(dc, helm_bin):
    """The hook Job of this upgrade can never run (no node matches its selector): helm gives up after --timeout and
    leaves the release `failed`, with values the role does not want. Check mode shows the repair and writes
    nothing; the next run rolls back to the last deployed revision, which has the wanted values."""
    before = int(_release(dc, helm_bin)["revision"])
    proc = _helm_cli(dc, helm_bin, *_upgrade_args("--set-string", UNSCHEDULABLE, "--timeout", "5s"), check=False)
    assert proc.returncode != 0 and "pre-upgrade hooks failed" in proc.stderr, proc.stderr
    assert _release(dc, helm_bin)["status"] == "failed"

    mark = dc.audit.mark()
    out, stats, _seconds = _run(dc, helm_bin, "--check")
    assert stats["failures"] == 0, _failure(out)
    assert _writes(dc, mark) == []
    plan = task_result(out, "Show the repair")
    assert plan["changed"] is True and f"would roll back to revision {before}" in plan["msg"], plan["msg"]

    mark = dc.audit.mark()
    out, stats, seconds = _run(dc, helm_bin)
    assert stats["failures"] == 0, _failure(out)
    assert "Roll the release back to its last deployed revision" in _changed_tasks(out)
    release = _release(dc, helm_bin)
    assert (release["status"], release["revision"]) == ("deployed", str(before + 2))
    assert _helm(dc, helm_bin, "get", "values", RELEASE, "-n", NS, "-o", "json") == EXPECTED_VALUES
    writes = len(_writes(dc, mark))
    idle, _requests = _converged_and_idle(dc, helm_bin)
    print(f"\nfailed release repaired: {seconds:.1f} s, {writes} writes; next run {idle:.1f} s, 0 writes")


def test_release_left_pending_by_an_interrupted_upgrade_is_repaired(dc, helm_bin):
    """helm killed while it waits for the hook Job leaves the release `pending-upgrade`, which helm itself refuses
    to upgrade ("another operation is in progress"); the next run rolls it back."""
    before = int(_release(dc, helm_bin)["revision"])
    cmd = [str(helm_bin), *_upgrade_args("--set-string", UNSCHEDULABLE, "--timeout", "300s"),
           "--kubeconfig", str(dc.kubeconfig)]
    helm = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: _release(dc, helm_bin)["status"] == "pending-upgrade", timeout=60,
                 what="helm upgrade to start (release pending-upgrade)")
        time.sleep(1)
    finally:
        helm.send_signal(signal.SIGKILL)
        helm.wait()
    assert _release(dc, helm_bin)["status"] == "pending-upgrade"

    mark = dc.audit.mark()
    out, stats, seconds = _run(dc, helm_bin)
    assert stats["failures"] == 0, _failure(out)
    release = _release(dc, helm_bin)
    assert (release["status"], release["revision"]) == ("deployed", str(before + 2))
    assert _helm(dc, helm_bin, "get", "values", RELEASE, "-n", NS, "-o", "json") == EXPECTED_VALUES
    writes = len(_writes(dc, mark))
    idle, _requests = _converged_and_idle(dc, helm_bin)
    print(f"\npending release repaired: {seconds:.1f} s, {writes} writes; next run {idle:.1f} s, 0 writes")


def test_release_left_pending_by_an_interrupted_install_is_installed_anew(dc, helm_bin):
    """helm killed while it waits for a first install leaves the release `pending-install` with no revision that
    ever deployed: the next run uninstalls it (the chart's pre-delete and the NFD subchart's post-delete hook Jobs
    run, hence the skip) and installs it anew."""
    reason = job_runner_missing(dc)
    if reason:
        pytest.skip(reason)
    _reset(dc)
    # --wait never ends: the NFD garbage collector's pod cannot be scheduled. (Not the operator's: its node selector
    # is also the chart's pre-delete hook Job's, which the uninstall runs.)
    cmd = [str(helm_bin), "install", RELEASE, str(paths.charts_dir() / "gpu-operator"), "-n", NS, "--create-namespace",
           "--set-string", "node-feature-discovery.gc.nodeSelector.kubegpu-test/nowhere=true", "--wait",
           "--timeout", "300s", "--kubeconfig", str(dc.kubeconfig)]
    helm = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: _helm(dc, helm_bin, "list", "-n", NS, "--all", "-o", "json"), timeout=60,
                 what="helm install to record the release")
        time.sleep(2)
    finally:
        helm.send_signal(signal.SIGKILL)
        helm.wait()
    assert _release(dc, helm_bin)["status"] == "pending-install"

    mark = dc.audit.mark()
    out, stats, seconds = _run(dc, helm_bin)
    assert stats["failures"] == 0, _failure(out)
    assert "uninstall it (no revision ever deployed)" in task_result(out, "Show the repair")["msg"]
    release = _release(dc, helm_bin)
    assert (release["status"], release["revision"]) == ("deployed", "1")
    assert _helm(dc, helm_bin, "get", "values", RELEASE, "-n", NS, "-o", "json") == EXPECTED_VALUES
    writes = len(_writes(dc, mark))
    idle, _requests = _converged_and_idle(dc, helm_bin)
    print(f"\npending install reinstalled: {seconds:.1f} s, {writes} writes; next run {idle:.1f} s, 0 writes")
