# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ServingRuntimes (serving.kserve.io/v1alpha1) from kubegpu_serving.runtimes.

Two types, both vLLM's OpenAI-compatible server on port 8080 reading the model KServe's storage initializer
puts in /mnt/models:
- vllm: LLMs (chat and completions).
- vllm-embed: embedding and reranker models (vLLM's pooling runner, --task=embed): /v1/embeddings, /score.

A runtime is written into each namespace where a model names it. The model format is "vLLM" with autoSelect off:
every InferenceService names its runtime, so two runtimes of one format never compete.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import MANAGED_BY, SERVING_RUNTIME_LABEL
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.spec import VLLM_EMBED

API_VERSION = "serving.kserve.io/v1alpha1"
MODEL_FORMAT = "vLLM"
PORT = 8080
DEFAULT_IMAGE = "vllm/vllm-openai:v0.11.0"
RUNTIME_LABEL = SERVING_RUNTIME_LABEL
# KServe replaces {{.Name}} with the InferenceService's name: clients ask for the model by that name.
_BASE_ARGS = ("--port=%d" % PORT, "--model=/mnt/models", "--served-model-name={{.Name}}")
_TYPE_ARGS = {VLLM_EMBED: ("--task=embed",)}


def runtime_object(runtime, namespace):
    """The ServingRuntime of `runtime` in `namespace`."""
    container = {
        "name": "kserve-container",
        "image": runtime.image or DEFAULT_IMAGE,
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": list(_BASE_ARGS) + list(_TYPE_ARGS.get(runtime.type, ())) + list(runtime.args),
        # vLLM writes its caches under HOME; the image's is not writable under a restricted SCC.
        "env": [{"name": "HOME", "value": "/tmp"}, {"name": "HF_HOME", "value": "/tmp/hf_home"}] + list(runtime.env),
        "ports": [{"containerPort": PORT, "protocol": "TCP"}],
    }
    if runtime.resources:
        container["resources"] = dict(runtime.resources)
    return {
        "apiVersion": API_VERSION,
        "kind": "ServingRuntime",
        "metadata": {
            "name": runtime.name, "namespace": namespace,
            "labels": dict(MANAGED_BY, **{RUNTIME_LABEL: runtime.name}),
            "annotations": {"prometheus.kserve.io/port": str(PORT), "prometheus.kserve.io/path": "/metrics"},
        },
        "spec": {
            "supportedModelFormats": [{"name": MODEL_FORMAT, "autoSelect": False}],
            "multiModel": False,
            "containers": [container],
        },
    }
