# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one waiter: every wait of the collection is a target, a predicate and one timeout/poll policy.

The API (stable: modules and the serving stage build on it)::

    target = Target("nvidia.com/v1", "ClusterPolicy", name="cluster-policy")          # one object
    target = Target("v1", "Node", label_selector="pool=a", names=["gpu-1", "gpu-2"])   # a list, one call a poll
    target = Target.custom("resource.k8s.io", read=lambda cluster: ...)                # anything else (discovery)

    outcome = wait_for(cluster, target, state_ready(), timeout=1200,
                       interval=2.0,      # seconds between polls
                       budget=None,       # seconds this call may wait; then it returns outcome.ready False
                       started=None,      # epoch seconds the whole wait began (a wait spread over several calls)
                       raise_on_failure=True)   # False: failed items end the wait without raising (outcome.failed)

    outcome.ready      True: every item is ready (or, with raise_on_failure=False, ready or failed)
    outcome.observed   what the target read last (an object, None, or a list)
    outcome.items      {name: (READY | WAITING | FAILED, detail)} of the last poll
    outcome.failed     names of failed items (only with raise_on_failure=False; otherwise WaitFailed is raised)
    outcome.progress   {summary, target, expected, ready, pending, failed, waited_s, lines}: what the task returns

    (keyword arguments added later, all optional: memory=dict kept across the rounds of one wait)

    # in a module: KubegpuModule(..., waits=True) adds the options wait_round and wait_started, and
    outcome = module.wait_for(target, predicate, result)   # timeout = the module's `timeout` option; sets
                                                           # result["ready"], result["progress"]; fails the module
                                                           # with the waiter's message on WaitTimeout/WaitFailed

Predicates judge what the target read. Per kind (use these, or `each(fn, expected)` for a new one):
`state_ready` (ClusterPolicy, NVIDIADriver: status.state == ready), `condition(type, status)` (e.g. Ready True,
Available True; the failing condition's reason and message are in the detail), `node_changes(changes)` (MIG state
and allocatable per node), `operand_configs(wanted)` (operand DaemonSets mounting their ConfigMaps),
`resource_slices(nodes)` (each node publishes a ResourceSlice), `api_served(group)` (discovery).

Errors: WaitTimeout and WaitFailed (both WaitError) name the target, what was expected, what was last seen and
for how long, and how long the wait ran: `ClusterPolicy/cluster-policy: not ready after 1200 s (expected
status.state == ready); last seen: state notReady: Ready=False (reason OperandsNotReady): ... for 40 s`.
`err.progress` is the same progress as a round's, `err.observed` the last read.

Progress users see (docs/architecture.md, "Waits"): Ansible modules cannot print while they run, so a role calls
a waiting module as a task with `until: <result>.ready` / `retries:` / `delay:` and a short O(wait_round): each
call waits at most that long and returns `ready: false` with `progress`; the module's action plugin prints the
round's progress line and Ansible its RETRYING line (both live in AWX). `wait_started` carries the start of the
whole wait from round to round, so O(timeout) bounds the whole wait and its error says how long it ran;
KubegpuModule keeps what the rounds of one wait saw and wrote in a private file between rounds, so that the last
round's result says `changed` and lists the `changes` and progress `lines` of every round. Each poll whose state
changed is also appended to the file named by KUBEGPU_PROGRESS_LOG, when set, for `tail -f`.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.watch import WatchedList
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.rollout import Progress
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.states import FAILED, READY, WAITING

PROGRESS_LOG_ENV = "KUBEGPU_PROGRESS_LOG"
# A progress line names each item not ready up to this many; beyond, it counts them per detail (DETAIL_GROUPS
# details at most, NAMED_LONGEST of each named): a line listing every node of a large batch in flight is too long
# to read, printed once a second (docs/performance.md, "Where the figures behind the code live").
NAMED_ITEMS = 10
DETAIL_GROUPS = 5
NAMED_LONGEST = 3


# -- errors -------------------------------------------------------------------------------------------------------
class WaitError(Exception):
    """A wait that ended without its target ready: `progress` is the last round's progress (items, lines),
    `states` {item: (state, detail)} and `observed` what the target read last."""

    def __init__(self, message, progress=None, states=None, observed=None):
        super(WaitError, self).__init__(message)
        self.progress = progress or {}
        self.states = states or {}
        self.observed = observed


class WaitTimeout(WaitError):
    """The whole wait (from `started`) ran past its timeout."""


