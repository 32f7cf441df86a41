# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which GPUs the DCGM exporter can tie to pods: none of those the DRA driver hands out, under a ClusterPolicy.

dcgm-exporter names the pod of a GPU from the kubelet's pod-resources API, which knows the device plugin's GPUs;
for GPUs allocated through DRA it must also read ResourceSlices, with KUBERNETES_ENABLE_DRA set. GPU Operator
v26.7.0 renders both only in the GPUCluster manifests (manifests/state-dcgm-exporter/0700_daemonset.yaml), not in
the ClusterPolicy's (assets/state-dcgm-exporter): under a ClusterPolicy, which is what the collection writes, the
GPU metrics of DRA nodes carry no pod or namespace (NVIDIA/gpu-operator PRs #2697, #2706; NVIDIA/dcgm-exporter
issue #718; shared/reference/upstream-changes-2026.md). Setting the variable alone would not do: the exporter's
ClusterRole has no read access to ResourceSlices there. So the collection says so (the doctor and the report)
rather than patching NVIDIA's operand; docs/monitoring.md, "GPU metrics on DRA pools". Pure.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    DRA_PLUGIN_LABEL,
    DRA_PLUGIN_LABEL_VALUE,
    POOL_LABEL,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_state import node_labels, node_name

SOURCES = ("NVIDIA/gpu-operator v26.7.0 manifests/state-dcgm-exporter/0700_daemonset.yaml (KUBERNETES_ENABLE_DRA "
           "only under a GPUCluster); NVIDIA/dcgm-exporter#718")
# Shown when a pool is named by no POOL_LABEL.
NO_POOL = "(no pool)"


def dra_nodes_by_pool(nodes):
    """{pool: [node names]} of the nodes the DRA kubelet plugin serves (the dra stage's label), names sorted."""
    out = {}
    for node in nodes:
        labels = node_labels(node)
        if labels.get(DRA_PLUGIN_LABEL) == DRA_PLUGIN_LABEL_VALUE:
            out.setdefault(labels.get(POOL_LABEL) or NO_POOL, []).append(node_name(node))
    return dict((pool, sorted(names)) for pool, names in out.items())


def unattributed_notes(nodes):
    """One note per pool with DRA nodes: {pool, nodes (count), field, message, fix}, pools sorted."""
    notes = []
    for pool, names in sorted(dra_nodes_by_pool(nodes).items()):
        notes.append({
            "pool": pool, "nodes": len(names), "field": "%s=%s" % (DRA_PLUGIN_LABEL, DRA_PLUGIN_LABEL_VALUE),
            "message": "pool %s: per-pod GPU metrics are missing on its %d DRA node(s) (%s): under a ClusterPolicy "
                       "the DCGM exporter does not tie GPUs allocated through DRA to pods, so their metrics carry no "
                       "pod or namespace; per-node and per-GPU metrics are there (%s)"
                       % (pool, len(names), ", ".join(names[:5]) + (", ..." if len(names) > 5 else ""), SOURCES),
            "fix": "Nothing to set under a ClusterPolicy: read the GPU metrics of this pool per node and GPU (UUID), "
                   "and the ResourceClaims for which pod holds which GPU (docs/monitoring.md, GPU metrics on DRA "
                   "pools)"})
    return notes
