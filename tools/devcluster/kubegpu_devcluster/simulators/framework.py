"""A minimal level-triggered controller runtime on the kubernetes client's watch.

Watch threads turn events into keys on a delay queue; one worker per simulator fetches the object's current
state (or, for the kinds a simulator caches, takes the copy its watch last delivered) and calls
``reconcile(kind, obj)`` (obj is None once deleted). Reconcilers ask for a later look with
``requeue``; that is how simulated processes take time (a CSV installing, a MIG change in progress).
"""
from __future__ import annotations

import copy
import heapq
import json
import logging
import threading
import time
from datetime import datetime, timezone

from kubernetes import config as kube_config
from kubernetes.dynamic import DynamicClient, LazyDiscoverer
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


def status_free(obj: dict) -> int:
    """A fingerprint of an object (decoded JSON) without its status, resourceVersion and managedFields: equal for two
    versions that differ only by what a controller reports (a DaemonSet's pod counts)."""
    meta = dict((k, v) for k, v in (obj.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields"))
    return hash(json.dumps([meta, obj.get("spec")], sort_keys=True))


def _version(obj: dict) -> int:
    """An object's resourceVersion as a number: the local cluster's are etcd revisions, so a larger one is newer (as
    client-go's integer mutation cache assumes)."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class Copy:
    """An object as a watch (or this simulator's own write) last delivered it: what reconcile gets for a cached kind.
    Only to_dict(), a copy the reconciler may change."""

    def __init__(self, raw: dict):
        self._raw = raw

    def to_dict(self) -> dict:
        return copy.deepcopy(self._raw)


class Discoverer(LazyDiscoverer):
    """The client's lazy discovery, where a group version the server still lists but no longer serves (its CRD
    being deleted: a fleet switch, an operator's uninstall) has no resources. Upstream, its 404 ends every search
    that walks it, and a lookup of a core kind ("v1" names no group) walks every group: a simulator process that
    started while the switch deleted the KServe CRDs died in its first ConfigMap lookup, and the cluster went on
    without any simulator. An empty group version is not kept: the next search asks again."""

    def get_resources_for_api_version(self, prefix, group, version, preferred):
        try:
            return super().get_resources_for_api_version(prefix, group, version, preferred)
        except NotFoundError:
            return {}


def client_for(kubeconfig: str, connections: int = 0) -> DynamicClient:
    # One discovery cache file per user: the default one is shared by every client on the machine and
    # concurrent writers corrupt it.
    api = kube_config.new_client_from_config(config_file=kubeconfig)
    # connections: what the simulator has in flight at most (its workers and watches). The client keeps cpu x 5
    # connections (10 on two cores): beyond that, each request of a burst opened a TLS connection and dropped it.
    if connections:
        api.rest_client.pool_manager.connection_pool_kw["maxsize"] = connections
    return DynamicClient(api, cache_file=f"{kubeconfig}.discovery.json", discoverer=Discoverer)


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
        # One read at a time when reads are kept: at a batch's due time sixteen workers find the copy expired
        # together, and each sending its own GET to a busy API server made each wait for all of them.
        self._reading = threading.Lock() if ttl > 0 else None

    def invalidate(self) -> None:
        with self._lock:
            self._read = (None, 0.0)
            self._generation += 1

    def _kept(self):
        with self._lock:
            data, at = self._read
            return data if data is not None and time.monotonic() - at < self._ttl else None

    def _data(self) -> dict:
        if self._reading is None:
            return self._fetch()
        data = self._kept()
        if data is not None:
            return data
        with self._reading:   # another worker's read may have just kept a copy
            data = self._kept()
            return data if data is not None else self._fetch()

    def _fetch(self) -> dict:
        with self._lock:
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
    # Kinds whose status this simulator never reads: an event that changes only an object's status (a DaemonSet's pod
    # counts, rewritten by the DaemonSet controller as a roll-out pauses and resumes operands on hundreds of nodes)
    # wakes no reconcile.
    status_blind: frozenset = frozenset()
    # Kinds reconciled from the copy the watch last delivered, as a controller reconciles from its informer's cache,
    # instead of a GET each time (a roll-out's batch makes thousands of Node reconciles). A reconciler of such a kind
    # passes what it writes to remember(), so that its next reconcile never acts on the version before its own write.
    cached: frozenset = frozenset()

    def __init__(self, kubeconfig: str):
        self.dyn = client_for(kubeconfig, self.workers + len(self.watches) + 2)
        self.knobs = Knobs(self.dyn, self.name, self.knobs_ttl)
        self._queue: list = []
        self._queued: dict = {}
        self._processing: set = set()   # keys a worker is reconciling now
        self._observed: dict = {}       # key -> when the watch first reported a change not reconciled yet
        self._cache: dict = {}          # key -> decoded object, for the cached kinds
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

    def remember(self, kind: str, written) -> None:
        """A write's response (the object as written) into the cache of a cached kind."""
        if kind in self.cached and written is not None:
            self._store(kind, written.to_dict() if hasattr(written, "to_dict") else written)

    def watched(self, kind: str, namespace: str | None, name: str) -> dict | None:
        """An object of a cached kind as its watch (or this simulator's own write) last delivered it; None when it
        has not. Shared, not copied: for reading only."""
        with self._cv:
            return self._cache.get((kind, namespace or None, name))

    def _store(self, kind: str, raw: dict) -> None:
        meta = raw.get("metadata") or {}
        key = (kind, meta.get("namespace") or None, meta.get("name"))
        with self._cv:
            old = self._cache.get(key)
            if old is None or _version(raw) >= _version(old):
                self._cache[key] = raw

    def _current(self, key: tuple):
        """What reconcile gets: the cached copy for a cached kind (a GET when the watch has not delivered it yet), else
        the object as the API server has it now; None once deleted."""
        kind, namespace, name = key
        if kind in self.cached:
            with self._cv:
                raw = self._cache.get(key)
            if raw is not None:
                return Copy(raw)
        obj = self.get(kind, namespace, name)
        if obj is not None and kind in self.cached:
            self._store(kind, obj.to_dict())
        return obj

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
        # key -> fingerprint of the object as last delivered: a Node's kubelet heartbeats, and the status of a
        # status-blind kind, are skipped with it.
        seen = {}
        fingerprint = heartbeat_free if kind == "Node" else status_free if kind in self.status_blind else None
        while not self._stop.is_set():
            try:
                api = self.api(kind)
                if resume is None:
                    listing = api.get()
                    listed = set()
                    for item in listing.items:
                        key = (kind, item.metadata.namespace or None, item.metadata.name)
                        listed.add(key)
                        raw = item.to_dict() if fingerprint or kind in self.cached else None
                        if fingerprint:   # the listed version is the one reconciled: its next heartbeat is none
                            seen[key] = fingerprint(raw)
                        if kind in self.cached:
                            self._store(kind, raw)
                        self.requeue(kind, item.metadata.namespace, item.metadata.name)
                    with self._cv:   # deleted while no watch ran: reconciled as gone
                        gone = [k for k in self._cache if k[0] == kind and k not in listed]
                        for key in gone:
                            del self._cache[key]
                    for key in gone:
                        self.requeue(*key)
                    resume = listing.metadata.resourceVersion
                for event in self.dyn.watch(api, resource_version=resume, timeout=60):
                    meta = event["object"].metadata
                    resume = meta.resourceVersion
                    key = (kind, meta.namespace or None, meta.name)
                    if event["type"] == "DELETED":
                        seen.pop(key, None)
                        if kind in self.cached:
                            with self._cv:
                                self._cache.pop(key, None)
                    else:
                        if kind in self.cached:
                            self._store(kind, event["raw_object"])
                        if fingerprint:
                            mark = fingerprint(event["raw_object"])
                            if seen.get(key) == mark:
                                continue   # a heartbeat, or a status this simulator never reads
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
        path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"   # core kinds: /api/v1
        while not self._stop.is_set():
            try:
                found = self.dyn.request("get", path).to_dict().get("resources") or []
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
                self.reconcile(kind, key, self._current(key))
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
