# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MIG catalog: profiles, placement rules and named layouts per MIG-capable GPU model.

This is the one place that knows MIG facts. Sources: reference gpu-operator.md ("MIG"); the
GPU Operator's default-mig-parted-config as NVIDIA/mig-parted ships it
(deployments/systemd/config-default.yaml, read 2026-11 at bd7160f4: profile names, the most
of each per GPU, device filters and all-balanced per model); NVIDIA's MIG User Guide
("Supported GPUs", "Supported MIG Profiles", "Deployment Considerations": which GPUs have
MIG, their instance counts and minimum drivers). Validation and rendering live in mig_layout.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from dataclasses import dataclass
from typing import Tuple

import re

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import GPU_RESOURCE, MIG_CAPABLE_LABEL, MIG_RESOURCE_PREFIX
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import (
    GpuModel,
    model_for_key,
)

ALL_DISABLED = "all-disabled"
ALL_ENABLED = "all-enabled"
ALL_BALANCED = "all-balanced"
_ALL_PREFIX = "all-"

SINGLE = "single"
MIXED = "mixed"
STRATEGIES = (SINGLE, MIXED)

# Label values and resource names cannot hold '+': the device plugin and GFD write every '+' of
# a profile as '.' ("1g.10gb+me" -> nvidia.com/mig-1g.10gb.me, "1g.24gb+me.all" ->
# nvidia.com/mig-1g.24gb.me.all, "2g.48gb+gfx" -> nvidia.com/mig-2g.48gb.gfx; k8s-device-plugin
# replaces "+" with "." in the resource name) and the operator names configs the same way
# (all-1g.10gb.me). "-me" (RTX PRO 6000: no media engines) is a name of its own, unchanged.
_ME_CANONICAL = "+me"
_ME_IN_NAMES = ".me"
_PLUS = "+"
_SUFFIXES = ("me.all", "me", "gfx")
# <compute>g.<memory>gb, then '+' or '.' and one of the suffixes mig-parted knows.
_SUFFIXED = re.compile(r"^(?P<base>[0-9]+g\.[0-9]+gb)[+.](?P<suffix>%s)$" % "|".join(re.escape(x) for x in _SUFFIXES))


class LayoutError(ValueError):
    """A MIG layout that cannot be applied; the message names the value and what is valid."""


@dataclass(frozen=True)
class MigProfile:
    """One MIG profile of one GPU model.

    name: mig-parted's name ("3g.40gb", "1g.10gb+me").
    compute_slices: the "g" of the name.
    memory_slices: memory slices one instance occupies.
    max_count: most instances of this profile on one GPU.
    starts: memory-slice positions an instance may start at.
    """

    name: str
    compute_slices: int
    memory_slices: int
    max_count: int
    starts: Tuple[int, ...]


@dataclass(frozen=True)
class MigCatalog:
    """The MIG facts of one GPU model.

    profiles are in the order mig-parted configs list them (smallest first).
    balanced is the operator's all-balanced geometry for this model.
    """

    model: GpuModel
    memory_slices: int
    compute_slices: int
    profiles: Tuple[MigProfile, ...]
    balanced: Tuple[Tuple[str, int], ...]

    def profile_names(self):
        """Return the profile names, in catalog order."""
        return tuple(profile.name for profile in self.profiles)

    def profile(self, name):
        """Return the MigProfile called name ('+me' or '.me' spelling).

        Raises LayoutError listing this model's profiles when there is none.
        """
        wanted = canonical_profile_name(name)
        for profile in self.profiles:
            if profile.name == wanted:
                return profile
        raise LayoutError(
            "unknown MIG profile %r for %s (valid: %s)"
            % (name, self.model.product, ", ".join(self.profile_names()))
        )

    def named_layouts(self):
        """Return {name: (mig_enabled, ((profile, count), ...))} for every named layout.

        Names are the ones the GPU Operator generates per node: all-disabled, all-enabled,
        all-balanced and all-<profile> (the most instances of that profile).
        """
        layouts = {
            ALL_DISABLED: (False, ()),
            ALL_ENABLED: (True, ()),
            ALL_BALANCED: (True, self.balanced),
        }
        for profile in self.profiles:
            layouts[named_layout_for(profile.name)] = (True, ((profile.name, profile.max_count),))
        return layouts

    def named_layout(self, name):
        """Return (mig_enabled, ((profile, count), ...)) for a named layout.

        all-<profile> accepts either '+me' or '.me'. Raises LayoutError listing the valid
        names when name is none of them.
        """
        layouts = self.named_layouts()
        layout = None
        if isinstance(name, str) and name.startswith(_ALL_PREFIX):
            layout = layouts.get(_ALL_PREFIX + label_safe_profile_name(name[len(_ALL_PREFIX):]))
        if layout is None:
            layout = layouts.get(name)
        if layout is None:
            raise LayoutError(
                "unknown named layout %r for %s (valid: %s)"
                % (name, self.model.product, ", ".join(layouts))
            )
        return layout


