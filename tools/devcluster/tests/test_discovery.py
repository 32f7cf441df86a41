"""The simulators' discovery: a group version the server lists but no longer serves has no resources, instead of
failing the lookup of a kind of another group (a core kind's lookup walks every group)."""
from __future__ import annotations

import threading

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import LazyDiscoverer
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from kubegpu_devcluster.simulators.framework import Discoverer


class Gone(NotFoundError):
    def __init__(self):
        super().__init__(ApiException(status=404, reason="Not Found"))


def _without_init():
    return Discoverer.__new__(Discoverer)   # no API server: only the group-version lookup is exercised


def test_a_group_version_deleted_while_listed_has_no_resources(monkeypatch):
    def gone(self, prefix, group, version, preferred):
        raise Gone()
    monkeypatch.setattr(LazyDiscoverer, "get_resources_for_api_version", gone)
    assert _without_init().get_resources_for_api_version("apis", "serving.kserve.io", "v1beta1", True) == {}


def test_other_failures_are_not_hidden(monkeypatch):
    def broken(self, prefix, group, version, preferred):
        raise ResourceNotFoundError("something else")
    monkeypatch.setattr(LazyDiscoverer, "get_resources_for_api_version", broken)
    with pytest.raises(ResourceNotFoundError):
        _without_init().get_resources_for_api_version("apis", "x.example.com", "v1", True)


class _Served:
    """A dynamic client that serves ConfigMap under /api/v1 and nothing else; records the paths asked for."""

    def __init__(self, stop):
        self.paths = []
        self.resources = self
        self.invalidated = 0
        self.stop = stop

    def request(self, verb, path):
        self.paths.append(path)
        if path != "/api/v1":
            self.stop.set()   # asked in the wrong place: it would ask there for ever
            raise Gone()
        return type("Reply", (), {"to_dict": lambda self: {"resources": [{"kind": "ConfigMap"}]}})()

    def invalidate_cache(self):
        self.invalidated += 1


def test_a_core_kind_is_looked_for_under_api_not_apis():
    """A watch of a core kind that lost its lookup (the 404 above, before the fix) waits until the kind is served
    again: it must ask where core kinds are served, or it waits for ever and its events are lost."""
    from kubegpu_devcluster.simulators.framework import Simulator

    class Sim(Simulator):
        name = "test"
        watches = {"ConfigMap": "v1"}

    sim = Sim.__new__(Sim)
    sim._stop = threading.Event()
    sim.dyn = _Served(sim._stop)
    sim._wait_served("ConfigMap")
    assert sim.dyn.paths == ["/api/v1"] and sim.dyn.invalidated == 1
