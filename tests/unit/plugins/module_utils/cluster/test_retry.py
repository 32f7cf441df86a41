"""The retry policy without a cluster: which faults are retried, how long it waits, when it gives up, and that a
write that may have reached the server is never sent twice."""
from __future__ import annotations

import email.utils
import http.client

import pytest
from urllib3 import exceptions as u3

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.retry import (
    ApiRetryError,
    Retrier,
    RetryPolicy,
    StatusFault,
    classify,
    parse_retry_after,
    resend_is_safe,
)


class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


class ApiError(Exception):
    """Stands in for kubernetes' ApiException / DynamicApiError: status, reason, headers, body."""

    def __init__(self, status, reason="", headers=None, body=None):
        super().__init__(status)
        self.status, self.reason, self.headers, self.body = status, reason, headers or {}, body


def retrier(budget=30.0, rng=lambda: 0.5, max_attempts=40):
    clock = FakeClock()
    return Retrier(RetryPolicy(budget=budget, rng=rng, max_attempts=max_attempts), clock=clock,
                   sleep=clock.sleep), clock


def failing(*faults, result="ok"):
    """send() that raises each fault in turn, then returns result; .calls counts the tries."""
    pending = list(faults)

    def send():
        send.calls += 1
        if pending:
            raise pending.pop(0)
        return result
    send.calls = 0
    return send


RESET = u3.ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer"))
REFUSED = u3.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")


@pytest.mark.parametrize("exc, kind, maybe_applied", [
    (ApiError(429, "Too Many Requests", {"Retry-After": "1"}), "429", False),
    (StatusFault(429, "Too Many Requests", {"retry-after": "2"}), "429", False),
    (ApiError(500, "Internal Server Error"), "5xx", True),
    (ApiError(500, "Internal Server Error", body=b'{"kind":"Status","message":"etcdserver: request timed out"}'),
     "5xx", True),
    (ApiError(500, "Internal Server Error", {"Retry-After": "2"}, b'{"kind":"Status","message":"boom"}'), "5xx", True),
    (ApiError(500, "Internal Server Error", body=b"<html>502 upstream failed</html>"), "5xx", True),
    (ApiError(503, "Service Unavailable"), "5xx", True),
    (ApiError(504, "Gateway Timeout"), "5xx", True),
    (ApiError(409, "Conflict", body=b'{"reason":"Conflict","message":"the object has been modified"}'),
     "conflict", False),
    (RESET, "connection", True),
    (u3.MaxRetryError(None, "/api", RESET), "connection", True),
    (REFUSED, "connection", False),
    (u3.MaxRetryError(None, "/api", REFUSED), "connection", False),
    (u3.ReadTimeoutError(None, "/api", "Read timed out."), "connection", True),
    (ConnectionResetError(104, "reset"), "connection", True),
    (ConnectionRefusedError(111, "refused"), "connection", False),
    (http.client.RemoteDisconnected("Remote end closed connection without response"), "connection", True),
    (ApiError(0, "SSLError\n[SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in violation of protocol"),
     "connection", False),
])
def test_transient_faults_are_classified(exc, kind, maybe_applied):
    fault = classify(exc)
    assert fault is not None and fault.kind == kind
    assert fault.maybe_applied is maybe_applied


