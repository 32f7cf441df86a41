# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG layouts: validate what a pool asks for, render mig-parted configs, predict resources.

A layout describes the MIG geometry of every GPU on a node of one GPU model. Three input
shapes are accepted:

- a named layout: "all-disabled", "all-enabled" (MIG on, no devices), "all-balanced" or
  "all-<profile>" (the most instances of that profile), as the GPU Operator names them;
- a mapping {profile: count} applied to every GPU, e.g. {"3g.40gb": 1, "2g.20gb": 2};
  {} means MIG on with no devices;
- a list of entries, each for some GPUs by index:
  [{"devices": [0, 1] | "all", "profiles": {profile: count}, "mig_enabled": true}]
  where profiles defaults to {} and mig_enabled to true; mig_enabled false takes no
  profiles. Entries must not share a GPU, and "all" only stands alone.

Profiles may be spelt with '+me' (mig-parted) or '.me' (resource names). Errors are
LayoutError; messages name the field and value, and callers prefix the pool name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Tuple, Union

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import GpuModel
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import (
    ALL_DISABLED,
    MIXED,
    SINGLE,
    STRATEGIES,
    LayoutError,
    catalog_for,
    resource_name,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import GPU_RESOURCE, MIG_CONFIG_LABEL

ALL_DEVICES = "all"
_ENTRY_KEYS = ("devices", "mig_enabled", "profiles")
_WHOLE_GPU = "whole GPUs (MIG off)"
# The config name becomes the value of the node label nvidia.com/mig.config.
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


@dataclass(frozen=True)
class LayoutEntry:
    """The geometry of some GPUs of a node; becomes one mig-parted config entry.

    devices: "all" or a sorted tuple of GPU indices.
    profiles: ((profile, count), ...) in catalog order; empty when MIG is off, or on
      without devices.
    """

    devices: Union[str, Tuple[int, ...]]
    mig_enabled: bool
    profiles: Tuple[Tuple[str, int], ...]


@dataclass(frozen=True)
class MigLayout:
    """A layout that validate_layout accepted for one GPU model."""

    model: GpuModel
    entries: Tuple[LayoutEntry, ...]


def validate_layout(model, layout):
    """Return the MigLayout for a named layout, {profile: count} or list of entries.

    Every GPU's profiles are known to the model, within their per-GPU maximum, within the
    GPU's memory slices, and placeable at their allowed start slices. A MigLayout already
    validated for the same model is returned as is. Raises LayoutError otherwise.
    """
    if isinstance(layout, MigLayout):
        if layout.model != model:
            raise LayoutError(
                "layout was validated for %s, not %s" % (layout.model.product, model.product)
            )
        return layout
    if isinstance(layout, str):
        return MigLayout(model, (_named_entry(model, layout),))
    if isinstance(layout, Mapping):
        subject = "layout " + _format(layout)
        return MigLayout(model, (LayoutEntry(ALL_DEVICES, True, _checked_profiles(model, layout, subject)),))
    if isinstance(layout, (list, tuple)):
        return MigLayout(model, _checked_entries(model, layout))
    raise LayoutError(
        "layout is %r, expected a named layout (e.g. all-balanced), a mapping "
        "{profile: count} or a list of {devices, profiles} entries" % (layout,)
    )


def required_strategy(layout):
    """Return the mig.strategy a node with this MigLayout needs: "single" or "mixed".

    single when every GPU carries one and the same profile, or all have MIG off; GPUs with
    MIG on and no devices do not count (resources_for refuses them). mixed otherwise.
    """
    return SINGLE if len(_device_kinds(layout)) <= 1 else MIXED


def resources_for(model, layout, gpus_per_node, strategy):
    """Return {extended resource: count} a node advertises under this layout and strategy.

    layout is anything validate_layout accepts. Mixed: MIG devices as
    nvidia.com/mig-<profile>, MIG-off GPUs as nvidia.com/gpu; single: everything as
    nvidia.com/gpu. Raises LayoutError when the device plugin would refuse the node: a GPU
    with MIG on and no devices, more than one kind of device under single, or entries that
    do not match gpus_per_node.
    """
    layout = validate_layout(model, layout)
    if strategy not in STRATEGIES:
        raise LayoutError("mig strategy is %r, expected one of %s" % (strategy, ", ".join(STRATEGIES)))
    gpus = _per_gpu(layout, gpus_per_node)
    _check_every_mig_gpu_has_devices(gpus)
    if strategy == SINGLE and required_strategy(layout) != SINGLE:
        raise LayoutError(
            "mig strategy single advertises one kind of device per node, layout gives %s; "
            "use mig strategy mixed, or one profile on every GPU" % ", ".join(_device_kinds(layout))
        )
    resources = {}
    for entry in gpus:
        if not entry.mig_enabled:
            resources[GPU_RESOURCE] = resources.get(GPU_RESOURCE, 0) + 1
        for name, count in entry.profiles:
            resource = resource_name(name, strategy)
            resources[resource] = resources.get(resource, 0) + count
    return resources


def render_mig_parted_config(configs, device_filter=False):
    """Return the mig-parted config document for {config name: MigLayout}.

    {"version": "v1", "mig-configs": {name: [{"devices": "all" | [indices],
    "mig-enabled": bool, "mig-devices": {profile: count}}]}}, with "mig-devices" only when
    MIG is on and, when device_filter is true, "device-filter" from the model's PCI ids.
    Raises LayoutError for a name that cannot be a label value or a value that is not a
    MigLayout.
    """
    rendered = {}
    for name, layout in configs.items():
        if not isinstance(name, str) or not _LABEL_VALUE.match(name):
            raise LayoutError(
                "mig config name %r cannot be a value of label %s: expected "
                "1-63 of A-Z a-z 0-9 - _ . starting and ending with a letter or digit" % (name, MIG_CONFIG_LABEL)
            )
        if not isinstance(layout, MigLayout):
            raise LayoutError(
                "mig config %r is %r, expected a layout returned by validate_layout" % (name, layout)
            )
        rendered[name] = [_render_entry(layout.model, entry, device_filter) for entry in layout.entries]
    return {"version": "v1", "mig-configs": rendered}


def _render_entry(model, entry, device_filter):
    """Return one mig-parted entry, keys in the order mig-parted's own configs use."""
    rendered = {}
    if device_filter:
        rendered["device-filter"] = list(model.device_filter)
    rendered["devices"] = entry.devices if entry.devices == ALL_DEVICES else list(entry.devices)
    rendered["mig-enabled"] = entry.mig_enabled
    if entry.mig_enabled:
        rendered["mig-devices"] = dict(entry.profiles)
    return rendered


def _named_entry(model, name):
    """Return the LayoutEntry of a named layout; all-disabled also fits non-MIG models."""
    if name == ALL_DISABLED:
        return LayoutEntry(ALL_DEVICES, False, ())
    try:
        mig_enabled, profiles = catalog_for(model).named_layout(name)
    except LayoutError as err:
        raise LayoutError("layout %r: %s" % (name, err)) from None
    return LayoutEntry(ALL_DEVICES, mig_enabled, profiles)


def _checked_entries(model, layout):
    """Return the LayoutEntry tuple of a list layout, each GPU in at most one entry."""
    if not layout:
        raise LayoutError("layout is an empty list, expected at least one {devices, profiles} entry")
    entries = tuple(_checked_entry(model, "layout[%d]" % index, item) for index, item in enumerate(layout))
    if len(entries) == 1:
        return entries
    if any(entry.devices == ALL_DEVICES for entry in entries):
        raise LayoutError(
            "layout has %d entries and one has devices 'all'; give every entry its own GPU "
            "indices, or use one entry" % len(entries)
        )
    owner = {}
    for index, entry in enumerate(entries):
        for device in entry.devices:
            if device in owner:
                raise LayoutError(
                    "layout[%d].devices lists GPU %d, already in layout[%d].devices; each GPU "
                    "belongs to one entry" % (index, device, owner[device])
                )
            owner[device] = index
    return entries


def _checked_entry(model, field, item):
    """Return the LayoutEntry of one list item; field names it in messages."""
    if not isinstance(item, Mapping):
        raise LayoutError("%s is %r, expected a mapping with keys %s" % (field, item, ", ".join(_ENTRY_KEYS)))
    unknown = sorted(str(key) for key in item if key not in _ENTRY_KEYS)
    if unknown:
        raise LayoutError("%s has unknown keys %s (valid: %s)" % (field, ", ".join(unknown), ", ".join(_ENTRY_KEYS)))
    devices = _checked_devices(field + ".devices", item.get("devices"))
    mig_enabled = item.get("mig_enabled", True)
    if not isinstance(mig_enabled, bool):
        raise LayoutError("%s.mig_enabled is %r, expected true or false" % (field, mig_enabled))
    profiles = item.get("profiles", {})
    if not isinstance(profiles, Mapping):
        raise LayoutError("%s.profiles is %r, expected a mapping {profile: count}" % (field, profiles))
    if not mig_enabled:
        if profiles:
            raise LayoutError(
                "%s.profiles is %s but mig_enabled is false; MIG devices need MIG on "
                "(drop profiles or set mig_enabled: true)" % (field, _format(profiles))
            )
        return LayoutEntry(devices, False, ())
    subject = "%s.profiles %s" % (field, _format(profiles))
    return LayoutEntry(devices, True, _checked_profiles(model, profiles, subject))


def _checked_devices(field, devices):
    """Return "all" or the sorted tuple of distinct GPU indices."""
    if devices == ALL_DEVICES:
        return ALL_DEVICES
    if (
        isinstance(devices, (list, tuple))
        and devices
        and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in devices)
        and len(set(devices)) == len(devices)
    ):
        return tuple(sorted(devices))
    raise LayoutError(
        "%s is %r, expected 'all' or a non-empty list of distinct GPU indices (0, 1, ...)" % (field, devices)
    )


