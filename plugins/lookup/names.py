# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: names
short_description: The labels, annotations and field managers of this collection, by name
version_added: 0.1.0
description:
  - Returns names the collection defines once (its labels, annotations, field managers, operands and namespaces),
    so that a task of another collection (M(kubernetes.core.k8s)) writes with the same field manager as this
    collection's modules, or selects nodes by the same label, without spelling it again.
  - A term is the name of the constant in lower case, e.g. V(field_manager), V(node_pools_field_manager),
    V(pool_label), V(mig_config_label). An unknown term fails and lists the known ones.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  _terms:
    description: The names to return.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Create a namespace as this collection's installs do
  kubernetes.core.k8s:
    definition: "{{ namespace }}"
    apply: true
    server_side_apply:
      field_manager: "{{ lookup('kubegpu.platform.names', 'field_manager') }}"

- name: The nodes of pool llm-h100
  kubernetes.core.k8s_info:
    kind: Node
    label_selectors:
      - "{{ lookup('kubegpu.platform.names', 'pool_label') }}=llm-h100"
"""

RETURN = r"""
_raw:
  description: One value per term, in the order of the terms.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.kubegpu.platform.plugins.module_utils.planning import names

KNOWN = dict((key.lower(), value) for key, value in vars(names).items()
             if key.isupper() and not key.startswith("_") and isinstance(value, (str, tuple, dict)))


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        values = []
        for term in terms:
            key = str(term).lower()
            if key not in KNOWN:
                raise AnsibleLookupError("kubegpu.platform.names: unknown name %r; known: %s"
                                         % (term, ", ".join(sorted(KNOWN))))
            value = KNOWN[key]
            values.append(list(value) if isinstance(value, tuple) else value)
        return values
