"""Start and stop the local cluster: etcd + kube-apiserver on loopback, RBAC on, JSON audit log, upstream CRDs.
(control_plane.py adds the controller-manager, the scheduler and KWOK.)

Every user is a client certificate: the admin (what the collection runs as), one user per simulator
(group kubegpu:simulators, bound to cluster-admin; KWOK and cert-manager count as one), the built-in users of the
controller-manager and the scheduler, and `kubegpu-nobody` with no rights at all, so that tests can show RBAC
refusing a request.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import yaml

from . import certs, control_plane, paths, ports

ADMIN = ("kubegpu-admin", ("system:masters",))
NOBODY = ("kubegpu-nobody", ())
SIMULATOR_GROUP = "kubegpu:simulators"
# Simulated components, each with a user of its own; the fleet loader, KWOK and cert-manager (real, but run by the
# local cluster like a simulator) count as one.
SIMULATOR_USERS = ("fleet", "olm", "gpu-operator", "mig-manager", "device-plugin", "dra-plugin", "kwok",
                   "kserve", "keda", "knative", "openshift-ai", "cert-manager", "kueue-operator",
                   "dcgm-exporter", "nvidia-driver")
# Admission webhooks are not called. Every chart that registers one (kserve-resources, keda, the DRA driver) points
# it at a Service in front of pods that no kubelet runs (KWOK gives them addresses nothing answers on), with
# failurePolicy Fail: the API server would refuse every InferenceService, ScaledObject and predictor pod. Serving
# the webhooks from a simulator would need the Service's cluster IP routed to this machine (root networking).
# The configurations are still stored as the charts write them; ValidatingAdmissionPolicy (in-process) stays on.
WEBHOOK_ADMISSION = ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook")
# Stopping waits this long for the processes after SIGTERM, and at most STOP_KILL_WAIT after SIGKILL.
STOP_GRACE = 5.0
STOP_KILL_WAIT = 20.0


def simulator_user(name: str) -> str:
    return f"system:kubegpu-sim:{name}"


AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    # One event per request, when the response is complete: verb, user, object and response code.
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        # The control plane's own traffic (controllers, scheduler, kubelet leases and heartbeats) never stops;
        # logged, it would hide the collection's and the simulators' requests and the log would never settle.
        {"level": "None", "users": ["system:kube-controller-manager", "system:kube-scheduler",
                                    simulator_user("kwok")]},
        {"level": "None", "userGroups": ["system:serviceaccounts:kube-system"]},
        # Simulators whose kinds are not installed yet (a chart or an operator brings the CRDs) look at discovery
        # every few seconds; logged, those looks would keep the log from settling. Their object requests stay.
        {"level": "None", "userGroups": [SIMULATOR_GROUP],
         "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/openapi/*", "/version"]},
        {"level": "Metadata"},
    ],
}


def audit_policy(request_bodies_of=()) -> dict:
    """AUDIT_POLICY, and for the users in `request_bodies_of` (DEVCLUSTER_AUDIT_REQUEST_USERS, comma-separated) the
    body of every request too (level Request), so a test can search what they sent. Secrets stay at Metadata, as
    Kubernetes' own example policy keeps them: the body of a Secret is where a secret belongs."""
    users = [u for u in request_bodies_of if u]
    if not users:
        return AUDIT_POLICY
    bodies = [{"level": "Metadata", "users": users, "resources": [{"group": "", "resources": ["secrets"]}]},
              {"level": "Request", "users": users}]
    return dict(AUDIT_POLICY, rules=bodies + AUDIT_POLICY["rules"])


def _kubeconfig(state: Path, server: str, user_stem: str) -> dict:
    pki = state / "pki"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "devcluster",
                      "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")}}],
        "users": [{"name": user_stem, "user": {"client-certificate": str(pki / f"{user_stem}.crt"),
                                               "client-key": str(pki / f"{user_stem}.key")}}],
        "contexts": [{"name": "devcluster", "context": {"cluster": "devcluster", "user": user_stem}}],
        "current-context": "devcluster",
    }


