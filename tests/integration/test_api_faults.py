"""The collection survives API faults (issue 10): real throttling and real dropped connections, no mocks.

- Throttling: API Priority and Fairness on the local API server. system:masters is exempt from APF, so the
  collection runs as its own user (a client certificate from the cluster's CA, bound to cluster-admin), whose
  FlowSchema sends it to a priority level with no seats of its own: a request there runs only while no other
  request of that level runs, and is refused with 429 otherwise. A second user of the same level keeps it busy
  part of the time (a SelfSubjectAccessReview whose body arrives slowly holds the seat), so that a share of the
  collection's requests meet 429 -- counted in the audit log.
- Dropped connections: toxiproxy (tools/devcluster/build/toxiproxy) between the collection and the API server,
  on loopback; TLS passes through it (the API server certificate names 127.0.0.1). A thread adds reset_peer,
  latency and timeout toxics at random and takes them away again.

The demo fleet's node pools converge through the node_pools playbook under both at once.
"""
from __future__ import annotations

import json
import random
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from kubernetes.dynamic.exceptions import NotFoundError

from conftest import REPO, cert_kubeconfig, gpu_allocatable, wait_for
from kubegpu_devcluster import __main__ as devcluster
from kubegpu_devcluster import certs, cluster, paths

USER = "kubegpu-faults"            # the collection, throttled
LOAD_USER = "kubegpu-faults-load"  # keeps the throttled priority level busy
FLOWCONTROL = "flowcontrol.apiserver.k8s.io/v1"
PRIORITY_LEVEL = "kubegpu-faults-one-seat"
INVENTORY = REPO / "examples" / "demo" / "inventory.yml"
FLEET = REPO / "tools" / "devcluster" / "fleets" / "default.yaml"
SEED = 20261130


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Toxiproxy:
    """A toxiproxy server on loopback with one proxy in front of the API server, driven over its HTTP API."""

    def __init__(self, state: Path, upstream_port: int):
        binary = paths.bin_dir() / "toxiproxy"
        if not binary.exists():
            pytest.fail(f"{binary} is missing: run tools/devcluster/build.sh")
        self.api = f"http://127.0.0.1:{_free_port()}"
        self.log = state / "toxiproxy.log"
        self.proc = subprocess.Popen([str(binary), "-host", "127.0.0.1", "-port", self.api.rsplit(":", 1)[1],
                                      "-seed", str(SEED)],
                                     stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)
        try:
            wait_for(self._up, timeout=20, what="toxiproxy to answer")
            self.listen = f"127.0.0.1:{_free_port()}"
            self.call("POST", "/proxies", {"name": "apiserver", "listen": self.listen,
                                           "upstream": f"127.0.0.1:{upstream_port}", "enabled": True})
        except BaseException:
            self.stop()
            raise
        self.added = {"reset_peer": 0, "latency": 0, "timeout": 0}

    def _up(self) -> bool:
        try:
            self.call("GET", "/version")
            return True
        except OSError:
            return False

    def call(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.api + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            text = resp.read()
        try:
            return json.loads(text) if text.strip() else None
        except ValueError:      # /version answers plain text
            return text.decode()

    def add(self, name: str, kind: str, stream: str, toxicity: float, **attributes) -> None:
        toxic = {"name": name, "type": kind, "stream": stream, "toxicity": toxicity, "attributes": attributes}
        self.call("POST", "/proxies/apiserver/toxics", toxic)
        self.added[kind] += 1

    def accepted_since(self, offset: int) -> int:
        """How many clients the proxy accepted after byte `offset` of its log (it logs each at info level)."""
        with open(self.log, "rb") as log:
            log.seek(offset)
            return log.read().count(b'"message":"Accepted client"')

    def clear(self) -> None:
        for toxic in self.call("GET", "/proxies/apiserver/toxics") or []:
            self.call("DELETE", f"/proxies/apiserver/toxics/{toxic['name']}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Chaos(threading.Thread):
    """Adds one toxic at a time at random (reset the connection, slow it, or stall and close it), for a moment.

    The first fault is certain, not left to chance: a short random reset may fall between two modules' requests
    (it did, once in a full run under load: 6 resets, none met). Every connection is reset from the start until
    the proxy has accepted a client and `certain` seconds after, so a module meets resets while it works."""

    def __init__(self, proxy: Toxiproxy, seed: int = SEED, deadline: float = 900, certain: float = 1.0):
        super().__init__(daemon=True)
        self.proxy, self.rng, self.deadline = proxy, random.Random(seed), time.monotonic() + deadline
        self.certain = certain
        self.stopping = threading.Event()
        self.log_offset = 0

    def start(self) -> None:
        # In place before the thread runs, so that no connection of the run can come before it.
        self.proxy.add("first", "reset_peer", "upstream", 1.0, timeout=0)
        self.log_offset = self.proxy.log.stat().st_size
        super().start()

    def run(self) -> None:
        while not self.stopping.is_set() and time.monotonic() < self.deadline:
            if self.proxy.accepted_since(self.log_offset):
                self.stopping.wait(self.certain)
                break
            self.stopping.wait(0.05)
        self.proxy.clear()
        n = 0
        while not self.stopping.is_set() and time.monotonic() < self.deadline and n < 5000:
            n += 1
            if self.stopping.wait(self.rng.uniform(0.3, 1.5)):
                break
            kind = self.rng.choices(["reset_peer", "latency", "timeout"], weights=[5, 3, 2])[0]
            stream = self.rng.choice(["upstream", "downstream"])
            if kind == "reset_peer":
                self.proxy.add(f"t{n}", kind, stream, self.rng.uniform(0.5, 1.0), timeout=self.rng.randint(0, 100))
                hold = self.rng.uniform(0.1, 0.5)
            elif kind == "latency":
                self.proxy.add(f"t{n}", kind, stream, 1.0, latency=self.rng.randint(100, 600), jitter=50)
                hold = self.rng.uniform(0.5, 2.0)
            else:
                self.proxy.add(f"t{n}", kind, stream, 1.0, timeout=self.rng.randint(200, 1000))
                hold = self.rng.uniform(0.1, 0.4)
            self.stopping.wait(hold)
            self.proxy.clear()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=15)
        self.proxy.clear()


class Throttle(threading.Thread):
    """Keeps the one-seat priority level busy `hold` seconds out of every `hold + pause`, as LOAD_USER: a
    SelfSubjectAccessReview whose body is sent slowly occupies the seat until the body is complete."""

    def __init__(self, server_port: int, pki: Path, hold: float, pause: float, deadline: float = 900):
        super().__init__(daemon=True)
        self.port, self.hold, self.pause, self.deadline = server_port, hold, pause, time.monotonic() + deadline
        self.ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.ctx.load_cert_chain(str(pki / "faults-load.crt"), str(pki / "faults-load.key"))
        self.stopping = threading.Event()
        self.codes: dict[int, int] = {}

    def once(self, hold: float) -> int:
        body = json.dumps({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                           "spec": {"resourceAttributes": {"verb": "get", "resource": "nodes"}}}).encode()
        head = (f"POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as raw:
            with self.ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(head + body[:1])
                self.stopping.wait(hold)
                tls.sendall(body[1:])
                status = tls.recv(64).split(b" ", 2)
        return int(status[1]) if len(status) > 1 else 0

    def run(self) -> None:
        n = 0
        while not self.stopping.is_set() and time.monotonic() < self.deadline and n < 20000:
            n += 1
            try:
                code = self.once(self.hold)
            except OSError:
                code = 0
            self.codes[code] = self.codes.get(code, 0) + 1
            self.stopping.wait(self.pause)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=15)


@pytest.fixture(scope="module")
def faults(operator):
    """USER (bound to cluster-admin, throttled by APF) and LOAD_USER, a toxiproxy in front of the API server, and
    a kubeconfig for USER through it. Everything is removed afterwards."""
    dc = operator
    pki = dc.state / "pki"
    ca = certs.CertificateAuthority(pki)
    ca.issue("faults", USER)
    ca.issue("faults-load", LOAD_USER)
    api_port = cluster.read_state(dc.state)["ports"]["kube-apiserver"]
    apply = {}
    objects = [
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", {
            "metadata": {"name": USER},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]}),
        # No seats of its own and none borrowed: one request at a time runs, any other is refused (429).
        (FLOWCONTROL, "PriorityLevelConfiguration", {
            "metadata": {"name": PRIORITY_LEVEL},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 0, "lendablePercent": 0,
                                                    "borrowingLimitPercent": 0,
                                                    "limitResponse": {"type": "Reject"}}}}),
        (FLOWCONTROL, "FlowSchema", {
            "metadata": {"name": USER},
            "spec": {"priorityLevelConfiguration": {"name": PRIORITY_LEVEL}, "matchingPrecedence": 300,
                     "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [{"kind": "User", "user": {"name": u}} for u in (USER, LOAD_USER)],
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                   "clusterScope": True, "namespaces": ["*"]}],
                                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}),
    ]
    proxy = None
    try:
        for api_version, kind, body in objects:
            api = dc.admin.resources.get(api_version=api_version, kind=kind)
            apply[(api_version, kind)] = body["metadata"]["name"]
            api.server_side_apply(body=dict(body, apiVersion=api_version, kind=kind), field_manager="tests",
                                  force_conflicts=True)
        proxy = Toxiproxy(dc.state, api_port)
        kubeconfig = cert_kubeconfig(dc.state / "kubeconfig-faults-proxy", f"https://{proxy.listen}", pki, "faults")
        yield {"dc": dc, "proxy": proxy, "kubeconfig": kubeconfig, "api_port": api_port, "pki": pki}
    finally:
        if proxy is not None:
            proxy.stop()
        for (api_version, kind), name in apply.items():
            try:
                dc.admin.resources.get(api_version=api_version, kind=kind).delete(name=name)
            except NotFoundError:
                pass


