# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A list of objects kept current by a watch, for waits that must see a change as it happens.

What client-go's informer does, for one wait: list once, then apply the server's events as they stream in (a
background thread), so that a roll-out takes a node's next step a moment after the node got there, not up to a
poll later, and reads a thousand nodes once instead of once a second. Used by the waiter (wait.py, a Target with
watch=True)::

    watched = WatchedList(cluster, "v1", "Node", label_selector="pool=a")
    nodes = watched.read()       # the objects now (the first read lists); do not change them
    watched.pause(1.0)           # sleeps until an event changed something, or 1 s (the first pause starts the watch)
    watched.remember(answer)     # a write's answer: newer than what the watch delivered yet, it is kept
    watched.close()

A stream that ends (the server's timeout, an expired resourceVersion, a dropped connection) is followed by a new
list at the next read. A watch the server refuses (RBAC without the `watch` verb) or the client cannot stream
turns the reads into lists: the wait polls, as it did before watches.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import time

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import WatchUnsupported
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.retry import ClusterError

# Seconds a stream lasts before the server ends it and the next read lists again (bounds how long a missed event
# could go unnoticed, at one list per stream).
STREAM_SECONDS = 300
# Streams that end in a row without delivering anything before the reads turn into lists for good.
GIVE_UP_AFTER = 3
# After an event wakes a pause, the moment left for the rest of its burst (a simulator or mig-manager changes
# several nodes at once): one judgement for the burst, not one per event.
SETTLE_SECONDS = 0.05

LISTING, WATCHING, POLLING = "listing", "watching", "polling"


def _key(obj):
    meta = obj.get("metadata") or {}
    return meta.get("namespace"), meta.get("name")


def _newer(candidate, current):
    """Whether `candidate` is a later version of the object than `current` (resourceVersions compared as the
    integers etcd gives them, as client-go's mutation cache does; one that is not an integer always wins)."""
    try:
        return int(candidate["metadata"]["resourceVersion"]) > int(current["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return True


class WatchedList(object):
    """The objects of one list (kind, namespace, label selector), kept current by a watch."""

    def __init__(self, cluster, api_version, kind, namespace=None, label_selector=None,
                 stream_seconds=STREAM_SECONDS):
        self.cluster, self.api_version, self.kind = cluster, api_version, kind
        self.namespace, self.label_selector, self.stream_seconds = namespace, label_selector, stream_seconds
        self._changed = threading.Condition()
        self._objects = {}
        self._state = LISTING
        self._dirty = False
        self._stream = None
        self._idle_ends = 0
        self._generation = 0  # which stream is the current one: an older thread's events and end are ignored
        self._version = None  # the last list's resourceVersion, until its stream starts
        self.why_polling = None  # why reads are lists (a refused watch), for the docs' "what if" and tests

    @property
    def polling(self):
        return self._state == POLLING

    def read(self):
        """The objects now, as a list of the server's dicts (shared: read them, do not change them)."""
        with self._changed:
            state = self._state
            if state == WATCHING:
                self._dirty = False
                return list(self._objects.values())
        if state == POLLING:
            return self.cluster.list(self.api_version, self.kind, namespace=self.namespace,
                                     label_selector=self.label_selector)
        objects, version = self.cluster.list_versioned(self.api_version, self.kind, namespace=self.namespace,
                                                       label_selector=self.label_selector)
        with self._changed:
            self._objects = dict((_key(o), o) for o in objects)
            self._dirty = False
            self._state = WATCHING if version else POLLING
            # The stream starts at the first pause: a wait over at its first read sends nothing but the list.
            self._version = version
        return objects

    def pause(self, seconds):
        """Sleep until an event changed something since the last read, or `seconds` passed."""
        seconds = max(0.0, seconds)
        with self._changed:
            version, self._version = self._version, None
            if version and self._state == WATCHING:
                self._start(version)
            watching = self._state == WATCHING
            if watching and not self._dirty:
                self._changed.wait(seconds)  # an event, the stream's end or close() wakes it
            woke = self._dirty
        if not watching:
            time.sleep(seconds)  # reads are lists: the caller's interval is the pace
        elif woke:
            time.sleep(min(SETTLE_SECONDS, seconds))  # the rest of the burst

    def remember(self, obj):
        """A write's answer (the object as the server stored it): kept when newer than the watch's copy, so a read
        right after a write sees it even before its event arrives. An object the list does not hold is left to
        the watch (it may not match the selector)."""
        if not isinstance(obj, dict) or self._state != WATCHING:
            return
        key = _key(obj)
        with self._changed:
            current = self._objects.get(key)
            if current is not None and _newer(obj, current):
                self._objects[key] = obj

    def close(self):
        """End the stream; the next read lists again."""
        with self._changed:
            stream, self._stream = self._stream, None
            self._generation += 1
            self._version = None
            if self._state == WATCHING:
                self._state = LISTING
            self._changed.notify_all()
        if stream is not None:
            stream.close()

    # -- the stream's thread ----------------------------------------------------------------------------------
    def _start(self, version):
        """Called holding the lock: a new stream from `version` (the list's), the current one from now on."""
        self._generation += 1
        generation = self._generation
        thread = threading.Thread(target=self._follow, args=(version, generation), name="watch " + self.kind)
        thread.daemon = True  # a module that returns mid-stream is not held up by it
        thread.start()

    def _follow(self, version, generation):
        delivered = False
        try:
            stream = self.cluster.watch(self.api_version, self.kind, version, namespace=self.namespace,
                                        label_selector=self.label_selector, seconds=self.stream_seconds)
            with self._changed:
                current = generation == self._generation
                if current:
                    self._stream = stream
            if not current:  # closed while the request was on its way
                stream.close()
                return
            for kind, obj in stream:
                delivered = True
                if not self._apply(kind, obj, generation):
                    break
        except WatchUnsupported as err:
            self._end(generation, POLLING, str(err))
        except ClusterError as err:
            # 403 (no watch verb): lists from now on. Anything else (a dropped connection): list and watch again.
            self._end(generation, POLLING if "HTTP 403" in str(err) else LISTING, str(err))
        except Exception as err:  # a stream cut mid-event by close() or the network: list and watch again
            self._end(generation, LISTING, str(err), delivered)
        else:
            self._end(generation, LISTING, "stream ended", delivered)

    def _apply(self, kind, obj, generation):
        """One event into the list; False ends the stream (the server's ERROR, e.g. 410 Gone: list again)."""
        with self._changed:
            if generation != self._generation or kind == "ERROR":
                return False
            if kind == "BOOKMARK":
                return True
            key = _key(obj)
            if kind == "DELETED":
                self._objects.pop(key, None)
            elif key not in self._objects or _newer(obj, self._objects[key]):
                self._objects[key] = obj
            self._dirty = True
            self._changed.notify_all()
        return True

    def _end(self, generation, state, why, delivered=True):
        with self._changed:
            if generation != self._generation:
                return
            self._stream = None
            self._idle_ends = 0 if delivered else self._idle_ends + 1
            if state == POLLING or self._idle_ends >= GIVE_UP_AFTER:
                self._state, self.why_polling = POLLING, why
            elif self._state == WATCHING:
                self._state = LISTING
            self._changed.notify_all()
