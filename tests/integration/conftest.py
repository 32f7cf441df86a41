"""One real local cluster per test session (tools/devcluster), with helpers to run the collection against it.

The cluster lives in .cache/test-cluster (not .devcluster, so a developer's own cluster is left alone) and
is stopped at the end of the session. Tests switch fleets with `fleet(...)`, steer simulators with
`knobs(...)`, run modules and playbooks as the admin user, and count requests in the audit log.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "devcluster"))
sys.path.insert(0, str(REPO / ".cache" / "collections"))

from kubegpu_devcluster import __main__ as devcluster  # noqa: E402
from kubegpu_devcluster import cluster  # noqa: E402
from kubegpu_devcluster.audit import AuditLog  # noqa: E402
from kubegpu_devcluster.simulators.framework import KNOBS_CONFIGMAP, KNOBS_NAMESPACE  # noqa: E402

FLEETS = REPO / "tools" / "devcluster" / "fleets"
ANSIBLE_BIN = Path(sys.executable).parent


class Devcluster:
    def __init__(self, state: Path):
        self.state = state
        self.kubeconfig = cluster.kubeconfig_path(state)
        self.audit = AuditLog(state / "audit.log")
        self.admin = devcluster.dynamic_client(state)
        self.fleet_file = None

    def client(self, user: str = "admin"):
        return devcluster.dynamic_client(self.state, user)

    def fleet(self, name: str, fresh: bool = False) -> dict:
        """Load fleets/<name>.yaml (or a path) unless it is already the loaded one; return the parsed file.

        fresh: load it again even so, for a test that needs the nodes as the file has them, not as an earlier
        test left them (labels, allocatable)."""
        path = Path(name) if "/" in name else FLEETS / f"{name}.yaml"
        if fresh or self.fleet_file != path:
            devcluster.switch_fleet(self.state, path)
            self.fleet_file = path
        return yaml.safe_load(path.read_text())

    def knobs(self, values: dict) -> None:
        """Set simulator knobs, e.g. {"olm.fail_csv": "gpu-operator-certified.v26.7.0"} (simulators/*.py)."""
        api = self.admin.resources.get(api_version="v1", kind="ConfigMap")
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": KNOBS_CONFIGMAP, "namespace": KNOBS_NAMESPACE}, "data": values}
        api.server_side_apply(body=body, field_manager="tests", force_conflicts=True)

    def clear_knobs(self) -> None:
        try:
            self.admin.resources.get(api_version="v1", kind="ConfigMap").delete(
                name=KNOBS_CONFIGMAP, namespace=KNOBS_NAMESPACE)
        except NotFoundError:
            pass

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


@pytest.fixture(scope="session")
def devcluster_session():
    state = Path(os.environ.get("KUBEGPU_TEST_CLUSTER_DIR", REPO / ".cache" / "test-cluster"))
    os.environ["DEVCLUSTER_DIR"] = str(state)
    subprocess.run([str(REPO / "tools" / "devcluster" / "build.sh")], check=True, stdout=subprocess.DEVNULL)
    t0 = time.monotonic()
    devcluster.up(state, FLEETS / "default.yaml")
    print(f"\nlocal cluster ready in {time.monotonic() - t0:.1f} s ({state})")
    dc = Devcluster(state)
    dc.fleet_file = FLEETS / "default.yaml"
    yield dc
    cluster.down(state)


@pytest.fixture
def dc(devcluster_session):
    """The session's cluster with the simulator knobs cleared before each test."""
    devcluster_session.clear_knobs()
    return devcluster_session


def wait_for(predicate, timeout: float = 20, interval: float = 0.2, what: str = "condition"):
    """Poll predicate() until it returns something truthy; fail naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")
