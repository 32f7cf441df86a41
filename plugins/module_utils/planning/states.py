# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one state vocabulary of waits and roll-outs: what the waiter (cluster/wait.py) judges each item, and what
the roll-out's decisions (planning/node_pools/steps.py) read and write, so that neither maps the other's words."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

READY, WAITING, FAILED = "ready", "waiting", "failed"
