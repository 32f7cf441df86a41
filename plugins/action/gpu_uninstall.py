# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs the gpu_uninstall module and prints each round's wait progress (plugin_utils/progress.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.plugin_utils.progress import WaitProgressAction


class ActionModule(WaitProgressAction):
    pass
