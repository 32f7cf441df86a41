# -*- coding: utf-8 -*-
"""Nodes and pods as the API returns them, for the doctor's tests."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy


def gpu_node(name="gpu-0", labels=None, allocatable=None, capacity=None, annotations=None, managed=None):
    base = {
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559", "nvidia.com/mig.capable": "true",
        "nvidia.com/cuda.driver-version.full": "580.105.08", "nvidia.com/cuda.runtime-version.full": "13.0",
        "nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "success",
        "nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/gpu.deploy.dcgm-exporter": "true",
        "nvidia.com/gpu.sharing-strategy": "none", "kubegpu.io/node-pool": "llm-h100",
    }
    for k, v in (labels or {}).items():
        if v is None:
            base.pop(k, None)
        else:
            base[k] = v
    alloc = {"cpu": "96", "nvidia.com/gpu": "8"} if allocatable is None else allocatable
    meta = {"name": name, "labels": base, "annotations": annotations or {}}
    if managed:
        meta["managedFields"] = managed
    return {"metadata": meta, "status": {"allocatable": dict(alloc),
                                         "capacity": dict(alloc if capacity is None else capacity)}}


def gpu_pod(name="p", namespace="llm", node="gpu-0", requests=None, phase="Running", env=None, args=None,
            statuses=None, conditions=None):
    container = {"name": "main", "image": "vllm/vllm-openai", "resources": {
        "requests": dict(requests if requests is not None else {"nvidia.com/gpu": "1"})}}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if args:
        container["args"] = list(args)
    spec = {"containers": [container]}
    if node:
        spec["nodeName"] = node
    status = {"phase": phase}
    if statuses:
        status["containerStatuses"] = statuses
    if conditions:
        status["conditions"] = conditions
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": status}


def with_(obj, **changes):
    out = copy.deepcopy(obj)
    out.update(changes)
    return out
