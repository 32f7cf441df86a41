# -*- coding: utf-8 -*-
"""Fitting a model's need on slices: the smallest that fits, tensor parallelism, vLLM args, refusals."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.fit import (
    HEADROOM,
    MAX_UTILIZATION,
    allowed_units,
    fit,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import (
    SizingError,
    need_per_unit,
    size_model,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.slices import (
    claim_template_slices,
    parse_slices,
    pool_slices,
)

from hf_configs import BGE_LARGE, LLAMA_31_70B, LLAMA_31_8B  # noqa: E402  pylint: disable=wrong-import-order
POOLS = [
    {"name": "llm-h100", "selector": {"matchLabels": {"pool": "llm"}},
     "sharing": {"strategy": "mig", "mig": {"layout": {"3g.40gb": 2}, "strategy": "mixed"}}},
    {"name": "big-h100", "selector": {"matchLabels": {"pool": "big"}}, "sharing": {"strategy": "none"}},
    {"name": "embed-l40s", "selector": {"matchLabels": {"pool": "embed"}},
     "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 8}}},
]
HARDWARE = {"llm-h100": {"gpu": "H100-80GB", "gpus_per_node": 8}, "big-h100": {"gpu": "H100-80GB", "gpus_per_node": 8},
            "embed-l40s": {"gpu": "L40S", "gpus_per_node": 4}}
SLICES = pool_slices(POOLS, hardware=HARDWARE)


def llama_8b(**kwargs):
    return size_model(precision=kwargs.pop("precision", "fp16"), hf_config=LLAMA_31_8B,
                      context=kwargs.pop("context", 8192), concurrency=kwargs.pop("concurrency", 4), **kwargs)


def llama_70b(**kwargs):
    return size_model(precision=kwargs.pop("precision", "fp16"), hf_config=LLAMA_31_70B,
                      context=kwargs.pop("context", 8192), **kwargs)


def test_8b_fp16_fits_a_3g_40gb_mig_device():
    result = fit(llama_8b(), SLICES, "nvidia.com/mig-3g.40gb")
    assert (result["slice"]["pool"], result["slice"]["resource_name"], result["units"]) == (
        "llm-h100", "nvidia.com/mig-3g.40gb", 1)
    # 15.0 weights + 4.0 KV cache (32k tokens x 128 KiB) + overhead: about 21.7 GiB of 39.4.
    assert result["need_per_unit_gib"] == 21.65
    assert result["gpu_memory_utilization"] == 0.58
    assert result["vllm_args"] == ["--max-model-len", "8192", "--gpu-memory-utilization", "0.58",
                                   "--max-num-seqs", "4"]
    assert result["vllm"] == {"max_model_len": 8192, "gpu_memory_utilization": 0.58, "max_num_seqs": 4,
                              "tensor_parallel_size": 1}
    assert result["resources"] == {"nvidia.com/mig-3g.40gb": 1}
    assert result["claim_template"] is None


def test_the_smallest_slice_that_fits_is_chosen():
    result = fit(llama_8b(), SLICES)
    assert result["slice"]["resource_name"] == "nvidia.com/mig-3g.40gb"
    assert [(item["pool"], item["units"]) for item in result["fitting"]] == [("llm-h100", 1), ("big-h100", 1)]
    assert result["too_small"] == ["pool 'embed-l40s' nvidia.com/gpu (L40S, time-slicing x8, 5.6 GiB)"]


def test_70b_fp16_needs_two_h100():
    result = fit(llama_70b(), SLICES)
    assert (result["slice"]["pool"], result["slice"]["resource_name"], result["units"]) == (
        "big-h100", "nvidia.com/gpu", 2)
    assert result["vllm"]["tensor_parallel_size"] == 2
    assert "--tensor-parallel-size" in result["vllm_args"]
    assert result["resources"] == {"nvidia.com/gpu": 2}
    # 65.7 GiB of weights per GPU: 70.4 with the rest, x 1.05 headroom under 95% of 79.6 GiB.
    assert result["need_per_unit_gib"] == 70.4
    assert result["gpu_memory_utilization"] == 0.93
    assert result["need_per_unit_gib"] * (1 + HEADROOM) <= MAX_UTILIZATION * result["slice"]["memory_gib"]


def test_70b_fp16_refused_on_one_h100():
    with pytest.raises(SizingError) as err:
        fit(llama_70b(), SLICES, {"pool": "big-h100", "units": 1})
    assert str(err.value).startswith(
        "model does not fit pool 'big-h100' nvidia.com/gpu (H100-80GB, 79.6 GiB): it needs 137.3 GiB (weights 131.4 + "
        "kv_cache 2.5 + activations 1.4 + cuda_context 1.0 + cuda_graphs 1.0) per unit on 1 unit (fp16, 8192 tokens of "
        "context x 1 sequences) with 5% headroom; it offers 79.6 GiB per unit (95% usable: 75.7 GiB), at most 8 "
        "per pod; "
        "slices that fit: pool 'big-h100' nvidia.com/gpu (H100-80GB, 79.6 GiB) x2")


def test_70b_fp16_refused_on_a_mig_device_names_need_slice_and_what_fits():
    with pytest.raises(SizingError) as err:
        fit(llama_70b(), SLICES, "nvidia.com/mig-3g.40gb")
    message = str(err.value)
    assert message.startswith("model does not fit pool 'llm-h100' nvidia.com/mig-3g.40gb (H100-80GB, 3g.40gb, "
                              "39.4 GiB): it needs 137.3 GiB (weights 131.4 + kv_cache 2.5")
    assert "it offers 39.4 GiB per unit (95% usable: 37.4 GiB), at most 1 per pod" in message
    assert message.endswith("slices that fit: pool 'big-h100' nvidia.com/gpu (H100-80GB, 79.6 GiB) x2")


def test_70b_int4_fits_one_h100():
    result = fit(llama_70b(precision="awq"), SLICES)
    assert (result["slice"]["resource_name"], result["units"]) == ("nvidia.com/gpu", 1)


def test_embedding_model_on_a_time_sliced_l40s():
    need = size_model(hf_config=BGE_LARGE, concurrency=32)
    result = fit(need, SLICES, "embed-l40s")
    assert (result["slice"]["kind"], result["slice"]["replicas"], result["units"]) == ("time-slicing", 8, 1)
    # The share is 1/8 of the L40S; utilization is a fraction of the whole GPU the replica sees.
    assert result["need_per_unit_gib"] < result["slice"]["memory_gib"]
    assert result["gpu_memory_utilization"] == 0.05
    assert result["vllm_args"][:2] == ["--max-model-len", "512"]


def test_fp8_kv_cache_is_passed_to_vllm():
    result = fit(llama_8b(precision="fp8", kv_cache_dtype="fp8"), SLICES)
    assert result["vllm_args"][-2:] == ["--kv-cache-dtype", "fp8"]
    assert result["vllm"]["kv_cache_dtype"] == "fp8"


def test_claim_template_with_count_fits_on_exactly_its_devices():
    slices = claim_template_slices([{"name": "h200x2", "namespaces": ["llm"], "products": ["H200-141GB"], "count": 2}])
    result = fit(llama_70b(), slices, "h200x2")
    assert (result["units"], result["claim_template"], result["resources"]) == (2, "h200x2", {})
    assert result["vllm"]["tensor_parallel_size"] == 2


def test_unknown_memory_is_too_small_to_choose():
    slices = claim_template_slices([{"name": "any", "namespaces": ["llm"]}])
    with pytest.raises(SizingError) as err:
        fit(llama_8b(), slices)
    assert str(err.value) == ("no slice has a known memory to fit the model on (claim template 'any' (memory "
                              "unknown))")
    with pytest.raises(SizingError) as err:
        fit(llama_8b(), slices, "any")
    assert "its memory is unknown (give the claim template products or min_memory)" in str(err.value)


def test_nothing_fits():
    slices = parse_slices([{"pool": "small", "resource_name": "nvidia.com/gpu", "memory": "24Gi",
                            "max_units_per_pod": 4}])
    with pytest.raises(SizingError) as err:
        fit(llama_70b(), slices)
    assert str(err.value).startswith("model fits no slice: it needs 36.7 GiB (weights 32.9 + kv_cache 0.6")
    assert "the largest offer is pool 'small' nvidia.com/gpu (24.0 GiB) x4; lower context or concurrency" in \
        str(err.value)


@pytest.mark.parametrize("requested, message", [
    ("nvidia.com/mig-1g.10gb", "requested slice 'nvidia.com/mig-1g.10gb' is none of the slices offered (pool "
                               "'llm-h100' nvidia.com/mig-3g.40gb"),
    ({"pool": "nowhere"}, "requested slice {pool: nowhere} is none of the slices offered"),
    ({"units": 0, "pool": "big-h100"}, "requested.units is 0"),
    ({"gpu": "H100"}, "requested is {'gpu': 'H100'}; expected a resource name"),
    (7, "requested is 7; expected"),
])
def test_bad_requests(requested, message):
    with pytest.raises(SizingError) as err:
        fit(llama_8b(), SLICES, requested)
    assert message in str(err.value)


def test_no_slices():
    with pytest.raises(SizingError) as err:
        fit(llama_8b(), [])
    assert "no slices to fit the model on" in str(err.value)


def test_requested_units_above_the_fewest_are_honoured():
    result = fit(llama_8b(), SLICES, {"pool": "big-h100", "units": 4})
    assert (result["units"], result["vllm"]["tensor_parallel_size"]) == (4, 4)


@pytest.mark.parametrize("requested, message", [
    ({"resource_name": "nvidia.com/mig-3g.40gb", "units": 2},
     "requested {resource_name: nvidia.com/mig-3g.40gb, units: 2} on 2 units: pool 'llm-h100' nvidia.com/mig-3g.40gb "
     "(H100-80GB, 3g.40gb, 39.4 GiB) gives exactly 1 unit per pod (sizes vLLM's tensor parallelism accepts for this "
     "model: 1)"),
    ({"pool": "big-h100", "units": 3},
     "gives 1 to 8 units per pod (sizes vLLM's tensor parallelism accepts for this model: 1, 2, 4, 8)"),
])
def test_requested_units_outside_the_slice(requested, message):
    with pytest.raises(SizingError) as err:
        fit(llama_8b(), SLICES, requested)
    assert message in str(err.value)


def test_allowed_units_follow_the_attention_heads():
    big = [item for item in SLICES if item.pool == "big-h100"][0]
    assert allowed_units(llama_70b(), big) == [1, 2, 4, 8]
    # 24 heads, 8 KV heads: 3 and 6 divide the heads but neither divides nor is divided by 8.
    need = size_model(precision="bf16", context=1024, architecture={
        "num_hidden_layers": 2, "hidden_size": 3072, "num_attention_heads": 24, "num_key_value_heads": 8,
        "intermediate_size": 8192, "vocab_size": 1000})
    assert allowed_units(need, big) == [1, 2, 4, 8]
    # Heads unknown: powers of two.
    need = size_model(parameters=10 ** 9, precision="bf16", context=1024, architecture={
        "num_hidden_layers": 2, "num_key_value_heads": 8, "head_dim": 128})
    assert allowed_units(need, big) == [1, 2, 4, 8]


def test_need_per_unit_matches_the_fit():
    need = llama_70b()
    result = fit(need, SLICES)
    assert result["need_per_unit_bytes"] == sum(need_per_unit(need, 2).values())
