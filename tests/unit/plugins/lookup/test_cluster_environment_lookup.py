# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.kubegpu.platform.plugins.lookup.cluster_environment import LookupModule


def _run(variables):
    templar = Templar(loader=DataLoader(), variables=variables)
    return LookupModule(loader=DataLoader(), templar=templar).run([], variables=variables)


def test_a_hosts_k8s_auth_variables_become_its_environment_templated():
    # Inventory values are trusted templates; a plain string in a test is not.
    variables = {"K8S_AUTH_KUBECONFIG": trust_as_template("{{ base }}/east.kubeconfig"), "base": "/etc/kubegpu",
                 "K8S_AUTH_VERIFY_SSL": False, "K8S_AUTH_IMPERSONATE_GROUPS": ["a", "b"],
                 "K8S_AUTH_CONTEXT": "", "K8S_AUTH_API_KEY": None,
                 "kubegpu_node_pools": [], "k8s_auth_host": "lower case is not an environment name"}
    assert _run(variables) == [{"K8S_AUTH_KUBECONFIG": "/etc/kubegpu/east.kubeconfig",
                                "K8S_AUTH_VERIFY_SSL": "false", "K8S_AUTH_IMPERSONATE_GROUPS": "a,b"}]


def test_a_host_without_them_gets_an_empty_environment():
    assert _run({"ansible_connection": "local"}) == [{}]
