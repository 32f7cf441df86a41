# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One reading of a Node: GPU allocatable, MIG state, paused operands, GFD's facts."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_state import (
    gfd_facts,
    gpu_allocatable,
    mig_config,
    mig_state,
    node_annotations,
    node_labels,
    paused_operands,
)


def node(labels=None, allocatable=None, annotations=None):
    meta = {"name": "n"}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "status": {"allocatable": allocatable} if allocatable is not None else {}}


@pytest.mark.parametrize("allocatable, expected", [
    (None, {}),
    ({"cpu": "8", "memory": "1Gi", "pods": "110"}, {}),
    ({"nvidia.com/gpu": "8", "cpu": "8"}, {"nvidia.com/gpu": 8}),
    # MIG mixed: every profile, the whole-GPU resource at 0 included, keys sorted
    ({"nvidia.com/mig-3g.40gb": "8", "nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "16"},
     {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-3g.40gb": 8}),
    # time-slicing with renameByDefault
    ({"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "16"}, {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 16}),
    # not a count, or not a GPU resource of NVIDIA's
    ({"nvidia.com/gpu": "1k", "example.com/gpu": "2"}, {}),
])
def test_gpu_allocatable(allocatable, expected):
    result = gpu_allocatable(node(allocatable=allocatable))
    assert result == expected and list(result) == sorted(result)


def test_labels_and_annotations_of_a_bare_node():
    assert node_labels({"metadata": {"name": "n"}}) == {} and node_annotations({}) == {}
    assert node_annotations(node(annotations={"a": "b"})) == {"a": "b"}


@pytest.mark.parametrize("labels, config, state", [
    ({}, None, None),
    ({"nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "success"}, "all-disabled", "success"),
    ({"nvidia.com/mig.config": "kubegpu-llm-1"}, "kubegpu-llm-1", None),
])
def test_mig_state(labels, config, state):
    assert (mig_config(labels), mig_state(labels)) == (config, state)
    assert mig_state(labels, "unknown") == (state or "unknown")


@pytest.mark.parametrize("labels, paused", [
    ({}, []),
    ({"nvidia.com/gpu.deploy.dcgm": "true", "nvidia.com/gpu.deploy.device-plugin": "false"}, []),
    ({"nvidia.com/gpu.deploy.gpu-feature-discovery": "paused-for-mig-change",
      "nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change", "nvidia.com/gpu.deploy.driver": "true",
      "example.com/x": "paused-for-mig-change"}, ["device-plugin", "gpu-feature-discovery"]),
])
def test_paused_operands(labels, paused):
    assert paused_operands(labels) == paused


@pytest.mark.parametrize("labels, expected", [
    ({}, {"product": "", "physical_product": "", "count": None, "physical_count": None, "memory_mib": None,
          "family": None, "mig_capable": False}),
    ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8",
      "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.family": "hopper", "nvidia.com/mig.capable": "true"},
     {"product": "NVIDIA-H100-80GB-HBM3", "physical_product": "NVIDIA-H100-80GB-HBM3", "count": 8,
      "physical_count": 8, "memory_mib": 81559, "family": "hopper", "mig_capable": True}),
    # MIG strategy single: gpu.count counts MIG devices, not GPUs
    ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", "nvidia.com/gpu.count": "16"},
     {"product": "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", "physical_product": "NVIDIA-H100-80GB-HBM3", "count": 16,
      "physical_count": None, "memory_mib": None, "family": None, "mig_capable": False}),
    ({"nvidia.com/gpu.product": "Tesla-T4-SHARED", "nvidia.com/gpu.count": "4"},
     {"product": "Tesla-T4-SHARED", "physical_product": "Tesla-T4", "count": 4, "physical_count": 4,
      "memory_mib": None, "family": None, "mig_capable": False}),
])
def test_gfd_facts(labels, expected):
    assert gfd_facts(labels) == expected
