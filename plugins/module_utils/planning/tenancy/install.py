# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How Kueue is installed where its API (kueue.x-k8s.io) is not served (docs/tenancy.md, "Installing Kueue").

- Kubernetes: the upstream chart (kubernetes.core.helm), from settings.helm.charts_dir/kueue when given, else the
  published chart oci://registry.k8s.io/kueue/charts/kueue at its pinned version.
- OpenShift: the Red Hat build of Kueue through OLM (package kueue-operator in openshift-kueue-operator, all
  namespaces; channel, source and approval from settings.kueue_operator, else the catalog's default), then its
  operand, the Kueue CR named cluster (kueue.openshift.io/v1), which makes the operator deploy Kueue.

    install_plan(settings, platform, kueue_served, mappings=()) -> {"charts": [...], "operators": [...],
                                                                    "operands": [...]}
      mappings (kueue_config.device_class_mappings): written into the chart's Configuration
      (managerConfig.controllerManagerConfigYaml) or the operand's spec.config.resources, so that the Kueue the
      collection installs counts DRA claims.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import MANAGED_BY, OPENSHIFT
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.kueue_config import (
    chart_values,
    operand_resources,
)

KUEUE_NAMESPACE = "kueue-system"
KUEUE_CHART = {"ref": "oci://registry.k8s.io/kueue/charts/kueue", "version": "0.19.2", "folder": "kueue"}
KUEUE_OPERATOR = "kueue-operator"
KUEUE_OPERATOR_NAMESPACE = "openshift-kueue-operator"
KUEUE_OPERAND_API = "kueue.openshift.io/v1"
# Workloads Kueue queues on OpenShift: Jobs, and the Deployments KServe's Standard mode makes of a model.
KUEUE_OPERAND_FRAMEWORKS = ["BatchJob", "Pod", "Deployment", "StatefulSet"]


def install_plan(settings, platform, kueue_served, mappings=()):
    """What to install for Kueue: nothing when it is not wanted, already served, or install is off."""
    plan = {"charts": [], "operators": [], "operands": []}
    if not settings.kueue or kueue_served or not settings.install:
        return plan
    if platform == OPENSHIFT:
        args = {"package": KUEUE_OPERATOR, "namespace": KUEUE_OPERATOR_NAMESPACE,
                "operator_group": {"target_namespaces": []}}
        for key in ("channel", "approval", "source"):
            if settings.kueue_operator.get(key):
                args[key] = settings.kueue_operator[key]
        plan["operators"].append(args)
        config = {"integrations": {"frameworks": list(KUEUE_OPERAND_FRAMEWORKS)}}
        resources = operand_resources(mappings)
        if resources:
            config["resources"] = resources
        plan["operands"].append({"apiVersion": KUEUE_OPERAND_API, "kind": "Kueue",
                                 "metadata": {"name": "cluster", "labels": dict(MANAGED_BY)},
                                 "spec": {"managementState": "Managed", "config": config}})
        return plan
    charts_dir = (settings.helm.get("charts_dir") or "").rstrip("/")
    release = {"name": "kueue", "namespace": settings.helm.get("namespace") or KUEUE_NAMESPACE, "chart": "kueue",
               "values": chart_values(settings.helm.get("values"), mappings)}
    if charts_dir:
        release.update(chart_ref="%s/%s" % (charts_dir, KUEUE_CHART["folder"]), version=None)
    else:
        release.update(chart_ref=KUEUE_CHART["ref"], version=KUEUE_CHART["version"])
    plan["charts"].append(release)
    return plan
