# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How much GPU memory a model needs to serve: weights + KV cache + runtime overhead.

Public API (stable; the serving stage imports it):

    size_model(parameters=None, precision=None, context=None, concurrency=1, architecture=None,
               hf_config=None, kv_cache_dtype=None, kind=None) -> ModelNeed
        parameters: the parameter count (int), or None to estimate it from the architecture.
        precision: weights' format: fp32, bf16, fp16, fp8, int8, int4, awq, gptq (PRECISIONS);
          None reads hf_config's quantization_config / torch_dtype, else bf16.
        context: tokens per sequence (vLLM --max-model-len); None takes the architecture's
          max_position_embeddings.
        concurrency: sequences held at once at full context (vLLM --max-num-seqs).
        architecture: {num_hidden_layers, num_key_value_heads, head_dim | hidden_size +
          num_attention_heads, intermediate_size, vocab_size, tie_word_embeddings,
          max_position_embeddings, ...} (Hugging Face config.json key names).
        hf_config: a Hugging Face config.json as a dict (text_config nesting understood);
          architecture's keys win over it.
        kv_cache_dtype: auto (default) | fp32 | bf16 | fp16 | fp8 | fp8_e4m3 | fp8_e5m2.
        kind: decoder (LLMs: a KV cache per token) | encoder (embedding / reranker models: no KV
          cache, a batch of activations); None guesses from hf_config's model_type.
    need_per_unit(need, units) -> dict: the same terms for one GPU of a tensor-parallel group.
    ModelNeed.to_dict() -> {"parameters", "precision", "kv_cache_dtype", "kind", "context",
        "concurrency", "tokens", "kv_cache_bytes_per_token", "terms": {name: {"bytes", "gib"}},
        "total_bytes", "total_gib", "architecture", "assumptions"}.

Every constant is documented in docs/serving.md ("Sizing") with its source. Errors are
SizingError naming the field, the value and what is valid. Pure: no cluster, no I/O.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional, Tuple

GIB = 2 ** 30
MIB = 2 ** 20

DECODER = "decoder"
ENCODER = "encoder"
KINDS = (DECODER, ENCODER)

# Bytes one stored weight takes. 4-bit formats (AWQ, GPTQ: group size 128) add per group of 128
# weights an fp16 scale and a 4-bit zero point: (16 + 4) / 8 / 128 = 0.0195 bytes per weight.
_GROUP_OVERHEAD = (2 + 0.5) / 128
PRECISIONS = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5 + _GROUP_OVERHEAD,
    "awq": 0.5 + _GROUP_OVERHEAD,
    "gptq": 0.5 + _GROUP_OVERHEAD,
}
_ALIASES = {
    "float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float": "fp32",
    "w8a8": "int8", "w4a16": "int4", "fp8_e4m3": "fp8",
}
_SIXTEEN_BIT = ("bf16", "fp16")
_QUANTIZED = ("fp8", "int8", "int4", "awq", "gptq")
# vLLM --kv-cache-dtype values and the bytes of one cached element; auto follows the model's dtype.
KV_CACHE_DTYPES = {"auto": None, "fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}

# Runtime overhead per GPU (docs/serving.md, "Sizing", gives each figure's source).
# CUDA context, cuBLAS/cuDNN workspaces and the other allocations PyTorch does not count.
CUDA_CONTEXT_BYTES = 1 * GIB
# NCCL buffers and vLLM's custom all-reduce, only with tensor parallelism.
TENSOR_PARALLEL_BYTES = 512 * MIB
# CUDA graphs vLLM captures for decoding batch sizes (not for encoder-only models).
CUDA_GRAPHS_BYTES = 1 * GIB
# vLLM's profiling forward pass runs with --max-num-batched-tokens tokens; its V1 engine defaults
# to 8192 for the OpenAI server on large GPUs (2048 on smaller ones): 8192 is the safe side.
BATCHED_TOKENS = 8192
# Activations per batched token: the gated MLP holds gate and up (2 x intermediate) next to a few
# hidden-sized tensors (residual, normed input, attention output, MLP output).
_HIDDEN_COPIES = 4
# The sampler keeps fp32 logits for every running sequence, and a copy while it processes them.
_LOGIT_BYTES = 4 * 2

_HEADLINE = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
             "intermediate_size", "vocab_size", "tie_word_embeddings", "max_position_embeddings")
