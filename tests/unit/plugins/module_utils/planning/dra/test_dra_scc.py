# -*- coding: utf-8 -*-
"""OpenShift's privileged SCC for the DRA driver: the service account names the chart gives, the grant's shape."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.driver_values import release_for
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.scc import (
    chart_fullname,
    scc_objects,
    service_accounts,
)


def test_service_accounts_of_the_new_release():
    assert service_accounts(release_for()) == [
        ("dra-driver-nvidia-gpu", "dra-driver-nvidia-gpu-service-account-controller"),
        ("dra-driver-nvidia-gpu", "dra-driver-nvidia-gpu-service-account-kubeletplugin")]


def test_service_accounts_of_a_25_release_upgraded_in_place():
    old = {"name": "nvidia-dra-driver-gpu", "namespace": "nvidia-dra-driver-gpu", "chart_version": "25.12.0"}
    assert service_accounts(release_for(installed=old)) == [
        ("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-service-account-controller"),
        ("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-service-account-kubeletplugin")]


def test_fullname_follows_the_chart_helper():
    assert chart_fullname("dra") == "dra-dra-driver-nvidia-gpu"
    assert chart_fullname("my-dra-driver-nvidia-gpu") == "my-dra-driver-nvidia-gpu"
    assert chart_fullname("x" * 70) == "x" * 63


def test_the_grant_is_use_of_privileged_only():
    role, binding = scc_objects(release_for())
    assert role["rules"] == [{"apiGroups": ["security.openshift.io"], "resources": ["securitycontextconstraints"],
                              "resourceNames": ["privileged"], "verbs": ["use"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    assert [s["kind"] for s in binding["subjects"]] == ["ServiceAccount", "ServiceAccount"]