class WaitFailed(WaitError):
    """A predicate saw a state that will not become ready by waiting (a failed CSV, an ignored ClusterPolicy)."""


class RoundOver(Exception):
    """Raised by a caller deep in a module's flow when a wait's round ran out (Outcome.ready False): the module
    returns ready False with `progress` and is called again. Not an error."""

    def __init__(self, progress):
        super(RoundOver, self).__init__(progress.get("summary", "round over"))
        self.progress = progress


# -- targets ------------------------------------------------------------------------------------------------------
class Target(object):
    """What a wait reads each poll: one object (name), or a list (namespace, label_selector), or a custom read.

    `names` (for a list) are the items that must each be judged: one absent from the list is judged as None.
    """

    def __init__(self, api_version, kind, name=None, namespace=None, label_selector=None, names=None, title=None,
                 read=None, watch=False):
        self.api_version, self.kind, self.name, self.namespace = api_version, kind, name, namespace
        self.label_selector = label_selector
        self.names = list(names) if names is not None else None
        self._read = read
        self.title = title or self._title()
        # A list kept current by a watch (cluster/watch.py): judged as soon as an event changes it, not a poll
        # later, and read once instead of once a poll. Without the watch verb it polls as without it.
        self.watch = bool(watch) and not name and read is None
        self.watched = None

    @classmethod
    def custom(cls, title, read, names=None):
        """A target read by `read(cluster)` (discovery, several kinds); judged like a single object."""
        return cls(None, None, title=title, read=read, names=names)

    def _title(self):
        if self.name:
            return "/".join(x for x in (self.kind, self.namespace, self.name) if x)
        where = []
        if self.namespace:
            where.append("in " + self.namespace)
        if self.label_selector:
            where.append(self.label_selector)
        return "{0}s{1}".format(self.kind, " (" + ", ".join(where) + ")" if where else "")

    @property
    def single(self):
        """Judged as one item (named by the target): a named object, or a custom read without `names`."""
        return bool(self.name) or (self._read is not None and self.names is None)

    def read(self, cluster):
        if self._read is not None:
            return self._read(cluster)
        if self.watch:
            if self.watched is None:
                self.watched = WatchedList(cluster, self.api_version, self.kind, namespace=self.namespace,
                                           label_selector=self.label_selector)
            return self.watched.read()
        if self.name:
            return cluster.get(self.api_version, self.kind, self.name, self.namespace)
        kwargs = {}
        if self.namespace:
            kwargs["namespace"] = self.namespace
        if self.label_selector:
            kwargs["label_selector"] = self.label_selector
        return cluster.list(self.api_version, self.kind, **kwargs)

    def pause(self, seconds, sleep=time.sleep):
        """Until the next read: `seconds`, or for a watched list until an event changed it."""
        if self.watched is not None:
            self.watched.pause(seconds)
        else:
            sleep(seconds)

    def remember(self, obj):
        """A write's answer to an object of a watched list: a read right after the write sees it."""
        if self.watched is not None:
            self.watched.remember(obj)

    def close(self):
        """End a watched list's stream (a later read lists again)."""
        if self.watched is not None:
            self.watched.close()


# -- predicates ---------------------------------------------------------------------------------------------------
class Predicate(object):
    """`expected` says in words what the wait waits for; judge(observed, target) returns {name: (state, detail)}.

    fail_fast: a FAILED item ends the wait at once (a CSV); otherwise the wait goes on until nothing is WAITING
    (the other nodes of a batch are midway through their change and must not be left behind).
    """

    def __init__(self, expected, judge, fail_fast=True):
        self.expected, self._judge, self.fail_fast = expected, judge, fail_fast

    def judge(self, observed, target):
        return self._judge(observed, target)


def _name_of(obj):
    return ((obj or {}).get("metadata") or {}).get("name")


def each(fn, expected, fail_fast=True, missing=(WAITING, "not found")):
    """A predicate judging each object with fn(obj) -> (state, detail); an absent object is `missing`."""
    def judge(observed, target):
        if target.single:
            name = target.name or target.title
            return {name: fn(observed) if observed is not None else missing}
        by_name = dict((_name_of(o), o) for o in observed or [])
        names = target.names if target.names is not None else sorted(by_name)
        return dict((n, fn(by_name[n]) if n in by_name else missing) for n in names)
    return Predicate(expected, judge, fail_fast)


def conditions_of(obj):
    return [dict((k, c.get(k)) for k in ("type", "status", "reason", "message"))
            for c in ((obj or {}).get("status") or {}).get("conditions") or []]