# Hugging Face key spellings of older model types, read as the canonical name.
_KEY_ALIASES = {
    "num_hidden_layers": ("n_layer", "num_layers", "n_layers"),
    "hidden_size": ("n_embd", "d_model"),
    "num_attention_heads": ("n_head", "num_heads"),
    "num_key_value_heads": ("num_kv_heads", "n_head_kv", "multi_query_group_num"),
    "intermediate_size": ("n_inner", "ffn_dim", "ffn_hidden_size"),
    "max_position_embeddings": ("n_positions", "max_seq_len", "seq_length"),
}
# model_type values of encoder-only (BERT-like) models: embeddings and rerankers.
ENCODER_MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "distilbert", "electra", "deberta", "deberta-v2",
                       "mpnet", "nomic_bert", "new", "modernbert", "camembert", "ernie")
# Decoders whose MLP is up + down (2 matrices) rather than gate + up + down (3).
_UNGATED_MODEL_TYPES = ("gpt2", "gpt_neox", "gptj", "opt", "falcon", "bloom", "phi", "gpt_bigcode", "starcoder2",
                        "mpt")


class SizingError(ValueError):
    """A model that cannot be sized, or a fit that is refused; the message says what and what to do."""


@dataclass(frozen=True)
class Architecture:
    """The shape of a model, in Hugging Face config.json names; None where unknown."""

    kind: str = DECODER
    model_type: Optional[str] = None
    num_hidden_layers: Optional[int] = None
    hidden_size: Optional[int] = None
    num_attention_heads: Optional[int] = None
    num_key_value_heads: Optional[int] = None
    head_dim: Optional[int] = None
    intermediate_size: Optional[int] = None
    vocab_size: Optional[int] = None
    tie_word_embeddings: bool = False
    max_position_embeddings: Optional[int] = None
    type_vocab_size: int = 0
    num_experts: int = 0
    kv_lora_rank: Optional[int] = None
    qk_rope_head_dim: int = 0
    gated_mlp: bool = True
    # The parameter layout: BERT-like (encoder_only model types) or a decoder's, whatever kind it is served as.
    bert_like: bool = False

    def to_dict(self):
        """The known fields, as a plain dict."""
        flags = ("tie_word_embeddings", "gated_mlp", "bert_like")
        return dict((name, getattr(self, name)) for name in self.__dataclass_fields__
                    if getattr(self, name) not in (None, 0) or name in flags)


@dataclass(frozen=True)
class ModelNeed:
    """What serving one model needs on one GPU (units=1); need_per_unit splits it over several.

    Terms in bytes: weights, kv_cache, activations, cuda_context, cuda_graphs.
    """

    parameters: int
    embedding_parameters: int
    precision: str
    kv_cache_dtype: str
    kv_cache_bytes_per_element: int
    activation_bytes: int
    kind: str
    context: int
    concurrency: int
    architecture: Architecture
    weights: int
    kv_cache: int
    kv_cache_bytes_per_token: int
    activations: int
    cuda_context: int
    cuda_graphs: int
    assumptions: Tuple[str, ...] = field(default_factory=tuple)

    @property
    def tokens(self):
        """Tokens the KV cache holds: context x concurrency."""
        return self.context * self.concurrency

    @property
    def total(self):
        """Bytes of every term together."""
        return self.weights + self.kv_cache + self.activations + self.cuda_context + self.cuda_graphs

    def terms(self):
        """{term: bytes}, in the order messages list them."""
        return {"weights": self.weights, "kv_cache": self.kv_cache, "activations": self.activations,
                "cuda_context": self.cuda_context, "cuda_graphs": self.cuda_graphs}

    def to_dict(self):
        """The need as plain data: each term in bytes and GiB, the inputs and the assumptions."""
        return {
            "parameters": self.parameters,
            "precision": self.precision,
            "kv_cache_dtype": self.kv_cache_dtype,
            "kind": self.kind,
            "context": self.context,
            "concurrency": self.concurrency,
            "tokens": self.tokens,
            "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token,
            "terms": _terms_dict(self.terms()),
            "total_bytes": self.total,
            "total_gib": gib(self.total),
            "architecture": self.architecture.to_dict(),
            "assumptions": list(self.assumptions),
        }


