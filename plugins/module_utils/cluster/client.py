# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connect to the cluster with kubernetes.core's client and auth, and read from it.

Authentication is kubernetes.core's own (module options, then K8S_AUTH_* variables, then kubeconfig), so AWX
credentials work unchanged. Reads are lists with selectors, never one GET per node: a no-op run on a
thousand-node cluster must cost requests per pool, not per node.

Every HTTP request the client makes passes through one Retrier (retry.py): throttling, server errors and
dropped connections are retried here, once, so modules and the write helpers never repeat it.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.access.rules import forbidden_message
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.retry import (
    ClusterError,
    Retrier,
    RetryPolicy,
    StatusFault,
    RETRY_STATUSES,
    resend_is_safe,
)

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError, ResourceNotFoundError
    try:
        from kubernetes.watch.watch import iter_resp_lines
    except ImportError:  # an older client: the waits poll
        iter_resp_lines = None
    HAS_CLIENT = True
    CLIENT_IMPORT_ERROR = None
except ImportError as e:  # reported by KubegpuModule with install advice
    HAS_CLIENT = False
    CLIENT_IMPORT_ERROR = e

    class DynamicApiError(Exception):
        pass

    class NotFoundError(DynamicApiError):
        pass

    class ResourceNotFoundError(Exception):
        pass

    iter_resp_lines = None


# Seconds: connecting, then waiting for each read of a response. Without a read timeout a connection that
# stalls (a proxy or load balancer that stops forwarding) would hang the run for good.
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0


def plain_json(client, data):
    """The dynamic client's serializer hook: the response's decoded JSON, unwrapped."""
    return data


def _env_seconds(name, default):
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


def retrier_from_env(log=None):
    """A Retrier whose budget (seconds per request) is KUBEGPU_API_RETRY_BUDGET, 120 by default."""
    return Retrier(RetryPolicy(budget=_env_seconds("KUBEGPU_API_RETRY_BUDGET", 120.0)), log=log)


def request_name(method, url):
    """"GET /api/v1/nodes?labelSelector=..." from a full URL, without the scheme and host."""
    path = url.split("://", 1)[-1]
    path = "/" + path.split("/", 1)[1] if "/" in path else "/"
    return "{0} {1}".format(method.upper(), path)


def install_retries(api_client, retrier, timeout=None):
    """Send every request of this kubernetes ApiClient through `retrier`, and leave urllib3 retrying nothing.

    urllib3 would otherwise retry connection errors itself (3 times, without delay) under ours. The wrapper
    reads the whole body within the retried call, so a connection dropped mid-response is retried too.
    """
    api_client.kubegpu_retrier = retrier
    if getattr(api_client, "kubegpu_original_call_api", None) is not None:
        return
    pool_manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if pool_manager is not None:
        pool_manager.connection_pool_kw["retries"] = False
        pool_manager.clear()
    original = api_client.call_api
    api_client.kubegpu_original_call_api = original
    timeout = timeout or (CONNECT_TIMEOUT, _env_seconds("KUBEGPU_API_REQUEST_TIMEOUT", READ_TIMEOUT))

    def call_api(method, url, header_params=None, body=None, post_params=None, _request_timeout=None):
        headers = dict(header_params or {})
        run = api_client.kubegpu_retrier
        outermost = not run.nested  # inside a write helper's own retried call, that call decides

        def send():
            response = original(method, url, header_params=dict(headers), body=body, post_params=post_params,
                                _request_timeout=_request_timeout or timeout)
            response.read()
            if outermost and response.status in RETRY_STATUSES:
                raise StatusFault(response.status, response.reason, response.headers, response.data)
            return response

        if not outermost:
            return send()
        try:
            return run.call(request_name(method, url), send,
                            resend=resend_is_safe(method, headers.get("Content-Type"), url))
        except StatusFault as e:  # not retried (an unsafe write): let the client report it as usual
            raise _api_exception(e)

    api_client.call_api = call_api


def _api_exception(fault):
    try:
        from kubernetes.client.exceptions import ApiException
    except ImportError:  # pragma: no cover - without the client nothing reaches here
        return fault
    exc = ApiException(status=fault.status, reason=fault.reason)
    exc.headers, exc.body = fault.headers, fault.body
    return exc


