# -*- coding: utf-8 -*-
"""The mig_layout module's logic, called directly: model lookup, strategy, resources, rendered config."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import UnknownGpuError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import LayoutError
from ansible_collections.kubegpu.platform.plugins.modules.mig_layout import (
    ARGUMENT_SPEC,
    describe_layout,
    gpu_model,
)


@pytest.mark.parametrize("gpu, key", [
    ("H100-80GB", "H100-80GB"),
    ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
    ("NVIDIA-H100-PCIe", "H100-80GB"),
    ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "H100-80GB"),
    ("NVIDIA-A100-SXM4-40GB", "A100-40GB"),
    ("A100-SXM4-40GB", "A100-40GB"),
    ("NVIDIA-L40S-SHARED", "L40S"),
    ("H200-141GB", "H200-141GB"),
])
def test_gpu_model(gpu, key):
    assert gpu_model(gpu).key == key


def test_unknown_gpu_names_keys_and_products():
    with pytest.raises(UnknownGpuError) as err:
        gpu_model("H100")
    message = str(err.value)
    assert message.startswith("gpu is 'H100', neither a GPU model key (valid: A30-24GB, A100-40GB, ")
    assert "nor a known nvidia.com/gpu.product label (valid: NVIDIA-A30, " in message


@pytest.mark.parametrize("kwargs, strategy, resources", [
    ({"gpu": "H100-80GB", "layout": {"3g.40gb": 2}, "gpus_per_node": 8}, "single", {"nvidia.com/gpu": 16}),
    ({"gpu": "H100-80GB", "layout": {"3g.40gb": 2}, "gpus_per_node": 8, "strategy": "mixed"}, "mixed",
     {"nvidia.com/mig-3g.40gb": 16}),
    ({"gpu": "NVIDIA-H100-80GB-HBM3", "layout": "all-balanced", "gpus_per_node": 8}, "mixed",
     {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-3g.40gb": 8}),
    ({"gpu": "A30-24GB", "layout": "all-1g.6gb"}, "single", {"nvidia.com/gpu": 4}),
    ({"gpu": "A100-80GB", "layout": {"1g.10gb+me": 1, "1g.10gb": 6}}, "mixed",
     {"nvidia.com/mig-1g.10gb": 6, "nvidia.com/mig-1g.10gb.me": 1}),
    ({"gpu": "A100-80GB", "gpus_per_node": 4,
      "layout": [{"devices": [0, 1], "profiles": {"7g.80gb": 1}}, {"devices": [2, 3], "mig_enabled": False}]},
     "mixed", {"nvidia.com/gpu": 2, "nvidia.com/mig-7g.80gb": 2}),
    ({"gpu": "L40S", "layout": "all-disabled", "gpus_per_node": 4}, "single", {"nvidia.com/gpu": 4}),
])
def test_describe_layout(kwargs, strategy, resources):
    result = describe_layout(**kwargs)
    assert result["changed"] is False
    assert result["valid"] is True
    assert result["strategy"] == strategy
    assert result["resources"] == resources


def test_describe_layout_renders_the_config_as_dict_and_text():
    result = describe_layout("H100-80GB", {"1g.10gb": 2, "3g.40gb": 1, "2g.20gb": 1}, config_name="balanced-ish")
    assert result["gpu"] == {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3"}
    assert result["mig_parted_config"] == {"version": "v1", "mig-configs": {"balanced-ish": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}]}}
    assert result["mig_parted_config_yaml"] == (
        "version: v1\n"
        "mig-configs:\n"
        "  balanced-ish:\n"
        "  - devices: all\n"
        "    mig-enabled: true\n"
        "    mig-devices:\n"
        "      1g.10gb: 2\n"
        "      2g.20gb: 1\n"
        "      3g.40gb: 1\n"
    )


@pytest.mark.parametrize("kwargs, error, message", [
    ({"gpu": "H100-80GB", "layout": {"3g.40gb": 3}}, LayoutError,
     "layout {3g.40gb: 3} needs 12 memory slices, NVIDIA-H100-80GB-HBM3 has 8 (valid: up to 2 x 3g.40gb)"),
    ({"gpu": "L40S", "layout": "all-balanced"}, LayoutError, "layout 'all-balanced': NVIDIA-L40S is not MIG-capable"),
    ({"gpu": "H100-80GB", "layout": "all-balanced", "strategy": "single"}, LayoutError,
     "mig strategy single advertises one kind of device per node"),
    ({"gpu": "H100-80GB", "layout": [{"devices": [0, 2], "profiles": {"7g.80gb": 1}}], "gpus_per_node": 2},
     LayoutError, "layout[0].devices lists GPU 2, the node has 2 GPUs (valid: 0 to 1)"),
    ({"gpu": "H100-80GB", "layout": "all-3g.40gb", "config_name": "bad name"}, LayoutError,
     "mig config name 'bad name' cannot be a value of label nvidia.com/mig.config"),
    ({"gpu": "H100-80GB", "layout": "all-3g.40gb", "gpus_per_node": 0}, LayoutError, "gpus_per_node is 0"),
    ({"gpu": "RTX-9000", "layout": "all-balanced"}, UnknownGpuError, "gpu is 'RTX-9000', neither a GPU model key"),
])
def test_describe_layout_refuses(kwargs, error, message):
    with pytest.raises(error) as err:
        describe_layout(**kwargs)
    assert message in str(err.value)


def test_argument_spec_matches_the_function():
    assert sorted(ARGUMENT_SPEC) == ["config_name", "gpu", "gpus_per_node", "layout", "strategy"]
    assert ARGUMENT_SPEC["strategy"]["choices"] == ["single", "mixed"]
    assert (ARGUMENT_SPEC["gpus_per_node"]["default"], ARGUMENT_SPEC["config_name"]["default"]) == (1, "custom")