def gib(value):
    """Bytes as GiB, rounded to 2 decimals."""
    return round(value / GIB, 2)


def describe(terms):
    """Render {term: bytes} as "21.3 GiB (weights 15.0 + kv_cache 4.0 + ...)"."""
    total = sum(terms.values())
    return "%.1f GiB (%s)" % (total / GIB, " + ".join("%s %.1f" % (name, value / GIB)
                                                      for name, value in terms.items() if value))


def _terms_dict(terms):
    return dict((name, {"bytes": value, "gib": gib(value)}) for name, value in terms.items())


# ---------------------------------------------------------------------------------------------
# Architecture from a config
# ---------------------------------------------------------------------------------------------

def model_architecture(architecture=None, hf_config=None, kind=None):
    """Return the Architecture of a model from architecture (dict) and/or hf_config (config.json dict).

    hf_config's text_config (multimodal models) is read in place of its top level; keys of
    architecture override the config's. kind forces decoder or encoder; otherwise an encoder
    model_type (ENCODER_MODEL_TYPES) or is_decoder false with no causal-LM architecture is an
    encoder. Raises SizingError for a value that is not a positive whole number.
    """
    merged = {}
    for source, name in ((hf_config, "hf_config"), (architecture, "architecture")):
        if source is None:
            continue
        if not isinstance(source, Mapping):
            raise SizingError("%s is %r; expected a mapping of config.json keys (num_hidden_layers, "
                              "num_key_value_heads, head_dim, ...)" % (name, source))
        merged.update(_flatten(source))
    model_type = merged.get("model_type")
    bert_like = _looks_encoder(merged)
    if kind is None:
        kind = ENCODER if bert_like else DECODER
    if kind not in KINDS:
        raise SizingError("kind is %r; expected decoder (LLMs) or encoder (embedding / reranker models)" % (kind,))
    values = dict((name, _whole(merged, name)) for name in (
        "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
        "intermediate_size", "vocab_size", "max_position_embeddings", "kv_lora_rank"))
    heads = values["num_attention_heads"]
    if values["num_key_value_heads"] is None and heads is not None:
        values["num_key_value_heads"] = 1 if merged.get("multi_query") else heads
    if values["head_dim"] is None and heads and values["hidden_size"]:
        values["head_dim"] = values["hidden_size"] // heads
    experts = _whole(merged, "num_local_experts") or _whole(merged, "num_experts") or 0
    moe_size = _whole(merged, "moe_intermediate_size")
    if experts and moe_size:
        values["intermediate_size"] = moe_size
    tie = merged.get("tie_word_embeddings", False)
    return Architecture(
        kind=kind,
        model_type=model_type if isinstance(model_type, str) else None,
        tie_word_embeddings=bool(tie),
        type_vocab_size=_whole(merged, "type_vocab_size") or 0,
        num_experts=experts,
        qk_rope_head_dim=_whole(merged, "qk_rope_head_dim") or 0,
        gated_mlp=not bert_like and model_type not in _UNGATED_MODEL_TYPES,
        bert_like=bert_like,
        **values
    )


def _flatten(config):
    """config with text_config's keys on top (multimodal models keep the LLM's shape there)."""
    flat = dict(config)
    text = config.get("text_config")
    if isinstance(text, Mapping):
        flat.update(text)
        for key in ("tie_word_embeddings", "torch_dtype", "quantization_config"):
            if key in config and key not in text:
                flat[key] = config[key]
    for name, aliases in _KEY_ALIASES.items():
        if flat.get(name) is None:
            for alias in aliases:
                if flat.get(alias) is not None:
                    flat[name] = flat[alias]
                    break
    return flat


def _looks_encoder(config):
    model_type = config.get("model_type")
    if model_type in ENCODER_MODEL_TYPES:
        return True
    architectures = config.get("architectures") or []
    causal = any(str(name).endswith(("ForCausalLM", "ForConditionalGeneration", "LMHeadModel"))
                 for name in architectures)
    return config.get("is_decoder") is False and not causal and bool(architectures)


def _whole(config, name):
    value = config.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SizingError("%s is %r; expected a whole number >= 1 (as in the model's config.json)" % (name, value))
    return value


