#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: model_sizing
short_description: Size a model's GPU memory and find the GPU slice it fits, with the vLLM arguments to match
version_added: 0.2.0
description:
  - Computes the GPU memory a model needs to be served by vLLM, term by term, weights, KV cache for the context
    and concurrency asked, activations, CUDA context and CUDA graphs, from its parameter count or architecture (a
    Hugging Face C(config.json) given as a dict works).
  - With I(pools) (the shape of C(kubegpu_node_pools)), I(claim_templates) or I(slices), it lists what each pool
    offers a pod (whole GPUs, MIG devices, time-sliced or MPS replicas, DRA claim templates) and picks the smallest
    slice the model fits, with the number of GPUs for tensor parallelism, C(--gpu-memory-utilization) and
    C(--max-model-len).
  - With I(requested), a model that does not fit the slice it asks for fails the task with a message naming the
    need in GiB by term, the slice and the slices that would fit, instead of an OOMKilled pod later.
  - Needs no cluster. The formula, its constants and their sources are in the collection's docs/serving.md.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  parameters:
    description:
      - The model's parameter count, e.g. C(8030261248). Estimated from the architecture when left out.
    type: int
  precision:
    description:
      - The weights' format. C(awq), C(gptq) and C(int4) are 4-bit with group size 128; quantized formats keep
        embeddings and C(lm_head) at 16 bits, as vLLM loads them.
      - Default is what I(hf_config) says (C(quantization_config), else C(torch_dtype); C(float32) checkpoints are
        served in fp16 by vLLM), else C(bf16).
    type: str
    choices: [fp32, bf16, fp16, fp8, int8, int4, awq, gptq]
  kv_cache_dtype:
    description:
      - The KV cache's element type (vLLM C(--kv-cache-dtype)). C(auto) follows 16-bit weights, and is 16 bits for
        quantized weights.
    type: str
    choices: [auto, fp32, bf16, fp16, fp8, fp8_e4m3, fp8_e5m2]
    default: auto
  context:
    description:
      - Tokens of one sequence, prompt and output (vLLM C(--max-model-len)). Default is the model's
        C(max_position_embeddings).
    type: int
  concurrency:
    description:
      - Sequences held at once at full context (vLLM C(--max-num-seqs)); the KV cache holds I(context) x
        I(concurrency) tokens. For an encoder, the sequences of one batch.
    type: int
    default: 1
  architecture:
    description:
      - The model's shape in C(config.json) key names, C(num_hidden_layers), C(num_key_value_heads), C(head_dim) (or
        C(hidden_size) and C(num_attention_heads)), C(intermediate_size), C(vocab_size), C(tie_word_embeddings),
        C(max_position_embeddings). Its keys override I(hf_config)'s.
    type: dict
  hf_config:
    description:
      - The model's Hugging Face C(config.json) as a dict; multimodal configs' C(text_config) is read.
    type: dict
  kind:
    description:
      - C(decoder) for LLMs (a KV cache per token), C(encoder) for embedding and reranker models (BERT-like, no KV
        cache). Default is guessed from C(model_type) of I(hf_config).
    type: str
    choices: [decoder, encoder]
  pools:
    description:
      - Node pools in the shape of C(kubegpu_node_pools); each pool's GPU comes from I(hardware), else I(nodes),
        else its selector's C(nvidia.com/gpu.product) and C(nvidia.com/gpu.count).
  hardware:
    description:
      - 'The GPU of pools, C({<pool>: {gpu: <model key or gpu.product>, gpus_per_node: <N>}}).'
    type: dict
  nodes:
    description:
      - Node objects (as C(kubernetes.core.k8s_info) returns them); their GPU Feature Discovery labels tell each
        pool's GPU model and GPUs per node.
    type: list
    elements: dict
  claim_templates:
    description:
      - DRA claim templates in the shape of C(kubegpu_dra.claim_templates); each is a slice of its own.
  slices:
    description:
      - Slices given as data, C({pool, resource_name, memory (bytes or a quantity such as 40Gi), kind,
        units_per_node, max_units_per_pod, device_memory}).
    type: list
    elements: dict
  requested:
    description:
      - The slice the model asks for, a resource name, claim template or pool name, or a mapping with some of
        C(pool), C(resource_name), C(claim_template), C(units). The task fails when the model does not fit it.
      - Left out, the smallest slice that fits is chosen.
    type: raw
extends_documentation_fragment:
  - kubegpu.platform.inputs.pools
  - kubegpu.platform.inputs.claim_templates
attributes:
  check_mode:
    support: full
    description: Changes nothing; runs the same in check mode.
"""

EXAMPLES = r"""
- name: Size Llama 3.1 8B at 8k context for 4 concurrent sequences, and pick a slice of the pools
  kubegpu.platform.model_sizing:
    precision: bf16
    context: 8192
    concurrency: 4
    architecture:
      num_hidden_layers: 32
      hidden_size: 4096
      num_attention_heads: 32
      num_key_value_heads: 8
      intermediate_size: 14336
      vocab_size: 128256
    pools: "{{ kubegpu_node_pools }}"
    hardware:
      llm-h100: {gpu: H100-80GB, gpus_per_node: 8}
  register: sizing

- name: Pass the arguments to the model server
  ansible.builtin.debug:
    msg: "{{ sizing.fit.vllm_args }} on {{ sizing.fit.resources }}"

