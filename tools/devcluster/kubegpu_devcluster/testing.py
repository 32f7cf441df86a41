"""pytest helpers for tests against the local cluster: the simulators' own (tools/devcluster/tests) and the
collection's (tests/integration) start one real cluster per session through `session` and steer it with a
`Devcluster`: switch fleets, set simulator knobs, count requests in the audit log, wait for a condition.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError

from kubegpu_devcluster import __main__ as devcluster
from kubegpu_devcluster import cluster
from kubegpu_devcluster.audit import AuditLog
from kubegpu_devcluster.simulators.framework import KNOBS_CONFIGMAP, KNOBS_NAMESPACE

HERE = Path(__file__).resolve().parents[1]          # tools/devcluster
FLEETS = HERE / "fleets"
BUILD = HERE / "build.sh"


class Devcluster:
    """A running local cluster, seen as its admin."""

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


@contextlib.contextmanager
def own_cluster(state: Path, kind=Devcluster, fleet: Path | None = None):
    """A cluster of a test file's own, beside the session's (for tests that need one nothing else has touched):
    DEVCLUSTER_DIR points at it while it runs and back at the session's cluster afterwards. `fleet`: a fleet file to
    start with instead of the default one (a fleet without some CRDs starts from a seed without them, much faster
    than switching to it, which deletes them from the running API server)."""
    saved = os.environ.get("DEVCLUSTER_DIR")
    own = session(state, kind, fleet)
    try:
        dc = next(own, None)
        assert dc is not None, "the local cluster did not start"
        yield dc
    finally:
        own.close()
        if saved is None:
            os.environ.pop("DEVCLUSTER_DIR", None)
        else:
            os.environ["DEVCLUSTER_DIR"] = saved


def session(state: Path, kind=Devcluster, fleet: Path | None = None):
    """Start a cluster in `state` with the default fleet (or `fleet`), yield a `kind` for it, stop it afterwards.

    The binaries come from tools/devcluster/build.sh, which builds nothing when its cache is warm."""
    os.environ["DEVCLUSTER_DIR"] = str(state)
    subprocess.run([str(BUILD)], check=True, stdout=subprocess.DEVNULL)
    fleet = Path(fleet) if fleet else FLEETS / "default.yaml"
    t0 = time.monotonic()
    devcluster.up(state, fleet)
    print(f"\nlocal cluster ready in {time.monotonic() - t0:.1f} s ({state})")
    dc = kind(state)
    dc.fleet_file = fleet
    try:
        yield dc
    finally:
        cluster.down(state)


# A wait's timeout bounds a failure; it asserts no speed. KWOK, the simulators, the API server and the tests share
# two cores in CI, and a KWOK pod or a simulator's status write can lag by tens of seconds on a busy machine; a
# passing wait returns as soon as it holds.
WAIT_TIMEOUT = 120


def wait_for(predicate, timeout: float = WAIT_TIMEOUT, interval: float = 0.2, what: str = "condition"):
    """Poll predicate() until it returns something truthy; fail naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


# OLM, as the olm simulator serves it: subscribe to a package, approve its InstallPlans, read its CSVs.
OLM_V1A1 = "operators.coreos.com/v1alpha1"


def olm_subscribe(dc, channel, approval="Manual", starting=None, package="gpu-operator-certified",
                  source="certified-operators") -> str:
    """Subscribe to `package` in a new namespace (with its OperatorGroup); return the namespace."""
    ns = f"olm-{uuid.uuid4().hex[:6]}"
    dc.admin.resources.get(api_version="v1", kind="Namespace").create(body={"metadata": {"name": ns}})
    dc.admin.resources.get(api_version="operators.coreos.com/v1", kind="OperatorGroup").create(
        body={"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": "og"},
              "spec": {"targetNamespaces": [ns]}}, namespace=ns)
    spec = {"name": package, "channel": channel, "source": source, "sourceNamespace": "openshift-marketplace",
            "installPlanApproval": approval}
    if starting:
        spec["startingCSV"] = starting
    dc.admin.resources.get(api_version=OLM_V1A1, kind="Subscription").create(
        body={"apiVersion": OLM_V1A1, "kind": "Subscription", "metadata": {"name": package}, "spec": spec},
        namespace=ns)
    return ns


def install_plans(dc, ns):
    return dc.admin.resources.get(api_version=OLM_V1A1, kind="InstallPlan").get(namespace=ns).items


def csv_phase(dc, ns, name):
    """The phase of CSV `name` in `ns`, None while there is none."""
    csvs = {c.metadata.name: c for c in dc.admin.resources.get(api_version=OLM_V1A1, kind="ClusterServiceVersion")
            .get(namespace=ns).items}
    return (csvs[name].status or {}).get("phase") if name in csvs else None


def approve_plan(dc, ns, plan) -> None:
    dc.admin.resources.get(api_version=OLM_V1A1, kind="InstallPlan").patch(
        name=plan.metadata.name, namespace=ns, body={"spec": {"approved": True}},
        content_type="application/merge-patch+json")
