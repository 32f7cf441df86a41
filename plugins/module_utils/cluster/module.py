# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AnsibleModule every kubegpu module uses: kubernetes.core's auth options, one way to report errors, and
the API retries of the run (`api_retries`) in every result, success or failure."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import (
    CLIENT_IMPORT_ERROR,
    HAS_CLIENT,
    Cluster,
    ClusterError,
    DynamicApiError,
    describe_api_error,
    retrier_from_env,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.retry import FAULTS

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
except ImportError:  # kubernetes.core missing: reported below with install advice
    AUTH_ARG_SPEC = {}


class KubegpuModule(AnsibleModule):
    """AnsibleModule with the cluster auth options merged in and `cluster` connected on first use."""

    def __init__(self, argument_spec=None, needs_cluster=True, **kwargs):
        spec = dict(argument_spec or {})
        if needs_cluster:
            spec.update(AUTH_ARG_SPEC)
        super(KubegpuModule, self).__init__(argument_spec=spec, **kwargs)
        self._cluster = None
        if needs_cluster and (not HAS_CLIENT or not AUTH_ARG_SPEC):
            self.fail_json(msg=missing_required_lib("kubernetes and the kubernetes.core collection"),
                           exception=str(CLIENT_IMPORT_ERROR))

    @property
    def cluster(self):
        if self._cluster is None:
            try:
                self._retrier = retrier_from_env()
                self._cluster = Cluster.connect(dict((k, self.params.get(k)) for k in AUTH_ARG_SPEC), self._retrier)
            except DynamicApiError as e:  # discovery already talks to the server: 401, 403, ...
                self.fail_json(msg=describe_api_error("connecting to the API server", e))
            except Exception as e:  # kubernetes.core raises CoreException for a bad kubeconfig or auth options
                self.fail_json(msg="Could not connect to the cluster: {0}".format(e))
        return self._cluster

    @property
    def api_retries(self):
        """Retries per fault so far: {"429": n, "5xx": n, "connection": n, "conflict": n}."""
        retrier = getattr(self, "_retrier", None)  # absent when AnsibleModule fails on its arguments
        return dict(retrier.counts) if retrier else dict((k, 0) for k in FAULTS)

    def exit_json(self, **kwargs):
        kwargs.setdefault("api_retries", self.api_retries)
        super(KubegpuModule, self).exit_json(**kwargs)

    def fail_json(self, msg, **kwargs):
        kwargs.setdefault("api_retries", self.api_retries)
        super(KubegpuModule, self).fail_json(msg, **kwargs)

    def run(self, func):
        """Call func(self) and exit with its result; API failures become one clear message."""
        try:
            result = func(self)
        except ClusterError as e:
            self.fail_json(msg=str(e))
        self.exit_json(**result)
