# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each node pool offers a model server: its slices, one per resource a pod can ask for.

Public API (stable; the serving stage imports it):

    Slice: pool, kind (gpu | mig | time-slicing | mps | dra), resource_name, memory_bytes (what one unit
      can count on), device_memory_bytes (the total CUDA reports for the device a unit sees: vLLM's
      --gpu-memory-utilization is a fraction of it), units_per_node, max_units_per_pod,
      min_units_per_pod, gpu (model key), profile (MIG), replicas (time-slicing / MPS), nodes (how many
      nodes of the pool were seen with this GPU), claim_template (DRA). Slice.to_dict() gives plain data
      with memory in GiB too.
    pool_slices(pools, nodes=None, hardware=None) -> [Slice]
      pools: kubegpu_node_pools (raw, or Pools from pool_spec.parse_pools). The GPU model and GPUs per
      node of each pool come from hardware {pool: {gpu: model key or gpu.product, gpus_per_node: N}},
      else from the pool's nodes (Node dicts, their GFD labels), else from the pool's selector
      (nvidia.com/gpu.product and nvidia.com/gpu.count). Pools of strategy dra give none:
      their slices are their claim templates'.
    gpu_slices(pool, model, gpus_per_node, nodes=None) -> [Slice]: one pool on one GPU model.
    claim_template_slices(templates) -> [Slice]: kubegpu_dra.claim_templates (raw or parsed).
    parse_slices(raw) -> [Slice]: slices given as dicts (memory as bytes or a quantity such as "40Gi").

What a unit offers, by kind:
- gpu: a whole GPU (gpu_models memory); a pod may take every GPU of a node (tensor parallelism).
- mig: one MIG device (mig_catalog.profile_memory_mib), resource nvidia.com/mig-<profile> under MIG
  strategy mixed, nvidia.com/gpu under single (mig_layout.resources_for says which). One per pod: CUDA
  enumerates a single MIG device per process, so a model cannot span MIG devices.
- time-slicing: GPU (or MIG device) memory / replicas. Time-slicing does not isolate memory: any replica
  can take the whole device, so the 1/replicas share is what each can count on when all are in use.
  One per pod: two replicas may be the same GPU.
- mps: GPU memory / replicas, the limit the device plugin pins for each MPS client; one per pod.
- dra: a claim template's devices: min_memory, else the smallest memory of its products (MIG: of its
  profile), capped by an MPS pinned memory limit; exactly count devices per claim. Unknown (None) when
  the template names neither products nor min_memory.
