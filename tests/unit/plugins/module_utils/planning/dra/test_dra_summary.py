# -*- coding: utf-8 -*-
"""What gpu_cluster_info reports of the DRA stage: devices per node, claim templates and their objects."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.summary import dra_summary
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import CLAIM_TEMPLATE_LABEL as LABEL


def slice_of(node, devices, driver="gpu.nvidia.com", generation=1):
    return {"spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": generation},
                     "devices": [{"name": "gpu-%d" % i} for i in range(devices)]}}


def obj(kind, name, template, namespace=None):
    meta = {"name": name, "labels": {LABEL: template}}
    if namespace:
        meta["namespace"] = namespace
    return {"kind": kind, "metadata": meta}


def test_dra_summary():
    slices = [slice_of("b", 8), slice_of("a", 2, generation=1), slice_of("a", 4, generation=2),
              slice_of("c", 3, driver="other.example.com")]
    objects = [obj("ResourceClaimTemplate", "gpu", "gpu", "team-b"), obj("DeviceClass", "kubegpu-gpu", "gpu"),
               obj("ResourceClaimTemplate", "gpu", "gpu", "team-a"), obj("ResourceClaim", "shared", "shared", "llm"),
               {"kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"}}]
    assert dra_summary(slices, objects) == {
        "nodes": {"a": 4, "b": 8},
        "claim_templates": [
            {"name": "gpu", "device_class": "kubegpu-gpu",
             "claims": ["ResourceClaimTemplate team-a/gpu", "ResourceClaimTemplate team-b/gpu"]},
            {"name": "shared", "device_class": None, "claims": ["ResourceClaim llm/shared"]}]}
    assert dra_summary([], []) == {"nodes": {}, "claim_templates": []}