def _status_message(exc):
    """The message of the API server's Status in an error's body ("" when there is none)."""
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        return (json.loads(body) or {}).get("message", "") if body else ""
    except (ValueError, AttributeError):
        return ""


def describe_api_error(action, exc):
    """One message for every failed request: what was asked, the HTTP status, the server's words, what to do.

    A 403 names the verb, resource and namespace RBAC refused and the automation_access rule that grants it
    (planning/access/rules.py), the same for every module."""
    status = getattr(exc, "status", None)
    if status == 403:
        denied = forbidden_message(_status_message(exc) or str(exc))
        if denied:
            return "{0} failed (HTTP 403, RBAC): {1}.".format(action, denied)
    reason = getattr(exc, "summary", None)
    text = reason() if callable(reason) else str(exc)
    hint = ""
    if status == 401:
        hint = " Check the credentials (kubeconfig, K8S_AUTH_API_KEY or the AWX credential)."
    elif status == 403:
        hint = " The user lacks RBAC rights for this: grant them or run as a cluster administrator."
    return "{0} failed (HTTP {1}): {2}.{3}".format(action, status, text, hint)


class WatchUnsupported(Exception):
    """The kubernetes client in use cannot stream a watch (the waits list instead)."""


class WatchStream(object):
    """A watch's open response: iterate for (type, object) events; close() ends it from another thread."""

    def __init__(self, response):
        self._response = response

    def __iter__(self):
        for line in iter_resp_lines(self._response.response):
            if line:
                event = json.loads(line)
                yield event.get("type"), event.get("object") or {}

    def close(self):
        raw = self._response.response
        # urllib3 2.3+ can shut the socket down under a blocked read; older ones at least drop the connection.
        closer = getattr(raw, "shutdown", None) or getattr(raw, "release_conn", None)
        try:
            closer()
        except Exception:  # already closed: nothing left to end
            pass


