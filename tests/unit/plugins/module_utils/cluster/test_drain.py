# -*- coding: utf-8 -*-
"""drain_node waits through the waiter with the module's wait policy (round, start, memory)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster import drain
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import RoundOver


class Cluster(object):
    def __init__(self, pods_left):
        self.pods_left = pods_left
        self.dynamic = self
        self.posted = []

    def request(self, method, path, body=None):
        self.posted.append(path)

    def get(self, api_version, kind, name, namespace=None):
        return {"metadata": {"name": name}} if "{0}/{1}".format(namespace, name) in self.pods_left else None


def test_a_round_that_ends_mid_drain_raises_round_over(monkeypatch):
    monkeypatch.setattr(drain, "patch_object", lambda *a, **k: None)
    cluster = Cluster(["ns/p"])
    memory = {}
    with pytest.raises(RoundOver) as over:
        drain.drain_node(cluster, "gpu-1", ["ns/p"], 60, interval=0.01, budget=0.05, started=None, memory=memory)
    assert over.value.progress["pending"]["ns/p"].startswith("still running")
    assert cluster.posted == ["/api/v1/namespaces/ns/pods/p/eviction"] and memory
    cluster.pods_left = []
    drain.drain_node(cluster, "gpu-1", ["ns/p"], 60, interval=0.01, memory=memory)
