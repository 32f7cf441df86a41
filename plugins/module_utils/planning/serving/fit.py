# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which slice a model fits, on how many units, and the vLLM arguments that keep it there.

Public API (stable; the serving stage imports it):

    fit(need, slices, requested=None) -> dict
      need: a sizing.ModelNeed; slices: slices.Slice list (pool_slices, claim_template_slices,
      parse_slices). requested: None (the smallest slice that fits), or the slice the model asks for:
      a resource name, claim template or pool name (str), or {pool, resource_name, claim_template,
      units} (any of them). Returns {"slice", "units", "need", "need_per_unit", "need_per_unit_gib",
      "gpu_memory_utilization", "vllm" {max_model_len, gpu_memory_utilization, max_num_seqs,
      tensor_parallel_size, kv_cache_dtype?}, "vllm_args" [str], "resources" {name: units} (claim
      template slices: {}), "claim_template", "fitting" [every slice that fits, smallest first],
      "too_small" [labels]}. Raises SizingError when the requested slice (or, without one, every
      slice) is too small: the message names the need (GiB, by term), the slice (pool, resource, GiB)
      and the slices that would fit.

A slice fits on units when need_per_unit x (1 + HEADROOM) <= MAX_UTILIZATION x the unit's memory.
Units: from the slice's min_units_per_pod to its max_units_per_pod, only counts vLLM's tensor
parallelism accepts (they divide the attention heads, and divide or are divided by the KV heads;
powers of two when the heads are unknown); the fewest that fit. "Smallest" is the least memory held
(units x unit memory), then the fewest units.
--gpu-memory-utilization is need_per_unit x (1 + HEADROOM) / the device's memory as CUDA reports it
(a time-sliced replica sees the whole GPU), rounded up to hundredths, at most MAX_UTILIZATION: vLLM
then sizes its KV cache for the context and concurrency asked, and leaves a shared GPU's rest to the
other replicas.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
from collections.abc import Mapping

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import (
    ENCODER,
    GIB,
    SizingError,
    describe,
    gib,
    need_per_unit,
)

# vLLM's own default is 0.9; above 0.95 fragmentation and the allocator's reserve leave too little.
MAX_UTILIZATION = 0.95
# Margin on the estimate: the overhead constants are typical figures, not measurements of this model.
HEADROOM = 0.05
_REQUEST_KEYS = ("pool", "resource_name", "claim_template", "units")
_MAX_TENSOR_PARALLEL = 64


def fit(need, slices, requested=None):
    """Return the fit of need on slices (see the module docstring); raises SizingError."""
    slices = list(slices)
    if not slices:
        raise SizingError("no slices to fit the model on: give pools (kubegpu_node_pools, with their hardware or "
                          "nodes), claim templates or slices")
    request = _parse_request(requested)
    options = []
    too_small = []
    for item in slices:
        option = _smallest_units(need, item)
        if option is None:
            too_small.append(item)
        else:
            options.append(option)
    options.sort(key=lambda option: (option["units"] * option["slice"].memory_bytes, option["units"],
                                     option["slice"].pool or "", option["slice"].resource_name))
    if request is None:
        if not options:
            raise SizingError(_nothing_fits(need, too_small))
        return _result(need, options[0], options, too_small)
    wanted = [item for item in slices if _matches(item, request)]
    if not wanted:
        raise SizingError("requested slice %s is none of the slices offered (%s)"
                          % (_request_text(request), "; ".join(item.label() for item in slices)))
    for option in options:
        if option["slice"] in wanted and request.get("units") in (None, option["units"]):
            return _result(need, option, options, too_small)
    units = request.get("units")
    if units is not None:
        allowed = [item for item in wanted if units in allowed_units(need, item)]
        if not allowed:
            raise SizingError(
                "requested %s on %d units: %s gives %s per pod (sizes vLLM's tensor parallelism accepts for this "
                "model: %s)" % (_request_text(request), units, wanted[0].label(), _unit_range(wanted[0]),
                                ", ".join(str(count) for count in allowed_units(need, wanted[0])) or "none"))
        for item in allowed:
            option = _option(need, item, units)
            if option["fits"]:
                return _result(need, option, options, too_small)
        wanted = allowed
    raise SizingError(_refusal(need, wanted[0], request, options))


def _unit_range(item):
    if item.min_units_per_pod == item.max_units_per_pod:
        return "exactly %d unit%s" % (item.min_units_per_pod, "" if item.min_units_per_pod == 1 else "s")
    return "%d to %d units" % (item.min_units_per_pod, item.max_units_per_pod)


def allowed_units(need, item):
    """Return the unit counts a slice may give this model, fewest first (tensor-parallel sizes vLLM accepts)."""
    arch = need.architecture
    low, high = item.min_units_per_pod, min(item.max_units_per_pod, _MAX_TENSOR_PARALLEL)
    counts = []
    for units in range(low, high + 1):
        if units == 1 or units == item.min_units_per_pod == item.max_units_per_pod:
            counts.append(units)
        elif arch.num_attention_heads and arch.num_key_value_heads:
            kv = arch.num_key_value_heads
            if arch.num_attention_heads % units == 0 and (kv % units == 0 or units % kv == 0):
                counts.append(units)
        elif units & (units - 1) == 0:
            counts.append(units)
    return counts


