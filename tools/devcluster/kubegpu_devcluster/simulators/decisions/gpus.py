"""What a node says about its GPUs: the model, the physical count, the MIG geometry mig-manager applied.

The three GPU simulators read the same facts the same way: the model from gpu.product (GFD's suffixes
removed), the count from the fleet's gpu.count kept in an annotation (GFD rewrites the label under MIG single),
the geometry from the annotation the mig-manager simulator writes.
"""
from __future__ import annotations

import json

from ... import hardware

GPUS_ANNOTATION = "devcluster.kubegpu.io/gpus"
APPLIED_ANNOTATION = "devcluster.kubegpu.io/mig-applied"
GEOMETRY_ANNOTATION = "devcluster.kubegpu.io/mig-geometry"


def node_model(labels: dict) -> str | None:
    """The hardware key (kubegpu_devcluster.hardware) of the node's GPUs; None for an unknown product."""
    return hardware.model_by_product(labels.get("nvidia.com/gpu.product", ""))


def physical_gpus(labels: dict, annotations: dict) -> int:
    """The node's GPU count: the fleet's gpu.count, kept in an annotation once GFD may rewrite the label."""
    try:
        return int(annotations.get(GPUS_ANNOTATION) or labels.get("nvidia.com/gpu.count") or 0)
    except ValueError:
        return 0


def applied_geometry(annotations: dict, count: int) -> list:
    """Per GPU: None (MIG disabled) or {profile: count}. Missing or unreadable: all disabled."""
    try:
        geometry = json.loads(annotations.get(GEOMETRY_ANNOTATION) or "null")
    except ValueError:
        geometry = None
    if not isinstance(geometry, list) or len(geometry) != count:
        return [None] * count
    return geometry
