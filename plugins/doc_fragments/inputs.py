# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The stage inputs several modules take, one part each (argument specs in plugins/module_utils/cluster/args.py):
    kubegpu.platform.inputs.pools, .claim_templates, .platform, .operator_namespace. A module may say in its own
    description of an option what it does with it, not give it another type or default."""

    # Nothing common to all: a module names the parts it takes.
    DOCUMENTATION = r"""
options: {}
"""

    POOLS = r"""
options:
  pools:
    description: The node pools, as in C(kubegpu_node_pools) (see the gpu_node_pools module).
    type: list
    elements: dict
    default: []
"""

    CLAIM_TEMPLATES = r"""
options:
  claim_templates:
    description: The DRA claim templates, as in C(kubegpu_dra.claim_templates) (see the dra_claim_templates module).
    type: list
    elements: dict
    default: []
"""

    PLATFORM = r"""
options:
  platform:
    description: V(auto) asks the cluster (OpenShift serves the ClusterVersion C(version)).
    type: str
    choices: [auto, openshift, kubernetes]
    default: auto
"""

    OPERATOR_NAMESPACE = r"""
options:
  operator_namespace:
    description:
      - The GPU Operator's namespace. Unset or empty, the namespace the ClusterPolicy reports in C(status.namespace).
      - When the ClusterPolicy reports none yet, a module that can do without it says what it uses instead (the
        platform's default namespace) and one that cannot refuses, naming this option.
    type: str
"""