- name: Refuse a 70B FP16 model on a 3g.40gb MIG device before any pod is created
  kubegpu.platform.model_sizing:
    hf_config: "{{ lookup('ansible.builtin.file', 'llama-3.1-70b/config.json') | from_json }}"
    context: 8192
    slices:
      - {pool: llm-h100, resource_name: nvidia.com/mig-3g.40gb, memory: 40320Mi, kind: mig}
    requested: nvidia.com/mig-3g.40gb
"""

RETURN = r"""
need:
  description: The model's need on one GPU, each term in bytes and GiB, with the inputs and the assumptions made.
  returned: always
  type: dict
  sample:
    parameters: 8030261248
    precision: bf16
    kv_cache_dtype: bf16
    kind: decoder
    context: 8192
    concurrency: 4
    tokens: 32768
    kv_cache_bytes_per_token: 131072
    terms: {weights: {bytes: 16060522496, gib: 14.96}, kv_cache: {bytes: 4294967296, gib: 4.0}}
    total_bytes: 23245275136
    total_gib: 21.65
    assumptions: ["parameters estimated from the architecture: 8.03B"]
slices:
  description: Every slice offered (pools, claim templates and given slices), memory per unit in bytes and GiB.
  returned: always
  type: list
  elements: dict
  sample:
    - {pool: llm-h100, kind: mig, resource_name: nvidia.com/mig-3g.40gb, memory_bytes: 42278584320, memory_gib: 39.38,
       units_per_node: 16, max_units_per_pod: 1, gpu: H100-80GB, profile: 3g.40gb}
fit:
  description:
    - The chosen slice, its units (the tensor-parallel size), the need per unit, the vLLM settings and arguments,
      the resources a pod requests, every slice that fits (smallest first) and those too small.
    - None when no slices were given.
  returned: always
  type: dict
  sample:
    slice: {pool: llm-h100, resource_name: nvidia.com/mig-3g.40gb, memory_gib: 39.38}
    units: 1
    need_per_unit_gib: 21.65
    gpu_memory_utilization: 0.58
    vllm: {max_model_len: 8192, gpu_memory_utilization: 0.58, max_num_seqs: 4, tensor_parallel_size: 1}
    vllm_args: ["--max-model-len", "8192", "--gpu-memory-utilization", "0.58", "--max-num-seqs", "4"]
    resources: {nvidia.com/mig-3g.40gb: 1}
    claim_template: null
vllm_args:
  description: The fit's vLLM arguments, empty when no slices were given.
  returned: always
  type: list
  elements: str
  sample: ["--max-model-len", "8192", "--gpu-memory-utilization", "0.58", "--max-num-seqs", "4"]
"""

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.args import (
    CLAIM_TEMPLATES_ARG_SPEC,
    POOLS_ARG_SPEC,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import LayoutError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.fit import fit
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import (
    KINDS,
    KV_CACHE_DTYPES,
    PRECISIONS,
    SizingError,
    size_model,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.slices import (
    claim_template_slices,
    parse_slices,
    pool_slices,
)

ARGUMENT_SPEC = {
    "parameters": {"type": "int"},
    "precision": {"type": "str", "choices": list(PRECISIONS)},
    "kv_cache_dtype": {"type": "str", "choices": list(KV_CACHE_DTYPES), "default": "auto"},
    "context": {"type": "int"},
    "concurrency": {"type": "int", "default": 1},
    "architecture": {"type": "dict"},
    "hf_config": {"type": "dict"},
    "kind": {"type": "str", "choices": list(KINDS)},
    "pools": POOLS_ARG_SPEC["pools"],
    "hardware": {"type": "dict"},
    "nodes": {"type": "list", "elements": "dict"},
    "claim_templates": CLAIM_TEMPLATES_ARG_SPEC["claim_templates"],
    "slices": {"type": "list", "elements": "dict"},
    "requested": {"type": "raw"},
}
_MODEL_KEYS = ("parameters", "precision", "kv_cache_dtype", "context", "concurrency", "architecture", "hf_config",
               "kind")


def size_and_fit(parameters=None, precision=None, kv_cache_dtype="auto", context=None, concurrency=1,
                 architecture=None, hf_config=None, kind=None, pools=None, hardware=None, nodes=None,
                 claim_templates=None, slices=None, requested=None):
    """Return the module result: need, slices, fit (None without slices) and vllm_args.

    Raises SizingError, PoolError or LayoutError with the message the task fails with.
    """
    need = size_model(parameters=parameters, precision=precision, context=context, concurrency=concurrency,
                      architecture=architecture, hf_config=hf_config, kv_cache_dtype=kv_cache_dtype, kind=kind)
    offered = []
    if pools:
        offered.extend(pool_slices(pools, nodes=nodes, hardware=hardware))
    elif hardware:
        raise SizingError("hardware is given without pools; it describes the GPUs of pools (give pools too)")
    if claim_templates:
        offered.extend(claim_template_slices(claim_templates))
    offered.extend(parse_slices(slices))
    if requested is not None and not offered:
        raise SizingError("requested is %r but no slices were given to fit it on (give pools, claim_templates or "
                          "slices)" % (requested,))
    result = fit(need, offered, requested) if offered else None
    return {
        "changed": False,
        "need": need.to_dict(),
        "slices": [item.to_dict() for item in offered],
        "fit": result,
        "vllm_args": result["vllm_args"] if result else [],
    }


def main():
    module = KubegpuModule(argument_spec=ARGUMENT_SPEC, needs_cluster=False, supports_check_mode=True)
    try:
        result = size_and_fit(**module.params)
    except (SizingError, PoolError, LayoutError) as err:
        module.fail_json(msg=str(err))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
