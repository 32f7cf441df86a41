# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one error of the DRA planners: input or a cluster the DRA stage cannot take as it is."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class DraError(ValueError):
    """DRA input or platform that cannot be applied.

    The message names the object, the field, the value, what is valid and what to do.
    requirements, when not empty, lists what someone other than the collection must change
    first (control-plane flags, for instance), one sentence each, for the module to return.
    """

    def __init__(self, message, requirements=()):
        super(DraError, self).__init__(message)
        self.requirements = list(requirements)
