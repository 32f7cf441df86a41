# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: cluster_environment
short_description: The cluster connection of the current inventory host, as K8S_AUTH_* environment variables
version_added: 0.1.0
description:
  - Returns the variables of the current host whose names start with C(K8S_AUTH_) (C(K8S_AUTH_KUBECONFIG),
    C(K8S_AUTH_CONTEXT), C(K8S_AUTH_HOST), C(K8S_AUTH_API_KEY), C(K8S_AUTH_VERIFY_SSL), C(K8S_AUTH_SSL_CA_CERT), ...),
    templated, as a mapping of strings for a play's C(environment) keyword.
  - Every play of the collection's playbooks sets its environment from it, so that with one inventory host per
    cluster each host's tasks reach that host's cluster. kubernetes.core's modules, this collection's modules and the
    Helm commands all read these names from the environment (see docs/many-clusters.md).
  - A host without such variables gets an empty mapping, and the environment of ansible-playbook (for instance the
    K8S_AUTH_* variables an AWX credential injects) applies unchanged.
  - Booleans become V(true) or V(false), lists are joined with commas, unset (null or empty) values are left out.
author:
  - kubegpu.platform contributors (@kubegpu)
options: {}
"""

EXAMPLES = r"""
# inventory: one host per cluster
#   clusters:
#     hosts:
#       east: {ansible_connection: local, K8S_AUTH_KUBECONFIG: /etc/kubegpu/east.kubeconfig}
#       west: {ansible_connection: local, K8S_AUTH_HOST: "https://api.west:6443", K8S_AUTH_API_KEY: "{{ vault_west }}"}
- name: Read each host's cluster
  hosts: clusters
  gather_facts: false
  environment: "{{ lookup('kubegpu.platform.cluster_environment') }}"
  tasks:
    - name: Read the cluster
      kubegpu.platform.gpu_cluster_info:
"""

RETURN = r"""
_raw:
  description: One mapping of environment variable names to string values (empty when the host sets none).
  type: list
  elements: dict
"""

import re

from ansible.plugins.lookup import LookupBase

# kubernetes.core reads K8S_AUTH_<OPTION> for each auth option (and K8S_AUTH_PROXY_HEADERS_<KEY>).
NAME = re.compile(r"^K8S_AUTH_[A-Z0-9_]+$")


def environment_value(value):
    """A variable's value as an environment variable's string, or None for an unset one."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        variables = variables or {}
        environment = {}
        for name in sorted(n for n in variables if NAME.match(str(n))):
            value = environment_value(self._templar.template(variables[name]))
            if value is not None:
                environment[name] = value
        return [environment]
