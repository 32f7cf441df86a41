# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render gpu_cluster_info's result as the plain-text report people read in a terminal or AWX job output."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type


def table(header, rows):
    """Lines of a left-aligned text table: header, a rule, then the rows (cells turned into text)."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    fmt = "  ".join("{%d:<%d}" % (i, w) for i, w in enumerate(widths))
    lines = [fmt.format(*header).rstrip(), "  ".join("-" * w for w in widths)]
    lines.extend(fmt.format(*[str(c) for c in r]).rstrip() for r in rows)
    return lines


def _counts(counter):
    """`k=v, ...` sorted by key; zero counts left out (resources a node no longer advertises stay at 0)."""
    return ", ".join("{0}={1}".format(k, v) for k, v in sorted(counter.items()) if v) or "-"


def _yes(flag):
    return "yes" if flag else "no"


def cluster_report(info):
    """Lines of text: platform, GPU Operator, DRA and serving, then one table row per GPU model."""
    platform = info["platform"]
    op = info["gpu_operator"]
    dra = info["dra"]
    serving = info["serving"]
    lines = ["Platform:     {0} {1} (Kubernetes {2})".format(
        platform["name"], platform.get("version") or "?", platform.get("kubernetes_version") or "?")]
    if op["installed"] or op.get("method"):
        operator = "{0} via {1} in {2}{3}".format(op.get("version") or "?", op["method"], op.get("namespace"),
                                                  "" if op["installed"] else " (phase {0})".format(op.get("phase")))
    else:
        operator = "not installed"
    policies = "; ".join(
        "ClusterPolicy {0}: {1}{2}".format(
            p["name"], p.get("state") or "no status yet",
            "".join(" ({0}: {1})".format(c["type"], c["reason"]) for c in p["conditions"]
                    if c.get("type") == "Ready" and c.get("status") != "True"))
        for p in op.get("cluster_policies", []))
    lines.append("GPU Operator: {0}{1}".format(operator, "; " + policies if policies else ""))
    lines.append("DRA:          {0}; {1} device classes; {2} resource slices".format(
        "resource.k8s.io " + "/".join(dra["served_versions"]) if dra["served_versions"] else "not served",
        len(dra["device_classes"]), dra["resource_slices"]))
    if dra.get("nodes"):
        lines.append("DRA nodes:    " + ", ".join(
            "{0} ({1} devices)".format(node, count) for node, count in sorted(dra["nodes"].items())))
    for template in dra.get("claim_templates") or []:
        lines.append("Claim template {0}: DeviceClass {1}; {2}".format(
            template["name"], template["device_class"] or "missing", ", ".join(template["claims"]) or "no claims"))
    lines.append("Serving:      KServe API {0}, controller {1}; Knative Serving API {2}; KEDA API {3}; "
                 "OpenShift AI API {4}".format(
                     _yes(serving["kserve"]["api"]), _yes(serving["kserve"]["controller"]),
                     _yes(serving["knative_serving"]["api"]), _yes(serving["keda"]["api"]),
                     _yes(serving["openshift_ai"]["api"])))
    by_place = {}
    for model in serving.get("models") or []:
        place = ("pool " + model["pool"]) if model.get("pool") else ("claim template " + str(model.get("claim_template")))
        by_place.setdefault(place, []).append("{0} ({1}{2})".format(
            model["name"], "Ready" if model["ready"] else "not ready",
            ", scales to zero" if model.get("min_replicas") == 0 else ""))
    for place, served_models in sorted(by_place.items()):
        lines.append("Served on {0}: {1}".format(place, ", ".join(served_models)))
    nodes = info["gpu_nodes"]
    lines.append("Nodes:        {0} in all, {1} with NVIDIA GPUs".format(nodes["nodes"], nodes["gpu_nodes"]))
    lines.append("")
    rows = [[m["product"], m["nodes"], m["gpus"],
             "{0:.0f} GiB".format(m["memory_mib"] / 1024.0) if m.get("memory_mib") else "?",
             _yes(m["mig_capable"]), _counts(m["allocatable"]), _counts(m["sharing"]), _counts(m["mig_states"])]
            for m in nodes["models"]]
    lines.extend(table(["GPU model", "Nodes", "GPUs", "Memory", "MIG", "Allocatable", "Sharing", "MIG config"],
                       rows or [["(no GPU nodes)", 0, 0, "-", "-", "-", "-", "-"]]))
    # The capacity report (planning/report/capacity_text.py) shows the pools with their requests; this table is for
    # results that do not carry it.
    pools = [] if info.get("capacity") else (info.get("pools") or [])
    if pools:
        lines.append("")
        lines.extend(table(["Node pool", "Nodes", "GPU model", "Allocatable", "Sharing", "MIG state"],
                           [[p["name"], p["nodes"], ", ".join(p["products"]), _counts(p["allocatable"]),
                             _counts(p["sharing"]), _counts(p["mig_states"])] for p in pools]))
    return lines
