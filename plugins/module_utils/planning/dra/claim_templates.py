# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Claim templates: what workloads ask for, as DeviceClasses and ResourceClaimTemplates.

The user describes them in kubegpu_dra.claim_templates::

    - name: gpu-40g               # [a-z0-9-], at most 40 characters, unique
      namespaces: [llm]           # where the ResourceClaimTemplate (or shared ResourceClaim) lives
      device: gpu                 # gpu (a whole GPU, default) | mig (a MIG device)
      min_memory: 40Gi            # the device's memory capacity at least this
      products: [H100-80GB]       # model keys, gpu.product labels or NVML names (productName)
      mig_profile: 3g.40gb        # device mig: the MIG profile
      count: 2                    # devices per claim (default 1)
      same_pcie_root: true        # count >= 2: all devices under one PCIe root complex
      sharing:                    # the driver's opaque config (GpuConfig / MigDeviceConfig)
        strategy: time-slicing    # time-slicing | mps
        interval: Long            # time-slicing of whole GPUs: Default | Short | Medium | Long
        mps: {default_active_thread_percentage: 50, default_pinned_device_memory_limit: 10Gi}
      claim: template             # template (one claim per pod) | shared (one ResourceClaim pods share)
      cel: "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"   # one more condition, as CEL

parse_claim_templates checks everything before any object is built and returns ClaimTemplates;
render_objects turns them into objects (resource.k8s.io/v1):

Objects are resource.k8s.io/v1 unless the cluster serves an older version only (v1beta2, v1beta1).