def canonical_profile_name(name):
    """Return a profile name as mig-parted spells it: its +me / +gfx / +me.all suffix with '+'.

    "1g.10gb.me" -> "1g.10gb+me", "1g.24gb.me.all" -> "1g.24gb+me.all", "2g.48gb.gfx" ->
    "2g.48gb+gfx"; names already spelt with '+', names without a suffix and "-me" names come
    back unchanged.
    """
    match = _SUFFIXED.match(name)
    if match is None:
        return name
    return match.group("base") + _PLUS + match.group("suffix")


def label_safe_profile_name(name):
    """Return a profile name as GFD, the device plugin and the operator write it: every '+' as '.'."""
    return canonical_profile_name(name).replace(_PLUS, ".")


def named_layout_for(profile_name):
    """Return the all-<profile> layout name the operator uses ("all-1g.10gb.me", "all-1g.24gb.gfx")."""
    return _ALL_PREFIX + label_safe_profile_name(profile_name)


def resource_name(profile_name, strategy):
    """Return the extended resource a MIG device of this profile is advertised as.

    mixed: nvidia.com/mig-<profile> with every '+' as '.'; single: nvidia.com/gpu.
    Raises LayoutError for any other strategy.
    """
    if strategy == MIXED:
        return MIG_RESOURCE_PREFIX + label_safe_profile_name(profile_name)
    if strategy == SINGLE:
        return GPU_RESOURCE
    raise LayoutError(
        "mig strategy %r is not one that advertises MIG devices (valid: %s)"
        % (strategy, ", ".join(STRATEGIES))
    )


def catalog_for(model):
    """Return the MigCatalog of a GpuModel.

    Raises LayoutError when there is none: for a model that is not MIG-capable (as the table,
    or GFD's nvidia.com/mig.capable for a model read from labels, says), and for a model the
    catalog does not know, naming the models it knows; time-slicing, MPS and none need no
    catalog.
    """
    catalog = _CATALOGS.get(model.key) if getattr(model, "catalogued", True) else None
    if catalog is not None:
        return catalog
    if not model.mig_capable:
        source = "" if getattr(model, "catalogued", True) else \
            " (GPU Feature Discovery: %s is not true)" % MIG_CAPABLE_LABEL
        raise LayoutError(
            "%s is not MIG-capable%s; only %s applies (share it with strategy time-slicing or mps "
            "instead; MIG-capable models: %s)"
            % (model.product, source, ALL_DISABLED, ", ".join(known_mig_products()))
        )
    raise LayoutError(
        "%s is not in the MIG catalog, so no MIG layout can be checked for it (known MIG models: %s); "
        "share these nodes with strategy time-slicing, mps or none, or add the model to "
        "plugins/module_utils/planning/mig_catalog.py"
        % (model.product, ", ".join(known_mig_products()))
    )


def known_mig_products():
    """Return the gpu.product of every model the catalog knows, in catalog order (one per model)."""
    return [catalog.model.product for catalog in _CATALOG_LIST]