def _smallest_units(need, item):
    if item.memory_bytes is None:
        return None
    for units in allowed_units(need, item):
        option = _option(need, item, units)
        if option["fits"]:
            return option
    return None


def _option(need, item, units):
    terms = need_per_unit(need, units)
    per_unit = sum(terms.values())
    wanted = per_unit * (1 + HEADROOM)
    fits = item.memory_bytes is not None and wanted <= MAX_UTILIZATION * item.memory_bytes
    return {"slice": item, "units": units, "terms": terms, "per_unit": per_unit, "fits": fits}


def _utilization(option):
    device = option["slice"].device_memory
    value = math.ceil(option["per_unit"] * (1 + HEADROOM) / device * 100 - 1e-9) / 100
    return min(MAX_UTILIZATION, max(0.01, value))


def _result(need, option, options, too_small):
    item, units = option["slice"], option["units"]
    utilization = _utilization(option)
    vllm = {"max_model_len": need.context, "gpu_memory_utilization": utilization, "max_num_seqs": need.concurrency,
            "tensor_parallel_size": units}
    args = ["--max-model-len", str(need.context), "--gpu-memory-utilization", "%.2f" % utilization,
            "--max-num-seqs", str(need.concurrency)]
    if units > 1:
        args += ["--tensor-parallel-size", str(units)]
    if need.kind != ENCODER and need.kv_cache_dtype.startswith("fp8"):
        vllm["kv_cache_dtype"] = need.kv_cache_dtype
        args += ["--kv-cache-dtype", need.kv_cache_dtype]
    return {
        "slice": item.to_dict(),
        "units": units,
        "need": need.to_dict(),
        "need_per_unit": dict((name, {"bytes": value, "gib": gib(value)}) for name, value in option["terms"].items()),
        "need_per_unit_bytes": option["per_unit"],
        "need_per_unit_gib": gib(option["per_unit"]),
        "gpu_memory_utilization": utilization,
        "vllm": vllm,
        "vllm_args": args,
        "resources": {} if item.claim_template else {item.resource_name: units},
        "claim_template": item.claim_template,
        "fitting": [dict(other["slice"].to_dict(), units=other["units"],
                         need_per_unit_gib=gib(other["per_unit"])) for other in options],
        "too_small": [other.label() for other in too_small],
    }


def _parse_request(requested):
    if requested is None:
        return None
    if isinstance(requested, str) and requested:
        return {"name": requested}
    if isinstance(requested, Mapping) and requested and all(key in _REQUEST_KEYS for key in requested):
        units = requested.get("units")
        if units is not None and (isinstance(units, bool) or not isinstance(units, int) or units < 1):
            raise SizingError("requested.units is %r; expected a whole number >= 1" % (units,))
        return dict(requested)
    raise SizingError("requested is %r; expected a resource name, claim template or pool (str), or a mapping with "
                      "some of %s" % (requested, ", ".join(_REQUEST_KEYS)))


def _matches(item, request):
    if "name" in request:
        return request["name"] in (item.resource_name, item.claim_template, item.pool)
    return all(request.get(key) in (None, getattr(item, key)) for key in ("pool", "resource_name", "claim_template"))


def _request_text(request):
    if "name" in request:
        return repr(request["name"])
    return "{%s}" % ", ".join("%s: %s" % (key, request[key]) for key in _REQUEST_KEYS if key in request)


def _need_text(need, units, terms):
    return "%s per unit on %d unit%s (%s, %d tokens of context x %d sequences)" % (
        describe(terms), units, "" if units == 1 else "s", need.precision, need.context, need.concurrency)


def _refusal(need, item, request, options):
    units_asked = request.get("units")
    counts = [units_asked] if units_asked else (allowed_units(need, item) or [item.min_units_per_pod])
    units = counts[-1]
    terms = need_per_unit(need, units)
    if item.memory_bytes is None:
        offer = "its memory is unknown (give the claim template products or min_memory)"
    else:
        offer = "it offers %.1f GiB per unit (%.0f%% usable: %.1f GiB), at most %d per pod" % (
            item.memory_bytes / GIB, MAX_UTILIZATION * 100, MAX_UTILIZATION * item.memory_bytes / GIB,
            item.max_units_per_pod)
    fitting = "; ".join("%s x%d" % (option["slice"].label(), option["units"]) for option in options[:5])
    return ("model does not fit %s: it needs %s with %d%% headroom; %s; slices that fit: %s"
            % (item.label(), _need_text(need, units, terms), HEADROOM * 100, offer,
               fitting or "none (lower context or concurrency, or use a smaller precision such as fp8 or int4)"))


def _nothing_fits(need, too_small):
    known = [item for item in too_small if item.memory_bytes is not None]
    largest = max(known, key=lambda item: item.memory_bytes * item.max_units_per_pod) if known else None
    if largest is None:
        return "no slice has a known memory to fit the model on (%s)" % "; ".join(item.label() for item in too_small)
    units = (allowed_units(need, largest) or [1])[-1]
    return ("model fits no slice: it needs %s with %d%% headroom; the largest offer is %s x%d; lower context or "
            "concurrency, use a smaller precision (fp8, int4) or a pool with larger GPUs"
            % (_need_text(need, units, need_per_unit(need, units)), HEADROOM * 100, largest.label(), units))
