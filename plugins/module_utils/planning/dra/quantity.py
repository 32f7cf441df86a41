# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes resource quantities ("40Gi", "143771Mi", "80G", "1500M"), read as exact numbers.

Only what capacities and claim templates use: a non-negative integer or decimal and an optional
binary (Ki..Ei) or decimal (k..E) suffix. No exponent forms, no milli-units.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from fractions import Fraction

_SUFFIXES = {
    "": 1,
    "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60,
    "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18,
}
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
SUFFIXES = tuple(suffix for suffix in _SUFFIXES if suffix)


def parse_quantity(text):
    """Return the quantity as a Fraction (bytes for memory), None when text is not one this module reads."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        return None
    match = _QUANTITY.match(str(text).strip())
    if match is None:
        return None
    number, suffix = match.groups()
    return Fraction(number) * _SUFFIXES[suffix or ""]


def mebibytes(mib):
    """Return the quantity text of a size in MiB, as capacities are published ("143771Mi")."""
    return "%dMi" % mib