# Placement on the 7-compute, 8-memory-slice GPUs (MIG User Guide via the reference):
# an instance starts only at these memory slices, which also keeps the compute slices in
# use at 7 or fewer. The '+me' variant takes the media engines but places like its 1g
# profile; only one instance fits because each GPU has one set of media engines.
_1G_STARTS = (0, 1, 2, 3, 4, 5, 6)


def _seven_slice(key, one, one_double, two, three, four, seven):
    """Catalog for a GPU with 7 compute and 8 memory slices; all-balanced is 1g x2, 2g, 3g."""
    return MigCatalog(
        model=model_for_key(key),
        memory_slices=8,
        compute_slices=7,
        profiles=(
            MigProfile(one, 1, 1, 7, _1G_STARTS),
            MigProfile(one + _ME_CANONICAL, 1, 1, 1, _1G_STARTS),
            MigProfile(one_double, 1, 2, 4, (0, 2, 4, 6)),
            MigProfile(two, 2, 2, 3, (0, 2, 4)),
            MigProfile(three, 3, 4, 2, (0, 4)),
            MigProfile(four, 4, 4, 1, (0,)),
            MigProfile(seven, 7, 8, 1, (0,)),
        ),
        balanced=((one, 2), (two, 1), (three, 1)),
    )


# A30 has 4 compute and 4 memory slices and neither a 3g nor a 7g profile.
_A30 = MigCatalog(
    model=model_for_key("A30-24GB"),
    memory_slices=4,
    compute_slices=4,
    profiles=(
        MigProfile("1g.6gb", 1, 1, 4, (0, 1, 2, 3)),
        MigProfile("1g.6gb+me", 1, 1, 1, (0, 1, 2, 3)),
        MigProfile("2g.12gb", 2, 2, 2, (0, 2)),
        MigProfile("2g.12gb+me", 2, 2, 1, (0, 2)),
        MigProfile("4g.24gb", 4, 4, 1, (0,)),
    ),
    balanced=(("1g.6gb", 2), ("2g.12gb", 1)),
)

# RTX PRO 6000 Blackwell: 4 compute and 4 memory slices, at most 4 instances (MIG User Guide,
# "Supported GPUs"). Profile names and the most of each per GPU: the operator's config
# (all-1g.24gb.gfx, all-1g.24gb.me.all, all-1g.24gb-me, all-2g.48gb*, all-4g.96gb*; all-balanced
# 1g.24gb x2 + 2g.48gb). "+gfx" adds graphics, "+me.all" takes all media engines (so one per GPU),
# "-me" has none. Placement is taken to be A30's 4-slice rule (1g anywhere, 2g at 0 or 2, 4g at
# 0); the guide's figure was not read slice by slice.
_RTX_PRO_6000 = MigCatalog(
    model=model_for_key("RTX-PRO-6000-96GB"),
    memory_slices=4,
    compute_slices=4,
    profiles=(
        MigProfile("1g.24gb", 1, 1, 4, (0, 1, 2, 3)),
        MigProfile("1g.24gb+gfx", 1, 1, 4, (0, 1, 2, 3)),
        MigProfile("1g.24gb-me", 1, 1, 4, (0, 1, 2, 3)),
        MigProfile("1g.24gb+me.all", 1, 1, 1, (0, 1, 2, 3)),
        MigProfile("2g.48gb", 2, 2, 2, (0, 2)),
        MigProfile("2g.48gb+gfx", 2, 2, 2, (0, 2)),
        MigProfile("2g.48gb-me", 2, 2, 2, (0, 2)),
        MigProfile("2g.48gb+me.all", 2, 2, 1, (0, 2)),
        MigProfile("4g.96gb", 4, 4, 1, (0,)),
        MigProfile("4g.96gb+gfx", 4, 4, 1, (0,)),
    ),
    balanced=(("1g.24gb", 2), ("2g.48gb", 1)),
)