def _checked_profiles(model, profiles, subject):
    """Return ((profile, count), ...) in catalog order for one GPU, or raise LayoutError.

    subject ("layout {3g.40gb: 3}") starts every message.
    """
    try:
        catalog = catalog_for(model)
        counts = dict((catalog.profile(str(name)), count) for name, count in profiles.items())
    except LayoutError as err:
        raise LayoutError("%s: %s" % (subject, err)) from None
    if len(counts) != len(profiles):
        raise LayoutError("%s names a profile twice ('+me' and '.me' are the same profile)" % subject)
    for profile, count in counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise LayoutError(
                "%s: count of %s is %r, expected a whole number from 1 to %d (leave the profile "
                "out for none)" % (subject, profile.name, count, profile.max_count)
            )
    used = sum(profile.memory_slices * count for profile, count in counts.items())
    if used > catalog.memory_slices:
        raise LayoutError(
            "%s needs %d memory slices, %s has %d (valid: %s)"
            % (subject, used, model.product, catalog.memory_slices, _what_fits(catalog, counts))
        )
    for profile, count in counts.items():
        if count > profile.max_count:
            raise LayoutError(
                "%s asks for %d x %s, %s takes at most %d (valid: %s)"
                % (subject, count, profile.name, model.product, profile.max_count, _what_fits(catalog, counts))
            )
    if not _places(counts):
        starts = "; ".join(
            "%s at %s" % (profile.name, ", ".join(str(start) for start in profile.starts)) for profile in counts
        )
        raise LayoutError(
            "%s cannot be placed on %s: the instances overlap at every combination of their "
            "allowed start memory slices (%s) (valid: %s)"
            % (subject, model.product, starts, _what_fits(catalog, counts))
        )
    return tuple((profile.name, counts[profile]) for profile in catalog.profiles if profile in counts)


