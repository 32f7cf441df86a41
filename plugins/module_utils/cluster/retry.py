# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Carry API requests through transient faults: throttling (429), server errors (5xx), dropped connections.

The policy is pure (a clock, a sleep and a random source are passed in), so tests drive it without a cluster.
What may be sent again is decided per request:

- a request the server certainly did not act on (429, a connection that was never made) is sent again;
- a request that may have reached the server (a reset or timeout after sending, a 5xx) is sent again only if
  sending it twice leaves the same state (reads, server-side apply, merge patches, evictions, dry runs);
  a write with a `verify` callback is first checked (re-read) and sent again only if it did not take effect,
  so the audit log shows it once; any other write is not sent again and the error says so;
- 409 conflicts are retried only by read-modify-write callers (`retry_conflicts`), each try re-reading first.

Every retry is counted per fault (`counts`), and modules report the counts as `api_retries`.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import email.utils
import json
import random
import threading
import time

try:
    from urllib3 import exceptions as urllib3_errors
except ImportError:  # urllib3 comes with the kubernetes client; without it no request is ever made
    urllib3_errors = None

THROTTLED = "429"
SERVER = "5xx"
CONNECTION = "connection"
CONFLICT = "conflict"
FAULTS = (THROTTLED, SERVER, CONNECTION, CONFLICT)

RETRY_STATUSES = (429, 500, 502, 503, 504)
# Bodies that leave the same object however often they are applied.
IDEMPOTENT_PATCHES = ("application/apply-patch+yaml", "application/merge-patch+json",
                      "application/strategic-merge-patch+json")


_ADVICE = {
    THROTTLED: "The API server kept refusing it: check its load and API Priority and Fairness settings",
    SERVER: "The API server kept failing: check its health and etcd's",
    CONNECTION: "The API server could not be reached reliably: check the network path to it (proxies, load "
                "balancers)",
    CONFLICT: "Another writer kept changing the object: find it (managedFields) and stop it",
}


class ClusterError(Exception):
    """An API request failed; the message says what was asked, what the server said, and what to do."""


class ApiRetryError(ClusterError):
    """A request failed after retries (budget spent) or could not safely be sent again."""

    def __init__(self, message, what=None, fault=None, attempts=0):
        super(ApiRetryError, self).__init__(message)
        self.what, self.fault, self.attempts = what, fault, attempts


class Fault(object):
    """One failed try: the kind of fault, whether the server may have acted on the request, the delay it asked
    for (Retry-After, seconds) and a short description."""

    def __init__(self, kind, maybe_applied, detail, retry_after=None):
        self.kind, self.maybe_applied, self.detail, self.retry_after = kind, maybe_applied, detail, retry_after

    def __repr__(self):
        return "Fault({0!r}, {1!r}, {2!r}, {3!r})".format(
            self.kind, self.maybe_applied, self.detail, self.retry_after)


class StatusFault(Exception):
    """A response whose status is worth a retry, raised before the client turns it into an ApiException."""

    def __init__(self, status, reason, headers=None, body=None):
        super(StatusFault, self).__init__("HTTP {0} {1}".format(status, reason or ""))
        self.status, self.reason, self.headers, self.body = status, reason, headers or {}, body