@pytest.mark.parametrize("exc", [
    ApiError(400), ApiError(401), ApiError(403), ApiError(404), ApiError(422),
    # What the API server answers to a server-side apply of a field its schema lacks: the same every time.
    ApiError(500, "Internal Server Error", body=b'{"kind":"Status","message":"failed to create typed patch object '
                                                b'(/p; nvidia.com/v1, Kind=ClusterPolicy): .spec.driver.x: field not '
                                                b'declared in schema","code":500}'),
    ApiError(409, "Conflict", body=b'{"reason":"AlreadyExists","message":"configmaps \\"x\\" already exists"}'),
    ApiError(0, "SSLError\n[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
    u3.SSLError("certificate verify failed: hostname mismatch"),
    ValueError("not a fault"),
])
def test_permanent_errors_are_not_retried(exc):
    assert classify(exc) is None
    r = retrier()[0]
    send = failing(exc)
    with pytest.raises(type(exc)):
        r.call("GET /api/v1/nodes", send)
    assert send.calls == 1 and sum(r.counts.values()) == 0


def test_retry_after_is_honoured_and_counted():
    r, clock = retrier()
    send = failing(ApiError(429, "Too Many Requests", {"Retry-After": "3"}), ApiError(429, headers={"Retry-After": "1"}))
    assert r.call("GET /api/v1/nodes", send) == "ok"
    assert send.calls == 3
    assert r.counts == {"429": 2, "5xx": 0, "connection": 0, "conflict": 0}
    assert clock.sleeps[0] >= 3 and clock.sleeps[1] >= 1      # never less than the server asked
    assert clock.sleeps[0] < 3 + r.policy.base                 # plus a little jitter only


def test_retry_after_as_http_date():
    now = 1_000_000.0
    assert parse_retry_after(email.utils.formatdate(now + 5, usegmt=True), now=now) == pytest.approx(5, abs=1)
    assert parse_retry_after("junk") is None and parse_retry_after(None) is None
    assert parse_retry_after("-4") == 0


def test_backoff_grows_exponentially_with_jitter_and_is_capped():
    policy = RetryPolicy(base=0.25, cap=2.0, rng=lambda: 1.0)
    fault = classify(ApiError(503))
    assert [policy.delay(fault, n) for n in range(1, 7)] == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    low = RetryPolicy(base=0.25, cap=2.0, rng=lambda: 0.0)
    assert [low.delay(fault, n) for n in range(1, 5)] == [0.125, 0.25, 0.5, 1.0]     # jitter: half to all of a step


def test_budget_exhausted_names_the_request_and_the_fault():
    r, clock = retrier(budget=5.0)
    send = failing(*[ApiError(429, "Too Many Requests", {"Retry-After": "1"})] * 50)
    with pytest.raises(ApiRetryError) as err:
        r.call("PATCH /api/v1/nodes/gpu-h100-000", send)
    msg = str(err.value)
    assert "PATCH /api/v1/nodes/gpu-h100-000" in msg and "HTTP 429" in msg and "KUBEGPU_API_RETRY_BUDGET" in msg
    assert clock.now <= 5.0                                    # never slept past the budget
    assert err.value.fault.kind == "429" and send.calls == err.value.attempts


def test_fault_names_what_the_server_said():
    body = b'{"kind":"Status","message":"Cannot evict pod as it would violate the pod\'s disruption budget."}'
    fault = classify(ApiError(429, "Too Many Requests", body=body))
    assert fault.kind == "429" and "disruption budget" in fault.detail


def test_max_attempts_bounds_a_fast_failing_request():
    r = retrier(budget=1e9, max_attempts=4, rng=lambda: 0.0)[0]
    send = failing(*[REFUSED] * 10)
    with pytest.raises(ApiRetryError):
        r.call("GET /version", send)
    assert send.calls == 4 and r.counts["connection"] == 3


def test_idempotent_request_is_resent_after_a_reset():
    r = retrier()[0]
    send = failing(RESET, ApiError(502, "Bad Gateway"))
    assert r.call("GET /api/v1/pods", send, resend=True) == "ok"
    assert r.counts["connection"] == 1 and r.counts["5xx"] == 1


def test_unsafe_write_is_not_resent_after_it_may_have_reached_the_server():
    r = retrier()[0]
    send = failing(RESET)
    with pytest.raises(ApiRetryError) as err:
        r.call("POST /api/v1/namespaces/x/configmaps", send, resend=False)
    assert send.calls == 1
    assert "not sent again" in str(err.value) and "POST /api/v1/namespaces/x/configmaps" in str(err.value)


def test_unsafe_write_is_resent_when_it_never_left():
    r = retrier()[0]
    send = failing(REFUSED, ApiError(429, headers={"Retry-After": "0"}))
    assert r.call("POST /api/v1/namespaces/x/configmaps", send, resend=False) == "ok"
    assert send.calls == 3


def test_write_that_took_effect_is_verified_not_resent():
    r = retrier()[0]
    send = failing(RESET)
    checks = []
    assert r.call("apply ConfigMap x/y", send, resend=False, verify=lambda: checks.append(1) or True) is None
    assert send.calls == 1 and checks == [1]                  # read back, found in place: sent once only
    assert r.counts["connection"] == 1


def test_write_that_did_not_take_effect_is_sent_again():
    r = retrier()[0]
    send = failing(RESET, ApiError(504, "Gateway Timeout"))
    assert r.call("apply ConfigMap x/y", send, resend=False, verify=lambda: False) == "ok"
    assert send.calls == 3


def test_conflicts_only_retried_for_read_modify_write():
    conflict = ApiError(409, "Conflict", body=b'{"reason":"Conflict","message":"the object has been modified"}')
    r = retrier()[0]
    with pytest.raises(ApiError):
        r.call("PUT /api/v1/nodes/a", failing(conflict))
    send = failing(conflict, conflict)
    assert r.call("update Node a", send, retry_conflicts=True) == "ok"
    assert send.calls == 3 and r.counts["conflict"] == 2


def test_nested_calls_do_not_retry_again():
    r = retrier()[0]
    inner = failing(RESET)

    def outer():
        return r.call("GET /api/v1/nodes", inner)             # the client's own request, inside a write helper
    outer_send = failing(result=None)
    outer_send_calls = []

    def send():
        outer_send_calls.append(1)
        return outer() if len(outer_send_calls) == 1 else outer_send()
    assert r.call("apply Node a", send, resend=True) is None
    assert inner.calls == 1 and len(outer_send_calls) == 2 and r.counts["connection"] == 1


@pytest.mark.parametrize("method, content_type, url, safe", [
    ("GET", None, "https://h/api/v1/nodes", True),
    ("PATCH", "application/apply-patch+yaml", "https://h/api/v1/nodes/a?fieldManager=x", True),
    ("PATCH", "application/merge-patch+json", "https://h/api/v1/nodes/a", True),
    ("PATCH", "application/json-patch+json", "https://h/api/v1/nodes/a", False),
    ("POST", "application/json", "https://h/api/v1/namespaces/a/configmaps", False),
    ("POST", "application/json", "https://h/api/v1/namespaces/a/configmaps?dryRun=All", True),
    ("POST", "application/json", "https://h/api/v1/namespaces/a/pods/p/eviction", True),
    ("PUT", "application/json", "https://h/api/v1/nodes/a", True),
    ("DELETE", None, "https://h/api/v1/nodes/a", True),
])
def test_which_requests_may_be_sent_twice(method, content_type, url, safe):
    assert resend_is_safe(method, content_type, url) is safe
