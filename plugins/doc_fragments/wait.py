# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The options every waiting module shares (argument specs in plugins/module_utils/cluster/args.py).

    DOCUMENTATION: every waiting module. OPTIONAL (kubegpu.platform.wait.optional): the modules whose wait can be
    left out. A module documents its own default for O(timeout) and may say what it waits for.
    """

    DOCUMENTATION = r"""
options:
  timeout:
    description:
      - Seconds the whole wait may take, counted from O(wait_started) when set; the module's description of this
        option says what it waits for.
    type: int
  wait_round:
    description:
      - Seconds this call waits at most. When the wait is not over by then, the module returns RV(ready=false) with
        RV(progress) instead of failing, and is meant to be called again by the task's C(until) loop, so that Ansible
        prints a RETRYING line each round (live in AWX) and each round's result carries the progress.
      - V(0) waits up to O(timeout) in this one call.
      - 'In a role: C(until: result.ready), C(retries) of O(timeout) / O(wait_round) plus one (filter
        P(kubegpu.platform.wait_retries#filter)), C(delay: 1), and
        O(wait_started) set once before the task.'
    type: int
    default: 0
  wait_started:
    description:
      - When the whole wait began, in seconds since the epoch (for example C({{ now(utc=true).timestamp() }}) set once
        with C(set_fact) before the task). O(timeout) counts from it across the rounds, and a timeout's error says how
        long the wait ran. Unset, the wait starts with this call.
    type: float
"""

    OPTIONAL = r"""
options:
  wait:
    description:
      - Wait until what the module wrote is ready, up to O(timeout); the module's description of this option says
        what it waits for.
      - V(false) returns once the writes are sent.
    type: bool
    default: true
"""