def kubeconfig_path(state: Path, user: str = "admin") -> Path:
    return state / ("kubeconfig" if user == "admin" else f"kubeconfig-{user}")


def read_state(state: Path) -> dict:
    f = state / "state.json"
    return json.loads(f.read_text()) if f.exists() else {}


def _write_state(state: Path, data: dict) -> None:
    (state / "state.json").write_text(json.dumps(data, indent=2))


def _alive(pid: int) -> bool:
    """True while the process runs; a zombie (exited, not yet reaped by its parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _reap(pids) -> None:
    """Collect the exit status of those of our own children that have exited."""
    for p in pids:
        try:
            os.waitpid(p, os.WNOHANG)
        except ChildProcessError:
            pass


def running(state: Path) -> bool:
    pids = read_state(state).get("pids") or {}
    return bool(pids) and all(_alive(p) for p in pids.values())


def _wait_ready(server: str, state: Path, timeout: float) -> None:
    pki = state / "pki"
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{server}/readyz", context=ctx, timeout=5) as r:
                if r.status == 200:
                    return
        except Exception as e:  # the server is still starting: keep the reason for the timeout message
            last = str(e)
        time.sleep(0.3)
    raise RuntimeError(f"kube-apiserver not ready after {timeout:.0f} s ({last}); see {state / 'apiserver.log'}")


def up(state: Path, timeout: float = 90, seed: Path | None = None) -> dict:
    """Start etcd and kube-apiserver (if not running) and write the kubeconfigs. Returns the state record.

    `seed` is an etcd data folder saved earlier (CRDs already loaded): it is copied in and etcd starts from it
    with --force-new-cluster, which rewrites the stored membership to this run's ports.
    """
    if running(state):
        return read_state(state)
    stop(state)  # leftovers of a crashed run; an existing etcd-data folder is reused
    state.mkdir(parents=True, exist_ok=True)
    bins = paths.bin_dir()
    for b in ("etcd", "kube-apiserver"):
        if not (bins / b).exists():
            raise RuntimeError(f"{bins / b} is missing: run tools/devcluster/build.sh (make binaries)")

    pki = state / "pki"
    ca = certs.CertificateAuthority(pki)
    ca.issue("apiserver", "kube-apiserver", server=True)
    ca.issue("admin", ADMIN[0], ADMIN[1])
    ca.issue("nobody", NOBODY[0], NOBODY[1])
    for sim in SIMULATOR_USERS:
        ca.issue(f"sim-{sim}", simulator_user(sim), (SIMULATOR_GROUP,))
    control_plane.issue_certificates(ca)
    sa_key = certs.service_account_keys(pki)
    (state / "audit-policy.yaml").write_text(yaml.safe_dump(
        audit_policy(os.environ.get("DEVCLUSTER_AUDIT_REQUEST_USERS", "").split(","))))

    seeded = []
    if seed is not None and not (state / "etcd-data").exists():
        shutil.copytree(seed, state / "etcd-data")
        seeded = ["--force-new-cluster"]
    etcd_port, etcd_peer, api_port = ports.free_ports(3)
    server = f"https://127.0.0.1:{api_port}"
    env = dict(os.environ, ETCD_UNSUPPORTED_ARCH=os.environ.get("ETCD_UNSUPPORTED_ARCH", ""))
    etcd = subprocess.Popen(
        [str(bins / "etcd"), "--name", "devcluster", "--data-dir", str(state / "etcd-data"),
         "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
         "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
         "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
         "--initial-cluster", f"devcluster=http://127.0.0.1:{etcd_peer}",
         # A throwaway cluster: durability is not worth the fsync latency.
         "--unsafe-no-fsync", "--quota-backend-bytes", str(4 * 1024 ** 3), "--log-level", "warn"] + seeded,
        stdout=open(state / "etcd.log", "ab"), stderr=subprocess.STDOUT, start_new_session=True, env=env)
    apiserver = subprocess.Popen(
        [str(bins / "kube-apiserver"),
         f"--etcd-servers=http://127.0.0.1:{etcd_port}",
         "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
         f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
         f"--client-ca-file={pki / 'ca.crt'}",
         "--authorization-mode=RBAC",
         "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
         f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={sa_key}",
         "--service-cluster-ip-range=10.96.0.0/16",
         # Fleet nodes are created as registered, Ready nodes. This plugin would taint each one not-ready until
         # the controller-manager has seen it Ready: 1,000 extra writes and 40 s for the large fleet. The
         # controller-manager still taints a node that stops being Ready. Webhook admission: see WEBHOOK_ADMISSION.
         "--disable-admission-plugins=TaintNodesByCondition," + ",".join(WEBHOOK_ADMISSION),
         # As kubeadm and OpenShift do: driver charts (the DRA kubelet plugin) run privileged pods.
         "--allow-privileged=true",
         f"--audit-policy-file={state / 'audit-policy.yaml'}", f"--audit-log-path={state / 'audit.log'}",
         "--audit-log-format=json", "--audit-log-mode=blocking", "--audit-log-maxsize=0",
         "--profiling=false", "--v=1"],
        stdout=open(state / "apiserver.log", "ab"), stderr=subprocess.STDOUT, start_new_session=True)
    record = {"server": server, "pids": {"etcd": etcd.pid, "kube-apiserver": apiserver.pid},
              "ports": {"etcd": etcd_port, "kube-apiserver": api_port}}
    _write_state(state, record)
    kubeconfig_path(state).write_text(yaml.safe_dump(_kubeconfig(state, server, "admin")))
    kubeconfig_path(state, "nobody").write_text(yaml.safe_dump(_kubeconfig(state, server, "nobody")))
    for sim in SIMULATOR_USERS:
        kubeconfig_path(state, f"sim-{sim}").write_text(yaml.safe_dump(_kubeconfig(state, server, f"sim-{sim}")))
    control_plane.write_kubeconfigs(state, server, _kubeconfig)
    for f in state.glob("kubeconfig*"):
        f.chmod(0o600)
    try:
        _wait_ready(server, state, timeout)
    except RuntimeError:
        down(state)
        raise
    return record


def add_process(state: Path, name: str, pid: int) -> None:
    record = read_state(state)
    record.setdefault("pids", {})[name] = pid
    _write_state(state, record)


def down(state: Path) -> None:
    """Stop every process the cluster started and remove its state folder."""
    stop(state)
    if state.exists():
        subprocess.run(["rm", "-rf", str(state)], check=False)


def stop(state: Path) -> None:
    """Stop every process the cluster started and return once each has exited.

    SIGTERM to each process group, SIGKILL to those still running after STOP_GRACE seconds, then wait (bounded)
    until they are gone: on a loaded machine a killed process can take a while to exit. Raises RuntimeError
    naming the processes still alive after that, rather than leaving them behind unnoticed.
    """
    record = read_state(state)
    named = dict(record.get("pids", {}))
    left = stop_processes(list(named.values()))
    if record:
        record["pids"] = {name: pid for name, pid in named.items() if pid in left}
        _write_state(state, record)
    if left:
        names = ", ".join(f"{name} (pid {pid})" for name, pid in named.items() if pid in left)
        raise RuntimeError(f"still running {STOP_KILL_WAIT:.0f} s after SIGKILL: {names}; stop them by hand "
                           f"(kill -9 PID) before starting the cluster in {state} again")


def stop_processes(pids: list) -> list:
    """SIGTERM to each process group, SIGKILL to those still running after STOP_GRACE seconds; returns the pids
    still running STOP_KILL_WAIT seconds after that (on a loaded machine a killed process can take a while)."""
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGTERM)
        except OSError:
            pass
    # A throwaway cluster: no need to wait long for a graceful exit.
    _wait_gone(pids, STOP_GRACE)
    for pid in pids:
        if _alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
    return _wait_gone(pids, STOP_KILL_WAIT)


def _wait_gone(pids, timeout: float) -> list:
    """Reap and wait until none of pids runs, at most timeout seconds; returns those still running."""
    deadline = time.monotonic() + timeout
    while True:
        _reap(pids)
        left = [p for p in pids if _alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)
