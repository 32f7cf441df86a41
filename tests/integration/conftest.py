"""One real local cluster per test session (tools/devcluster), with helpers to run the collection against it.

The cluster lives in .cache/test-cluster (not .devcluster, so a developer's own cluster is left alone) and
is stopped at the end of the session. Tests switch fleets with `fleet(...)`, steer simulators with
`knobs(...)`, run modules and playbooks as the admin user, and count requests in the audit log.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "devcluster"))
sys.path.insert(0, str(REPO / ".cache" / "collections"))

from demo_fleet import install_operator  # noqa: E402
from kubegpu_devcluster import testing  # noqa: E402
# Tests import wait_for from here.
from kubegpu_devcluster.testing import wait_for  # noqa: E402,F401  pylint: disable=unused-import

ANSIBLE_BIN = Path(sys.executable).parent


class Devcluster(testing.Devcluster):
    """The local cluster, and the collection run against it as the admin user."""

    def env(self) -> dict:
        return dict(os.environ, K8S_AUTH_KUBECONFIG=str(self.kubeconfig), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
                    ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                    PATH=f"{ANSIBLE_BIN}{os.pathsep}{os.environ['PATH']}")

    def module(self, name: str, args: dict | None = None, check: bool = False, env: dict | None = None,
               diff: bool = False) -> dict:
        """Run kubegpu.platform.<name> once through ansible (adhoc) and return its result."""
        cmd = ["ansible", "localhost", "-m", f"kubegpu.platform.{name}"]
        if args:
            cmd += ["-a", json.dumps(args)]
        if check:
            cmd.append("--check")
        if diff:
            cmd.append("--diff")
        proc = subprocess.run(cmd, cwd=REPO, env=dict(self.env(), **(env or {})), capture_output=True, text=True, check=False)
        out = json.loads(proc.stdout)
        return out["plays"][0]["tasks"][0]["hosts"]["localhost"]

    def playbook(self, playbook: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        cmd = ["ansible-playbook", playbook, *args]
        return subprocess.run(cmd, cwd=REPO, env=dict(self.env(), **(env or {})), capture_output=True, text=True, check=False)

    def start_playbook(self, playbook: str, *args: str) -> subprocess.Popen:
        """ansible-playbook started in a session of its own, output discarded: for a test that kills it (kill_playbook)."""
        return subprocess.Popen(["ansible-playbook", playbook, *args], cwd=REPO, env=self.env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


@pytest.fixture(scope="session")
def devcluster_session():
    state = Path(os.environ.get("KUBEGPU_TEST_CLUSTER_DIR", REPO / ".cache" / "test-cluster"))
    # Under pytest-xdist each worker is a session of its own: a cluster each (the files that start their own
    # cluster name its folder themselves, and `--dist loadfile` keeps a file on one worker).
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        state = state.with_name(f"{state.name}-{worker}")
    yield from testing.session(state, Devcluster)


@pytest.fixture
def dc(devcluster_session):
    """The session's cluster with the simulator knobs cleared before each test."""
    devcluster_session.clear_knobs()
    return devcluster_session


@pytest.fixture(scope="module")
def helm_bin():
    """The Go-built helm (tools/devcluster/build.sh builds it once; afterwards the call is a no-op)."""
    out = subprocess.run([str(REPO / "tools" / "devcluster" / "build.sh")], check=True, capture_output=True,
                         text=True).stdout.strip().splitlines()[-1]
    path = Path(out) / "helm"
    assert path.exists(), f"build.sh did not leave helm in {out}"
    return path


@pytest.fixture(scope="module")
def operator(devcluster_session):
    """The default (OpenShift) fleet, fresh, with the GPU Operator installed through OLM, a new ClusterPolicy
    and none of our configs: what the node-pool tests expect whatever ran before them in the session. A module
    that needs the operator without the fresh fleet defines its own `operator`."""
    dc = devcluster_session
    dc.fleet("default", fresh=True)
    for cm in dc.admin.resources.get(api_version="v1", kind="ConfigMap").get().items:
        if cm.metadata.name in ("kubegpu-mig-parted-config", "kubegpu-device-plugin-config"):
            dc.admin.resources.get(api_version="v1", kind="ConfigMap").delete(
                name=cm.metadata.name, namespace=cm.metadata.namespace)
    policies = dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    for policy in policies.get().items:
        policies.delete(name=policy.metadata.name)
    wait_for(lambda: not policies.get().items, timeout=60, what="old ClusterPolicy gone")
    return install_operator(dc)


# Helpers more than one test file needs.

def gpu_allocatable(dc) -> dict:
    """{node: {nvidia.com/ resource: count}} of every node, resources at 0 left out."""
    out = {}
    for n in dc.admin.resources.get(api_version="v1", kind="Node").get().items:
        alloc = n.status.allocatable or {}
        out[n.metadata.name] = {k: int(v) for k, v in alloc.items() if k.startswith("nvidia.com/") and int(v)}
    return out


def node_labels(dc, name) -> dict:
    """A node's labels as the API server has them now."""
    return dc.admin.resources.get(api_version="v1", kind="Node").get(name=name).metadata.labels


def cert_kubeconfig(path: Path, server: str, pki: Path, stem: str) -> Path:
    """A kubeconfig at `path` for the API server at `server` as the user whose client certificate is
    <pki>/<stem>.crt (a user of the local cluster's own CA)."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "faults",
        "clusters": [{"name": "devcluster", "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")}}],
        "users": [{"name": stem, "user": {"client-certificate": str(pki / f"{stem}.crt"),
                                          "client-key": str(pki / f"{stem}.key")}}],
        "contexts": [{"name": "faults", "context": {"cluster": "devcluster", "user": stem}}]}))
    path.chmod(0o600)
    return path


def task_name(task) -> str:
    """A task's name in ansible's JSON output, without its role ("kubegpu.platform.nfd : Install ..." -> "Install ...")."""
    return task["task"]["name"].split(" : ", 1)[-1]


def task_result(out, name) -> dict:
    """The result of the last task whose name starts with `name`, in ansible-playbook's JSON output."""
    found = [t["hosts"]["localhost"] for p in out["plays"] for t in p["tasks"] if task_name(t).startswith(name)]
    assert found, f"no task named {name!r}"
    return found[-1]


def _process_tree():
    """{parent pid: [child pids]} of every process now."""
    tree = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def kill_playbook(proc):
    """Kill ansible-playbook's process group and everything under it, as when the machine running it dies.

    Ansible's workers call setsid (a session of their own), so a signal to the playbook's process group alone
    leaves the worker and the module running on: stop the whole tree first, then kill it.
    """
    os.killpg(proc.pid, signal.SIGSTOP)
    stopped = {proc.pid}
    while True:
        tree = _process_tree()
        found = [child for pid in stopped for child in tree.get(pid, ()) if child not in stopped]
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
            stopped.add(pid)
    os.killpg(proc.pid, signal.SIGKILL)
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)
