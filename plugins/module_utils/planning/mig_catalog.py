# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MIG catalog: profiles, placement rules and named layouts per MIG-capable GPU model.

This is the one place that knows MIG facts (reference gpu-operator.md, "MIG"; the
operator's default-mig-parted-config). Validation and rendering live in mig_layout.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from dataclasses import dataclass
from typing import Tuple

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
FULL_GPU_RESOURCE = "nvidia.com/gpu"
_MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

# Label values and resource names cannot hold '+', so the operator names the config for
# "1g.10gb+me" "all-1g.10gb.me" and the device plugin advertises "nvidia.com/mig-1g.10gb.me".
_ME_CANONICAL = "+me"
_ME_IN_NAMES = ".me"


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
        layout = layouts.get(name.replace(_ME_CANONICAL, _ME_IN_NAMES))
        if layout is None:
            raise LayoutError(
                "unknown named layout %r for %s (valid: %s)"
                % (name, self.model.product, ", ".join(layouts))
            )
        return layout


def canonical_profile_name(name):
    """Return name with a trailing '.me' spelt '+me', as mig-parted expects."""
    if name.endswith(_ME_IN_NAMES):
        return name[:-len(_ME_IN_NAMES)] + _ME_CANONICAL
    return name


def named_layout_for(profile_name):
    """Return the all-<profile> layout name the operator uses ("all-1g.10gb.me")."""
    return _ALL_PREFIX + profile_name.replace(_ME_CANONICAL, _ME_IN_NAMES)


def resource_name(profile_name, strategy):
    """Return the extended resource a MIG device of this profile is advertised as.

    mixed: nvidia.com/mig-<profile> with '+me' as '.me'; single: nvidia.com/gpu.
    Raises LayoutError for any other strategy.
    """
    if strategy == MIXED:
        return _MIG_RESOURCE_PREFIX + profile_name.replace(_ME_CANONICAL, _ME_IN_NAMES)
    if strategy == SINGLE:
        return FULL_GPU_RESOURCE
    raise LayoutError(
        "mig strategy %r is not one that advertises MIG devices (valid: %s)"
        % (strategy, ", ".join(STRATEGIES))
    )


def catalog_for(model):
    """Return the MigCatalog of a GpuModel.

    Raises LayoutError when the model is not MIG-capable, naming the models that are.
    """
    catalog = _CATALOGS.get(model.key)
    if catalog is None:
        raise LayoutError(
            "%s is not MIG-capable (nvidia.com/mig.capable=false); only %s applies "
            "(MIG-capable: %s)"
            % (model.product, ALL_DISABLED, ", ".join(_CATALOGS))
        )
    return catalog


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

# Driver notes: A100-40GB 1g.10gb needs R525+, and 4g+3g on one GPU needs R510+.
_CATALOG_LIST = (
    _A30,
    # key, 1g, 1g on 2 memory slices, 2g, 3g, 4g, 7g
    _seven_slice("A100-40GB", "1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    _seven_slice("A100-80GB", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    _seven_slice("H100-80GB", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    _seven_slice("H100-94GB", "1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    _seven_slice("H100-96GB", "1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
    _seven_slice("H200-141GB", "1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    # GH200 144G and GB200 rows come from the operator ConfigMap, which shares the
    # all-1g.18gb.me / all-1g.23gb.me configs with H200 / B200.
    _seven_slice("GH200-144GB", "1g.18gb", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb"),
    _seven_slice("B200-180GB", "1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
    _seven_slice("GB200-186GB", "1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"),
)
_CATALOGS = dict((catalog.model.key, catalog) for catalog in _CATALOG_LIST)