def estimate_parameters(arch):
    """Return (parameters, embedding parameters) estimated from an Architecture.

    Decoder layouts: token embeddings (vocab x hidden), an lm_head of the same size unless tied, and
    per layer the attention projections (q, o: hidden x heads x head_dim; k, v: hidden x kv_heads x
    head_dim), the MLP (gate + up + down, 3 x hidden x intermediate, times the experts of an MoE;
    2 matrices for ungated MLPs) and two norms. BERT-like layouts (arch.bert_like): token, position
    and type embeddings; per layer 4 hidden^2 attention, 2 hidden x intermediate MLP with biases and
    two layer norms; the pooler. The layout follows the model type, not the kind it is served as.
    Raises SizingError naming the keys it lacks.
    """
    needed = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
    missing = [name for name in needed if getattr(arch, name) is None]
    if missing:
        raise SizingError(
            "parameters is not given and cannot be estimated: the architecture lacks %s; give parameters (the "
            "model card's count), or the model's config.json as hf_config" % ", ".join(missing))
    hidden, layers, vocab = arch.hidden_size, arch.num_hidden_layers, arch.vocab_size
    intermediate = arch.intermediate_size or 4 * hidden
    if arch.bert_like:
        embeddings = (vocab + (arch.max_position_embeddings or 0) + arch.type_vocab_size) * hidden
        layer = 4 * hidden * hidden + 4 * hidden + 2 * hidden * intermediate + intermediate + hidden + 4 * hidden
        return embeddings + layers * layer + hidden * hidden + hidden, embeddings
    head_dim = arch.head_dim
    q_width = arch.num_attention_heads * head_dim
    kv_width = arch.num_key_value_heads * head_dim
    attention = 2 * hidden * q_width + 2 * hidden * kv_width
    mlp = (3 if arch.gated_mlp else 2) * hidden * intermediate * max(arch.num_experts, 1)
    router = hidden * arch.num_experts
    embeddings = vocab * hidden * (1 if arch.tie_word_embeddings else 2)
    return embeddings + layers * (attention + mlp + router + 2 * hidden) + hidden, embeddings


# ---------------------------------------------------------------------------------------------
# The need
# ---------------------------------------------------------------------------------------------

