# -*- coding: utf-8 -*-
"""The doctor over a whole cluster: verdict rules, counts per pattern, order, fail_on."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.diagnose import diagnose
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.findings import (
    PATTERNS,
    should_fail,
    verdict,
)

sys.path.insert(0, os.path.dirname(__file__))
from fixtures import gpu_node, gpu_pod  # noqa: E402  pylint: disable=wrong-import-position

CPU_NODE = {"metadata": {"name": "worker-0", "labels": {}}, "status": {"allocatable": {"cpu": "16"}}}


def test_healthy_cluster():
    out = diagnose([gpu_node(), CPU_NODE], [gpu_pod(), gpu_pod("web", node="worker-0", requests={"cpu": "1"})])
    assert out["summary"] == {"verdict": "healthy", "findings": 0, "counts": dict((p, 0) for p in PATTERNS),
                              "severities": {"failing": 0, "degraded": 0}}
    assert out["checked"] == {"gpu_nodes": 1, "gpu_pods": 1}


def test_counts_verdict_and_order():
    nodes = [gpu_node(), gpu_node("gpu-1", labels={"nvidia.com/mig.config.state": "failed"}), CPU_NODE]
    oom = gpu_pod("oom", statuses=[{"name": "main", "lastState": {"terminated": {"reason": "OOMKilled"}}}])
    out = diagnose(nodes, [oom])
    assert out["summary"]["verdict"] == "failing"
    assert out["summary"]["counts"]["mig_failed"] == 1 and out["summary"]["counts"]["oom_killed"] == 1
    assert [f["pattern"] for f in out["findings"]] == ["mig_failed", "oom_killed"]   # worst first


def test_a_cpu_node_is_not_examined():
    out = diagnose([dict(CPU_NODE, status={"allocatable": {}})], [])
    assert out["summary"]["verdict"] == "healthy" and out["checked"]["gpu_nodes"] == 0


@pytest.mark.parametrize("severities, expected", [
    ([], "healthy"), (["degraded"], "degraded"), (["degraded", "failing"], "failing"), (["failing"], "failing")])
def test_verdict(severities, expected):
    assert verdict([{"severity": s} for s in severities]) == expected


@pytest.mark.parametrize("verdict_, fail_on, expected", [
    ("healthy", "failing", False), ("degraded", "failing", False), ("failing", "failing", True),
    ("healthy", "degraded", False), ("degraded", "degraded", True), ("failing", "degraded", True),
    ("failing", "never", False)])
def test_should_fail(verdict_, fail_on, expected):
    assert should_fail(verdict_, fail_on) is expected
