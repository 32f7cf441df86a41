# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Platform detection, once: OpenShift serves the ClusterVersion "version", Kubernetes does not."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.platform import (
    detect_platform,
    platform_info,
)


class FakeCluster(object):
    def __init__(self, cluster_version=None):
        self.cluster_version = cluster_version
        self.gets = []

    def get(self, api_version, kind, name, namespace=None):
        self.gets.append((api_version, kind, name))
        wanted = ("config.openshift.io/v1", "ClusterVersion", "version")
        return self.cluster_version if (api_version, kind, name) == wanted else None

    def server_version(self):
        return "v1.34.1"


OPENSHIFT_VERSION = {"status": {"desired": {"version": "4.20.3"}}}


@pytest.mark.parametrize("cluster_version, wanted, expected, gets", [
    (None, "auto", "kubernetes", 1),
    (OPENSHIFT_VERSION, "auto", "openshift", 1),
    ({}, "auto", "openshift", 1),
    # asked for: no request
    (OPENSHIFT_VERSION, "kubernetes", "kubernetes", 0),
    (None, "openshift", "openshift", 0),
])
def test_detect_platform(cluster_version, wanted, expected, gets):
    cluster = FakeCluster(cluster_version)
    assert detect_platform(cluster, wanted) == expected
    assert len(cluster.gets) == gets


@pytest.mark.parametrize("cluster_version, expected", [
    (None, {"name": "kubernetes", "version": "v1.34.1", "kubernetes_version": "v1.34.1"}),
    (OPENSHIFT_VERSION, {"name": "openshift", "version": "4.20.3", "kubernetes_version": "v1.34.1"}),
    ({"status": {}}, {"name": "openshift", "version": None, "kubernetes_version": "v1.34.1"}),
])
def test_platform_info(cluster_version, expected):
    assert platform_info(FakeCluster(cluster_version)) == expected