def size_model(parameters=None, precision=None, context=None, concurrency=1, architecture=None, hf_config=None,
               kv_cache_dtype=None, kind=None):
    """Return the ModelNeed of serving a model on one GPU; see the module docstring for the inputs.

    weights = quantized parameters x bytes per parameter (PRECISIONS) + embeddings and lm_head at
    16 bits for quantized formats (vLLM keeps them unquantized), KV cache = 2 (K and V) x layers x
    kv_heads x head_dim x bytes per element x context x concurrency for decoders (MLA models:
    layers x (kv_lora_rank + qk_rope_head_dim) x bytes per token), none for encoders;
    activations, CUDA context and CUDA graphs per the module constants. Raises SizingError.
    """
    arch = model_architecture(architecture, hf_config, kind)
    assumptions = []
    precision = _precision(precision, hf_config, architecture, assumptions)
    concurrency = _positive("concurrency", concurrency, "sequences served at once")
    if context is None:
        if arch.max_position_embeddings is None:
            raise SizingError("context is not given and the architecture has no max_position_embeddings; give "
                              "context: the tokens of one sequence (prompt + output), vLLM's --max-model-len")
        context = arch.max_position_embeddings
        assumptions.append("context: the model's max_position_embeddings, %d tokens" % context)
    context = _positive("context", context, "tokens per sequence (vLLM --max-model-len)")
    if arch.max_position_embeddings and context > arch.max_position_embeddings:
        assumptions.append("context %d is above the model's max_position_embeddings %d: vLLM refuses it unless the "
                           "model supports the extension" % (context, arch.max_position_embeddings))

    embedding_parameters = 0
    if parameters is None:
        parameters, embedding_parameters = estimate_parameters(arch)
        assumptions.append("parameters estimated from the architecture: %.2fB" % (parameters / 1e9))
    else:
        if isinstance(parameters, float) and parameters >= 1 and parameters == int(parameters):
            parameters = int(parameters)
        parameters = _positive("parameters", parameters, "the model's parameter count (e.g. 8030261248)")
        if arch.vocab_size and arch.hidden_size:
            embedding_parameters = arch.vocab_size * arch.hidden_size * (
                1 if arch.tie_word_embeddings or arch.bert_like else 2)
    per_parameter = PRECISIONS[precision]
    if precision in _QUANTIZED and embedding_parameters:
        weights = (parameters - embedding_parameters) * per_parameter + embedding_parameters * 2
        assumptions.append("%s: embeddings and lm_head (%.2fB parameters) stay 16-bit, as vLLM loads them"
                           % (precision, embedding_parameters / 1e9))
    else:
        weights = parameters * per_parameter
        if precision in _QUANTIZED:
            assumptions.append("%s: every parameter counted quantized (vocab_size / hidden_size unknown, so the "
                               "16-bit embeddings could not be told apart): an underestimate" % precision)

    kv_dtype, kv_bytes = _kv_dtype(kv_cache_dtype, precision, assumptions)
    activation_bytes = 4 if precision == "fp32" else 2
    if arch.kind == ENCODER:
        per_token = 0
        kv_cache = 0
        graphs = 0
        activations = _encoder_activations(arch, context, concurrency, activation_bytes)
        assumptions.append("encoder: no KV cache; activations of one batch of %d sequences x %d tokens"
                           % (concurrency, context))
    else:
        per_token = kv_cache_bytes_per_token(arch, kv_bytes)
        kv_cache = per_token * context * concurrency
        graphs = CUDA_GRAPHS_BYTES
        activations = _decoder_activations(arch, context * concurrency, concurrency, activation_bytes, 1)
    return ModelNeed(
        parameters=int(parameters),
        embedding_parameters=int(embedding_parameters),
        precision=precision,
        kv_cache_dtype=kv_dtype,
        kv_cache_bytes_per_element=kv_bytes,
        activation_bytes=activation_bytes,
        kind=arch.kind,
        context=context,
        concurrency=concurrency,
        architecture=arch,
        weights=int(math.ceil(weights)),
        kv_cache=int(kv_cache),
        kv_cache_bytes_per_token=int(per_token),
        activations=int(activations),
        cuda_context=CUDA_CONTEXT_BYTES,
        cuda_graphs=graphs,
        assumptions=tuple(assumptions),
    )