- DeviceClass kubegpu-<name>: one CEL selector (selectors.py: the driver, the device type, and the
  template's conditions) and, for sharing, the driver's opaque config, so that the class alone says
  what a claim gets (KServe's managed DRA names only a class).
- per namespace, ResourceClaimTemplate <name> (claim: template) or ResourceClaim <name> (claim:
  shared): one request of count devices of that class, with a matchAttribute constraint on
  resource.kubernetes.io/pcieRoot when same_pcie_root. A template gives every pod a claim of its
  own: sharing then only shares among that pod's containers; pods share a device through one
  ResourceClaim (dra-driver-nvidia-gpu#459), hence claim: shared.

Errors are DraError naming the template, the field, the value and what is valid.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional, Tuple

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.quantity import SUFFIXES, parse_quantity
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.selectors import (
    attribute_in,
    attribute_is,
    capacity_at_least,
    cel,
    driver_is,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import CLAIM_TEMPLATE_LABEL, DRA_DRIVER, MANAGED_BY, PRODUCT_LABEL
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import (
    MODELS,
    UnknownGpuError,
    model_for_key,
    model_for_nvml_name,
    model_for_product,
    nvml_names,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import (
    LayoutError,
    canonical_profile_name,
    catalog_for,
)

API_VERSION = "resource.k8s.io/v1"
# v1beta2 has v1's shape; v1beta1 (Kubernetes 1.32, OpenShift 4.19) puts the request's fields beside its name
# instead of under "exactly".
V1BETA1 = "resource.k8s.io/v1beta1"
API_VERSIONS = (API_VERSION, "resource.k8s.io/v1beta2", V1BETA1)
CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"
CLASS_PREFIX = "kubegpu-"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"

GPU = "gpu"
MIG = "mig"
DEVICES = (GPU, MIG)
TIME_SLICING = "time-slicing"
MPS = "mps"
SHARING_STRATEGIES = (TIME_SLICING, MPS)
# The driver's names for the strategies, and the driver gate each needs (api v1beta1 validate.go).
_DRIVER_STRATEGY = {TIME_SLICING: "TimeSlicing", MPS: "MPS"}
STRATEGY_GATES = {TIME_SLICING: "TimeSlicingSettings", MPS: "MPSSupport"}
INTERVALS = ("Default", "Short", "Medium", "Long")
TEMPLATE = "template"
SHARED = "shared"
CLAIMS = (TEMPLATE, SHARED)

_KEYS = ("name", "namespaces", "device", "min_memory", "products", "mig_profile", "count", "same_pcie_root",
         "sharing", "claim", "cel")
_CEL_MAX = 10 * 1024
_SHARING_KEYS = ("strategy", "interval", "mps")
_MPS_KEYS = ("default_active_thread_percentage", "default_pinned_device_memory_limit")
_NAME_MAX = 40
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_MIG_PROFILE = re.compile(r"^[0-9]+g\.[0-9]+gb([+.]me)?$")


@dataclass(frozen=True)
class Sharing:
    """How the driver shares the devices of one claim: time-slicing or MPS."""

    strategy: str
    interval: Optional[str] = None
    active_thread_percentage: Optional[int] = None
    pinned_memory_limit: Optional[str] = None


@dataclass(frozen=True)
class ClaimTemplate:
    """One claim template as parse_claim_templates accepted it.

    products: the NVML names (productName) to accept, () for any.
    models: the collection's model keys those names belong to, () for any.
    """

    name: str
    namespaces: Tuple[str, ...]
    device: str = GPU
    min_memory: Optional[str] = None
    products: Tuple[str, ...] = ()
    models: Tuple[str, ...] = ()
    mig_profile: Optional[str] = None
    count: int = 1
    same_pcie_root: bool = False
    sharing: Optional[Sharing] = None
    claim: str = TEMPLATE
    cel: Optional[str] = None

    @property
    def class_name(self):
        """The DeviceClass of this template: kubegpu-<name>."""
        return CLASS_PREFIX + self.name

    @property
    def request_name(self):
        """The name of the claim's one request ("gpu" or "mig"), as containers' resources.claims[].request."""
        return self.device

    def terms(self):
        """Return the selector (selectors.Term tuple) a device must satisfy."""
        terms = [driver_is(DRA_DRIVER), attribute_is("type", self.device)]
        if self.mig_profile:
            terms.append(attribute_is("profile", self.mig_profile))
        if self.products:
            terms.append(attribute_in("productName", self.products))
        if self.min_memory:
            terms.append(capacity_at_least("memory", self.min_memory))
        return tuple(terms)

    def expression(self):
        """Return the CEL expression of the DeviceClass."""
        return cel(self.terms())


def parse_claim_templates(raw):
    """Return a ClaimTemplate per entry of kubegpu_dra.claim_templates; None means none. Raises DraError."""
    if raw is None:
        return []
    if not isinstance(raw, (list, tuple)):
        raise DraError("kubegpu_dra.claim_templates is %r; expected a list of claim templates, each with name and "
                       "namespaces" % (raw,))
    templates, first = [], {}
    for index, entry in enumerate(raw):
        template = _parse(index, entry)
        if template.name in first:
            raise DraError(
                "claim template '%s' (claim_templates[%d]): name already used by claim_templates[%d]; names must be "
                "unique (they name the DeviceClass %s<name>)"
                % (template.name, index, first[template.name], CLASS_PREFIX)
            )
        first[template.name] = index
        templates.append(template)
    return templates


def needed_gates(templates):
    """Return {driver gate: first template needing it}: sharing strategies the driver has behind gates."""
    gates = {}
    for template in templates:
        if template.sharing is not None:
            gates.setdefault(STRATEGY_GATES[template.sharing.strategy], template.name)
    return gates


def _fail(subject, field, value, expected):
    raise DraError("%s: %s is %r; expected %s" % (subject, field, value, expected))


def _parse(index, entry):
    where = "claim_templates[%d]" % index
    if not isinstance(entry, Mapping):
        _fail(where, "the entry", entry, "a mapping with keys " + ", ".join(_KEYS))
    name = entry.get("name")
    if not isinstance(name, str) or len(name) > _NAME_MAX or not _NAME.match(name):
        _fail(where, "name", name, "lowercase letters, digits and '-', starting and ending with a letter or digit, "
                                   "at most %d characters" % _NAME_MAX)
    subject = "claim template '%s'" % name
    _check_keys(subject, None, entry, _KEYS)
    device = entry.get("device", GPU)
    if device not in DEVICES:
        _fail(subject, "device", device, "one of " + ", ".join(DEVICES))
    mig_profile = entry.get("mig_profile")
    if device == GPU and mig_profile is not None:
        raise DraError("%s: mig_profile is set but device is gpu; a MIG profile selects MIG devices (set device: mig, "
                       "or drop mig_profile)" % subject)
    models, products = _parse_products(subject, entry.get("products"))
    if device == MIG:
        mig_profile = _parse_mig_profile(subject, mig_profile, models)
    count = entry.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        _fail(subject, "count", count, "a whole number of devices >= 1")
    same_root = entry.get("same_pcie_root", False)
    if not isinstance(same_root, bool):
        _fail(subject, "same_pcie_root", same_root, "true or false")
    if same_root and count < 2:
        raise DraError("%s: same_pcie_root is true with count %d; it constrains several devices of one claim (set "
                       "count >= 2, or drop same_pcie_root)" % (subject, count))
    claim = entry.get("claim", TEMPLATE)
    if claim not in CLAIMS:
        _fail(subject, "claim", claim, "template (one claim per pod) or shared (one ResourceClaim that pods share)")
    return ClaimTemplate(
        name=name,
        namespaces=_parse_namespaces(subject, entry.get("namespaces")),
        device=device,
        min_memory=_parse_memory(subject, entry.get("min_memory")),
        products=products,
        models=models,
        mig_profile=mig_profile,
        count=count,
        same_pcie_root=same_root,
        sharing=_parse_sharing(subject, entry.get("sharing"), device),
        claim=claim,
        cel=_parse_cel(subject, entry.get("cel")),
    )


def _parse_cel(subject, expression):
    """The user's own CEL condition: only its shape is checked here; the API server compiles it (the module
    validates the DeviceClass with a server-side dry run before writing anything)."""
    if expression is None:
        return None
    if not isinstance(expression, str) or not expression.strip() or len(expression) > _CEL_MAX:
        _fail(subject, "cel", expression, "a CEL expression over device (non-empty, at most %d characters)" % _CEL_MAX)
    return expression.strip()


def _check_keys(subject, field, raw, valid):
    unknown = sorted(str(key) for key in raw if key not in valid)
    if unknown:
        raise DraError("%s: unknown key%s %s%s (valid: %s)" % (
            subject, "s" if len(unknown) > 1 else "", ", ".join(unknown), "" if field is None else " in " + field,
            ", ".join(valid)))


def _parse_namespaces(subject, namespaces):
    if (not isinstance(namespaces, (list, tuple)) or not namespaces
            or not all(isinstance(ns, str) and _NAMESPACE.match(ns) for ns in namespaces)
            or len(set(namespaces)) != len(namespaces)):
        _fail(subject, "namespaces", namespaces, "a non-empty list of distinct namespace names (the claim template "
                                                 "is namespaced: one copy per namespace whose pods use it)")
    return tuple(namespaces)


def _parse_memory(subject, memory):
    if memory is None:
        return None
    amount = parse_quantity(memory) if isinstance(memory, str) else None
    if amount is None or amount <= 0 or not memory.strip()[-1:].isalpha():
        _fail(subject, "min_memory", memory, "a quantity with a unit, such as 40Gi or 80G (units: %s)"
              % ", ".join(SUFFIXES))
    return memory.strip()


def _known_products():
    return ", ".join(model.key for model in MODELS)


def _parse_products(subject, products):
    """Return (model keys, NVML names) for products; each entry a model key, gpu.product label or NVML name."""
    if products is None:
        return (), ()
    if isinstance(products, str):
        products = [products]
    if not isinstance(products, (list, tuple)) or not products:
        _fail(subject, "products", products, "a list of GPU models (%s), gpu.product labels or NVML names"
              % _known_products())
    models = []
    for product in products:
        model = _model(product)
        if model is None:
            raise DraError(
                "%s: products: %r is not a GPU this collection knows; give a model (%s), a %s "
                "label (e.g. NVIDIA-H100-80GB-HBM3) or the productName the DRA driver publishes (e.g. NVIDIA H100 "
                "80GB HBM3)" % (subject, product, _known_products(), PRODUCT_LABEL))
        if model not in models:
            models.append(model)
    names = []
    for model in models:
        names.extend(name for name in nvml_names(model) if name not in names)
    return tuple(model.key for model in models), tuple(names)


def _model(product):
    if not isinstance(product, str) or not product:
        return None
    try:
        return model_for_key(product)
    except UnknownGpuError:
        pass
    try:
        return model_for_product(product)
    except UnknownGpuError:
        return model_for_nvml_name(product)


def _parse_mig_profile(subject, profile, models):
    if profile is None:
        raise DraError("%s: device is mig but mig_profile is missing; give the MIG profile, e.g. 3g.40gb" % subject)
    if not isinstance(profile, str) or not _MIG_PROFILE.match(profile):
        _fail(subject, "mig_profile", profile, "a MIG profile such as 1g.10gb, 3g.40gb or 1g.10gb+me")
    profile = canonical_profile_name(profile)
    candidates = [model_for_key(key) for key in models] if models else [m for m in MODELS if m.mig_capable]
    offering = []
    for model in candidates:
        try:
            catalog = catalog_for(model)
        except LayoutError:
            raise DraError("%s: products includes %s, which is not MIG-capable; device mig needs MIG-capable GPUs"
                           % (subject, model.key))
        if profile in catalog.profile_names():
            offering.append(model.key)
        elif models:
            raise DraError("%s: mig_profile %s does not exist on %s (valid: %s)"
                           % (subject, profile, model.key, ", ".join(catalog.profile_names())))
    if not offering:
        raise DraError("%s: mig_profile %s exists on no GPU this collection knows (e.g. 1g.10gb, 3g.40gb on H100-80GB)"
                       % (subject, profile))
    return profile


def _parse_sharing(subject, sharing, device):
    if sharing is None:
        return None
    if not isinstance(sharing, Mapping):
        _fail(subject, "sharing", sharing, "a mapping with keys " + ", ".join(_SHARING_KEYS))
    _check_keys(subject, "sharing", sharing, _SHARING_KEYS)
    strategy = sharing.get("strategy")
    if strategy not in SHARING_STRATEGIES:
        _fail(subject, "sharing.strategy", strategy, "one of " + ", ".join(SHARING_STRATEGIES))
    interval = sharing.get("interval")
    if interval is not None:
        if strategy != TIME_SLICING:
            raise DraError("%s: sharing.interval is set with strategy %s; an interval is a time-slicing setting"
                           % (subject, strategy))
        if device == MIG:
            raise DraError("%s: sharing.interval is set for MIG devices; the driver time-slices MIG devices with its "
                           "default interval only (drop interval)" % subject)
        if interval not in INTERVALS:
            _fail(subject, "sharing.interval", interval, "one of " + ", ".join(INTERVALS))
    mps = sharing.get("mps")
    if mps is not None and strategy != MPS:
        raise DraError("%s: sharing.mps is set with strategy %s; set strategy: mps, or drop sharing.mps"
                       % (subject, strategy))
    percentage = limit = None
    if mps is not None:
        if not isinstance(mps, Mapping):
            _fail(subject, "sharing.mps", mps, "a mapping with keys " + ", ".join(_MPS_KEYS))
        _check_keys(subject, "sharing.mps", mps, _MPS_KEYS)
        percentage = mps.get("default_active_thread_percentage")
        if percentage is not None and (isinstance(percentage, bool) or not isinstance(percentage, int)
                                       or not 1 <= percentage <= 100):
            _fail(subject, "sharing.mps.default_active_thread_percentage", percentage, "a whole number from 1 to 100")
        limit = mps.get("default_pinned_device_memory_limit")
        if limit is not None and (not isinstance(limit, str) or parse_quantity(limit) is None):
            _fail(subject, "sharing.mps.default_pinned_device_memory_limit", limit, "a quantity such as 10Gi")
    return Sharing(strategy=strategy, interval=interval, active_thread_percentage=percentage,
                   pinned_memory_limit=limit)


def opaque_config(template):
    """Return the driver's opaque parameters for a template's sharing, None without sharing."""
    sharing = template.sharing
    if sharing is None:
        return None
    block = {"strategy": _DRIVER_STRATEGY[sharing.strategy]}
    if sharing.interval is not None:
        block["timeSlicingConfig"] = {"interval": sharing.interval}
    if sharing.strategy == MPS and (sharing.active_thread_percentage is not None or sharing.pinned_memory_limit):
        mps = {}
        if sharing.active_thread_percentage is not None:
            mps["defaultActiveThreadPercentage"] = sharing.active_thread_percentage
        if sharing.pinned_memory_limit:
            mps["defaultPinnedDeviceMemoryLimit"] = sharing.pinned_memory_limit
        block["mpsConfig"] = mps
    kind = "MigDeviceConfig" if template.device == MIG else "GpuConfig"
    return {"apiVersion": CONFIG_API_VERSION, "kind": kind, "sharing": block}


def _labels(template):
    return dict(MANAGED_BY, **{CLAIM_TEMPLATE_LABEL: template.name})


def device_class(template, api_version=API_VERSION):
    """Return the DeviceClass kubegpu-<name> of a template."""
    spec = {"selectors": [{"cel": {"expression": template.expression()}}]}
    if template.cel:
        # A selector of its own: every selector of a class must match, and the API server reports its errors apart.
        spec["selectors"].append({"cel": {"expression": template.cel}})
    config = opaque_config(template)
    if config is not None:
        spec["config"] = [{"opaque": {"driver": DRA_DRIVER, "parameters": config}}]
    return {"apiVersion": api_version, "kind": "DeviceClass",
            "metadata": {"name": template.class_name, "labels": _labels(template)}, "spec": spec}


def claim_spec(template, api_version=API_VERSION):
    """Return the ResourceClaim spec a template's claims carry."""
    request = {"deviceClassName": template.class_name, "allocationMode": "ExactCount", "count": template.count}
    if api_version == V1BETA1:
        request["name"] = template.request_name
    else:
        request = {"name": template.request_name, "exactly": request}
    devices = {"requests": [request]}
    if template.same_pcie_root:
        devices["constraints"] = [{"requests": [template.request_name], "matchAttribute": PCIE_ROOT}]
    return {"devices": devices}


def claim_objects(template, api_version=API_VERSION):
    """Return the ResourceClaimTemplate (claim: template) or ResourceClaim (claim: shared) per namespace."""
    objects = []
    for namespace in template.namespaces:
        metadata = {"name": template.name, "namespace": namespace, "labels": _labels(template)}
        if template.claim == SHARED:
            objects.append({"apiVersion": api_version, "kind": "ResourceClaim", "metadata": metadata,
                            "spec": claim_spec(template, api_version)})
        else:
            objects.append({"apiVersion": api_version, "kind": "ResourceClaimTemplate", "metadata": metadata,
                            "spec": {"metadata": {"labels": _labels(template)},
                                     "spec": claim_spec(template, api_version)}})
    return objects


def render_objects(templates, api_version=API_VERSION):
    """Return {"objects": [DeviceClasses, then claims], "warnings": [...]} for parsed templates.

    api_version is the resource.k8s.io version the cluster serves (platform.best_version).
    """
    if api_version not in API_VERSIONS:
        raise DraError("claim templates are written as %s; the cluster serves %r (see the DRA platform check)"
                       % (" or ".join(API_VERSIONS), api_version))
    classes, claims, warnings = [], [], []
    for template in templates:
        classes.append(device_class(template, api_version))
        claims.extend(claim_objects(template, api_version))
        if template.sharing is not None and template.claim == TEMPLATE:
            warnings.append(
                "claim template '%s' shares its devices (%s) but gives every pod a claim of its own, so only the "
                "containers of one pod share them; set claim: shared for pods to share one claim"
                % (template.name, template.sharing.strategy))
    return {"objects": classes + claims, "warnings": warnings}
