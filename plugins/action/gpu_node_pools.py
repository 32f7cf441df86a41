# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs the module of its name and prints each round's wait progress (plugin_utils/progress.py).

The action plugin of every module that waits in rounds: the others in this folder but preflight.py are links to
this file, as kubernetes.core links its action plugins to one file (Ansible picks an action plugin by its name).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.plugin_utils.progress import WaitProgressAction


class ActionModule(WaitProgressAction):
    pass
