"""A minimal level-triggered controller runtime on the kubernetes client's watch.

Watch threads turn events into keys on a delay queue; one worker per simulator fetches the object's current
state and calls ``reconcile(kind, obj)`` (obj is None once deleted). Reconcilers ask for a later look with
``requeue``; that is how simulated processes take time (a CSV installing, a MIG change in progress).
"""
from __future__ import annotations

import heapq
import json
import logging
import threading
import time
from datetime import datetime, timezone

from kubernetes import config as kube_config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

KNOBS_NAMESPACE = "kubegpu-devcluster"
KNOBS_CONFIGMAP = "simulator-knobs"
# A watched kind whose CRD is not installed yet (an operator or a chart brings it): look again this often.
MISSING_KIND_RETRY = 2.0
log = logging.getLogger("simulators")


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def heartbeat_free(node: dict) -> int:
    """A fingerprint of a Node (decoded JSON) without what a kubelet's periodic status post changes (its
    resourceVersion, managedFields and the conditions' lastHeartbeatTime): equal for two versions of a node that
    differ only by heartbeats."""
    meta = dict((k, v) for k, v in (node.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields"))
    status = dict(node.get("status") or {})
    status["conditions"] = [dict((k, v) for k, v in c.items() if k != "lastHeartbeatTime")
                            for c in status.get("conditions") or []]
    return hash(json.dumps([meta, node.get("spec"), status], sort_keys=True))


def client_for(kubeconfig: str) -> DynamicClient:
    # One discovery cache file per user: the default one is shared by every client on the machine and
    # concurrent writers corrupt it.
    return DynamicClient(kube_config.new_client_from_config(config_file=kubeconfig),
                         cache_file=f"{kubeconfig}.discovery.json")


class Knobs:
    """Failure and timing knobs: keys `<simulator>.<knob>` in ConfigMap kubegpu-devcluster/simulator-knobs.

    ttl > 0 keeps what was read that long: a simulator that acts on hundreds of nodes at once (a roll-out's batch)
    reads the ConfigMap once, not once per node per knob. A simulator that watches the ConfigMap calls
    invalidate() on its events, so that a changed knob is seen by the reconciles it triggers."""

    def __init__(self, dyn: DynamicClient, prefix: str, ttl: float = 0.0):
        self._api = dyn.resources.get(api_version="v1", kind="ConfigMap")
        self._prefix = prefix
        self._ttl = ttl
        self._read = (None, 0.0)   # (data, monotonic time it was read)
        self._generation = 0       # bumped by invalidate: a read begun before it is not kept
        self._lock = threading.Lock()

    def invalidate(self) -> None:
        with self._lock:
            self._read = (None, 0.0)
            self._generation += 1

    def _data(self) -> dict:
        with self._lock:
            data, at = self._read
            if data is not None and time.monotonic() - at < self._ttl:
                return data
            generation = self._generation
        try:
            cm = self._api.get(name=KNOBS_CONFIGMAP, namespace=KNOBS_NAMESPACE)
            data = (cm.data and cm.data.to_dict()) or {}
        except NotFoundError:
            data = {}
        if self._ttl > 0:
            with self._lock:
                if generation == self._generation:
                    self._read = (data, time.monotonic())
        return data

    def get(self, name: str, default: str = "") -> str:
        return self._data().get(f"{self._prefix}.{name}", default)

    def seconds(self, name: str, default: float) -> float:
        return float(self.get(name, str(default)))


class Simulator:
    """Subclasses set ``name`` and ``watches`` ({kind: api_version}) and implement ``reconcile``."""

    name = ""
    watches: dict = {}
    # Seconds a knobs read is kept (Knobs); 0 reads the ConfigMap on every look.
    knobs_ttl = 0.0
    # Reconciles at once (each key one at a time). More than one for the simulators that stand for one process per
    # node (mig-manager, device plugin): on real nodes a batch's hundred managers work side by side.
    workers = 1

    def __init__(self, kubeconfig: str):
        self.dyn = client_for(kubeconfig)
        self.knobs = Knobs(self.dyn, self.name, self.knobs_ttl)
        self._queue: list = []
        self._queued: dict = {}
        self._processing: set = set()   # keys a worker is reconciling now
        self._observed: dict = {}       # key -> when the watch first reported a change not reconciled yet
        self._local = threading.local()
        self._cv = threading.Condition()
        self._stop = threading.Event()

    # -- helpers for reconcilers
    def api(self, kind: str):
        return self.dyn.resources.get(api_version=self.watches.get(kind) or self.extra_kinds[kind], kind=kind)

    extra_kinds: dict = {}

    def requeue(self, kind: str, namespace: str | None, name: str, after: float = 0.0) -> None:
        key = (kind, namespace or None, name)
        due = time.monotonic() + after
        with self._cv:
            if key in self._queued and self._queued[key] <= due:
                return
            self._queued[key] = due
            heapq.heappush(self._queue, (due, key))
            self._cv.notify()

    def observed_at(self) -> float:
        """When the watch last reported a change of the key being reconciled (monotonic; now for a requeue).
        A simulated process that takes time counts from there, as one running on the node would, however long the
        simulator's queue was."""
        return getattr(self._local, "observed", None) or time.monotonic()

    def get(self, kind: str, namespace: str | None, name: str):
        try:
            return self.api(kind).get(name=name, namespace=namespace)
        except NotFoundError:
            return None

    def reconcile(self, kind: str, key: tuple, obj) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- runtime
    def _watch(self, kind: str) -> None:
        # A watch that ends on its timeout carries on from the last version it saw, as client-go's reflector does:
        # a list (and a reconcile of every object) only at the start and after an error. Listing again every
        # minute made each simulator that watches Nodes reconcile a 1,000-node fleet once a minute, for nothing.
        resume = None
        seen = {}   # key -> fingerprint of the object as last delivered (Node heartbeats are skipped with it)
        while not self._stop.is_set():
            try:
                api = self.api(kind)
                if resume is None:
                    listing = api.get()
                    for item in listing.items:
                        key = (kind, item.metadata.namespace or None, item.metadata.name)
                        if kind == "Node":   # the listed version is the one reconciled: its next heartbeat is none
                            seen[key] = heartbeat_free(item.to_dict())
                        self.requeue(kind, item.metadata.namespace, item.metadata.name)
                    resume = listing.metadata.resourceVersion
                for event in self.dyn.watch(api, resource_version=resume, timeout=60):
                    meta = event["object"].metadata
                    resume = meta.resourceVersion
                    key = (kind, meta.namespace or None, meta.name)
                    if event["type"] == "DELETED":
                        seen.pop(key, None)
                    elif kind == "Node":
                        mark = heartbeat_free(event["raw_object"])
                        if seen.get(key) == mark:
                            continue   # a kubelet's status post: only its conditions' heartbeat times moved
                        seen[key] = mark
                    with self._cv:   # the latest report: a process never starts before the change it acts on
                        self._observed[key] = time.monotonic()
                    self.requeue(kind, meta.namespace, meta.name)
                    if self._stop.is_set():
                        return
            except ResourceNotFoundError:
                resume = None
                self._wait_served(kind)
            except Exception as e:  # the API server restarted or the watch expired (410 Gone): list again
                resume = None
                log.debug("%s: watch %s restarts: %s", self.name, kind, e)
                if getattr(e, "status", None) == 404:   # the CRD was deleted: discovery is stale
                    self.dyn.resources.invalidate_cache()
                    time.sleep(MISSING_KIND_RETRY)
                time.sleep(0.5)

    def _wait_served(self, kind: str) -> None:
        """Until the API server serves `kind` (its CRD installed): one small discovery request per look, and the
        client's discovery cache refreshed only once it is there."""
        api_version = self.watches.get(kind) or self.extra_kinds[kind]
        while not self._stop.is_set():
            try:
                found = self.dyn.request("get", f"/apis/{api_version}").to_dict().get("resources") or []
                if any(r.get("kind") == kind for r in found):
                    self.dyn.resources.invalidate_cache()
                    return
            except Exception:  # the group is not served at all yet
                pass
            time.sleep(MISSING_KIND_RETRY)

    def _work(self) -> None:
        while not self._stop.is_set():
            with self._cv:
                while not self._queue or self._queue[0][0] > time.monotonic():
                    wait = (self._queue[0][0] - time.monotonic()) if self._queue else 1.0
                    self._cv.wait(timeout=max(0.01, min(wait, 1.0)))
                    if self._stop.is_set():
                        return
                due, key = heapq.heappop(self._queue)
                if self._queued.get(key) != due:
                    continue
                if key in self._processing:   # another worker has it: look again once it is done
                    later = time.monotonic() + 0.05
                    self._queued[key] = later
                    heapq.heappush(self._queue, (later, key))
                    continue
                del self._queued[key]
                self._processing.add(key)
                self._local.observed = self._observed.pop(key, None)
            kind, namespace, name = key
            try:
                self.reconcile(kind, key, self.get(kind, namespace, name))
            except Exception:  # a conflict or a race with the collection: look again shortly
                log.exception("%s: reconcile %s failed; retrying", self.name, key)
                self.requeue(kind, namespace, name, after=0.5)
            finally:
                with self._cv:
                    self._processing.discard(key)

    def start(self) -> list:
        threads = [threading.Thread(target=self._watch, args=(k,), daemon=True, name=f"{self.name}-{k}")
                   for k in self.watches]
        threads += [threading.Thread(target=self._work, daemon=True, name=f"{self.name}-worker-{i}")
                    for i in range(self.workers)]
        for t in threads:
            t.start()
        return threads

    def stop(self) -> None:
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