def describe_conditions(conditions):
    parts = ["{0}={1} (reason {2}): {3}".format(c.get("type"), c.get("status"), c.get("reason") or "-",
                                                c.get("message") or "-") for c in conditions]
    return "; ".join(parts) or "no conditions"


def _stale(obj):
    """Whether a condition still describes an older generation than the object's (status from before a change)."""
    generation = ((obj or {}).get("metadata") or {}).get("generation")
    return generation is not None and any(
        c.get("observedGeneration") is not None and c["observedGeneration"] < generation
        for c in ((obj or {}).get("status") or {}).get("conditions") or [])


def state_ready():
    """ClusterPolicy / NVIDIADriver: status.state == ready (conditions of the current generation); `ignored` fails."""
    def fn(obj):
        state = ((obj.get("status") or {}).get("state"))
        conditions = describe_conditions(conditions_of(obj))
        if state == "ready" and not _stale(obj):
            return READY, "ready"
        if state == "ignored":
            return FAILED, ("ignored by the GPU Operator: another {0} is the one it reconciles ({1})".format(
                obj.get("kind") or "object", conditions))
        if not state:
            return WAITING, "no status yet"
        return WAITING, "state {0}{1}: {2}".format(state, " (status of an older generation)" if _stale(obj) else "",
                                                   conditions)
    return each(fn, "status.state == ready")


def condition(type_, status="True", failed_reasons=()):
    """A condition `type_` with `status` (Ready True, Available True); the failing condition's reason and message
    are the detail. A reason in failed_reasons stops the wait."""
    def fn(obj):
        for c in conditions_of(obj):
            if c["type"] == type_:
                if c["status"] == status and not _stale(obj):
                    return READY, "{0}={1}".format(type_, status)
                detail = "{0}={1} (reason {2}): {3}".format(type_, c["status"], c["reason"] or "-", c["message"] or "-")
                return (FAILED if c["reason"] in failed_reasons else WAITING), detail
        return WAITING, "no {0} condition yet".format(type_)
    return each(fn, "condition {0}={1}".format(type_, status))


def node_changes(changes):
    """Nodes (a list target) each reach their planned change: MIG state success and allocatable as planned.

    A failed node does not end the wait for the others of its batch; a node that is gone has failed."""
    progress = Progress()

    def judge(observed, target):
        nodes = dict((_name_of(n), n) for n in observed or [])
        out = {}
        for name, change in changes.items():
            if name not in nodes:
                out[name] = (FAILED, "node is gone")
                continue
            out[name] = progress(nodes[name], change)
        return out
    return Predicate("MIG state success and allocatable as planned", judge, fail_fast=False)


