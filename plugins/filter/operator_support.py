# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: operator_support
short_description: The support state of a GPU Operator version, and whether the collection installs it
version_added: 0.1.0
description:
  - Looks the version up in the collection's one table of GPU Operator support windows
    (plugins/module_utils/planning/gpu_operator/support.py, docs/gpu-operator.md) - each line's state (supported,
    deprecated, end of support), since when, its source, and the DRA driver versions NVIDIA pairs with it.
  - A deprecated line passes with a warning; an end-of-support one is refused unless O(allow_end_of_support).
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  _input:
    description: The version (V(v26.7.0)), or an OLM channel (V(v26.3)); empty or another word (V(stable)) names no line.
    type: str
    required: true
  allow_end_of_support:
    description: The user's acknowledgement of an end-of-support version.
    type: bool
    default: false
  where:
    description: The setting that carries the version, as messages name it.
    type: str
    default: kubegpu_gpu_operator.version
"""

EXAMPLES = r"""
- name: Refuse an end-of-support operator version unless acknowledged
  ansible.builtin.assert:
    that: __support.refusal is none
    fail_msg: "{{ __support.refusal }}"
  vars:
    __support: "{{ gpu_operator_version | kubegpu.platform.operator_support(gpu_operator_allow_end_of_support) }}"
"""

RETURN = r"""
_value:
  description:
    - C(line), C(state), C(since), C(source), C(dra_driver) (a list) of the version's line (C(line) none when the
      version names none), and C(refusal) and C(warning), each a message or none.
  type: dict
"""

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.support import judge, support_of


def operator_support(version, allow_end_of_support=False, where="kubegpu_gpu_operator.version"):
    allowed = boolean(allow_end_of_support, strict=False)
    found = support_of(version)
    refusal, warning = judge(version, allowed, where)
    out = {"line": None, "state": None, "since": None, "source": None, "dra_driver": [],
           "refusal": refusal, "warning": warning}
    if found is not None:
        out.update(line=found.line, state=found.state, since=found.since, source=found.source,
                   dra_driver=list(found.dra_driver))
    return out


class FilterModule(object):
    def filters(self):
        return {"operator_support": operator_support}