def _results(out):
    """Every module result of a json-callback run, loop items included."""
    for play in out["plays"]:
        for task in play["tasks"]:
            result = task["hosts"].get("localhost", {})
            for r in result.get("results") or [result]:
                yield task["task"]["name"], r


def _duplicate_writes(events, user=USER):
    """Writes of `user` repeated with nothing else done to that object in between but reading it: what resending a
    write that had already been carried out (its answer lost) looks like. `events` are every user's, in order: a
    node's two steps of a MIG change are not a resend, mig-manager writes the node between them (the roll-out's
    wait watches the nodes, so no list of ours comes between them any more)."""
    dupes = []
    last = None
    for e in events:
        ok = 200 <= e.code < 300
        key = (e.verb, e.resource, e.namespace, e.name, e.subresource)
        if e.user != user:
            if ok and e.is_write and last is not None and (e.resource, e.namespace, e.name) == last[1:4]:
                last = None
            continue
        if e.is_write and ok:
            if last == key:
                dupes.append(str(e))
            last = key
        elif ok and last is not None and not (e.verb == "get" and (e.resource, e.namespace, e.name) == last[1:4]):
            last = None
    return dupes


def _converge(dc, kubeconfig, throttle=None, chaos=None):
    """Pristine nodes (every pool has work to do), then the node_pools playbook with the demo inventory as USER
    through the proxy, under the faults given; it must succeed. Returns (json output, seconds, USER's audit events)."""
    devcluster.switch_fleet(dc.state, FLEET)
    dc.fleet_file = FLEET
    mark = dc.audit.mark()
    for fault in (throttle, chaos):
        if fault is not None:
            fault.start()
    t0 = time.monotonic()
    try:
        proc = dc.playbook("playbooks/node_pools.yml", "-i", str(INVENTORY),
                           env={"K8S_AUTH_KUBECONFIG": str(kubeconfig), "KUBEGPU_API_REQUEST_TIMEOUT": "10"})
    finally:
        seconds = time.monotonic() - t0
        for fault in (chaos, throttle):
            if fault is not None:
                fault.stop()
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"ansible-playbook printed no JSON (rc {proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    failed = [(name, r.get("msg")) for name, r in _results(out) if r.get("failed")]
    assert proc.returncode == 0 and not failed, failed
    return out, seconds, dc.audit.events(mark, user=USER), dc.audit.events(mark, user=None)


