"""python -m kubegpu_devcluster up [--fleet FILE] | fleet FILE | down

`up` builds nothing: run build.sh first (make cluster-up does both). It returns once every component is
healthy and every fleet node is Ready with a KWOK lease, and prints how long each step took.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kubernetes.dynamic import DynamicClient

from . import catalog, cluster, control_plane, crds, fleet, paths
from .simulators.framework import KNOBS_NAMESPACE, client_for

DEFAULT_FLEET = paths.DEVCLUSTER_ROOT / "fleets" / "default.yaml"
# How long `up` and a fleet switch wait for components and nodes: generous, for a loaded 2-core machine.
READY_TIMEOUT = 180.0
# Per node of a fleet switch, when more than READY_TIMEOUT (switch_fleet).
NODE_READY_SECONDS = 0.12


def dynamic_client(state: Path, user: str = "admin") -> DynamicClient:
    return client_for(str(cluster.kubeconfig_path(state, user)))


def bootstrap(state: Path) -> None:
    """As admin: let the simulators' group act (cluster-admin) and make the knobs namespace."""
    admin = dynamic_client(state)
    crb = admin.resources.get(api_version="rbac.authorization.k8s.io/v1", kind="ClusterRoleBinding")
    crb.server_side_apply(body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "kubegpu-simulators"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": cluster.SIMULATOR_GROUP}],
    }, field_manager="devcluster")
    ns = admin.resources.get(api_version="v1", kind="Namespace")
    ns.server_side_apply(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KNOBS_NAMESPACE}},
                         field_manager="devcluster")


def _restart_kwok(state: Path) -> None:
    """Stop KWOK and start it again, recorded as the cluster's: a new KWOK lists every node afresh.

    Why: KWOK 0.8 keys the nodes it holds by name. A fleet switch deletes nodes and creates them again under the same
    names; when KWOK sees the new node before the old one's deletion, it drops the name, and the new node gets no lease
    and no heartbeat ever (seen: 2 of 1,000 nodes after a bench's third fleet switch, "Creating lease" logged for the
    old node, nothing for the new one)."""
    old = cluster.read_state(state)["pids"]["kwok"]
    if cluster.stop_processes([old]):
        raise RuntimeError(f"KWOK (pid {old}) still running after SIGKILL; stop it by hand (kill -9 {old})")
    # The old KWOK's node leases go with it: a new KWOK finding a node's lease held (it renews none it did not
    # create) leaves the node, and the pods bound to it, alone until the lease expires (LEASE_SECONDS).
    dynamic_client(state).resources.get(api_version="coordination.k8s.io/v1", kind="Lease").delete(
        namespace="kube-node-lease", field_selector="metadata.namespace=kube-node-lease")  # every lease there
    pid = control_plane.start_kwok(state, cluster.kubeconfig_path(state, "sim-kwok"), cluster._alive)
    cluster.add_process(state, "kwok", pid)


def populate(state: Path, fleet_file: Path, server: str, replace: bool = False) -> dict:
    """Load the fleet (and on OpenShift the catalog) as the fleet simulator's user; replace drops the old one."""
    dyn = dynamic_client(state, "sim-fleet")
    f = fleet.load(fleet_file)
    if replace:
        fleet.reset(dyn)
        # CRDs an earlier fleet went without (or whose operator simulator removed them) come back, except those
        # this fleet's platform installs itself.
        crds.wait_gone(dyn, crds.terminating(dyn))
        if crds.missing(dyn, paths.crds_dir(), skip=f.without_crds):
            crds.load(dyn, paths.crds_dir(), skip=f.without_crds)
    if f.without_crds:
        crds.remove(dyn, paths.crds_dir(), f.without_crds)
        dyn.resources.invalidate_cache()
    nodes = fleet.apply(f, dyn, server)
    packages = catalog.apply(dyn) if f.openshift else 0
    return {"platform": f.platform, "nodes": nodes, "packages": packages}


def start_simulators(state: Path) -> int:
    env = dict(os.environ, PYTHONPATH=str(paths.DEVCLUSTER_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "kubegpu_devcluster.simulators", str(state)],
                            stdout=open(state / "simulators.log", "ab"), stderr=subprocess.STDOUT,
                            start_new_session=True, env=env)
    cluster.add_process(state, "simulators", proc.pid)
    return proc.pid