Errors are SizingError naming the pool, the field and what to give.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.device_plugin_config import (
    DRA,
    MIG,
    MPS,
    TIME_SLICING,
    shared_resources,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import (
    MIG as DRA_MIG,
    MPS as DRA_MPS,
    ClaimTemplate,
    parse_claim_templates,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.quantity import parse_quantity
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import (
    MODELS,
    UnknownGpuError,
    model_for_key,
    model_for_labels,
    model_for_product,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import (
    LayoutError,
    catalog_for,
    profile_memory_mib,
    resource_name,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_layout import (
    required_strategy,
    resources_for,
    validate_layout,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    COUNT_LABEL,
    GPU_RESOURCE as FULL_GPU_RESOURCE,
    MEMORY_LABEL,
    PRODUCT_LABEL,
    SHARED_RESOURCE_SUFFIX as SHARED_SUFFIX,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import physical_gpus
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.selection import node_labels, resolve_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import Pool, PoolError, parse_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import MIB, SizingError, gib

GPU = "gpu"
KINDS = (GPU, MIG, TIME_SLICING, MPS, DRA)
_HARDWARE_KEYS = ("gpu", "gpus_per_node")
_SLICE_KEYS = ("pool", "kind", "resource_name", "memory", "memory_bytes", "device_memory", "device_memory_bytes",
               "units_per_node", "max_units_per_pod", "min_units_per_pod", "gpu", "profile", "replicas", "nodes",
               "claim_template")


@dataclass(frozen=True)
class Slice:
    """One resource a pool offers; memory in bytes per unit (see the module docstring)."""

    pool: Optional[str]
    kind: str
    resource_name: str
    memory_bytes: Optional[int]
    units_per_node: Optional[int]
    max_units_per_pod: int
    min_units_per_pod: int = 1
    device_memory_bytes: Optional[int] = None
    gpu: Optional[str] = None
    profile: Optional[str] = None
    replicas: Optional[int] = None
    nodes: Optional[int] = None
    claim_template: Optional[str] = None

    @property
    def device_memory(self):
        """The device total vLLM's utilization is a fraction of; the unit's memory when not told apart."""
        return self.device_memory_bytes or self.memory_bytes

    def label(self):
        """How messages name the slice: "pool 'llm-h100' nvidia.com/gpu (NVIDIA H100-80GB, 79.6 GiB)"."""
        where = ("claim template '%s'" % self.claim_template if self.claim_template
                 else "pool '%s' %s" % (self.pool, self.resource_name))
        what = ", ".join(item for item in (self.gpu, self.profile, "%s x%d" % (self.kind, self.replicas)
                                                                   if self.replicas else None) if item)
        memory = "memory unknown" if self.memory_bytes is None else "%.1f GiB" % (self.memory_bytes / 2 ** 30)
        return "%s (%s)" % (where, ", ".join(item for item in (what, memory) if item))

    def to_dict(self):
        """Plain data: every field, with memory_gib and device_memory_gib beside the bytes."""
        data = dict((name, getattr(self, name)) for name in self.__dataclass_fields__)
        data["memory_gib"] = None if self.memory_bytes is None else gib(self.memory_bytes)
        data["device_memory_gib"] = None if self.device_memory is None else gib(self.device_memory)
        return data


# ---------------------------------------------------------------------------------------------
# Node pools
# ---------------------------------------------------------------------------------------------

def pool_slices(pools, nodes=None, hardware=None):
    """Return the Slices of every pool (see the module docstring); raises SizingError or PoolError."""
    if pools is None or not all(isinstance(pool, Pool) for pool in pools):
        pools = parse_pools(pools)
    hardware = _parse_hardware(hardware, pools)
    selected = resolve_pools(pools, nodes) if nodes else {}
    slices = []
    for pool in pools:
        if pool.strategy == DRA:
            continue
        for model, gpus_per_node, count in _pool_hardware(pool, hardware.get(pool.name), selected.get(pool.name)):
            slices.extend(gpu_slices(pool, model, gpus_per_node, count))
    return slices


def gpu_slices(pool, model, gpus_per_node, nodes=None):
    """Return the Slices of one pool (a Pool) on nodes of one GpuModel with gpus_per_node GPUs.

    Resource names and counts are the device plugin's (mig_layout.resources_for for MIG layouts,
    device_plugin_config.shared_resources for time-slicing and MPS, renamed resources included).
    Raises SizingError for a layout that does not fit the GPU.
    """
    try:
        if pool.strategy == MIG:
            resources, memory = _mig_resources(pool, model, gpus_per_node)
        else:
            resources = {FULL_GPU_RESOURCE: gpus_per_node}
            memory = {FULL_GPU_RESOURCE: (None, _gpu_memory(pool, model))}
    except LayoutError as err:
        raise SizingError("pool '%s': %s: %s" % (pool.name, model.key, err)) from None
    sharing = pool.mps if pool.strategy == MPS else pool.time_slicing
    if sharing is None:
        kind = MIG if pool.strategy == MIG else GPU
        return [Slice(pool=pool.name, kind=kind if profile else GPU, resource_name=name, memory_bytes=size,
                      units_per_node=count, max_units_per_pod=1 if profile else count,
                      device_memory_bytes=size, gpu=model.key, profile=profile, nodes=nodes)
                for name, count in sorted(resources.items())
                for profile, size in [memory[name]]]
    slices = []
    kind = MPS if pool.strategy == MPS else TIME_SLICING
    for name, count in sorted(shared_resources(resources, sharing).items()):
        if not count:
            continue  # renamed: <name> stays at 0 beside <name>.shared
        base = name[:-len(SHARED_SUFFIX)] if name.endswith(SHARED_SUFFIX) and name not in memory else name
        profile, size = memory[base]
        share = size // sharing.replicas
        # MPS pins each client's memory limit, taken to be what CUDA reports as the device's total (not verified
        # on hardware; docs/serving.md); a time-sliced replica sees the whole device.
        device = share if kind == MPS else size
        slices.append(Slice(pool=pool.name, kind=kind, resource_name=name, memory_bytes=share, units_per_node=count,
                            max_units_per_pod=1, device_memory_bytes=device, gpu=model.key, profile=profile,
                            replicas=sharing.replicas, nodes=nodes))
    return slices


def _mig_resources(pool, model, gpus_per_node):
    """({resource: count}, {resource: (profile or None, bytes)}) of a MIG pool on one model."""
    layout = validate_layout(model, pool.mig.layout)
    strategy = pool.mig.strategy or required_strategy(layout)
    resources = resources_for(model, layout, gpus_per_node, strategy)
    memory = {}
    for entry in layout.entries:
        if not entry.mig_enabled:
            memory[FULL_GPU_RESOURCE] = (None, _gpu_memory(pool, model))
        for profile, dummy in entry.profiles:
            memory[resource_name(profile, strategy)] = (profile, profile_memory_mib(model, profile) * MIB)
    return resources, memory


def _gpu_memory(pool, model):
    if model.memory_mib is None:
        raise SizingError(
            "pool '%s': the memory of %s is not in the collection's GPU table; give the pool's nodes (their "
            "%s label tells it) or slices with memory" % (pool.name, model.key, MEMORY_LABEL))
    return model.memory_mib * MIB


def _parse_hardware(hardware, pools):
    """{pool: (GpuModel, gpus_per_node)} of hardware; refuses unknown pools, GPUs and counts."""
    if hardware is None:
        return {}
    if not isinstance(hardware, Mapping):
        raise SizingError("hardware is %r; expected {pool: {gpu: <model or gpu.product>, gpus_per_node: N}}"
                          % (hardware,))
    names = [pool.name for pool in pools]
    parsed = {}
    for name, entry in hardware.items():
        if name not in names:
            raise SizingError("hardware names pool %r, which is not among the pools (%s)" % (name, ", ".join(names)))
        if not isinstance(entry, Mapping) or sorted(entry) != sorted(_HARDWARE_KEYS):
            raise SizingError("hardware['%s'] is %r; expected {gpu: <model key or gpu.product>, gpus_per_node: N}"
                              % (name, entry))
        count = entry["gpus_per_node"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise SizingError("hardware['%s'].gpus_per_node is %r; expected a whole number >= 1" % (name, count))
        parsed[name] = (_model(entry["gpu"], "hardware['%s'].gpu" % name), count)
    return parsed


def _model(gpu, field):
    try:
        return model_for_key(gpu)
    except UnknownGpuError:
        pass
    try:
        return model_for_product(gpu)
    except UnknownGpuError:
        raise SizingError("%s is %r; expected a GPU model key (%s) or a %s label"
                          % (field, gpu, ", ".join(model.key for model in MODELS), PRODUCT_LABEL)) from None


def _pool_hardware(pool, given, members):
    """[(GpuModel, gpus_per_node, nodes or None)] of a pool: given, else its nodes, else its selector."""
    if given is not None:
        return [given + (None,)]
    if members:
        groups = {}
        for node in members:
            labels = node_labels(node)
            if not labels.get(PRODUCT_LABEL):
                continue
            key = (model_for_labels(labels), physical_gpus(node))
            groups[key] = groups.get(key, 0) + 1
        unknown = [model.key for model, count in groups if count is None]
        if unknown:
            raise SizingError("pool '%s': nodes with %s do not tell their GPU count (%s); give "
                              "hardware {%s: {gpu, gpus_per_node}}" % (pool.name, unknown[0], COUNT_LABEL, pool.name))
        if groups:
            return sorted(((model, count, nodes) for (model, count), nodes in groups.items()),
                          key=lambda item: (item[0].key, item[1]))
    return _selector_hardware(pool)


def _selector_hardware(pool):
    labels = (pool.selector or {}).get("matchLabels") or {}
    products = [labels[PRODUCT_LABEL]] if PRODUCT_LABEL in labels else []
    count = labels.get(COUNT_LABEL)
    for expression in (pool.selector or {}).get("matchExpressions") or []:
        if expression["operator"] != "In":
            continue
        if expression["key"] == PRODUCT_LABEL and not products:
            products = list(expression["values"])
        if expression["key"] == COUNT_LABEL and count is None and len(expression["values"]) == 1:
            count = expression["values"][0]
    if not products or not str(count or "").isdigit() or int(count) < 1:
        raise SizingError(
            "pool '%s': its GPU model and GPUs per node are unknown: no nodes of it were given, and its selector "
            "names %s; give hardware {%s: {gpu: <model, e.g. H100-80GB>, gpus_per_node: <N>}} or the cluster's "
            "nodes" % (pool.name, "no " + (PRODUCT_LABEL if not products else COUNT_LABEL), pool.name))
    return [(_model(product, "pool '%s' selector %s" % (pool.name, PRODUCT_LABEL)), int(count), None)
            for product in products]


# ---------------------------------------------------------------------------------------------
# Claim templates (DRA)
# ---------------------------------------------------------------------------------------------

def claim_template_slices(templates):
    """Return one Slice per claim template (kubegpu_dra.claim_templates, raw or parsed); raises SizingError."""
    if templates is None or not all(isinstance(template, ClaimTemplate) for template in templates):
        try:
            templates = parse_claim_templates(templates)
        except DraError as err:
            raise SizingError(str(err)) from None
    return [_template_slice(template) for template in templates]


def _template_slice(template):
    models = [model_for_key(key) for key in template.models]
    candidates = models or [model for model in MODELS if model.mig_capable]
    memory = None
    if template.device == DRA_MIG:
        sizes = []
        for model in candidates:
            try:
                if template.mig_profile in catalog_for(model).profile_names():
                    sizes.append(profile_memory_mib(model, template.mig_profile) * MIB)
            except LayoutError:
                continue
        memory = min(sizes) if sizes else None
    elif models and all(model.memory_mib for model in models):
        memory = min(model.memory_mib for model in models) * MIB
    if template.min_memory:
        floor = int(parse_quantity(template.min_memory))
        memory = floor if memory is None else max(memory, floor)
    device = memory
    sharing = template.sharing
    if sharing is not None and sharing.strategy == DRA_MPS and sharing.pinned_memory_limit and memory is not None:
        memory = min(memory, int(parse_quantity(sharing.pinned_memory_limit)))
        device = memory
    return Slice(pool=None, kind=DRA, resource_name=template.class_name, memory_bytes=memory, units_per_node=None,
                 max_units_per_pod=template.count, min_units_per_pod=template.count, device_memory_bytes=device,
                 gpu=",".join(template.models) or None, profile=template.mig_profile,
                 claim_template=template.name)


# ---------------------------------------------------------------------------------------------
# Slices given as data
# ---------------------------------------------------------------------------------------------

def parse_slices(raw):
    """Return Slices from dicts with the Slice fields; memory may be a quantity ("40Gi") or bytes.

    Needs resource_name and memory (or memory_bytes); kind defaults to gpu, max_units_per_pod to 1.
    Raises SizingError naming the entry and the field.
    """
    if raw is None:
        return []
    if not isinstance(raw, (list, tuple)):
        raise SizingError("slices is %r; expected a list of {pool, resource_name, memory, ...}" % (raw,))
    return [_parse_slice(index, entry) for index, entry in enumerate(raw)]


def _parse_slice(index, entry):
    where = "slices[%d]" % index
    if not isinstance(entry, Mapping):
        raise SizingError("%s is %r; expected a mapping with keys %s" % (where, entry, ", ".join(_SLICE_KEYS)))
    unknown = sorted(str(key) for key in entry if key not in _SLICE_KEYS)
    if unknown:
        raise SizingError("%s: unknown keys %s (valid: %s)" % (where, ", ".join(unknown), ", ".join(_SLICE_KEYS)))
    name = entry.get("resource_name")
    if not isinstance(name, str) or not name:
        raise SizingError("%s: resource_name is %r; expected the resource a pod asks for, e.g. nvidia.com/gpu"
                          % (where, name))
    kind = entry.get("kind", GPU)
    if kind not in KINDS:
        raise SizingError("%s: kind is %r; expected one of %s" % (where, kind, ", ".join(KINDS)))
    memory = _bytes(where, "memory", entry.get("memory_bytes", entry.get("memory")), required=True)
    device = _bytes(where, "device_memory", entry.get("device_memory_bytes", entry.get("device_memory")))
    counts = {}
    for key, default in (("units_per_node", None), ("max_units_per_pod", 1), ("min_units_per_pod", 1),
                         ("replicas", None), ("nodes", None)):
        value = entry.get(key, default)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise SizingError("%s: %s is %r; expected a whole number >= 1" % (where, key, value))
        counts[key] = value
    if counts["min_units_per_pod"] > counts["max_units_per_pod"]:
        raise SizingError("%s: min_units_per_pod %d is above max_units_per_pod %d"
                          % (where, counts["min_units_per_pod"], counts["max_units_per_pod"]))
    return Slice(pool=entry.get("pool"), kind=kind, resource_name=name, memory_bytes=memory, device_memory_bytes=device,
                 gpu=entry.get("gpu"), profile=entry.get("profile"), claim_template=entry.get("claim_template"),
                 **counts)


def _bytes(where, field, value, required=False):
    if value is None and not required:
        return None
    amount = value if isinstance(value, int) and not isinstance(value, bool) else parse_quantity(value)
    if amount is None or amount <= 0:
        raise SizingError("%s: %s is %r; expected bytes or a quantity such as 40Gi or 81559Mi" % (where, field, value))
    return int(amount)


__all__ = ["GPU", "KINDS", "PoolError", "Slice", "claim_template_slices", "gpu_slices", "parse_slices", "pool_slices"]
