# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: capacity_report
short_description: Build the GPU capacity report document from gpu_cluster_info and the previous report
version_added: 0.1.0
description:
  - Turns the registered result of M(kubegpu.platform.gpu_cluster_info) into the capacity report document, per
    node pool the nodes, GPU model, physical GPUs, sharing and layout, allocatable, requested and idle units per
    resource, and the pending GPU pods, then the teams' quota, use and borrowing per pool (tenancy stage), with
    what changed since the previous report.
  - The document is what the report role writes as JSON and keeps for the next run; render it with
    P(kubegpu.platform.capacity_render#filter).
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  _input:
    description: The registered result of M(kubegpu.platform.gpu_cluster_info).
    type: dict
    required: true
  previous:
    description:
      - The previous report document (what this filter returned last time, read back from JSON), or empty when
        there is none. A document of another schema is not compared.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Build the capacity report
  ansible.builtin.set_fact:
    capacity: "{{ gpu_cluster | kubegpu.platform.capacity_report(previous_report | default({})) }}"
"""

RETURN = r"""
_value:
  description:
    - C(schema), C(generated_at), C(cluster) (platform facts), C(pools) (see the C(capacity) result of
      M(kubegpu.platform.gpu_cluster_info)), C(unplaceable), C(teams) (the C(teams) result of
      M(kubegpu.platform.gpu_cluster_info), quota, used and borrowed per team, pool and resource),
      C(previous_generated_at) and C(changes) (a list of C(pool), C(field), C(resource), C(before), C(after), the
      teams' quota and use included; null when there was no previous report).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.capacity import report_document


def capacity_report(info, previous=None):
    try:
        return report_document(info["capacity"], info["observed_at"], cluster=info.get("platform"),
                               previous=previous or None, teams=info.get("teams"))
    except (KeyError, TypeError) as e:
        raise AnsibleFilterError(
            "capacity_report expects the registered result of kubegpu.platform.gpu_cluster_info (and a previous "
            "report document or nothing); missing {0}".format(e))


class FilterModule(object):
    def filters(self):
        return {"capacity_report": capacity_report}
