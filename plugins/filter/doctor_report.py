# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: doctor_report
short_description: Render the result of gpu_doctor as lines to read
version_added: 0.1.0
description:
  - Turns the registered result of M(kubegpu.platform.gpu_doctor) into lines of text, the verdict and the count of
    findings per pattern first, then three lines per finding, worst first (severity, pattern, object, field and
    value; what it means; the fix).
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  _input:
    description: The registered result of M(kubegpu.platform.gpu_doctor).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Print the findings
  ansible.builtin.debug:
    msg: "{{ doctor | kubegpu.platform.doctor_report }}"
"""

RETURN = r"""
_value:
  description: The report, one string per line.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.render import doctor_lines


def _doctor_report(result):
    try:
        return doctor_lines(result)
    except (KeyError, TypeError) as e:
        raise AnsibleFilterError(
            "doctor_report expects the registered result of kubegpu.platform.gpu_doctor; missing {0}".format(e))


class FilterModule(object):
    def filters(self):
        return {"doctor_report": _doctor_report}
