# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.diagnose import diagnose
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.render import doctor_lines

sys.path.insert(0, os.path.dirname(__file__))
from fixtures import gpu_node  # noqa: E402  pylint: disable=wrong-import-position


def test_healthy():
    assert doctor_lines(diagnose([gpu_node()], [])) == [
        "Verdict: healthy (0 finding(s): 0 failing, 0 degraded; examined 1 GPU node(s), 0 GPU pod(s))"]


def test_a_finding_reads_with_its_evidence_and_fix():
    lines = doctor_lines(diagnose([gpu_node(labels={"nvidia.com/mig.config.state": "failed"},
                                            allocatable={"nvidia.com/gpu": "0"})], []))
    assert lines[0].startswith("Verdict: failing (2 finding(s): 2 failing, 0 degraded")
    assert lines[1] == "Per pattern: device_plugin_not_advertising 1, mig_failed 1"
    assert lines[2] == "[failing] device_plugin_not_advertising: Node/gpu-0 status.allocatable = {\"nvidia.com/gpu\": 0}"
    assert lines[5] == "[failing] mig_failed: Node/gpu-0 metadata.labels[nvidia.com/mig.config.state] = failed"
    assert lines[7].startswith("    fix: Read the nvidia-mig-manager pod's log on gpu-0")
