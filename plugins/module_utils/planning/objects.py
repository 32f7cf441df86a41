# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compare what we want of an object with what the cluster has, the way server-side apply will merge it.

We only own the fields we set: a desired object is "in place" when every field it names has that value in
the live object, whatever else the live object carries (defaults, other managers' fields, status).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy


def differences(desired, current, path=""):
    """Paths (e.g. `spec.cdi.enabled`) where `desired` names a value that `current` lacks or differs from.

    Mappings are compared key by key (extra keys in current are fine); anything else, lists included, must be
    equal as a whole (we always send whole lists).
    """
    if isinstance(desired, dict) and isinstance(current, dict):
        found = []
        for key in sorted(desired):
            sub = "{0}.{1}".format(path, key) if path else str(key)
            if key not in current:
                if desired[key] is not None:
                    found.append(sub)
                continue
            found.extend(differences(desired[key], current[key], sub))
        return found
    return [] if desired == current else [path or "."]


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


def pick(obj, template):
    """The part of obj that template names (for showing `before` next to a desired `after`)."""
    if not isinstance(template, dict) or not isinstance(obj, dict):
        return copy.deepcopy(obj)
    return dict((k, pick(obj[k], v)) for k, v in template.items() if k in obj)
