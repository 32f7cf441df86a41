# -*- coding: utf-8 -*-
"""Builders of Nodes and raw pools shared by the node pool planner's tests."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

MIG = "nvidia.com/mig.config"
MACHINE = "machine.openshift.io/machine"

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
L40S = "NVIDIA-L40S"

# A mixed MIG layout on H100 nodes and what an 8-GPU node advertises with it (mig-manager and the device plugin).
MIXED = {"strategy": "mig", "mig": {"layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}}
MIXED_ALLOCATABLE = {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "16", "nvidia.com/mig-2g.20gb": "8",
                     "nvidia.com/mig-3g.40gb": "8"}


def node(name, product=H100, count=8, labels=None, machine=None, allocatable=None, mig_capable=None):
    """A Node as GFD labels it, with MIG off on MIG-capable GPUs (the operator's default)."""
    base = {"kubernetes.io/hostname": name}
    if product:
        capable = product != L40S if mig_capable is None else mig_capable
        base.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product,
                     "nvidia.com/gpu.count": str(count), "nvidia.com/mig.capable": "true" if capable else "false"})
        if capable:
            base[MIG] = "all-disabled"
    base.update(labels or {})
    if allocatable is None:
        allocatable = {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": str(count)} if product else {"cpu": "8"}
    metadata = {"name": name, "labels": base, "annotations": {}}
    if machine:
        metadata["annotations"][MACHINE] = "openshift-machine-api/" + machine
    return {"metadata": metadata, "status": {"allocatable": allocatable}}


def by_label(key, value):
    return {"matchLabels": {key: value}}


def raw_pool(name="p", selector=None, sharing=None, **extra):
    pool = {"name": name, "selector": selector or by_label("pool", name),
            "sharing": sharing or {"strategy": "none"}}
    pool.update(extra)
    return pool