def _places(counts):
    """True when every instance gets one of its start slices without sharing a memory slice.

    The catalog keeps every start within the GPU's memory slices, so only overlap is checked.
    Answers are cached: messages try many near layouts, and layouts repeat across pools.
    """
    return _places_cached(tuple(sorted(counts.items(), key=lambda item: item[0].name)))


@functools.lru_cache(maxsize=4096)
def _places_cached(counts):
    """_places for counts as a sorted tuple of (MigProfile, count)."""
    # Largest first: they have the fewest starts, so dead ends show up early.
    instances = sorted(
        (profile for profile, count in counts for dummy in range(count)),
        key=lambda profile: -profile.memory_slices,
    )
    return _place(instances, 0)


def _place(instances, used):
    """Backtracking search over start slices; used is a bitmask of taken memory slices."""
    if not instances:
        return True
    profile = instances[0]
    for start in profile.starts:
        mask = ((1 << profile.memory_slices) - 1) << start
        if not used & mask and _place(instances[1:], used | mask):
            return True
    return False


def _what_fits(catalog, counts):
    """Describe layouts near counts that are valid on their own: what follows "valid:" in messages.

    One profile: "up to N x <profile>". Several: up to two layouts with no more of each profile
    than asked, e.g. "{3g.40gb: 1, 1g.10gb: 1} or {3g.40gb: 2}": the first keeps as many of the
    asked profiles as fit (one of each, smallest first), then adds instances in the order asked; the second fills the GPU
    largest profile first. Each is built by adding one instance at a time only while the whole
    still passes the per-profile maxima and the placement search, so each is valid by itself.
    """
    profiles = list(counts)
    wanted = dict((profile, min(counts[profile], profile.max_count)) for profile in profiles)
    if len(profiles) == 1:
        only = profiles[0]
        return "up to %d x %s" % (_grow(catalog, {}, [only], wanted)[only], only.name)
    # One of each, smallest first: small instances leave the most room for the other kinds.
    ones = dict((profile, 1) for profile in profiles)
    kinds = _grow(catalog, {}, sorted(profiles, key=lambda profile: profile.memory_slices), ones)
    kinds = _grow(catalog, kinds, profiles, wanted)
    fullest = _grow(catalog, {}, sorted(profiles, key=lambda profile: -profile.memory_slices), wanted)
    chosen = [kinds] if fullest == kinds else [kinds, fullest]
    return " or ".join(_format_counts(_in_order(profiles, choice)) for choice in chosen)