def mounted_configmap(daemonset, volume):
    """The ConfigMap a DaemonSet's pod template mounts as `volume`, or None."""
    for v in (((daemonset or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("volumes") or []:
        if v.get("name") == volume and v.get("configMap"):
            return v["configMap"].get("name")
    return None


def operand_configs(wanted):
    """DaemonSets (a list target in the operator's namespace) {name: (volume, configmap)} mount their ConfigMaps;
    a DaemonSet that does not exist (no node runs that operand) is ready."""
    def judge(observed, target):
        by_name = dict((_name_of(d), d) for d in observed or [])
        out = {}
        for name, (volume, configmap) in sorted(wanted.items()):
            mounted = mounted_configmap(by_name.get(name), volume)
            out[name] = (READY, "not deployed") if name not in by_name else (
                (READY if mounted == configmap else WAITING), "mounts {0}{1}".format(
                    mounted, "" if mounted == configmap else ", not " + configmap))
        return out
    return Predicate("the operand DaemonSets mount the new ConfigMaps", judge)


def resource_slices(nodes, driver="gpu.nvidia.com"):
    """Each node publishes a ResourceSlice of `driver` (a ResourceSlice list target); the detail counts devices."""
    def judge(observed, target):
        devices = {}
        for item in observed or []:
            spec = item.get("spec") or {}
            if spec.get("driver") == driver and spec.get("nodeName") in nodes:
                devices[spec["nodeName"]] = devices.get(spec["nodeName"], 0) + len(spec.get("devices") or [])
        return dict((n, (READY, "{0} devices".format(devices[n])) if n in devices else
                     (WAITING, "no ResourceSlice of {0}".format(driver))) for n in nodes)
    return Predicate("a ResourceSlice of {0} per node".format(driver), judge)


def api_served(group):
    """A custom target reading `cluster.served_versions(group)`: ready once any version is served."""
    def judge(observed, target):
        return {group: (READY, "served as " + ", ".join(observed)) if observed else (WAITING, "not served")}
    return Predicate("{0} served by the API server".format(group), judge)


# -- the waiter ---------------------------------------------------------------------------------------------------
def gone():
    """Objects deleted: a Target.custom whose read returns {name: object or None}, each name ready once its object is
    gone (the uninstall); one still there is waited for, "terminating" once its deletion has begun (finalizers)."""
    def judge(observed, target):
        out = {}
        for name in target.names or sorted(observed or {}):
            obj = (observed or {}).get(name)
            if obj is None:
                out[name] = (READY, "gone")
            elif (obj.get("metadata") or {}).get("deletionTimestamp"):
                finalizers = (obj.get("metadata") or {}).get("finalizers") or []
                out[name] = (WAITING, "terminating" + (" (finalizers: %s)" % ", ".join(finalizers) if finalizers else ""))
            else:
                out[name] = (WAITING, "still there")
        return out
    return Predicate("deleted", judge)


class Outcome(object):
    """`since`: {item: seconds from the start of the wait to when it reached its last state}."""

    def __init__(self, ready, observed, items, progress, since=None):
        self.ready, self.observed, self.items, self.progress = ready, observed, items, progress
        self.since = since or {}

    @property
    def failed(self):
        return sorted(n for n, (s, _d) in self.items.items() if s == FAILED)


def _log(line):
    path = os.environ.get(PROGRESS_LOG_ENV)
    if not path:
        return
    try:
        with open(path, "a") as f:
            f.write(time.strftime("%Y-%m-%dT%H:%M:%SZ ", time.gmtime()) + line + "\n")
    except (IOError, OSError):  # a progress log must never fail the wait
        pass


class _Round(object):
    """Bookkeeping of one call: per item, since when its detail has been what it is; the lines of change."""

    def __init__(self, target, predicate, start, started, memory=None, line_gap=0.0):
        self.target, self.predicate, self.start, self.started = target, predicate, start, started
        self.since, self.lines, self.items = {}, [], {}
        # A watched target is judged at every burst of events: its lines come at most one per line_gap seconds
        # (the last state always has one), as many as a poll a second gave.
        self.line_gap, self._last_line, self._unlined = line_gap, None, False
        # What earlier rounds of the same wait saw: an item still in that state keeps its `since`.
        self.memory = memory.setdefault(target.title, {}) if memory is not None else {}
        for name, (state, detail, since) in self.memory.items():
            self.items[name], self.since[name] = (state, detail), since

    def see(self, items, now):
        changed = False
        for name, (state, detail) in items.items():
            old = self.items.get(name)
            if old != (state, detail):
                self.since[name] = now
                changed = True
        self.items = items
        self.memory.clear()
        self.memory.update((n, [s, d, self.since[n]]) for n, (s, d) in items.items())
        self._unlined = self._unlined or changed
        if self._unlined and (self._last_line is None or now - self._last_line >= self.line_gap):
            self.flush(now)

    def flush(self, now):
        """The line of the state now, if it has none yet."""
        if not self._unlined:
            return
        line = "{0:.0f} s: {1}".format(now - self.started, self.summary(now))
        self.lines.append(line)
        _log(line)
        self._last_line, self._unlined = now, False

    def summary(self, now):
        items = self.items
        ready = [n for n, s in sorted(items.items()) if s[0] == READY]
        rest = [(n, d) for n, (s, d) in sorted(items.items()) if s != READY]
        head = "{0}: ".format(self.target.title)
        if self.target.single:
            return head + ("; ".join("{0} ({1:.0f} s)".format(d, now - self.since.get(n, now)) for n, d in rest)
                           or "ready")
        head += "{0}/{1} ready".format(len(ready), len(items)) + ("; " if rest else "")
        if len(rest) <= NAMED_ITEMS:
            return head + "; ".join("{0}: {1} ({2:.0f} s)".format(n, d, now - self.since.get(n, now)) for n, d in rest)
        return head + self._grouped(rest, now)

    def _grouped(self, rest, now):
        """Many items not ready (a roll-out's hundreds of nodes in flight): a count per detail, most first, with the
        few that have been in it longest named; a line stays readable whatever the fleet."""
        by_detail = {}
        for name, detail in rest:
            by_detail.setdefault(detail, []).append((self.since.get(name, now), name))
        groups = sorted(by_detail.items(), key=lambda g: (-len(g[1]), g[0]))
        parts = ["{0} {1} (longest: {2})".format(len(members), detail, ", ".join(
            "{0} {1:.0f} s".format(name, now - since) for since, name in sorted(members)[:NAMED_LONGEST]))
            for detail, members in groups[:DETAIL_GROUPS]]
        if len(groups) > DETAIL_GROUPS:
            others = groups[DETAIL_GROUPS:]
            parts.append("{0} more in {1} other states".format(sum(len(m) for _d, m in others), len(others)))
        return "; ".join(parts)

    def progress(self, now):
        return {
            "summary": self.summary(now),
            "target": self.target.title,
            "expected": self.predicate.expected,
            "ready": sorted(n for n, s in self.items.items() if s[0] == READY),
            "pending": dict((n, "{0} ({1:.0f} s)".format(d, now - self.since.get(n, now)))
                            for n, (s, d) in self.items.items() if s == WAITING),
            "failed": dict((n, d) for n, (s, d) in self.items.items() if s == FAILED),
            "waited_s": round(now - self.started, 1),
            "lines": list(self.lines),
        }

    def offsets(self):
        return dict((n, round(t - self.started, 1)) for n, t in self.since.items())

    def last_seen(self, now, states=(WAITING, FAILED)):
        return "; ".join(("" if self.target.single else n + ": ") + "{0} for {1:.0f} s".format(
            d, now - self.since.get(n, now)) for n, (s, d) in sorted(self.items.items()) if s in states) or "nothing"


def wait_for(cluster, target, predicate, timeout, interval=2.0, budget=None, started=None, raise_on_failure=True,
             clock=time.time, sleep=time.sleep, memory=None, on_poll=None):
    """Poll `target` until `predicate` finds every item ready (one read per poll).

    timeout: seconds the whole wait may take, counted from `started` (epoch seconds; now when None).
    budget: seconds this call may take; when it runs out before the timeout, returns an Outcome with ready False
    (the caller returns its progress and is called again). Raises WaitTimeout past the timeout, WaitFailed when an
    item failed (at once when the predicate is fail_fast, else when nothing is left waiting), unless
    raise_on_failure is False: then the Outcome is ready once nothing is waiting, and lists `failed`.
    memory: a dict kept from round to round of one wait (KubegpuModule keeps it): an item still as an earlier
    round saw it keeps the time it got there, so "pending 40 s" and the timeout's "for how long" span the rounds.
    on_poll(observed, items) -> items: called after each judgement, before the verdict; what it returns is judged.
    A caller takes each item's next step there as soon as a poll shows it due (the roll-out's device-plugin step
    of a node whose MIG geometry is in place), instead of after the slowest item of the wait.
    """
    start = clock()
    started = start if started is None else float(started)
    deadline = started + timeout
    stop = min(deadline, start + budget) if budget else deadline
    rnd = _Round(target, predicate, start, started, memory, line_gap=interval if target.watch else 0.0)
    try:
        while True:
            polled = clock()
            observed = target.read(cluster)
            now = clock()
            items = predicate.judge(observed, target)
            if on_poll is not None:
                items = on_poll(observed, items)
            rnd.see(items, now)
            failed = [n for n, (s, _d) in items.items() if s == FAILED]
            waiting = [n for n, (s, _d) in items.items() if s == WAITING]
            fails = bool(failed) and (predicate.fail_fast or not waiting) and raise_on_failure
            ended = not waiting and not fails
            if fails or ended or now >= stop:
                rnd.flush(now)  # the last state has its line whatever the line gap
            if fails:
                raise WaitFailed("{0}: {1} (expected {2}; after {3:.0f} s)".format(
                    target.title, rnd.last_seen(now, (FAILED,)), predicate.expected, now - started),
                    rnd.progress(now), items, observed)
            if ended:
                return Outcome(True, observed, items, rnd.progress(now), rnd.offsets())
            if now >= deadline:
                raise WaitTimeout("{0}: not ready after {1:.0f} s (expected {2}); last seen: {3}".format(
                    target.title, now - started, predicate.expected, rnd.last_seen(now)), rnd.progress(now), items,
                    observed)
            if now >= stop:
                return Outcome(False, observed, items, rnd.progress(now), rnd.offsets())
            # Polls start `interval` apart: the time a poll took (a 1,000-node read, the steps on_poll sent) counts,
            # so an item's change is seen at most one interval late however slow the reads. A watched list is
            # judged again as soon as an event changes it.
            target.pause(max(0.0, min(polled + interval, stop) - clock()), sleep)
    finally:
        target.close()
