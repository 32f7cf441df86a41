# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the cluster looks like, from objects already read: GPU nodes per model, operator state, serving stack.

Pure functions over plain dicts (what the access layer returns), so every rule here is unit-tested without
a cluster.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import POOL_LABEL
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_state import (
    gfd_facts,
    gpu_allocatable,
    is_gpu_node,
    node_labels,
    node_name,
    sharing_state,
)

# Public here as well: the report and its tests read them from this module.
__all__ = ["gpu_operator_status", "is_gpu_node", "sharing_state", "summarize_gpu_nodes", "summarize_pools"]


def _bump(counter, key, by=1):
    counter[key] = counter.get(key, 0) + by


def summarize_gpu_nodes(nodes):
    """Group GPU nodes by physical GPU model: node and GPU counts, allocatable GPU resources, sharing states."""
    models = {}
    gpu_nodes = 0
    for node in nodes:
        if not is_gpu_node(node):
            continue
        gpu_nodes += 1
        labels = node_labels(node)
        gfd = gfd_facts(labels)
        product = gfd["physical_product"] or "unknown (no GFD labels yet)"
        entry = models.setdefault(product, {
            "product": product, "nodes": 0, "gpus": 0, "allocatable": {}, "sharing": {}, "mig_states": {},
            "memory_mib": gfd["memory_mib"], "mig_capable": gfd["mig_capable"], "node_names": [],
        })
        entry["nodes"] += 1
        entry["node_names"].append(node_name(node))
        # Under MIG single strategy gpu.count counts MIG devices; physical GPUs are then capacity we can't see.
        entry["gpus"] += gfd["physical_count"] or 0
        for resource, value in gpu_allocatable(node).items():
            _bump(entry["allocatable"], resource, value)
        state = sharing_state(labels)
        _bump(entry["sharing"], state["strategy"])
        if "mig_state" in state:
            _bump(entry["mig_states"], "{0}={1}".format(state["mig_config"], state["mig_state"]))
    ordered = sorted(models.values(), key=lambda m: (-m["nodes"], m["product"]))
    for m in ordered:
        m["node_names"].sort()
    return {"nodes": len(nodes), "gpu_nodes": gpu_nodes, "models": ordered}


def summarize_pools(nodes):
    """Per node pool (label kubegpu.io/node-pool): node count, GPU product(s), allocatable GPU resources summed,
    sharing strategies and MIG states, so capacity can be read per pool rather than per node."""
    pools = {}
    for node in nodes:
        labels = node_labels(node)
        name = labels.get(POOL_LABEL)
        if not name:
            continue
        entry = pools.setdefault(name, {"name": name, "nodes": 0, "products": [], "allocatable": {}, "sharing": {},
                                        "mig_states": {}})
        entry["nodes"] += 1
        product = gfd_facts(labels)["physical_product"] or "unknown"
        if product not in entry["products"]:
            entry["products"].append(product)
        for resource, value in gpu_allocatable(node).items():
            _bump(entry["allocatable"], resource, value)
        state = sharing_state(labels)
        _bump(entry["sharing"], state["strategy"])
        if "mig_state" in state:
            _bump(entry["mig_states"], state["mig_state"])
    return [dict(p, products=sorted(p["products"])) for dummy, p in sorted(pools.items())]


def _csv_version(name):
    tail = name.split(".", 1)[1] if "." in name else ""
    return tail[1:] if tail.startswith("v") else tail


def gpu_operator_status(csvs, deployments, policies):
    """Is the GPU Operator installed (OLM CSV or Helm Deployment), which version, and the ClusterPolicy's state."""
    result = {"installed": False, "method": None, "version": None, "namespace": None, "phase": None}
    own_csvs = [c for c in csvs if c["metadata"]["name"].startswith("gpu-operator-certified.")
                and (c.get("status") or {}).get("reason") != "Copied"]
    if own_csvs:
        csv = sorted(own_csvs, key=lambda c: c["metadata"]["name"])[-1]
        phase = (csv.get("status") or {}).get("phase")
        result.update(method="olm", version=_csv_version(csv["metadata"]["name"]),
                      namespace=csv["metadata"]["namespace"], phase=phase, installed=phase == "Succeeded")
    elif deployments:
        labels = deployments[0]["metadata"].get("labels") or {}
        chart = labels.get("helm.sh/chart", "")
        version = labels.get("app.kubernetes.io/version") or (chart.rsplit("-", 1)[-1].lstrip("v") if chart else None)
        result.update(method="helm", version=version, namespace=deployments[0]["metadata"]["namespace"],
                      installed=True)
    result["cluster_policies"] = [
        {"name": p["metadata"]["name"], "state": (p.get("status") or {}).get("state"),
         "conditions": [dict((k, c.get(k)) for k in ("type", "status", "reason", "message"))
                        for c in (p.get("status") or {}).get("conditions", [])]}
        for p in policies]
    return result
