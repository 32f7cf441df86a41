# -*- coding: utf-8 -*-
"""The model_sizing module's logic, called directly: need, slices, fit and refusals."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import SizingError
from ansible_collections.kubegpu.platform.plugins.modules.model_sizing import ARGUMENT_SPEC, size_and_fit

LLAMA_31_8B = {
    "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
    "intermediate_size": 14336, "vocab_size": 128256,
}
POOLS = [{"name": "llm-h100", "selector": {"matchLabels": {"pool": "llm"}},
          "sharing": {"strategy": "mig", "mig": {"layout": {"3g.40gb": 2}, "strategy": "mixed"}}}]
HARDWARE = {"llm-h100": {"gpu": "H100-80GB", "gpus_per_node": 8}}


def test_need_only():
    result = size_and_fit(precision="bf16", context=8192, concurrency=4, architecture=LLAMA_31_8B)
    assert result["changed"] is False
    assert (result["fit"], result["slices"], result["vllm_args"]) == (None, [], [])
    assert result["need"]["terms"]["kv_cache"]["gib"] == 4.0
    assert result["need"]["parameters"] == 8030261248


def test_pools_with_hardware():
    result = size_and_fit(precision="bf16", context=8192, concurrency=4, architecture=LLAMA_31_8B, pools=POOLS,
                          hardware=HARDWARE)
    assert [item["resource_name"] for item in result["slices"]] == ["nvidia.com/mig-3g.40gb"]
    assert result["fit"]["resources"] == {"nvidia.com/mig-3g.40gb": 1}
    assert result["vllm_args"] == result["fit"]["vllm_args"]
    assert result["vllm_args"][:4] == ["--max-model-len", "8192", "--gpu-memory-utilization", "0.58"]


def test_slices_and_claim_templates_together():
    result = size_and_fit(precision="bf16", context=8192, architecture=LLAMA_31_8B,
                          slices=[{"pool": "edge", "resource_name": "nvidia.com/gpu", "memory": "23034Mi"}],
                          claim_templates=[{"name": "gpu-80g", "namespaces": ["llm"], "min_memory": "80Gi"}])
    assert [item["resource_name"] for item in result["slices"]] == ["kubegpu-gpu-80g", "nvidia.com/gpu"]
    assert result["fit"]["slice"]["pool"] == "edge"


@pytest.mark.parametrize("kwargs, error, message", [
    ({"requested": "nvidia.com/gpu"}, SizingError, "requested is 'nvidia.com/gpu' but no slices were given"),
    ({"hardware": HARDWARE}, SizingError, "hardware is given without pools"),
    ({"pools": [{"name": "x"}]}, PoolError, "pool 'x': selects nothing"),
    ({"pools": POOLS, "hardware": HARDWARE, "concurrency": 64, "requested": "nvidia.com/mig-3g.40gb"}, SizingError,
     "model does not fit pool 'llm-h100' nvidia.com/mig-3g.40gb (H100-80GB, 3g.40gb, 39.4 GiB): it needs "),
])
def test_refusals(kwargs, error, message):
    with pytest.raises(error) as err:
        size_and_fit(precision="bf16", context=8192, architecture=LLAMA_31_8B, **kwargs)
    assert message in str(err.value)


def test_argument_spec_matches_the_function():
    assert sorted(ARGUMENT_SPEC) == ["architecture", "claim_templates", "concurrency", "context", "hardware",
                                     "hf_config", "kind", "kv_cache_dtype", "nodes", "parameters", "pools",
                                     "precision", "requested", "slices"]
    assert ARGUMENT_SPEC["precision"]["choices"] == ["fp32", "bf16", "fp16", "fp8", "int8", "int4", "awq", "gptq"]
    assert (ARGUMENT_SPEC["kv_cache_dtype"]["default"], ARGUMENT_SPEC["concurrency"]["default"]) == ("auto", 1)
    assert ARGUMENT_SPEC["kind"]["choices"] == ["decoder", "encoder"]
