# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which platform the cluster is: OpenShift (it serves the ClusterVersion "version") or Kubernetes.

The one place that tells them apart; modules and the DRA stage's platform facts ask here.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    KUBERNETES,
    OPENSHIFT,
    OPENSHIFT_CONFIG_API,
)

AUTO = "auto"


def cluster_version(cluster):
    """OpenShift's ClusterVersion "version" (one GET), None on Kubernetes."""
    return cluster.get(OPENSHIFT_CONFIG_API, "ClusterVersion", "version")


def openshift_release(version):
    """The OpenShift release a ClusterVersion says is wanted (status.desired.version), None when not yet known."""
    return ((version.get("status") or {}).get("desired") or {}).get("version")


def detect_platform(cluster, wanted=AUTO):
    """Return wanted unless it is auto; then openshift or kubernetes, as the cluster answers (one GET)."""
    if wanted != AUTO:
        return wanted
    return OPENSHIFT if cluster_version(cluster) is not None else KUBERNETES


def platform_info(cluster):
    """{name: openshift | kubernetes, version (OpenShift's release or Kubernetes'), kubernetes_version}."""
    version = cluster_version(cluster)
    kube = cluster.server_version()
    if version is not None:
        return {"name": OPENSHIFT, "version": openshift_release(version), "kubernetes_version": kube}
    return {"name": KUBERNETES, "version": kube, "kubernetes_version": kube}