def up(state: Path, fleet_file: Path) -> None:
    if cluster.read_state(state).get("ready") and cluster.running(state):
        print(f"devcluster already running: KUBECONFIG={cluster.kubeconfig_path(state)}")
        return
    cluster.down(state)  # whatever a failed or crashed start left behind
    control_plane.check_binaries()
    t0 = time.monotonic()
    # A fleet whose platform installs some CRDs itself starts from a seed without them: deleting the KServe CRDs
    # from a running API server takes tens of seconds.
    skip = fleet.load(fleet_file).without_crds
    seed = crds.seed_dir(paths.crds_dir(), skip)
    record = cluster.up(state, seed=seed if seed.exists() else None)
    t1 = time.monotonic()
    try:
        bootstrap(state)
        n_crds = crds.load(dynamic_client(state, "sim-fleet"), paths.crds_dir(), skip=skip)
        if not seed.exists():
            # Save etcd with the CRDs loaded, so the next start skips the slowest step.
            cluster.stop(state)
            crds.save_seed(state / "etcd-data", seed)
            record = cluster.up(state)
        t2 = time.monotonic()
        # The components start while the fleet loads; `up` waits for both below.
        cert_manager = None if control_plane.CERT_MANAGER_CRDS in skip else cluster.kubeconfig_path(
            state, "sim-cert-manager")
        started = control_plane.start(state, cluster.kubeconfig_path(state, "sim-kwok"), cert_manager)
        for name, (pid, dummy) in started.items():
            cluster.add_process(state, name, pid)
        summary = populate(state, fleet_file, record["server"])
        t3 = time.monotonic()
        start_simulators(state)
        control_plane.wait_healthy(state, started, cluster._alive, READY_TIMEOUT)
        admin = dynamic_client(state)
        control_plane.wait_default_service_account(admin, READY_TIMEOUT)
        t4 = time.monotonic()
        control_plane.wait_nodes_managed(admin, READY_TIMEOUT)
        t5 = time.monotonic()
    except Exception:
        cluster.down(state)
        raise
    data = cluster.read_state(state)
    data.update(ready=True, fleet=str(fleet_file), platform=summary["platform"])
    (state / "state.json").write_text(json.dumps(data, indent=2))
    print(f"devcluster up in {time.monotonic() - t0:.1f} s: API server {t1 - t0:.1f} s, {n_crds} CRDs "
          f"{t2 - t1:.1f} s, {summary['nodes']} nodes ({summary['platform']}) {t3 - t2:.1f} s"
          + (f", {summary['packages']} catalog packages" if summary["packages"] else "")
          + f", {'/'.join(started)} healthy +{t4 - t3:.1f} s, nodes Ready and leased "
          f"+{t5 - t4:.1f} s")
    print(f"export KUBECONFIG={cluster.kubeconfig_path(state)}")
    print(f"audit log: {state / 'audit.log'}")


def switch_fleet(state: Path, fleet_file: Path) -> dict:
    record = cluster.read_state(state)
    if not record.get("ready"):
        raise SystemExit("devcluster is not running: make cluster-up first")
    t0 = time.monotonic()
    summary = populate(state, fleet_file, record["server"], replace=True)
    # KWOK takes each node's lease and Ready in turn: on a busy 2-core machine 5,000 nodes took over 180 s (twice,
    # beside an `ansible-test sanity`), so a large fleet gets a proportionally longer wait.
    wait = max(READY_TIMEOUT, summary["nodes"] * NODE_READY_SECONDS)
    control_plane.wait_nodes_managed(dynamic_client(state), wait, on_stall=lambda: _restart_kwok(state))
    record = cluster.read_state(state)
    record.update(fleet=str(fleet_file), platform=summary["platform"])
    (state / "state.json").write_text(json.dumps(record, indent=2))
    print(f"fleet {fleet_file.name}: {summary['nodes']} nodes ({summary['platform']}) Ready in "
          f"{time.monotonic() - t0:.1f} s")
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="kubegpu_devcluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start the cluster and load a fleet")
    p_up.add_argument("--fleet", type=Path, default=Path(os.environ.get("FLEET") or DEFAULT_FLEET))
    p_fleet = sub.add_parser("fleet", help="replace the running cluster's fleet with another")
    p_fleet.add_argument("file", type=Path)
    sub.add_parser("down", help="stop every process and remove the state folder")
    args = parser.parse_args(argv)
    state = paths.state_dir()
    if args.command == "up":
        up(state, args.fleet.resolve())
    elif args.command == "fleet":
        switch_fleet(state, args.file.resolve())
    else:
        cluster.down(state)
        print("devcluster stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