# Driver notes: A100-40GB 1g.10gb needs R525+, and 4g+3g on one GPU needs R510+; H20 needs
# R535+, B300 R580+, GB300 R595+ (MIG User Guide, "Deployment Considerations").
_A100_40GB_NAMES = ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
_80GB_NAMES = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
_94GB_NAMES = ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb")
_96GB_NAMES = ("1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb")
_141GB_NAMES = ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")
_CATALOG_LIST = (
    _A30,
    # key, then 1g, 1g on 2 memory slices, 2g, 3g, 4g, 7g. Models that share a geometry share
    # the operator config's device-filter list and all-balanced entry.
    _seven_slice("A100-40GB", *_A100_40GB_NAMES),
    _seven_slice("A800-40GB", *_A100_40GB_NAMES),
    _seven_slice("A100-80GB", *_80GB_NAMES),
    _seven_slice("A800-80GB", *_80GB_NAMES),
    _seven_slice("H100-80GB", *_80GB_NAMES),
    _seven_slice("H800-80GB", *_80GB_NAMES),
    _seven_slice("H100-94GB", *_94GB_NAMES),
    _seven_slice("H800-94GB", *_94GB_NAMES),
    _seven_slice("H100-96GB", *_96GB_NAMES),
    _seven_slice("H20-96GB", *_96GB_NAMES),
    _seven_slice("H200-141GB", *_141GB_NAMES),
    # GH200 144G and GB200 rows come from the operator ConfigMap, which shares the
    # all-1g.18gb.me / all-1g.23gb.me configs with H200 / B200.
    _seven_slice("GH200-144GB", "1g.18gb", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb"),
    _seven_slice("B200-180GB", "1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
    _seven_slice("GB200-186GB", "1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"),
    # B300 and GB300: the operator config's all-1g.34gb(.me) x7, all-1g.67gb x4, all-2g.67gb x3,
    # all-3g.135gb x2, all-4g.135gb, all-7g.269gb and all-balanced 1g.34gb x2 + 2g.67gb + 3g.135gb
    # (device filter 0x3182); GB300 the same with 1g.35gb, 1g.70gb, 2g.70gb, 3g.139gb, 4g.139gb,
    # 7g.278gb (0x31C2; its all-1g.35gb entry is the 7-instance one).
    _seven_slice("B300-288GB", "1g.34gb", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb"),
    _seven_slice("GB300-288GB", "1g.35gb", "1g.70gb", "2g.70gb", "3g.139gb", "4g.139gb", "7g.278gb"),
    _RTX_PRO_6000,
)
_CATALOGS = dict((catalog.model.key, catalog) for catalog in _CATALOG_LIST)


# Memory of a MIG device as GPU Feature Discovery publishes it (nvidia.com/mig-<profile>.memory, MiB), for
# the profiles seen on real nodes (reference gpu-node-labels.md, "MIG capacity and labels"). '+me' devices
# have their base profile's memory.
_SEEN_MEMORY_MIB = {
    ("H100-80GB", "1g.10gb"): 9984,
    ("H100-80GB", "2g.20gb"): 20096,
    ("H100-80GB", "3g.40gb"): 40320,
    ("A100-40GB", "1g.5gb"): 4864,
    ("A100-40GB", "2g.10gb"): 9984,
    ("A100-40GB", "3g.20gb"): 20096,
    ("A100-40GB", "7g.40gb"): 40192,
}
_PROFILE_MEMORY = re.compile(r"^[0-9]+g\.(?P<gb>[0-9]+)gb")


def profile_memory_mib(model, profile_name):
    """Return the memory (MiB) of one MIG device of this profile on this GpuModel.

    The figure GFD publishes where one was seen; otherwise the gigabytes of the profile's name read
    as 10^9 bytes, a lower bound: every seen device has 2-5% more (3g.40gb: 40320 MiB, 42.3 GB).
    Raises LayoutError for a profile the model does not have.
    """
    profile = catalog_for(model).profile(profile_name)
    base = profile.name.split(_PLUS, 1)[0]
    seen = _SEEN_MEMORY_MIB.get((model.key, base))
    if seen is not None:
        return seen
    return int(int(_PROFILE_MEMORY.match(base).group("gb")) * 10 ** 9 // 2 ** 20)
