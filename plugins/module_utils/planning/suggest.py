# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The valid name closest to a misspelt one, for error messages ("did you mean 'mig_strategy'?")."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib


def closest(word, valid, cutoff=0.6):
    """The entry of valid most like word (difflib ratio >= cutoff), or None."""
    found = difflib.get_close_matches(str(word), [str(v) for v in valid], n=1, cutoff=cutoff)
    return found[0] if found else None


def did_you_mean(word, valid, cutoff=0.6):
    """" (did you mean 'x'?)" for the closest valid name, "" when none is close."""
    match = closest(word, valid, cutoff)
    return " (did you mean '%s'?)" % match if match else ""
