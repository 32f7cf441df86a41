# -*- coding: utf-8 -*-
"""Model sizing against published figures, and the formula's terms and refusals."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import (
    BATCHED_TOKENS,
    CUDA_CONTEXT_BYTES,
    CUDA_GRAPHS_BYTES,
    DECODER,
    ENCODER,
    GIB,
    TENSOR_PARALLEL_BYTES,
    SizingError,
    describe,
    estimate_parameters,
    kv_cache_bytes_per_token,
    model_architecture,
    need_per_unit,
    size_model,
)

from hf_configs import BGE_LARGE, LLAMA_31_70B, LLAMA_31_8B  # noqa: E402  pylint: disable=wrong-import-order
E5_LARGE_MULTILINGUAL = dict(BGE_LARGE, architectures=["XLMRobertaModel"], model_type="xlm-roberta",
                             vocab_size=250002, max_position_embeddings=514, type_vocab_size=1)

HF_BLOG = "huggingface.co/blog/llama31, 'Inference Memory Requirements'"
# The blog's weight figures count every parameter at the format's width. vLLM (and the published
# quantized checkpoints) keep the token embeddings and lm_head at 16 bits, so for fp8 / int4 the
# expected figure adds those 2 x vocab x hidden parameters' extra bytes: (2 - width) each.
EMBEDDINGS_8B = 2 * 128256 * 4096
EMBEDDINGS_70B = 2 * 128256 * 8192


def _published_plus_embeddings(gb, embeddings, width):
    return gb * 1e9 + embeddings * (2 - width)


# (case, config, precision, expected weight bytes, source). Within 10%.
WEIGHTS = [
    ("8B bf16", LLAMA_31_8B, "bf16", 16e9, HF_BLOG + ": 8B FP16 16 GB"),
    ("8B fp8", LLAMA_31_8B, "fp8", _published_plus_embeddings(8, EMBEDDINGS_8B, 1), HF_BLOG + ": 8B FP8 8 GB"),
    ("8B fp8 checkpoint", LLAMA_31_8B, "fp8", 9.08e9,
     "huggingface.co/neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8, files: 5 GB + 4.08 GB safetensors"),
    ("8B int4", LLAMA_31_8B, "int4", _published_plus_embeddings(4, EMBEDDINGS_8B, 0.5), HF_BLOG + ": 8B INT4 4 GB"),
    ("70B bf16", LLAMA_31_70B, "bf16", 140e9, HF_BLOG + ": 70B FP16 140 GB"),
    ("70B fp8", LLAMA_31_70B, "fp8", _published_plus_embeddings(70, EMBEDDINGS_70B, 1), HF_BLOG + ": 70B FP8 70 GB"),
    ("70B awq", LLAMA_31_70B, "awq", _published_plus_embeddings(35, EMBEDDINGS_70B, 0.5),
     HF_BLOG + ": 70B INT4 35 GB"),
    ("70B fp16 params given", dict(LLAMA_31_70B), "fp16", 140e9, HF_BLOG + ": 70B FP16 140 GB"),
]


@pytest.mark.parametrize("case, config, precision, expected, source", WEIGHTS, ids=[row[0] for row in WEIGHTS])
def test_weights_match_published_figures(case, config, precision, expected, source):
    need = size_model(precision=precision, context=8192, hf_config=config)
    assert abs(need.weights - expected) <= 0.10 * expected, (case, need.weights, expected, source)


# (case, config, bytes per token, context, expected KV cache bytes, source). Within 10% (these are exact).
KV_CACHE = [
    ("8B 8k", LLAMA_31_8B, 128 * 1024, 8192, 8 * 0.125 * GIB, HF_BLOG + ": 8B KV cache 0.125 GB per 1k tokens"),
    ("8B 32k", LLAMA_31_8B, 128 * 1024, 32768, 32 * 0.125 * GIB, HF_BLOG + ": 8B KV cache 0.125 GB per 1k tokens"),
    ("70B 8k", LLAMA_31_70B, 320 * 1024, 8192, 8 * 0.313 * GIB, HF_BLOG + ": 70B KV cache 0.313 GB per 1k tokens"),
    ("70B 32k", LLAMA_31_70B, 320 * 1024, 32768, 32 * 0.313 * GIB, HF_BLOG + ": 70B KV cache 0.313 GB per 1k tokens"),
    ("8B 16k", LLAMA_31_8B, 128 * 1024, 16000, 1.95 * GIB, HF_BLOG + ": 8B KV cache 1.95 GB for 16k tokens"),
    ("70B 16k", LLAMA_31_70B, 320 * 1024, 16000, 4.88 * GIB, HF_BLOG + ": 70B KV cache 4.88 GB for 16k tokens"),
]


@pytest.mark.parametrize("case, config, per_token, context, expected, source", KV_CACHE,
                         ids=[row[0] for row in KV_CACHE])
def test_kv_cache_matches_published_figures(case, config, per_token, context, expected, source):
    need = size_model(precision="bf16", context=context, hf_config=config)
    # 2 (K and V) x layers x kv_heads x head_dim x 2 bytes: 8B 2 x 32 x 8 x 128 x 2 = 128 KiB per token.
    assert need.kv_cache_bytes_per_token == per_token
    assert abs(need.kv_cache - expected) <= 0.10 * expected, (case, need.kv_cache, expected, source)


# (case, config, expected parameters, expected fp16 weight bytes or None, source). Within 10%.
ENCODERS = [
    ("bge-large-en-v1.5", BGE_LARGE, 335e6, None, "huggingface.co/BAAI/bge-large-en-v1.5: 335M params"),
    ("multilingual-e5-large", E5_LARGE_MULTILINGUAL, 560e6, 1.04 * GIB,
     "huggingface.co/intfloat/multilingual-e5-large discussion 38 (Model Memory Utility): float16 1.04 GB "
     "(accelerate's units are 1024^3), 560M params"),
]


@pytest.mark.parametrize("case, config, parameters, weights, source", ENCODERS, ids=[row[0] for row in ENCODERS])
def test_encoders_match_published_figures(case, config, parameters, weights, source):
    need = size_model(precision="fp16", hf_config=config, concurrency=32)
    assert need.kind == ENCODER
    assert abs(need.parameters - parameters) <= 0.10 * parameters, (case, need.parameters, source)
    if weights is not None:
        assert abs(need.weights - weights) <= 0.10 * weights, (case, need.weights, source)
    assert need.kv_cache == 0 and need.kv_cache_bytes_per_token == 0 and need.cuda_graphs == 0
    assert need.context == config["max_position_embeddings"]


def test_llama_8b_parameter_estimate_is_the_model_cards_count():
    # meta-llama/Llama-3.1-8B: 8,030,261,248 parameters (safetensors metadata on the model page).
    assert estimate_parameters(model_architecture(hf_config=LLAMA_31_8B)) == (8030261248, 2 * 128256 * 4096)


def test_terms_of_a_decoder():
    need = size_model(precision="bf16", context=8192, concurrency=4, hf_config=LLAMA_31_8B)
    assert need.tokens == 32768
    assert need.kv_cache == 32768 * 131072 == 4 * GIB
    assert need.cuda_context == CUDA_CONTEXT_BYTES
    assert need.cuda_graphs == CUDA_GRAPHS_BYTES
    # vLLM's profiling batch of 8192 tokens: (2 x 14336 + 4 x 4096) x 2 bytes each, plus 4 sequences' fp32 logits.
    assert need.activations == BATCHED_TOKENS * (2 * 14336 + 4 * 4096) * 2 + 4 * 128256 * 8
    assert need.total == need.weights + need.kv_cache + need.activations + need.cuda_context + need.cuda_graphs
    data = need.to_dict()
    assert data["terms"]["kv_cache"] == {"bytes": 4 * GIB, "gib": 4.0}
    assert data["terms"]["weights"]["gib"] == 14.96
    assert data["total_gib"] == round(need.total / GIB, 2)
    assert data["architecture"]["num_key_value_heads"] == 8
    assert data["kv_cache_dtype"] == "bf16"
    assert "parameters estimated from the architecture: 8.03B" in data["assumptions"]


def test_need_split_over_tensor_parallel_units():
    need = size_model(precision="bf16", context=8192, hf_config=LLAMA_31_70B)
    two = need_per_unit(need, 2)
    assert two["weights"] == -(-need.weights // 2)
    assert two["kv_cache"] == need.kv_cache // 2
    assert two["cuda_context"] == CUDA_CONTEXT_BYTES + TENSOR_PARALLEL_BYTES
    assert need_per_unit(need, 1) == need.terms()
    # 16 GPUs for 8 KV heads: vLLM replicates, every GPU keeps one head.
    arch = need.architecture
    assert kv_cache_bytes_per_token(arch, 2, 16) == 2 * 80 * 1 * 128 * 2
    assert describe(two).startswith("70.4 GiB (weights 65.7 + kv_cache 1.2")


@pytest.mark.parametrize("kwargs, precision, kv_dtype, per_token", [
    ({"precision": "fp8"}, "fp8", "fp16", 131072),
    ({"precision": "fp8", "kv_cache_dtype": "fp8"}, "fp8", "fp8", 65536),
    ({"precision": "awq"}, "awq", "fp16", 131072),
    ({"precision": "fp32"}, "fp32", "fp32", 262144),
    ({"precision": "fp16"}, "fp16", "fp16", 131072),
    ({"precision": "bfloat16"}, "bf16", "bf16", 131072),
    ({}, "bf16", "bf16", 131072),
    ({"hf_config": dict(LLAMA_31_8B, quantization_config={"quant_method": "awq", "bits": 4})}, "awq", "fp16", 131072),
    ({"hf_config": dict(LLAMA_31_8B, quantization_config={"quant_method": "fp8"})}, "fp8", "fp16", 131072),
    ({"hf_config": dict(LLAMA_31_8B, torch_dtype="float32")}, "fp16", "fp16", 131072),
])
def test_precision_and_kv_cache_dtype(kwargs, precision, kv_dtype, per_token):
    kwargs.setdefault("hf_config", LLAMA_31_8B)
    need = size_model(context=1024, **kwargs)
    assert (need.precision, need.kv_cache_dtype, need.kv_cache_bytes_per_token) == (precision, kv_dtype, per_token)


def test_multimodal_text_config_and_tied_embeddings():
    # A Llama-3.2-Vision-like config: the LLM's shape under text_config.
    config = {"model_type": "mllama", "architectures": ["MllamaForConditionalGeneration"], "torch_dtype": "bfloat16",
              "text_config": dict(LLAMA_31_8B, num_hidden_layers=40, tie_word_embeddings=True)}
    arch = model_architecture(hf_config=config)
    assert (arch.kind, arch.num_hidden_layers, arch.tie_word_embeddings) == (DECODER, 40, True)
    parameters, embeddings = estimate_parameters(arch)
    assert embeddings == 128256 * 4096


def test_architecture_overrides_config_and_head_dim_defaults():
    arch = model_architecture({"num_key_value_heads": 4}, LLAMA_31_8B)
    assert (arch.num_key_value_heads, arch.head_dim) == (4, 128)
    # An explicit head_dim (Gemma, Qwen3) wins over hidden_size / heads.
    assert model_architecture({"head_dim": 256}, LLAMA_31_8B).head_dim == 256
    # Without num_key_value_heads every head keeps K and V (multi-head attention).
    config = dict(LLAMA_31_8B)
    del config["num_key_value_heads"]
    assert model_architecture(hf_config=config).num_key_value_heads == 32


def test_parameters_given_with_architecture_for_the_kv_cache_only():
    need = size_model(parameters=8030261248, precision="bf16", context=4096,
                      architecture={"num_hidden_layers": 32, "num_key_value_heads": 8, "head_dim": 128})
    assert need.weights == 2 * 8030261248
    assert need.kv_cache == 4096 * 131072
    # Without vocab_size the embeddings cannot be told apart: all weights quantized, said so.
    need = size_model(parameters=8030261248, precision="int4", context=4096,
                      architecture={"num_hidden_layers": 32, "num_key_value_heads": 8, "head_dim": 128})
    assert any("underestimate" in text for text in need.assumptions)


def test_mixture_of_experts_and_mla():
    mixtral = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
               "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000, "num_local_experts": 8,
               "max_position_embeddings": 32768}
    # mistralai/Mixtral-8x7B: 46.7B parameters (Mistral AI's announcement).
    parameters = size_model(precision="bf16", hf_config=mixtral, context=4096).parameters
    assert abs(parameters - 46.7e9) <= 0.02 * 46.7e9
    mla = {"num_hidden_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64}
    need = size_model(parameters=671000000000, precision="fp8", architecture=mla, context=1000)
    assert need.kv_cache_bytes_per_token == 61 * (512 + 64) * 2


@pytest.mark.parametrize("kwargs, message", [
    ({"precision": "int3", "context": 10, "hf_config": LLAMA_31_8B}, "precision is 'int3'; expected one of fp32, bf16"),
    ({"kv_cache_dtype": "int8", "context": 10, "hf_config": LLAMA_31_8B}, "kv_cache_dtype is 'int8'"),
    ({"context": 0, "hf_config": LLAMA_31_8B}, "context is 0; expected a whole number >= 1"),
    ({"concurrency": -1, "context": 10, "hf_config": LLAMA_31_8B}, "concurrency is -1"),
    ({"parameters": 8e9, "context": 10},
     "the KV cache cannot be sized: the architecture lacks num_hidden_layers, num_key_value_heads, head_dim"),
    ({"context": 10, "architecture": {"num_hidden_layers": 32}},
     "parameters is not given and cannot be estimated: the architecture lacks hidden_size"),
    ({"hf_config": {"num_hidden_layers": 32}},
     "context is not given and the architecture has no max_position_embeddings"),
    ({"context": 10, "hf_config": dict(LLAMA_31_8B, num_hidden_layers="32")}, "num_hidden_layers is '32'"),
    ({"context": 10, "hf_config": LLAMA_31_8B, "kind": "seq2seq"}, "kind is 'seq2seq'; expected decoder"),
    ({"context": 10, "hf_config": ["not", "a", "dict"]}, "hf_config is ['not', 'a', 'dict']; expected a mapping"),
])
def test_refusals(kwargs, message):
    with pytest.raises(SizingError) as err:
        size_model(**kwargs)
    assert message in str(err.value)


def test_context_above_the_model_is_noted():
    need = size_model(precision="bf16", context=200000, hf_config=LLAMA_31_8B)
    assert any("above the model's max_position_embeddings 131072" in text for text in need.assumptions)


def test_kind_override_sizes_a_decoder_embedding_model_as_an_encoder():
    # A decoder architecture served for embeddings can be sized without a KV cache when asked.
    need = size_model(precision="bf16", context=512, concurrency=8, hf_config=LLAMA_31_8B, kind="encoder")
    assert (need.kind, need.kv_cache, need.cuda_graphs) == (ENCODER, 0, 0)
    # Its parameters keep the decoder's layout.
    assert need.parameters == 8030261248
    assert model_architecture(hf_config=BGE_LARGE, kind="decoder").kind == DECODER
