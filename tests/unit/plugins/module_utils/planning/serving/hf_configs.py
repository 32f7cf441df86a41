# -*- coding: utf-8 -*-
"""config.json of the models the sizing tests use (the keys sizing reads), shared by test_sizing and test_serving_fit."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

# meta-llama/Llama-3.1-8B-Instruct and -70B-Instruct.
LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "tie_word_embeddings": False, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
}
LLAMA_31_70B = dict(LLAMA_31_8B, hidden_size=8192, intermediate_size=28672, num_attention_heads=64,
                    num_hidden_layers=80)
# BAAI/bge-large-en-v1.5 (BERT-large).
BGE_LARGE = {
    "architectures": ["BertModel"], "model_type": "bert", "hidden_size": 1024, "intermediate_size": 4096,
    "num_attention_heads": 16, "num_hidden_layers": 24, "vocab_size": 30522, "max_position_embeddings": 512,
    "type_vocab_size": 2, "torch_dtype": "float32",
}
