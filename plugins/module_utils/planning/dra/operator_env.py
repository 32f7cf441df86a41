# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator's driver manager and the DRA driver (GPU Operator 25.10 or later).

Before it upgrades or restarts the NVIDIA driver on a node, the operator's driver manager evicts the pods
that use GPUs there. It finds the DRA driver's kubelet plugin by a node label it is told in
spec.driver.manager.env NODE_LABEL_FOR_GPU_POD_EVICTION (shared/reference/dra-kserve-openshift-ai.md,
"NVIDIA DRA driver"): the label the DRA nodes carry.

The ClusterPolicy CRD declares spec.driver.manager.env as a plain array (no x-kubernetes-list-type), which
server-side apply treats as atomic: whoever applies it owns the whole list. So the entry is read, merged
into the list others set, and written back with the resourceVersion read (cluster/apply.update_object),
never applied on its own.

Pure.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DRA_PLUGIN_LABEL

EVICTION_ENV = "NODE_LABEL_FOR_GPU_POD_EVICTION"
ENV_PATH = "spec.driver.manager.env"


def manager_env(policy):
    """The ClusterPolicy's spec.driver.manager.env (a list, empty when unset)."""
    spec = (policy or {}).get("spec") or {}
    return list(((spec.get("driver") or {}).get("manager") or {}).get("env") or [])


def eviction_env(env, wanted):
    """Return the env list with the DRA entry set (wanted) or taken out, or None when it already is so.

    Other entries keep their place. Taking out removes only an entry holding the DRA plugin's label: a
    different value was set by someone else, for something else.
    """
    env = list(env or [])
    index = next((i for i, e in enumerate(env) if isinstance(e, dict) and e.get("name") == EVICTION_ENV), None)
    if wanted:
        entry = {"name": EVICTION_ENV, "value": DRA_PLUGIN_LABEL}
        if index is None:
            return env + [entry]
        if env[index].get("value") == DRA_PLUGIN_LABEL and set(env[index]) <= {"name", "value"}:
            return None
        return env[:index] + [entry] + env[index + 1:]
    if index is None or env[index].get("value") != DRA_PLUGIN_LABEL:
        return None
    return env[:index] + env[index + 1:]
