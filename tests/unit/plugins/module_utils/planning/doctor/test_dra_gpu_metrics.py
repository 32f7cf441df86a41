# -*- coding: utf-8 -*-
"""Per-pod GPU metrics on DRA pools: under a ClusterPolicy the DCGM exporter does not tie DRA GPUs to pods, and the
doctor and the report say so (monitoring/attribution.py), without changing the doctor's verdict."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.diagnose import diagnose
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.render import doctor_lines
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.attribution import (
    dra_nodes_by_pool,
    unattributed_notes,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.capacity import (
    pool_capacity,
    report_document,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.capacity_text import capacity_lines

sys.path.insert(0, os.path.dirname(__file__))
from fixtures import gpu_node  # noqa: E402  pylint: disable=wrong-import-position

DRA = {"nvidia.com/dra-kubelet-plugin": "true", "nvidia.com/gpu.deploy.device-plugin": "false",
       "kubegpu.io/node-pool": "dra-h200"}
NODES = [gpu_node("gpu-0"), gpu_node("dra-0", labels=DRA, allocatable={}), gpu_node("dra-1", labels=DRA, allocatable={}),
         gpu_node("dra-x", labels=dict(DRA, **{"kubegpu.io/node-pool": None}), allocatable={})]
# The operator's exporter running on every node that should have one, and scraped: nothing else to find.
EXPORTER = {"metadata": {"name": "nvidia-dcgm-exporter", "namespace": "gpu-operator"}}
EXPORTER_PODS = [{"metadata": {"name": "dcgm-" + n["metadata"]["name"], "namespace": "gpu-operator",
                               "labels": {"app": "nvidia-dcgm-exporter"}},
                  "spec": {"nodeName": n["metadata"]["name"]}, "status": {"phase": "Running"}} for n in NODES]
MONITORS = [{"metadata": {"name": "nvidia-dcgm-exporter", "namespace": "gpu-operator"}}]
POLICY = {"metadata": {"name": "cluster-policy", "creationTimestamp": "2026-12-01T00:00:00Z"},
          "spec": {"dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": True}}}, "status": {"namespace": "gpu-operator", "state": "ready"}}


def test_dra_nodes_by_pool():
    assert dra_nodes_by_pool(NODES) == {"dra-h200": ["dra-0", "dra-1"], "(no pool)": ["dra-x"]}
    assert dra_nodes_by_pool([gpu_node()]) == {}
    # Another value of the label is not the dra stage's.
    assert dra_nodes_by_pool([gpu_node("n", labels={"nvidia.com/dra-kubelet-plugin": "false"})]) == {}


def test_a_note_per_pool_names_the_nodes_the_cause_and_the_source():
    notes = unattributed_notes(NODES)
    assert [(n["pool"], n["nodes"]) for n in notes] == [("(no pool)", 1), ("dra-h200", 2)]
    message = notes[1]["message"]
    assert message.startswith("pool dra-h200: per-pod GPU metrics are missing on its 2 DRA node(s) (dra-0, dra-1)")
    assert "ClusterPolicy" in message and "0700_daemonset.yaml" in message and "dcgm-exporter#718" in message
    assert "docs/monitoring.md" in notes[1]["fix"]


def test_the_doctor_says_it_and_keeps_its_verdict():
    out = diagnose(NODES, EXPORTER_PODS, policies=[POLICY], daemonsets=[EXPORTER], service_monitors=MONITORS)
    assert out["summary"]["verdict"] == "healthy", out["findings"]
    assert out["findings"] == []
    assert [n["pool"] for n in out["notes"]] == ["(no pool)", "dra-h200"]
    lines = doctor_lines(out)
    assert lines[0].startswith("Verdict: healthy")
    assert any(line.startswith("[not measured] pool dra-h200: per-pod GPU metrics are missing") for line in lines)


def test_the_doctor_is_silent_without_dra_nodes_or_without_the_exporter():
    assert "notes" not in diagnose([gpu_node()], [], policies=[POLICY])
    assert "notes" not in diagnose(NODES, [])                  # no ClusterPolicy: no exporter to speak of
    off = dict(POLICY, spec={"dcgmExporter": {"enabled": False}})
    assert "notes" not in diagnose(NODES, [], policies=[off])  # the exporter_missing finding says more


def test_the_report_says_it():
    capacity = pool_capacity(NODES, [])
    document = report_document(capacity, "2026-12-07T00:00:00Z")
    assert [n["pool"] for n in document["notes"]] == ["(no pool)", "dra-h200"]
    lines = capacity_lines(document)
    at = lines.index("Not measured:")
    assert lines[at + 2].startswith("  pool dra-h200: per-pod GPU metrics are missing")
    assert "notes" not in report_document(pool_capacity([gpu_node()], []), "t")