def parse_retry_after(value, now=None):
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date); None when absent or bad."""
    if value is None:
        return None
    value = str(value).strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _header(headers, name):
    if not headers:
        return None
    try:
        for key, value in headers.items():
            if key.lower() == name.lower():
                return value
    except AttributeError:
        return None
    return None


def _body_text(exc):
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    return body if isinstance(body, str) else ""


def _server_message(body_text):
    """The `message` of a Status body, shortened, for naming the fault (e.g. a PodDisruptionBudget's refusal)."""
    try:
        message = json.loads(body_text).get("message")
    except (ValueError, AttributeError):
        return ""
    return ": {0}".format(message[:200]) if isinstance(message, str) and message else ""


# Messages of a 500 that a later try may not meet (storage or network trouble behind the API server). Any other
# 500 the API server words itself is an answer, not a fault: it refuses a server-side apply of a field the
# schema lacks with 500, and would refuse it every time.
TRANSIENT_500 = ("etcdserver", "timeout", "timed out", "deadline exceeded", "try again", "unavailable",
                 "connection refused", "connection reset", "leader changed", "too many requests")


def _transient_500(headers, body_text):
    if _header(headers, "Retry-After") is not None:
        return True
    try:
        status = json.loads(body_text)
    except ValueError:
        return True     # not the API server's own Status: a proxy or load balancer in between failed
    message = str(status.get("message", "") if isinstance(status, dict) else "").lower()
    return any(marker in message for marker in TRANSIENT_500)


def _status_fault(status, reason, headers, body_text):
    if status == 429:
        return Fault(THROTTLED, False, "HTTP 429 {0}{1}".format(reason or "Too Many Requests",
                                                                _server_message(body_text)),
                     parse_retry_after(_header(headers, "Retry-After")))
    if status in (502, 503, 504) or (status == 500 and _transient_500(headers, body_text)):
        # The server may have stored the change before failing (etcd timeouts answer 500 or 504).
        return Fault(SERVER, True, "HTTP {0} {1}{2}".format(status, reason or "", _server_message(body_text)),
                     parse_retry_after(_header(headers, "Retry-After")))
    folded = body_text.lower().replace(" ", "")
    if status == 409 and "alreadyexists" not in folded and "fieldmanagerconflict" not in folded:
        return Fault(CONFLICT, False, "HTTP 409 Conflict (the object changed since it was read)")
    return None


def classify(exc):
    """The Fault an exception stands for, or None when it is no transient fault (404, 403, a bad request...)."""
    if isinstance(exc, StatusFault):
        return _status_fault(exc.status, exc.reason, exc.headers, _body_text(exc))
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status > 0:
        return _status_fault(status, getattr(exc, "reason", None), getattr(exc, "headers", None),
                             _body_text(exc))
    if status == 0:
        # The REST client turns urllib3's SSLError into ApiException(status=0): a TLS handshake cut short
        # (the request was not sent yet) is transient, a certificate that does not verify is not.
        text = str(getattr(exc, "reason", "") or exc)
        if "SSLError" in text and not _is_certificate_problem(text):
            return Fault(CONNECTION, False, "TLS handshake failed: {0}".format(_first_line(text, skip=1)))
        return None
    return _connection_fault(exc)


def _is_certificate_problem(text):
    text = text.lower()
    return "certificate" in text or "hostname" in text or "verify failed" in text


def _first_line(text, skip=0):
    lines = [line for line in str(text).splitlines() if line.strip()]
    return (lines[skip:] or lines or [""])[0][:200]


def _connection_fault(exc):
    if urllib3_errors is not None and isinstance(exc, urllib3_errors.MaxRetryError) and exc.reason is not None:
        return _connection_fault(exc.reason) or Fault(CONNECTION, True, _first_line(exc))
    detail = "{0}: {1}".format(type(exc).__name__, _first_line(exc) or "connection failed")
    if urllib3_errors is not None:
        if isinstance(exc, (urllib3_errors.NewConnectionError, urllib3_errors.ConnectTimeoutError)):
            return Fault(CONNECTION, False, detail)          # no connection, nothing sent
        if isinstance(exc, urllib3_errors.SSLError):
            return None if _is_certificate_problem(str(exc)) else Fault(CONNECTION, False, detail)
        if isinstance(exc, (urllib3_errors.ProtocolError, urllib3_errors.ReadTimeoutError,
                            urllib3_errors.IncompleteRead, urllib3_errors.InvalidChunkLength)):
            return Fault(CONNECTION, True, detail)
    if isinstance(exc, ConnectionRefusedError):
        return Fault(CONNECTION, False, detail)
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return Fault(CONNECTION, True, detail)
    try:
        import http.client as http_client
    except ImportError:  # pragma: no cover - Python 2 has no modules run with it here
        return None
    if isinstance(exc, http_client.HTTPException):      # RemoteDisconnected, IncompleteRead, BadStatusLine
        return Fault(CONNECTION, True, detail)
    return None


def resend_is_safe(method, content_type, url):
    """Whether sending this request twice leaves the cluster as sending it once would."""
    method = (method or "").upper()
    if method in ("GET", "HEAD", "OPTIONS"):
        return True
    if "dryRun=All" in (url or ""):
        return True
    content_type = (content_type or "").split(";")[0].strip().lower()
    if method == "PATCH":
        return content_type in IDEMPOTENT_PATCHES
    if method in ("PUT", "DELETE"):
        # A PUT carries the resourceVersion it read: a repeat after success meets 409, never a second change.
        # A repeated DELETE meets 404.
        return True
    # An eviction of a pod already evicted finds it terminating or gone; any other POST may create twice.
    return method == "POST" and (url or "").split("?")[0].rstrip("/").endswith("/eviction")


class RetryPolicy(object):
    """How long to keep trying one request: exponential backoff with jitter, bounded by `budget` seconds in all
    and `max_attempts` tries; a Retry-After from the server is honoured (never waited less)."""

    def __init__(self, budget=120.0, base=0.25, cap=8.0, max_attempts=40, rng=random.random):
        self.budget, self.base, self.cap, self.max_attempts, self.rng = budget, base, cap, max_attempts, rng

    def delay(self, fault, failures):
        """Seconds to wait before try `failures + 1`: half the capped exponential step plus a random half."""
        step = min(self.cap, self.base * (2 ** (failures - 1)))
        backoff = step / 2 + self.rng() * step / 2
        if fault.retry_after is not None:
            # Spread clients told the same Retry-After a little, so they do not come back at the same instant.
            return fault.retry_after + self.rng() * self.base
        return backoff


class Retrier(object):
    """Runs requests under a RetryPolicy and counts the retries per fault.

    Nested calls (the write helpers wrap the client, whose every HTTP request also passes here) do not retry
    again: only the outermost call does, so retries never multiply.
    """

    def __init__(self, policy=None, clock=time.monotonic, sleep=time.sleep, log=None):
        self.policy = policy or RetryPolicy()
        self.clock, self.sleep, self.log = clock, sleep, log
        self.counts = dict((k, 0) for k in FAULTS)
        # Per thread: writes sent side by side (parallel.py) each retry on their own, and a request nested in
        # one thread's write is not taken for nested in another's.
        self._local = threading.local()
        self._count_lock = threading.Lock()

    @property
    def _depth(self):
        return getattr(self._local, "depth", 0)

    @_depth.setter
    def _depth(self, value):
        self._local.depth = value

    @property
    def nested(self):
        return self._depth > 0

    def call(self, what, send, resend=True, verify=None, retry_conflicts=False):
        """Return send() once it succeeds; retry transient faults; raise ApiRetryError when giving up.

        `what` names the request in errors ("PATCH /api/v1/nodes/gpu-07"). `resend`: sending twice is harmless.
        `verify()`, for writes, says whether an earlier try that may have reached the server took effect;
        then nothing is sent again and call returns None.
        """
        if self.nested:
            return send()
        start = self.clock()
        failures = 0
        while True:
            self._depth += 1
            try:
                return send()
            except Exception as exc:  # classified below; anything not transient is re-raised as it is
                fault = classify(exc)
                if fault is None or (fault.kind == CONFLICT and not retry_conflicts):
                    raise
                failures += 1
                if fault.maybe_applied and not resend and verify is None:
                    raise ApiRetryError(
                        "{0}: {1} after the request was sent. It may have been carried out, so it was not sent "
                        "again (that could apply it twice); check the object and run again.".format(
                            what, fault.detail), what, fault, failures)
                wait = self.policy.delay(fault, failures)
                spent = self.clock() - start
                if failures >= self.policy.max_attempts or spent + wait > self.policy.budget:
                    raise ApiRetryError(
                        "{0}: gave up after {1} tries in {2:.1f} s ({3}): last fault {4}. {5}, or raise "
                        "KUBEGPU_API_RETRY_BUDGET (seconds).".format(
                            what, failures, spent,
                            "{0} tries at most".format(self.policy.max_attempts) if failures >= self.policy.max_attempts
                            else "waiting {0:.1f} s more would pass the retry budget {1:g} s".format(
                                wait, self.policy.budget),
                            fault.detail, _ADVICE[fault.kind]),
                        what, fault, failures)
            finally:
                self._depth -= 1
            with self._count_lock:
                self.counts[fault.kind] += 1
            if self.log:
                self.log("{0}: {1}; try {2} in {3:.2f} s".format(what, fault.detail, failures + 1, wait))
            self.sleep(wait)
            if fault.maybe_applied and verify is not None and verify():
                return None
