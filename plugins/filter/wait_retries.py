# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: wait_retries
short_description: The retries of a task that waits in rounds, for its timeout and round length
version_added: 0.1.0
description:
  - A waiting module of this collection waits one round of O(wait_round) seconds per call and returns C(ready)
    false when the round ends first; its task calls it again with C(until), C(retries) and C(delay). This filter
    gives the C(retries) that let the task run until the module's own timeout ends the wait - the rounds that
    cover the timeout, plus one, so that the call that reports the timeout is one of them.
  - A round of less than one second counts as one second.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  _input:
    description: The wait's timeout, in seconds.
    type: int
    required: true
  wait_round:
    description: Seconds one call waits.
    type: int
    required: true
"""

EXAMPLES = r"""
- name: Wait until the ClusterPolicy is ready
  kubegpu.platform.cluster_policy:
    timeout: "{{ gpu_operator_timeout }}"
    wait_round: "{{ gpu_operator_wait_round }}"
  register: policy
  until: policy is failed or policy.ready
  retries: "{{ gpu_operator_timeout | kubegpu.platform.wait_retries(gpu_operator_wait_round) }}"
  delay: 1
"""

RETURN = r"""
_value:
  description: The number of retries, ceil(timeout / max(wait_round, 1)) + 1.
  type: int
"""

import math

from ansible.errors import AnsibleFilterError


def _seconds(value):
    """value as Jinja's int filter reads it ("30", 30.0, "30.5"), a non-number refused rather than taken as 0."""
    try:
        return int(value)
    except ValueError:
        return int(float(value))


def wait_retries(timeout, wait_round):
    try:
        timeout, wait_round = _seconds(timeout), _seconds(wait_round)
    except (TypeError, ValueError):
        raise AnsibleFilterError("wait_retries: timeout and wait_round must be whole seconds, got %r and %r"
                                 % (timeout, wait_round))
    return int(math.ceil(float(timeout) / max(wait_round, 1))) + 1


class FilterModule(object):
    def filters(self):
        return {"wait_retries": wait_retries}
