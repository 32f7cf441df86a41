# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: created_namespace
short_description: Mark a Namespace to apply as the collection's when the run creates it
version_added: 0.1.0
description:
  - Adds the C(app.kubernetes.io/managed-by=kubegpu.platform) label to a Namespace definition when the namespace does
    not exist yet (this run creates it) or already carries that label (an earlier run created it). A namespace the
    user made is returned as it is, so that M(kubegpu.platform.gpu_uninstall) never deletes it.
  - The same rule the collection's modules apply to the namespaces they create, for a role that creates one with
    M(kubernetes.core.k8s).
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  _input:
    description: The Namespace definition to apply.
    type: dict
    required: true
  current:
    description: The namespace as the cluster has it (a C(kubernetes.core.k8s_info) resource), or none when absent.
    type: dict
"""

EXAMPLES = r"""
- name: Read the namespace
  kubernetes.core.k8s_info:
    kind: Namespace
    name: gpu-operator
  register: current

- name: Create it, marked when this run creates it
  kubernetes.core.k8s:
    definition: "{{ {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': 'gpu-operator'}}
                    | kubegpu.platform.created_namespace(current.resources | first | default(none)) }}"
"""

RETURN = r"""
_value:
  description: The Namespace definition, with the managed-by label where the collection creates or created it.
  type: dict
"""

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.uninstall.ownership import mark_created_namespace


class FilterModule(object):
    def filters(self):
        return {"created_namespace": mark_created_namespace}
