"""Cluster.list when discovery and the server disagree: a kind whose CRD is gone lists as nothing, with fakes."""
from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError, api_exception

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import Cluster
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.retry import ClusterError


def _error(status, body):
    try:
        raise ApiException(status=status, reason="reason")
    except ApiException as e:
        e.body = body
        return api_exception(e)


class Resource:
    """A resource as discovery has it; its list answers `answer` (items, or an exception to raise)."""

    def __init__(self, answer):
        self.answer = answer

    def get(self, namespace=None, serializer=None, **params):
        if isinstance(self.answer, Exception):
            raise self.answer
        return {"items": self.answer}


class K8sClient:
    """kubernetes.core's K8SClient stand-in: resource() from (cached) discovery; no request is sent."""

    def __init__(self, resources):
        self.resources = resources
        self.client = type("Dynamic", (), {})()
        self.client.client = type("Api", (), {"call_api": lambda *a, **k: None})()

    def resource(self, kind, api_version):
        if (api_version, kind) not in self.resources:
            raise ResourceNotFoundError("no %s %s" % (api_version, kind))
        return self.resources[(api_version, kind)]


ISVC = ("serving.kserve.io/v1beta1", "InferenceService")


def test_a_kind_its_cached_discovery_still_lists_but_the_server_no_longer_serves_lists_empty():
    # The uninstall's serving stage, a round after `helm uninstall kserve-crd` deleted KServe's CRDs: the discovery
    # cache file still names serving.kserve.io, the server answers the list with "404 page not found".
    cluster = Cluster(K8sClient({ISVC: Resource(_error(404, "404 page not found"))}))
    assert cluster.list(*ISVC) == []
    assert cluster.list(*ISVC, namespace="llm", label_selector="app.kubernetes.io/managed-by=kubegpu.platform") == []


def test_a_kind_discovery_does_not_know_lists_empty_and_a_served_kind_lists_its_items():
    item = {"metadata": {"name": "m", "namespace": "llm"}}
    cluster = Cluster(K8sClient({ISVC: Resource([item])}))
    assert cluster.list(*ISVC) == [item]
    assert cluster.list("kueue.x-k8s.io/v1beta2", "ClusterQueue") == []


def test_other_list_errors_still_fail_with_the_kind_named():
    cluster = Cluster(K8sClient({ISVC: Resource(_error(500, "etcdserver: leader changed"))}))
    with pytest.raises(ClusterError) as e:
        cluster.list(*ISVC)
    assert "list serving.kserve.io/v1beta1 InferenceService failed (HTTP 500)" in str(e.value)
