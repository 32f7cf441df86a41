# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Release numbers as clusters and charts spell them, read as comparable tuples."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError

# "v1.34.2", "1.34.2+k3s1", "v1.33.4-gke.1200", "4.20.3", "4.21.0-ec.2", "0.4.1", "25.12.0"
_RELEASE = re.compile(r"^v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?(?:[-+].*)?$")


def parse_release(value, what):
    """Return (major, minor, patch) of a release string; patch is 0 when absent.

    what names the value in the error ("Kubernetes version"). Raises DraError.
    """
    match = _RELEASE.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise DraError(
            "%s is %r; expected <major>.<minor>[.<patch>] such as 1.34.2 or v1.34.2+k3s1" % (what, value)
        )
    return tuple(int(part or 0) for part in match.groups())


def release_text(release):
    """Return "1.34.2" for (1, 34, 2)."""
    return ".".join(str(part) for part in release)
