"""A role's waiting task shows its progress while it waits: the gpu_operator playbook on the OpenShift fleet, with
the simulated operator taking a while to make the ClusterPolicy ready.

Each round of the task's `until` loop prints the round's progress line (the collection's action plugin) and
Ansible's RETRYING line, before the task's own result; the progress log (KUBEGPU_PROGRESS_LOG) gets each change.
"""
from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO
from gpu_operator_playbook import INVENTORY, PLAYBOOK, _reset
from kubegpu_devcluster import paths

READY_SECONDS = 12
TASK = "Reconcile the ClusterPolicy and wait until it is ready"


@pytest.fixture
def slow_operator(dc):
    dc.fleet("default")
    _reset(dc)
    dc.knobs({"gpu-operator.ready_seconds": str(READY_SECONDS)})
    yield dc
    dc.clear_knobs()
    _reset(dc)


def test_cluster_policy_wait_prints_progress_each_round_before_it_succeeds(slow_operator, helm_bin, tmp_path):
    dc = slow_operator
    log = tmp_path / "progress.log"
    t0 = time.monotonic()
    env = dict(dc.env(), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_NOCOLOR="1",
               KUBEGPU_PROGRESS_LOG=str(log), KUBEGPU_TEST_HELM=str(helm_bin),
               KUBEGPU_TEST_CHARTS=str(paths.charts_dir()))
    # The progress lines go to stderr (a json stdout callback stays parseable): read both, in order, as a
    # terminal or AWX shows them.
    proc = subprocess.run(["ansible-playbook", PLAYBOOK, "-i", str(INVENTORY), "-e", "gpu_operator_wait_round=3"],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    seconds = time.monotonic() - t0
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:]
    start = out.index(f"TASK [kubegpu.platform.gpu_operator : {TASK}]")
    section = out[start:out.index("TASK [", start + 1)]
    progress = re.findall(r"^\[localhost\] waiting (\d+) s for status.state == ready: "
                          r"ClusterPolicy/gpu-cluster-policy: (.*)$", section, re.M)
    retrying = re.findall(rf"^FAILED - RETRYING: \[localhost\]: .*{TASK} \((\d+) retries left\)", section, re.M)
    # The policy is new: the operator needs READY_SECONDS, so rounds of 3 s show it at least twice.
    assert len(progress) >= 2 and len(retrying) == len(progress), section
    assert all("state notReady" in detail or "no status yet" in detail for dummy, detail in progress), progress
    waited = [int(s) for s, dummy in progress]
    assert waited == sorted(waited) and waited[-1] >= 3, waited
    # The progress comes before the task's result, and the task ends changed (the first round wrote the policy).
    assert section.rindex("FAILED - RETRYING") < section.index("changed: [localhost]"), section
    lines = Path(log).read_text().splitlines()
    assert any("ClusterPolicy/gpu-cluster-policy: state notReady" in x for x in lines), lines
    assert any(x.endswith("ClusterPolicy/gpu-cluster-policy: ready") for x in lines), lines
    print(f"\n{len(progress)} progress lines in {seconds:.1f} s:\n{section}")
