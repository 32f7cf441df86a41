"""The rest of a real control plane beside the API server: kube-controller-manager, kube-scheduler, KWOK as the
fleet's kubelets, and cert-manager.

The controller-manager and the scheduler are the upstream binaries (built from the same k8s.io/kubernetes
module as the API server), each with the user the built-in RBAC roles are written for
(system:kube-controller-manager, system:kube-scheduler), leader election off (there is one of each). The
controller-manager gives every controller its own service account (--use-service-account-credentials) and signs
service-account tokens with the API server's key, so pods get real tokens and `default` service accounts.
KWOK manages the fleet's nodes (FLEET_LABEL): leases, Ready, and the pods bound to them (kwok/stages/).
cert-manager (build/cert-manager: its certificate controllers and CA injector in one process, as the user
system:kubegpu-sim:cert-manager like KWOK's) issues the Certificates charts create and writes the caBundle of the
webhook configurations, APIServices and CRDs that ask for it (docs/local-cluster.md, "cert-manager").
"""
from __future__ import annotations

import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import yaml

from . import certs, paths, ports
from .fleet import FLEET_LABEL

CONTROLLER_MANAGER = ("kube-controller-manager", "system:kube-controller-manager")
SCHEDULER = ("kube-scheduler", "system:kube-scheduler")
# One KWOK Stage per file (one YAML document each), in the order of their names.
KWOK_STAGES = sorted((paths.DEVCLUSTER_ROOT / "kwok" / "stages").glob("*.yaml"))
# KWOK renews a lease every quarter of its duration: at 600 s, 5,000 simulated nodes make ~33 writes/s. With 120 s
# (about 170 writes/s) KWOK fell behind on 5,000 nodes on two cores: hundreds of nodes went unreachable and back,
# and their DaemonSet pods with them, for as long as the fleet ran (measured 2026-12-06). The controller-manager's grace period
# outlasts a renewal missed under load, so a loaded machine does not mark nodes NotReady.
LEASE_SECONDS = 600
NODE_GRACE = "900s"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
BINARIES = ("kube-controller-manager", "kube-scheduler", "kwok", "cert-manager")
# The folder of shared/crds whose CRDs cert-manager's controllers watch: without them it does not start.
CERT_MANAGER_CRDS = "cert-manager"
# Where ClusterIssuers find their Secrets: the chart passes the namespace cert-manager is installed in.
CERT_MANAGER_NAMESPACE = "cert-manager"


def issue_certificates(ca: certs.CertificateAuthority) -> None:
    """Client certificates for the built-in users, serving certificates for the components' health ports."""
    for stem, user in (CONTROLLER_MANAGER, SCHEDULER):
        ca.issue(stem, user)
        ca.issue(f"{stem}-serving", stem, server=True)


