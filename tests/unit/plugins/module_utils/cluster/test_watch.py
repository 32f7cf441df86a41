# -*- coding: utf-8 -*-
"""WatchedList: one list, then the watch's events; a write's answer folded in; lists again when the stream ends;
lists every read when the watch is refused. A fake cluster stands in for the API server (the roll-out tests run
it against a real one)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import queue
import threading
import time

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import WatchUnsupported
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.retry import ClusterError
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.watch import WatchedList
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import Target, each, READY, WAITING, wait_for

END = object()


def node(name, rv, **labels):
    return {"metadata": {"name": name, "resourceVersion": str(rv), "labels": labels}}


class Stream(object):
    def __init__(self):
        self.events, self.closed = queue.Queue(), False

    def __iter__(self):
        while True:
            event = self.events.get()
            if event is END or self.closed:
                return
            if isinstance(event, Exception):
                raise event
            yield event

    def close(self):
        self.closed = True
        self.events.put(END)


class FakeCluster(object):
    def __init__(self, objects, refuse=None):
        self.objects, self.refuse = objects, refuse
        self.lists, self.watches, self.streams = 0, [], []

    def list_versioned(self, api_version, kind, namespace=None, label_selector=None, field_selector=None):
        self.lists += 1
        return list(self.objects), "10"

    def list(self, *args, **kwargs):
        return self.list_versioned(*args, **kwargs)[0]

    def watch(self, api_version, kind, resource_version, namespace=None, label_selector=None, seconds=300):
        self.watches.append(resource_version)
        if self.refuse is not None:
            raise self.refuse
        stream = Stream()
        self.streams.append(stream)
        return stream


def until(predicate, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def labels_of(watched):
    return dict((o["metadata"]["name"], o["metadata"]["labels"]) for o in watched.read())


def test_one_list_then_events_from_its_resource_version():
    cluster = FakeCluster([node("a", 5, s="old"), node("b", 6, s="old")])
    watched = WatchedList(cluster, "v1", "Node")
    assert labels_of(watched) == {"a": {"s": "old"}, "b": {"s": "old"}}
    watched.pause(0.0)
    assert until(lambda: cluster.streams)
    assert cluster.watches == ["10"]
    cluster.streams[0].events.put(("MODIFIED", node("a", 11, s="new")))
    cluster.streams[0].events.put(("ADDED", node("c", 12, s="new")))
    cluster.streams[0].events.put(("DELETED", node("b", 13)))
    assert until(lambda: labels_of(watched) == {"a": {"s": "new"}, "c": {"s": "new"}})
    assert cluster.lists == 1  # every later read came from the events
    watched.close()


def test_pause_wakes_on_an_event_not_after_the_whole_interval():
    cluster = FakeCluster([node("a", 5)])
    watched = WatchedList(cluster, "v1", "Node")
    watched.read()
    watched.pause(0.0)  # the first pause starts the stream
    assert until(lambda: cluster.streams)
    threading.Timer(0.2, lambda: cluster.streams[0].events.put(("MODIFIED", node("a", 11, s="x")))).start()
    t0 = time.time()
    watched.pause(10.0)
    assert time.time() - t0 < 5.0
    assert labels_of(watched) == {"a": {"s": "x"}}
    t0 = time.time()
    watched.pause(0.3)  # nothing new: the whole pause
    assert time.time() - t0 >= 0.25
    watched.close()


def test_a_write_answer_newer_than_the_watch_copy_is_read_an_older_event_does_not_undo_it():
    cluster = FakeCluster([node("a", 5, s="old")])
    watched = WatchedList(cluster, "v1", "Node")
    watched.read()
    watched.pause(0.0)  # the first pause starts the stream
    assert until(lambda: cluster.streams)
    watched.remember(node("a", 20, s="written"))
    assert labels_of(watched) == {"a": {"s": "written"}}
    cluster.streams[0].events.put(("MODIFIED", node("a", 15, s="before the write")))
    cluster.streams[0].events.put(("MODIFIED", node("b", 16)))
    assert until(lambda: "b" in labels_of(watched))
    assert labels_of(watched)["a"] == {"s": "written"}
    watched.remember(node("zz", 30))  # not in the list: left to the watch (it may not match the selector)
    assert "zz" not in labels_of(watched)
    watched.close()


def test_a_stream_that_ends_is_followed_by_a_new_list_and_watch():
    cluster = FakeCluster([node("a", 5)])
    watched = WatchedList(cluster, "v1", "Node")
    watched.read()
    watched.pause(0.0)  # the first pause starts the stream
    assert until(lambda: cluster.streams)
    cluster.streams[0].events.put(("MODIFIED", node("a", 11)))
    cluster.streams[0].events.put(("ERROR", {"code": 410}))  # resourceVersion too old
    assert until(lambda: (watched.read(), watched.pause(0.0), cluster.lists)[2] == 2)
    assert until(lambda: len(cluster.streams) == 2)
    assert not watched.polling
    watched.close()


def test_a_refused_watch_turns_every_read_into_a_list():
    cluster = FakeCluster([node("a", 5)], refuse=ClusterError(
        'watch v1 Node failed (HTTP 403, RBAC): cannot watch resource "nodes"'))
    watched = WatchedList(cluster, "v1", "Node")
    watched.read()
    watched.pause(0.0)
    assert until(lambda: watched.polling)
    assert "HTTP 403" in watched.why_polling
    before = cluster.lists
    watched.read()
    watched.read()
    assert cluster.lists == before + 2
    assert len(cluster.watches) == 1  # not asked again


def test_an_old_client_without_watch_polls():
    cluster = FakeCluster([node("a", 5)], refuse=WatchUnsupported("no watch"))
    watched = WatchedList(cluster, "v1", "Node")
    watched.read()
    watched.pause(0.0)
    assert until(lambda: watched.polling)
    t0 = time.time()
    watched.pause(0.2)  # polling: the caller's interval
    assert time.time() - t0 >= 0.15


def test_streams_that_deliver_nothing_three_times_in_a_row_give_up_to_lists():
    cluster = FakeCluster([node("a", 5)])
    watched = WatchedList(cluster, "v1", "Node")
    for n in range(3):
        watched.read()
        watched.pause(0.0)
        assert until(lambda: len(cluster.streams) == n + 1)
        cluster.streams[n].events.put(ConnectionError("reset"))
        assert until(lambda: watched.polling or not watched._state == "watching")
    assert until(lambda: watched.polling)


def test_wait_for_on_a_watched_target_sees_the_change_at_once_and_closes_the_stream():
    cluster = FakeCluster([node("a", 5, s="old")])
    target = Target("v1", "Node", names=["a"], watch=True)
    pred = each(lambda o: (READY, "new") if o["metadata"]["labels"].get("s") == "new" else (WAITING, "old"),
                "s == new")

    def change():
        until(lambda: cluster.streams)
        cluster.streams[0].events.put(("MODIFIED", node("a", 11, s="new")))
    threading.Thread(target=change).start()
    t0 = time.time()
    outcome = wait_for(cluster, target, pred, timeout=30, interval=20.0)
    assert outcome.ready and time.time() - t0 < 10.0
    assert cluster.lists == 1
    assert cluster.streams[0].closed


def test_a_wait_over_at_its_first_read_sends_nothing_but_the_list():
    cluster = FakeCluster([node("a", 5, s="new")])
    target = Target("v1", "Node", names=["a"], watch=True)
    pred = each(lambda o: (READY, "new"), "s == new")
    assert wait_for(cluster, target, pred, timeout=30, interval=1.0).ready
    assert cluster.lists == 1 and cluster.watches == []
