"""The simulators' knobs: a copy kept `ttl` seconds is read by one worker at a time, so that the workers of a batch
that find it expired together wait for one GET instead of each sending their own to a busy API server."""
from __future__ import annotations

import threading
import time

from kubegpu_devcluster.simulators.framework import Knobs


class _SlowConfigMaps:
    """The ConfigMap API of a busy server: each GET takes a while; counts the GETs."""

    def __init__(self, data):
        self.gets = 0
        self.data = data
        self._lock = threading.Lock()

    def get(self, name, namespace):
        with self._lock:
            self.gets += 1
        time.sleep(0.1)
        return type("ConfigMap", (), {"data": type("Data", (), {"to_dict": lambda _s: dict(self.data)})()})()


def _make(api, ttl):
    dyn = type("Dyn", (), {"resources": type("Res", (), {"get": staticmethod(lambda **_kw: api)})()})()
    return Knobs(dyn, "mig-manager", ttl)


def _read_together(knobs, workers=16):
    seen = []
    start = threading.Barrier(workers)

    def one():
        start.wait()
        seen.append(knobs.get("hang_nodes"))
    threads = [threading.Thread(target=one) for _worker in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return seen


def test_workers_that_find_the_copy_expired_together_send_one_get():
    api = _SlowConfigMaps({"mig-manager.hang_nodes": "gpu-a"})
    knobs = _make(api, ttl=5.0)
    assert _read_together(knobs) == ["gpu-a"] * 16
    assert api.gets == 1


def test_a_changed_knob_is_read_again_after_invalidate():
    api = _SlowConfigMaps({"mig-manager.hang_nodes": "gpu-a"})
    knobs = _make(api, ttl=5.0)
    assert knobs.get("hang_nodes") == "gpu-a"
    api.data = {"mig-manager.hang_nodes": "gpu-b"}
    assert knobs.get("hang_nodes") == "gpu-a"   # kept
    knobs.invalidate()
    assert _read_together(knobs, 4) == ["gpu-b"] * 4
    assert api.gets == 2


def test_without_ttl_every_look_reads():
    api = _SlowConfigMaps({})
    knobs = _make(api, ttl=0.0)
    assert _read_together(knobs, 4) == [""] * 4
    assert api.gets == 4