def _start(state: Path, name: str, args: list) -> int:
    proc = subprocess.Popen(args, stdout=open(state / f"{name}.log", "ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    return proc.pid


def _component_args(state: Path, stem: str, port: int) -> list:
    pki, kubeconfig = state / "pki", state / f"kubeconfig-{stem}"
    # No --authentication/authorization-kubeconfig: only /healthz is asked for, which is always allowed, and
    # delegated authentication would look for a front-proxy CA this API server does not have.
    return [f"--kubeconfig={kubeconfig}", "--bind-address=127.0.0.1", f"--secure-port={port}",
            f"--tls-cert-file={pki / f'{stem}-serving.crt'}", f"--tls-private-key-file={pki / f'{stem}-serving.key'}",
            "--leader-elect=false", "--profiling=false", "--v=1"]


def check_binaries() -> None:
    bins = paths.bin_dir()
    missing = [str(bins / b) for b in BINARIES if not (bins / b).exists()]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} missing: run tools/devcluster/build.sh (make binaries)")


def start(state: Path, kwok_kubeconfig: Path, cert_manager_kubeconfig: Path | None = None) -> dict:
    """Start the components (cert-manager only with its kubeconfig: when its CRDs are loaded); returns
    {name: (pid, health URL)}. Call wait_healthy before using them."""
    check_binaries()
    bins, pki = paths.bin_dir(), state / "pki"
    started = {}
    port, scheduler_port, kwok_port, cert_manager_port = ports.free_ports(4)
    pid = _start(state, "kube-controller-manager", [
        str(bins / "kube-controller-manager"), *_component_args(state, CONTROLLER_MANAGER[0], port),
        f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
        "--use-service-account-credentials=true",
        f"--node-monitor-grace-period={NODE_GRACE}",
        # The defaults (20/s) take a minute to garbage-collect the leases of a 1,000-node fleet.
        "--kube-api-qps=100", "--kube-api-burst=200"])
    started["kube-controller-manager"] = (pid, f"https://127.0.0.1:{port}/healthz")
    pid = _start(state, "kube-scheduler", [str(bins / "kube-scheduler"),
                                           *_component_args(state, SCHEDULER[0], scheduler_port)])
    started["kube-scheduler"] = (pid, f"https://127.0.0.1:{scheduler_port}/healthz")
    started["kwok"] = _start_kwok(state, kwok_kubeconfig, kwok_port)
    if cert_manager_kubeconfig is not None:
        pid = _start(state, "cert-manager", [
            str(bins / "cert-manager"), f"--kubeconfig={cert_manager_kubeconfig}",
            f"--cluster-resource-namespace={CERT_MANAGER_NAMESPACE}",
            f"--healthz-listen-address=127.0.0.1:{cert_manager_port}"])
        started["cert-manager"] = (pid, f"http://127.0.0.1:{cert_manager_port}/healthz")
    return started


def _start_kwok(state: Path, kwok_kubeconfig: Path, port: int | None = None) -> tuple:
    port = port or ports.free_ports(1)[0]
    pid = _start(state, "kwok", [
        str(paths.bin_dir() / "kwok"), f"--kubeconfig={kwok_kubeconfig}",
        "--config=" + ",".join(str(p) for p in KWOK_STAGES),
        f"--manage-nodes-with-label-selector={FLEET_LABEL}",
        f"--node-lease-duration-seconds={LEASE_SECONDS}",
        # Pod IPs come from one pool for all nodes; KWOK's default (a /24) runs out with a large fleet.
        "--cidr=10.64.0.0/12", f"--server-address=127.0.0.1:{port}"])
    return pid, f"http://127.0.0.1:{port}/healthz"


def start_kwok(state: Path, kwok_kubeconfig: Path, alive) -> int:
    """Start KWOK alone and wait until it answers; returns its pid (a restart after a stall: __main__._restart_kwok)."""
    started = {"kwok": _start_kwok(state, kwok_kubeconfig)}
    wait_healthy(state, started, alive, 60)
    return started["kwok"][0]


def write_kubeconfigs(state: Path, server: str, kubeconfig) -> None:
    for stem, dummy in (CONTROLLER_MANAGER, SCHEDULER):
        path = state / f"kubeconfig-{stem}"
        path.write_text(yaml.safe_dump(kubeconfig(state, server, stem)))
        path.chmod(0o600)


def _healthy(url: str, ctx: ssl.SSLContext) -> str:
    """'' when the URL answers 200 ok, else why not."""
    try:
        with urllib.request.urlopen(url, context=ctx if url.startswith("https") else None, timeout=5) as r:
            return "" if r.status == 200 else f"HTTP {r.status}"
    except Exception as e:  # still starting: the reason goes into the timeout message
        return str(e)


def wait_healthy(state: Path, started: dict, alive, timeout: float) -> None:
    """Wait until each component's /healthz answers ok; fail naming the component, the reason and its log."""
    ctx = ssl.create_default_context(cafile=str(state / "pki" / "ca.crt"))
    deadline = time.monotonic() + timeout
    pending = dict(started)
    reasons = {}
    while pending:
        for name, (pid, url) in list(pending.items()):
            if not alive(pid):
                raise RuntimeError(f"{name} exited while starting; see {state / (name + '.log')}")
            reasons[name] = _healthy(url, ctx)
            if not reasons[name]:
                del pending[name]
        if not pending:
            return
        if time.monotonic() > deadline:
            name = next(iter(pending))
            raise RuntimeError(f"{name} not healthy after {timeout:.0f} s ({_reasons(pending, reasons)}); "
                               f"see {state / (name + '.log')}")
        time.sleep(0.3)


def _reasons(pending: dict, reasons: dict) -> str:
    return "; ".join(f"{name}: {reasons.get(name) or 'no answer yet'}" for name in pending)


def nodes_managed(dyn) -> tuple:
    """(fleet nodes, those schedulable: Ready, leased by KWOK for this very node object, and rid of the
    not-ready taint the API server puts on every new node until the controller-manager sees it Ready)."""
    nodes = dyn.resources.get(api_version="v1", kind="Node").get(label_selector=FLEET_LABEL).items
    leases = dyn.resources.get(api_version="coordination.k8s.io/v1", kind="Lease").get(
        namespace="kube-node-lease").items
    # A fleet switch recreates nodes under the same names: only a lease owned by the new node counts.
    owners = {ref.uid for lease in leases for ref in (lease.metadata.ownerReferences or [])}
    ready = 0
    for node in nodes:
        conditions = {c.type: c.status for c in (node.status.conditions or [])}
        tainted = any(t.key == NOT_READY_TAINT for t in (node.spec.taints or []))
        if conditions.get("Ready") == "True" and node.metadata.uid in owners and not tainted:
            ready += 1
    return len(nodes), ready


def wait_nodes_managed(dyn, timeout: float, on_stall=None, stall: float = 60.0) -> int:
    """Wait until every fleet node is schedulable (nodes_managed); returns how many nodes that is.

    on_stall: called once when the count has not moved for `stall` seconds with nodes still missing (__main__._restart_kwok)."""
    deadline = time.monotonic() + timeout
    best, moved = -1, time.monotonic()
    while True:
        total, ready = nodes_managed(dyn)
        if ready == total:
            return total
        if ready > best:
            best, moved = ready, time.monotonic()
        elif on_stall is not None and time.monotonic() - moved > stall:
            print(f"{total - ready} of {total} fleet nodes still not managed after {stall:.0f} s without progress: "
                  f"restarting KWOK", flush=True)
            on_stall()
            on_stall, moved = None, time.monotonic()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{total - ready} of {total} fleet nodes not Ready, leased by KWOK and untainted "
                               f"after {timeout:.0f} s; see kwok.log and kube-controller-manager.log")
        time.sleep(0.5)


def wait_default_service_account(dyn, timeout: float, namespace: str = "default") -> None:
    """The controller-manager's serviceaccount controller creates `default` in each namespace soon after it
    exists; until then the ServiceAccount admission plugin refuses pods there."""
    api = dyn.resources.get(api_version="v1", kind="ServiceAccount")
    deadline = time.monotonic() + timeout
    while not api.get(namespace=namespace, field_selector="metadata.name=default").items:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no service account {namespace}/default after {timeout:.0f} s; "
                               "see kube-controller-manager.log")
        time.sleep(0.3)