def kv_cache_bytes_per_token(arch, element_bytes, units=1):
    """Bytes one token adds to the KV cache of one GPU of a tensor-parallel group of units.

    2 x layers x kv_heads x head_dim x element_bytes; with tensor parallelism each GPU holds
    kv_heads / units heads, at least one (vLLM replicates KV heads when units > kv_heads).
    MLA models (kv_lora_rank): layers x (kv_lora_rank + qk_rope_head_dim) x element_bytes, on
    every GPU. Raises SizingError naming the keys the architecture lacks.
    """
    if arch.kv_lora_rank:
        if arch.num_hidden_layers is None:
            raise SizingError("the architecture lacks num_hidden_layers; the KV cache cannot be sized")
        return arch.num_hidden_layers * (arch.kv_lora_rank + arch.qk_rope_head_dim) * element_bytes
    missing = [name for name in ("num_hidden_layers", "num_key_value_heads", "head_dim")
               if getattr(arch, name) is None]
    if missing:
        raise SizingError(
            "the KV cache cannot be sized: the architecture lacks %s; give architecture {num_hidden_layers, "
            "num_key_value_heads, head_dim (or hidden_size and num_attention_heads)} or the model's config.json "
            "as hf_config" % ", ".join(missing))
    heads = max(1, arch.num_key_value_heads // units) if units > 1 else arch.num_key_value_heads
    return 2 * arch.num_hidden_layers * heads * arch.head_dim * element_bytes


def _decoder_activations(arch, tokens, sequences, element_bytes, units):
    """Peak activations of vLLM's profiling pass, per GPU of units."""
    if arch.hidden_size is None:
        return 1 * GIB
    batched = min(tokens, BATCHED_TOKENS)
    intermediate = (arch.intermediate_size or 4 * arch.hidden_size) // units
    per_token = (2 * intermediate + _HIDDEN_COPIES * arch.hidden_size) * element_bytes
    logits = sequences * (arch.vocab_size or 0) * _LOGIT_BYTES
    return batched * per_token + logits


def _encoder_activations(arch, context, sequences, element_bytes):
    """One forward pass of the whole batch: hidden-sized tensors and MLP per token, attention scores."""
    hidden = arch.hidden_size or 1024
    intermediate = arch.intermediate_size or 4 * hidden
    heads = arch.num_attention_heads or 16
    tokens = context * sequences
    return (tokens * (_HIDDEN_COPIES * hidden + intermediate) * element_bytes
            + sequences * heads * context * context * element_bytes)


def need_per_unit(need, units):
    """Return {term: bytes} one GPU needs when the model is split over units GPUs (tensor parallel).

    weights / units (vLLM shards every layer, embeddings included); the KV cache of the GPU's share
    of KV heads; activations with the MLP split; the CUDA context and graphs on every GPU, plus NCCL
    and all-reduce buffers when units > 1.
    """
    units = _positive("units", units, "GPUs of the tensor-parallel group")
    if units == 1:
        return need.terms()
    arch = need.architecture
    if need.kind == ENCODER:
        kv = 0
        activations = int(math.ceil(need.activations / units))
    else:
        kv = kv_cache_bytes_per_token(arch, need.kv_cache_bytes_per_element, units) * need.tokens
        activations = _decoder_activations(arch, need.tokens, need.concurrency, need.activation_bytes, units)
    return {
        "weights": int(math.ceil(need.weights / units)),
        "kv_cache": int(kv),
        "activations": int(activations),
        "cuda_context": need.cuda_context + TENSOR_PARALLEL_BYTES,
        "cuda_graphs": need.cuda_graphs,
    }


def _precision(precision, hf_config, architecture, assumptions):
    """The canonical precision name; None reads the config's quantization_config, then torch_dtype."""
    if precision is None:
        config = _flatten(dict(hf_config or {}, **(architecture or {})))
        precision = _config_precision(config)
        if precision is None:
            assumptions.append("precision: bf16 (not given, and the config names none)")
            return "bf16"
        assumptions.append("precision: %s, from the model's config" % precision)
        return precision
    name = _ALIASES.get(str(precision).lower(), str(precision).lower())
    if name not in PRECISIONS:
        raise SizingError("precision is %r; expected one of %s" % (precision, ", ".join(PRECISIONS)))
    return name


def _config_precision(config):
    quantization = config.get("quantization_config")
    if isinstance(quantization, Mapping):
        method = str(quantization.get("quant_method", "")).lower()
        bits = quantization.get("bits") or quantization.get("w_bit")
        if method in ("awq", "gptq") and bits in (4, None):
            return method
        if method in ("gptq", "bitsandbytes") and bits == 8:
            return "int8"
        if method in ("fp8", "fbgemm_fp8"):
            return "fp8"
    dtype = config.get("torch_dtype") or config.get("dtype")
    name = _ALIASES.get(str(dtype).lower(), str(dtype).lower()) if dtype else None
    # vLLM's --dtype auto serves a float32 checkpoint in fp16.
    return "fp16" if name == "fp32" else (name if name in PRECISIONS else None)


def _kv_dtype(kv_cache_dtype, precision, assumptions):
    """(name, bytes per element) of the KV cache: auto follows 16-bit weights, else 16 bits (fp32: 32)."""
    name = "auto" if kv_cache_dtype is None else str(kv_cache_dtype).lower()
    if name not in KV_CACHE_DTYPES:
        raise SizingError("kv_cache_dtype is %r; expected one of %s" % (kv_cache_dtype, ", ".join(KV_CACHE_DTYPES)))
    if name != "auto":
        return name, KV_CACHE_DTYPES[name]
    if precision in _SIXTEEN_BIT:
        return precision, 2
    if precision == "fp32":
        return "fp32", 4
    # Quantized weights compute in 16 bits, and vLLM's auto KV cache takes that activation dtype.
    assumptions.append("kv_cache_dtype: 16-bit, the activation dtype of %s weights (give kv_cache_dtype: fp8 "
                       "for an fp8 KV cache)" % precision)
    return "fp16", 2


def _positive(name, value, what):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SizingError("%s is %r; expected a whole number >= 1: %s" % (name, value, what))
    return value
