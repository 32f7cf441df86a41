# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options several modules take, each spelt once with its one default, and the doc fragment that documents it.

KubegpuModule merges the waiting options itself (`waits`); a module names the other sets it takes (`shared`). A
module's own DOCUMENTATION may say more about an option (what it writes, what it waits for, its `timeout` default)
but not give it another type or default.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import COLLECTION

# Doc fragment kubegpu.platform.wait. `timeout` has a default per module (KubegpuModule's `timeout`), each
# documented in the module: an operator install and a label patch do not take the same time.
ROUNDS_ARG_SPEC = {
    "timeout": {"type": "int"},
    "wait_round": {"type": "int", "default": 0},
    "wait_started": {"type": "float"},
}

# Doc fragment kubegpu.platform.wait.optional: for the modules whose wait can be left out.
WAIT_ARG_SPEC = {
    "wait": {"type": "bool", "default": True},
}

# "Plan only" has one name: V(false) reads and plans, writes nothing; not check mode, as the roles call these
# modules for their plan before what the writes need (Kueue, the serving operators) is installed, when the
# server could not dry-run them.
APPLY_ARG_SPEC = {
    "apply": {"type": "bool", "default": False},
}

# Doc fragment kubegpu.platform.inputs.pools.
POOLS_ARG_SPEC = {
    "pools": {"type": "list", "elements": "dict", "default": []},
}

# Doc fragment kubegpu.platform.inputs.claim_templates.
CLAIM_TEMPLATES_ARG_SPEC = {
    "claim_templates": {"type": "list", "elements": "dict", "default": []},
}

# Doc fragment kubegpu.platform.inputs.platform.
PLATFORM_ARG_SPEC = {
    "platform": {"type": "str", "choices": ["auto", "openshift", "kubernetes"], "default": "auto"},
}

# Doc fragment kubegpu.platform.inputs.operator_namespace; the rule is operator_namespace() below.
OPERATOR_NAMESPACE_ARG_SPEC = {
    "operator_namespace": {"type": "str"},
}


def operator_namespace(params, policy):
    """The GPU Operator's namespace by the one rule of `operator_namespace`: the option when set (not empty), else
    the namespace the ClusterPolicy reports in status.namespace; None when neither says (the caller decides)."""
    return params.get("operator_namespace") or ((policy or {}).get("status") or {}).get("namespace") or None


def renamed(spec, old, removed_in):
    """The option `spec` (one option's dict) that also answers to its old name `old`, deprecated: users' playbooks
    keep working, with a deprecation warning, until the collection's version `removed_in`."""
    return dict(spec, aliases=list(spec.get("aliases", [])) + [old], deprecated_aliases=list(
        spec.get("deprecated_aliases", [])) + [{"name": old, "version": removed_in, "collection_name": COLLECTION}])