def _grow(catalog, counts, order, wanted):
    """Add instances of each profile in order, up to wanted (within its maximum), while the layout still places."""
    counts = dict(counts)
    used = _slices(counts)
    for profile in order:
        while (counts.get(profile, 0) < wanted[profile]
               and used + profile.memory_slices <= catalog.memory_slices
               and _places(_plus(counts, profile, counts.get(profile, 0) + 1))):
            counts[profile] = counts.get(profile, 0) + 1
            used += profile.memory_slices
    return counts


def _slices(counts):
    """Memory slices the instances of counts take together."""
    return sum(profile.memory_slices * count for profile, count in counts.items())


def _plus(counts, profile, count):
    """A copy of counts with profile at count."""
    merged = dict(counts)
    merged[profile] = count
    return merged


def _in_order(profiles, counts):
    """counts with its keys in the order the user named the profiles."""
    return dict((profile, counts[profile]) for profile in profiles if counts.get(profile))


def _per_gpu(layout, gpus_per_node):
    """Return the LayoutEntry of each GPU index on a node with gpus_per_node GPUs."""
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise LayoutError("gpus_per_node is %r, expected a whole number >= 1" % (gpus_per_node,))
    if layout.entries[0].devices == ALL_DEVICES:
        return [layout.entries[0]] * gpus_per_node
    by_gpu = {}
    for index, entry in enumerate(layout.entries):
        for device in entry.devices:
            if device >= gpus_per_node:
                raise LayoutError(
                    "layout[%d].devices lists GPU %d, the node has %d GPUs (valid: 0 to %d)"
                    % (index, device, gpus_per_node, gpus_per_node - 1)
                )
            by_gpu[device] = entry
    missing = [device for device in range(gpus_per_node) if device not in by_gpu]
    if missing:
        # mig-parted leaves GPUs no entry matches as they are, so what they advertise is unknown.
        raise LayoutError(
            "layout has no entry for %s of the node's %d; add one (e.g. mig_enabled: false)"
            % (_gpus(missing), gpus_per_node)
        )
    return [by_gpu[device] for device in range(gpus_per_node)]


def _check_every_mig_gpu_has_devices(gpus):
    """Refuse GPUs with MIG on and no devices: the device plugin then fails the whole node."""
    empty = [index for index, entry in enumerate(gpus) if entry.mig_enabled and not entry.profiles]
    if empty:
        raise LayoutError(
            "%s: MIG on and no MIG devices; the device plugin refuses such a node and "
            "advertises nothing (give them profiles, or turn MIG off)" % _gpus(empty)
        )


def _device_kinds(layout):
    """Return the kinds of devices the layout's GPUs advertise, in first-seen order."""
    kinds = []
    for entry in layout.entries:
        names = [name for name, dummy in entry.profiles] if entry.mig_enabled else [_WHOLE_GPU]
        for name in names:
            if name not in kinds:
                kinds.append(name)
    return kinds


def _gpus(indices):
    """Render GPU indices for messages: "GPU 3" or "GPUs 0, 1"."""
    return "%s %s" % ("GPU" if len(indices) == 1 else "GPUs", ", ".join(str(index) for index in indices))


def _format(profiles):
    """Render a user's {profile: count} the way messages quote it: {3g.40gb: 1, 1g.10gb: 4}."""
    return "{%s}" % ", ".join("%s: %s" % (name, count) for name, count in profiles.items())


def _format_counts(counts):
    """Render {MigProfile: count} like _format."""
    return _format(dict((profile.name, count) for profile, count in counts.items()))
