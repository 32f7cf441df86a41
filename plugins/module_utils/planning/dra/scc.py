# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""OpenShift: let the NVIDIA DRA driver's pods run privileged.

The driver's kubelet plugin and controller run privileged containers (host paths, the driver root);
OpenShift admits such a pod only when its service account may `use` the `privileged`
SecurityContextConstraints (shared/reference/dra-kserve-openshift-ai.md, "DRA on OpenShift"; the chart
itself creates no such grant, driver issue #753). The grant is the one OpenShift documents for operators:
a ClusterRole with verb `use` on securitycontextconstraints/privileged, bound to the service accounts.
A ClusterRoleBinding names them by namespace, so it can be written before Helm creates that namespace.

Service account names follow the chart's templates (dra-driver-nvidia-gpu 0.4.1, _helpers.tpl):
"<fullname>-service-account" with the suffix "-controller" or "-kubeletplugin", where fullname is the
release name when it contains the chart name (or the nameOverride), else "<release>-<name>".

Pure.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.driver_values import NEW_NAME
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import MANAGED_BY, PART_OF_LABEL

NAME = "kubegpu-dra-driver-privileged-scc"
RBAC_API = "rbac.authorization.k8s.io/v1"
SCC_GROUP = "security.openshift.io"
SCC = "privileged"
SERVICE_ACCOUNT_SUFFIXES = ("controller", "kubeletplugin")
LABELS = dict(MANAGED_BY, **{PART_OF_LABEL: "kubegpu-dra"})


def chart_fullname(release_name, name_override=None):
    """The chart's fullname for a release (its helper "dra-driver-nvidia-gpu.fullname", without fullnameOverride)."""
    name = name_override or NEW_NAME
    full = release_name if name in release_name else "%s-%s" % (release_name, name)
    return full[:63].rstrip("-")


def service_accounts(release):
    """[(namespace, name)] of the driver's controller and kubelet plugin for a release from driver_values.release_for."""
    base = "%s-service-account" % chart_fullname(release["name"], release.get("name_override"))
    return [(release["namespace"], "%s-%s" % (base, suffix)) for suffix in SERVICE_ACCOUNT_SUFFIXES]


def scc_objects(release):
    """The ClusterRole and ClusterRoleBinding that let the driver's service accounts use the privileged SCC."""
    meta = {"name": NAME, "labels": dict(LABELS)}
    role = {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": dict(meta),
            "rules": [{"apiGroups": [SCC_GROUP], "resources": ["securitycontextconstraints"],
                       "resourceNames": [SCC], "verbs": ["use"]}]}
    binding = {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding", "metadata": dict(meta),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}
                            for namespace, name in service_accounts(release)]}
    return [role, binding]