def _writes(events):
    """The writes carried out (2xx), as a multiset of (verb, resource, namespace, name, subresource)."""
    return Counter((e.verb, e.resource, e.namespace, e.name, e.subresource)
                   for e in events if e.is_write and 200 <= e.code < 300)


def test_demo_fleet_converges_through_throttling_and_resets(faults):
    dc, proxy = faults["dc"], faults["proxy"]
    # Fault-free runs before and after: the first brings our ConfigMaps and ClusterPolicy fields to what the demo
    # pools want (whatever earlier tests left), so that the faulted run and the last one start alike.
    _converge(dc, faults["kubeconfig"])
    throttle = Throttle(faults["api_port"], faults["pki"], hold=0.45, pause=0.35)
    out, seconds, events, everyone = _converge(dc, faults["kubeconfig"], throttle, Chaos(proxy))
    clean_seconds, clean_events = _converge(dc, faults["kubeconfig"])[1:3]

    throttled = [e for e in events if e.code == 429]
    retries = [r["api_retries"] for name, r in _results(out) if "api_retries" in r]
    total = {k: sum(r.get(k, 0) for r in retries) for k in ("429", "5xx", "connection", "conflict")}
    print(f"\nunder faults: {seconds:.1f} s, {len(events)} requests, {len(throttled)} throttled "
          f"({len(throttled) / max(1, len(events)):.0%}), {sum(_writes(events).values())} writes, toxics added "
          f"{proxy.added}, retries {total}, load requests {throttle.codes}; without faults: {clean_seconds:.1f} s, "
          f"{len(clean_events)} requests, {sum(_writes(clean_events).values())} writes")

    # Allocatable as planned, for every node the plan predicts.
    plan = next(r["plan"] for name, r in _results(out) if "Plan every pool" in name)
    predicted = {node: {k: v for k, v in change["allocatable_after"].items() if v}
                 for pool in plan["pools"] for node, change in pool["node_changes"].items()
                 if change["allocatable_after"] is not None}
    assert predicted, plan
    wait_for(lambda: all(gpu_allocatable(dc)[n] == want for n, want in predicted.items()), timeout=120,
             what=f"allocatable as planned: {predicted}")

    # Retries reported in every module result, and both kinds of fault met.
    assert retries and all(set(r) == {"429", "5xx", "connection", "conflict"} for r in retries)
    assert total["429"] > 0 and total["connection"] > 0, total
    # Enough of the run throttled to matter: since the roll-out's wait watches the nodes instead of listing them every
    # second the run sends about 70 requests, mostly in bursts, so the share of them caught in a throttled window
    # varies from run to run around a tenth (9 of 83, 7 of 71); several throttled and a twentieth at least.
    share = len(throttled) / len(events)
    assert len(throttled) >= 4 and share >= 0.05, f"only {len(throttled)} of {len(events)} requests were throttled"

    # No write repeated: the same writes as the fault-free run from the same state, none twice in a row.
    assert _writes(events) == _writes(clean_events)
    assert _duplicate_writes(everyone) == []


def test_retry_budget_exhausted_names_the_request_and_the_fault(faults):
    dc, proxy = faults["dc"], faults["proxy"]
    proxy.add("reset-all", "reset_peer", "upstream", 1.0, timeout=0)
    try:
        mark = dc.audit.mark()
        t0 = time.monotonic()
        env = {"K8S_AUTH_KUBECONFIG": str(faults["kubeconfig"]), "KUBEGPU_API_RETRY_BUDGET": "3"}
        result = dc.module("gpu_cluster_info", env=env)
        seconds = time.monotonic() - t0
    finally:
        proxy.clear()
    assert result.get("failed") is True
    msg = result["msg"]
    print(f"\nbudget spent in {seconds:.1f} s: {msg}")
    assert "gave up after" in msg and "retry budget 3 s" in msg and "KUBEGPU_API_RETRY_BUDGET" in msg, msg
    assert "reset" in msg.lower() or "aborted" in msg.lower(), msg          # the fault
    assert "GET /" in msg or "connect to the API server" in msg, msg        # the request
    assert result["api_retries"]["connection"] > 0
    assert seconds < 60
    assert dc.audit.writes(mark, user=USER) == []
