# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one error of the serving planners: settings, models or a platform the serving stage cannot take."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ServingError(ValueError):
    """Serving input or platform that cannot be applied.

    The message names the object (model, runtime, pool), the field, the value, what is valid and what to do.
    requirements, when not empty, lists what someone other than the collection must change first.
    """

    def __init__(self, message, requirements=()):
        super(ServingError, self).__init__(message)
        self.requirements = list(requirements)
