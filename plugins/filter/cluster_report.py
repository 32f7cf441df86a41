# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: cluster_report
short_description: Render the result of gpu_cluster_info as report lines
version_added: 0.1.0
description:
  - Turns the registered result of M(kubegpu.platform.gpu_cluster_info) into lines of text, a summary of the
    platform, GPU Operator, DRA and serving stack followed by one table row per GPU model.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  _input:
    description: The registered result of M(kubegpu.platform.gpu_cluster_info).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Print the report
  ansible.builtin.debug:
    msg: "{{ gpu_cluster | kubegpu.platform.cluster_report }}"
"""

RETURN = r"""
_value:
  description: The report, one string per line.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.cluster_text import cluster_report


def _cluster_report(info):
    try:
        return cluster_report(info)
    except (KeyError, TypeError) as e:
        raise AnsibleFilterError(
            "cluster_report expects the registered result of kubegpu.platform.gpu_cluster_info; missing {0}".format(e))


class FilterModule(object):
    def filters(self):
        return {"cluster_report": _cluster_report}
