# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: access_rules
short_description: The RBAC rules the collection's stages need, for a ClusterRole
version_added: 0.1.0
description:
  - Returns the rules (C(apiGroups), C(resources), C(verbs), C(resourceNames) where a rule is limited to names) that
    the given stages need, the preflight checks' reads always included, as the automation_access role grants them.
  - The rules live in one place, the collection's planning code, one set per stage, each with why the stage needs
    it (see docs/automation-access.md). A term V(all) means every stage the collection has.
  - An unknown stage fails and lists the known ones.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  _terms:
    description: The stages (V(gpu_operator), V(node_pools), V(dra), V(serving), V(report), ...) or V(all).
    type: list
    elements: str
    required: true
  why:
    description: Keep each rule's C(why) (the stage and reason), for documentation; a ClusterRole refuses it.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: A ClusterRole for the node pools stage
  kubernetes.core.k8s:
    definition:
      apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRole
      metadata: {name: kubegpu-node-pools}
      rules: "{{ lookup('kubegpu.platform.access_rules', 'node_pools', wantlist=True) }}"
"""

RETURN = r"""
_raw:
  description: The rules, one dict each.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.access import rules as access


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        stages = []
        for term in terms:
            for stage in (term if isinstance(term, list) else [term]):
                stages.extend(access.stages_known() if stage == "all" else [str(stage)])
        try:
            rules = access.rules_for(stages) if self.get_option("why") else access.cluster_role_rules(stages)
        except ValueError as e:
            raise AnsibleLookupError("kubegpu.platform.access_rules: %s" % e)
        return rules
