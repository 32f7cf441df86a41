# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compare what we want of an object with what the cluster has, the way server-side apply will merge it.

We only own the fields we set: a desired object is "in place" when every field it names has that value in
the live object, whatever else the live object carries (defaults, other managers' fields, status).

This is the collection's one diff engine: `difference_paths` says what differs, `subset` shows those fields
before and after, `object_key` and `diff_of` give every module's `diff` (cluster/apply.py, change_report).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy


def difference_paths(desired, current, path=()):
    """The one diff engine: key paths (tuples) where `desired` names a value that `current` lacks or differs from.

    Mappings are compared key by key (extra keys in current are fine; a None desired for an absent key is no
    difference); anything else, lists included, must be equal as a whole (we always send whole lists).
    """
    if isinstance(desired, dict) and isinstance(current, dict):
        found = []
        for key in sorted(desired):
            if key not in current:
                if desired[key] is not None:
                    found.append(path + (key,))
                continue
            found.extend(difference_paths(desired[key], current[key], path + (key,)))
        return found
    return [] if desired == current else [path]


def dotted(path):
    """A key path as text (`spec.cdi.enabled`; `.` for the whole value)."""
    return ".".join(str(k) for k in path) or "."


def differences(desired, current):
    """difference_paths as dotted text, e.g. ["spec.cdi.enabled", "metadata.labels.nvidia.com/mig.config"]."""
    return [dotted(p) for p in difference_paths(desired, current)]


def subset(obj, paths):
    """The part of obj at `paths` (tuples), nested as in obj; a path obj lacks is left out."""
    out = {}
    for path in paths:
        if not path:
            return copy.deepcopy(obj)
        node, ok = obj, True
        for key in path:
            if not isinstance(node, dict) or key not in node:
                ok = False
                break
            node = node[key]
        if not ok:
            continue
        dest = out
        for key in path[:-1]:
            dest = dest.setdefault(key, {})
        dest[path[-1]] = copy.deepcopy(node)
    return out


def overlay(base, top):
    """top over base, mappings merged key by key; unlike `merged`, a None in top is kept (a removed label)."""
    if not isinstance(base, dict) or not isinstance(top, dict):
        return copy.deepcopy(top)
    out = copy.deepcopy(base)
    for key, value in top.items():
        out[key] = overlay(base.get(key), value)
    return out


def object_key(kind, name, namespace=None):
    """How results and diffs name an object: `kind/namespace/name`, or `kind/name` when cluster-scoped."""
    return "/".join(x for x in (kind, namespace, name) if x)


def diff_of(changes):
    """{before: {key: fields before}, after: {key: fields after}} of change dicts (key, before, after), in order.

    An object changed twice in a run (a node in two roll-out steps) shows its first `before` and its last `after`.
    """
    before, after = {}, {}
    for c in changes:
        key = c["key"]
        if key in after:
            before[key] = overlay(c["before"], before[key]) if isinstance(before[key], dict) else before[key]
            after[key] = overlay(after[key], c["after"]) if isinstance(c["after"], dict) else c["after"]
        else:
            before[key], after[key] = copy.deepcopy(c["before"]), copy.deepcopy(c["after"])
    return {"before": before, "after": after}


def merged(current, desired):
    """The object server-side apply would leave: desired's fields over current (None removes a key)."""
    if not isinstance(current, dict) or not isinstance(desired, dict):
        return copy.deepcopy(desired)
    out = copy.deepcopy(current)
    for key, value in desired.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged(current.get(key), value)
    return out
