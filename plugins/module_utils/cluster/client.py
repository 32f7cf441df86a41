# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connect to the cluster with kubernetes.core's client and auth, and read from it.

Authentication is kubernetes.core's own (module options, then K8S_AUTH_* variables, then kubeconfig), so AWX
credentials work unchanged. Reads are lists with selectors, never one GET per node: a no-op run on a
thousand-node cluster must cost requests per pool, not per node.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError, ResourceNotFoundError
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


class ClusterError(Exception):
    """An API request failed; the message says what was asked, what the server said, and what to do."""


def describe_api_error(action, exc):
    status = getattr(exc, "status", None)
    reason = getattr(exc, "summary", None)
    text = reason() if callable(reason) else str(exc)
    hint = ""
    if status == 401:
        hint = " Check the credentials (kubeconfig, K8S_AUTH_API_KEY or the AWX credential)."
    elif status == 403:
        hint = " The user lacks RBAC rights for this: grant them or run as a cluster administrator."
    return "{0} failed (HTTP {1}): {2}.{3}".format(action, status, text, hint)


class Cluster:
    """A thin reader/writer over kubernetes.core's K8SClient (a dynamic client with cached discovery)."""

    def __init__(self, k8s_client):
        self._k8s = k8s_client
        self.dynamic = k8s_client.client

    @classmethod
    def connect(cls, auth):
        """Connect with kubernetes.core's auth handling; `auth` holds its options (None -> K8S_AUTH_*)."""
        return cls(get_api_client(**auth))

    def resource(self, api_version, kind):
        """The resource for api_version/kind, or None when the server does not serve it (CRD absent)."""
        try:
            return self._k8s.resource(kind, api_version)
        except ResourceNotFoundError:
            return None

    def list(self, api_version, kind, namespace=None, label_selector=None, field_selector=None):
        """All objects of a kind as plain dicts ([] when the kind is not served)."""
        res = self.resource(api_version, kind)
        if res is None:
            return []
        params = {}
        if label_selector:
            params["label_selector"] = label_selector
        if field_selector:
            params["field_selector"] = field_selector
        try:
            return [item.to_dict() for item in res.get(namespace=namespace, **params).items]
        except DynamicApiError as e:
            raise ClusterError(describe_api_error("list {0} {1}".format(api_version, kind), e))

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