class Cluster:
    """A thin reader/writer over kubernetes.core's K8SClient (a dynamic client with cached discovery)."""

    def __init__(self, k8s_client, retrier=None):
        self._k8s = k8s_client
        self.dynamic = k8s_client.client
        self.retrier = retrier or retrier_from_env()
        install_retries(self.dynamic.client, self.retrier)

    @classmethod
    def connect(cls, auth, retrier=None):
        """Connect with kubernetes.core's auth handling; `auth` holds its options (None -> K8S_AUTH_*).

        Connecting reads discovery, before our wrapper is in place: the whole connection is retried instead.
        """
        retrier = retrier or retrier_from_env()
        return cls(retrier.call("connect to the API server", lambda: get_api_client(**auth)), retrier)

    def allow_parallel(self, count):
        """Keep up to `count` connections open, for writes sent side by side (parallel.py); urllib3 otherwise
        keeps (cpu count x 5) and drops the rest after each request."""
        pool_manager = getattr(getattr(self.dynamic.client, "rest_client", None), "pool_manager", None)
        if pool_manager is not None and pool_manager.connection_pool_kw.get("maxsize", 1) < count:
            pool_manager.connection_pool_kw["maxsize"] = count
            pool_manager.clear()

    def write(self, what, send, verify=None):
        """Run one write request `send()` under the retrier. After a try that may have reached the server,
        `verify()` (a read) says whether it took effect; only if not is it sent again. Without `verify` such a
        write is not sent again (ApiRetryError), so no write is ever applied twice."""
        return self.retrier.call(what, send, resend=False, verify=verify)

    def resource(self, api_version, kind):
        """The resource for api_version/kind, or None when the server does not serve it (CRD absent)."""
        try:
            return self._k8s.resource(kind, api_version)
        except ResourceNotFoundError:
            return None

    def list(self, api_version, kind, namespace=None, label_selector=None, field_selector=None):
        """All objects of a kind as plain dicts ([] when the kind is not served)."""
        return self.list_versioned(api_version, kind, namespace, label_selector, field_selector)[0]

    def list_versioned(self, api_version, kind, namespace=None, label_selector=None, field_selector=None):
        """(objects, the list's resourceVersion): where a watch of the same objects starts (None when the kind is
        not served)."""
        res = self.resource(api_version, kind)
        if res is None:
            return [], None
        params = {}
        if label_selector:
            params["label_selector"] = label_selector
        if field_selector:
            params["field_selector"] = field_selector
        try:
            # The decoded JSON as it is: wrapping a list in the dynamic client's ResourceInstance and turning each
            # item back into a dict cost ten times the request on a thousand nodes (a batch's wait lists them
            # every second).
            answer = res.get(namespace=namespace, serializer=plain_json, **params)
            return answer.get("items") or [], (answer.get("metadata") or {}).get("resourceVersion")
        except NotFoundError:
            # Discovery said the kind is served, the server says it is not: its CRD went after kubernetes.core
            # cached discovery (a file shared by every module run against this server, refreshed only when a kind
            # is missing from it), e.g. once the uninstall's `helm uninstall kserve-crd` deleted KServe's CRDs. A
            # list of a served kind never answers 404 (an absent namespace lists empty): none of it exists.
            return [], None
        except DynamicApiError as e:
            raise ClusterError(describe_api_error("list {0} {1}".format(api_version, kind), e))

    def watch(self, api_version, kind, resource_version, namespace=None, label_selector=None, seconds=300):
        """A watch of a kind from `resource_version` (a list's): a WatchStream of (type, object) events, bookmarks
        included, which the server ends after `seconds`. Not retried: a watch that ends is followed by a new list
        (cluster/watch.py). Raises ClusterError when the server refuses it (a 403 names the missing verb), and
        WatchUnsupported when the installed kubernetes client cannot stream one."""
        res = self.resource(api_version, kind)
        api = self.dynamic.client
        if res is None or not hasattr(api, "param_serialize") or iter_resp_lines is None:
            raise WatchUnsupported("{0} {1}: no watch with this kubernetes client".format(api_version, kind))
        query = [("watch", "true"), ("resourceVersion", resource_version), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", int(seconds))]
        if label_selector:
            query.append(("labelSelector", label_selector))
        request = api.param_serialize("GET", res.path(namespace=namespace), query_params=query,
                                      header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
        # Past the retrying wrapper (install_retries), which reads a whole response before it returns: a watch's
        # response is read as it streams. The read timeout outlasts the server's own end of the stream.
        send = getattr(api, "kubegpu_original_call_api", None) or api.call_api
        try:
            response = send(*request, _request_timeout=(CONNECT_TIMEOUT, seconds + READ_TIMEOUT))
        except Exception as e:  # a refused or dropped connection: the caller lists again
            raise ClusterError("watch {0} {1}: {2}".format(api_version, kind, e))
        if not 200 <= response.status <= 299:
            fault = StatusFault(response.status, response.reason, response.headers, response.read())
            raise ClusterError(describe_api_error("watch {0} {1}".format(api_version, kind), _api_exception(fault)))
        return WatchStream(response)

    def get(self, api_version, kind, name, namespace=None):
        """One object as a dict, or None when it (or its kind) does not exist."""
        res = self.resource(api_version, kind)
        if res is None:
            return None
        try:
            return res.get(name=name, namespace=namespace).to_dict()
        except NotFoundError:
            return None
        except DynamicApiError as e:
            raise ClusterError(describe_api_error("get {0} {1}".format(kind, name), e))

    def served_versions(self, group):
        """Versions of an API group the server serves, preferred first ([] when the group is absent)."""
        try:
            info = self.dynamic.request("GET", "/apis/{0}".format(group))
        except NotFoundError:
            return []
        except DynamicApiError as e:
            raise ClusterError(describe_api_error("discover API group {0}".format(group), e))
        info = info.to_dict() if hasattr(info, "to_dict") else info
        preferred = (info.get("preferredVersion") or {}).get("version")
        versions = [v["version"] for v in info.get("versions", [])]
        return sorted(versions, key=lambda v: v != preferred)

    def server_version(self):
        return (self.dynamic.version or {}).get("kubernetes", {}).get("gitVersion", "")
