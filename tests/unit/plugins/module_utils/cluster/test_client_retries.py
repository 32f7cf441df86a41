"""The retry wrapper on a kubernetes ApiClient, and the write helpers' re-read before a resend, with fakes."""
from __future__ import annotations

import pytest
from urllib3 import exceptions as u3

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster import apply
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import install_retries, request_name
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.retry import (
    ApiRetryError,
    Retrier,
    RetryPolicy,
)

RESET = u3.ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer"))


class Response:
    def __init__(self, status, headers=None, data=b"{}"):
        self.status, self.reason, self.headers, self.data = status, "reason", headers or {}, data
        self.read_called = False

    def read(self):
        self.read_called = True
        return self.data


class PoolManager:
    def __init__(self):
        self.connection_pool_kw = {"retries": None}
        self.cleared = False

    def clear(self):
        self.cleared = True


class FakeApiClient:
    """call_api answers from a script: a Response, or an exception to raise."""

    def __init__(self, *script):
        self.script = list(script)
        self.calls = []
        self.rest_client = type("Rest", (), {})()
        self.rest_client.pool_manager = PoolManager()

    def call_api(self, method, url, header_params=None, body=None, post_params=None, _request_timeout=None):
        self.calls.append((method, url, _request_timeout))
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


def no_sleep_retrier(budget=30.0):
    return Retrier(RetryPolicy(budget=budget, rng=lambda: 0.0), sleep=lambda s: None)


def test_wrapper_retries_429_and_resets_reads_body_and_turns_off_urllib3_retries():
    api = FakeApiClient(Response(429, {"Retry-After": "0"}), RESET, Response(200))
    retrier = no_sleep_retrier()
    install_retries(api, retrier)
    response = api.call_api("GET", "https://127.0.0.1:6443/api/v1/nodes?labelSelector=a%3Db")
    assert response.status == 200 and response.read_called
    assert len(api.calls) == 3 and retrier.counts["429"] == 1 and retrier.counts["connection"] == 1
    assert api.rest_client.pool_manager.connection_pool_kw["retries"] is False and api.rest_client.pool_manager.cleared
    assert api.calls[0][2] is not None             # a timeout is always set: a stalled connection cannot hang a run


def test_wrapper_does_not_resend_a_create_after_a_reset():
    api = FakeApiClient(RESET, Response(201))
    install_retries(api, no_sleep_retrier())
    with pytest.raises(ApiRetryError) as err:
        api.call_api("POST", "https://127.0.0.1:6443/api/v1/namespaces/a/configmaps",
                     header_params={"Content-Type": "application/json"})
    assert len(api.calls) == 1
    assert "POST /api/v1/namespaces/a/configmaps" in str(err.value)


def test_wrapper_installed_twice_wraps_once():
    api = FakeApiClient(Response(200))
    install_retries(api, no_sleep_retrier())
    install_retries(api, no_sleep_retrier())
    api.call_api("GET", "https://h/version")
    assert len(api.calls) == 1


def test_request_name_drops_scheme_and_host():
    assert request_name("get", "https://127.0.0.1:6443/api/v1/nodes?x=1") == "GET /api/v1/nodes?x=1"


class FakeCluster:
    """Enough of client.Cluster for apply.py: a store of objects, a dynamic client whose writes fail as told."""

    def __init__(self, faults, applies_before_failing=True):
        self.store = {}
        self.faults = list(faults)
        self.sends = 0
        self.applies_before_failing = applies_before_failing
        self.retrier = no_sleep_retrier()
        self.dynamic = self

    def resource(self, api_version, kind):
        return kind

    def get(self, api_version, kind, name, namespace=None):
        return self.store.get((kind, name))

    def write(self, what, send, verify=None):
        return self.retrier.call(what, send, resend=False, verify=verify)

    def server_side_apply(self, resource, body, name, namespace=None, **kwargs):
        self.sends += 1
        fault = self.faults.pop(0) if self.faults else None
        if fault is None or self.applies_before_failing:
            current = self.store.get((resource, name)) or {}
            self.store[(resource, name)] = dict(current, **{k: v for k, v in body.items() if k != "metadata"},
                                                metadata=body["metadata"])
        if fault is not None:
            raise fault


CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": {"k": "v"}}


def test_apply_whose_answer_was_lost_is_read_back_not_sent_again():
    cluster = FakeCluster([RESET], applies_before_failing=True)
    change = apply.apply_object(cluster, CM, check_mode=False, current=None, current_known=True)
    assert change.changed and cluster.sends == 1
    assert cluster.store[("ConfigMap", "c")]["data"] == {"k": "v"}
    assert cluster.retrier.counts["connection"] == 1


def test_apply_that_never_arrived_is_sent_again():
    cluster = FakeCluster([RESET], applies_before_failing=False)
    apply.apply_configmap(cluster, "c", "n", {"k": "v"}, check_mode=False, current=None, current_known=True)
    assert cluster.sends == 2 and cluster.store[("ConfigMap", "c")]["data"] == {"k": "v"}


class Conflict(Exception):
    status = 409
    reason = "Conflict"
    headers = {}
    body = b'{"reason":"Conflict","message":"the object has been modified; please apply your changes"}'


def test_update_rereads_on_conflict():
    cluster = FakeCluster([])
    cluster.store[("Node", "a")] = {"metadata": {"name": "a", "resourceVersion": "1", "labels": {}}}
    replaced = []

    def replace(resource, body, name, namespace=None):
        if not replaced:
            replaced.append("conflict")
            cluster.store[("Node", "a")] = {"metadata": {"name": "a", "resourceVersion": "2", "labels": {"x": "1"}}}
            raise Conflict()
        replaced.append(body["metadata"]["resourceVersion"])
        cluster.store[("Node", "a")] = body
    cluster.replace = replace

    def mutate(obj):
        if obj["metadata"]["labels"].get("y") == "1":
            return False
        obj["metadata"]["labels"]["y"] = "1"
        return True
    assert apply.update_object(cluster, "v1", "Node", "a", mutate) is True
    assert replaced == ["conflict", "2"]                     # the second try carries the version read again
    assert cluster.store[("Node", "a")]["metadata"]["labels"] == {"x": "1", "y": "1"}
    assert cluster.retrier.counts["conflict"] == 1
