#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tenancy_quotas
short_description: GPU quotas, priorities and fair sharing per team and node pool, with Kueue or ResourceQuotas
version_added: 0.1.0
description:
  - Computes what every node pool offers in its own resource names from the pool plan (MIG layout x GPUs x nodes,
    time-slicing or MPS replicas, DRA devices) and each team's quota of it (a fraction or units); the teams' quotas
    plus the unassigned remainder equal each pool's capacity.
  - Refuses, before any write, unknown pools, resources a pool does not offer and quotas that add up to more than
    a pool offers (naming the teams), e.g. after a pool's MIG layout change.
  - Says what Kueue install is needed when C(kueue.x-k8s.io) is not served (a Helm release on Kubernetes, the Red
    Hat build of Kueue through OLM on OpenShift), with the DRA pools' DeviceClass mappings in Kueue's configuration.
  - Every ClusterQueue also covers C(cpu) and C(memory) (flavor C(kubegpu-cpu-memory)), as Kueue admits a workload
    only when its queue covers every resource it asks for; by default each queue may use what the GPU pools' nodes
    offer (their allocatable), a team's C(cpu) and C(memory) set its own.
  - With O(apply=true), writes (server-side apply, field manager C(kubegpu.platform/tenancy), only what differs,
    every object dry-run first) the teams' Namespaces, PriorityClasses and, with Kueue, WorkloadPriorityClasses,
    a ResourceFlavor per pool, a ClusterQueue per team in one cohort plus the shared ClusterQueue, and LocalQueues;
    without Kueue, a ResourceQuota per namespace. Objects of earlier runs no longer wanted are deleted.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  settings:
    description:
      - C(kubegpu_tenancy) - C(kueue), C(install), C(cohort), C(shared_queue), C(teams) (C(name), C(namespaces),
        C(quotas) (C(pool), C(share) or C(units)), C(borrow), C(lend), C(priority), C(cpu), C(memory)),
        C(priority_classes) (C(name),
        C(value), C(preemption), C(description)), C(helm) (C(charts_dir), C(binary), C(namespace), C(values)),
        C(kueue_operator) (C(channel), C(source), C(approval)), C(timeout). See docs/tenancy.md.
    type: dict
    default: {}
  pools:
    description: The node pools C(kubegpu_node_pools) the quotas share.
  claim_templates:
    description:
      - The DRA claim templates (C(kubegpu_dra.claim_templates)). Their DeviceClasses (C(kubegpu-<name>)) and the
        NVIDIA driver's C(gpu.nvidia.com) are mapped onto the DRA pools' quota resource C(gpu.nvidia.com) in
        Kueue's configuration (C(resources.deviceClassMappings)) when the stage installs Kueue; when Kueue was
        already there and its configuration lacks them, a warning says what to add.
  platform:
    description: V(auto) detects OpenShift or Kubernetes.
  apply:
    description:
      - Write the objects (with Kueue, once its API is served; waits for it up to O(timeout)).
      - V(false) plans only - reads, plans and refuses, writes nothing - as the C(tenancy) role's first call does
        before Kueue is installed.
    type: bool
    default: false
  timeout:
    description: Seconds to wait for the Kueue API to be served.
    default: 900
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubegpu.platform.wait
  - kubegpu.platform.inputs.pools
  - kubegpu.platform.inputs.claim_templates
  - kubegpu.platform.inputs.platform
attributes:
  check_mode:
    support: full
    description: Plans and sends every write as a server-side dry run; objects in namespaces the run would create,
      and Kueue objects while Kueue is still to be installed, are only computed.
  diff_mode:
    support: full
    description: Shows each object's fields before and after.
requirements:
  - kubernetes >= 24.2.0
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: Plan the quotas and what Kueue install is needed
  kubegpu.platform.tenancy_quotas:
    settings: "{{ kubegpu_tenancy }}"
    pools: "{{ kubegpu_node_pools }}"
  register: tenancy

- name: Write the queues and quotas
  kubegpu.platform.tenancy_quotas:
    settings: "{{ kubegpu_tenancy }}"
    pools: "{{ kubegpu_node_pools }}"
    claim_templates: "{{ kubegpu_dra.claim_templates | default([]) }}"
    apply: true
"""

RETURN = r"""
platform:
  description: openshift or kubernetes.
  returned: always
  type: str
kueue_served:
  description: Whether C(kueue.x-k8s.io) is served.
  returned: always
  type: bool
capacity:
  description: Per pool its C(strategy), C(nodes), C(resources) (resource name -> units) and C(allocatable) (the
    C(cpu) and C(memory) its nodes offer to pods).
  returned: always
  type: dict
quotas:
  description: Per team, per pool, resource name -> quota; C(unassigned) the remainder per pool.
  returned: always
  type: dict
node_quotas:
  description: Per team and the shared queue, its Kueue quota of C(cpu) and C(memory).
  returned: always
  type: dict
device_class_mappings:
  description: The DeviceClass mappings Kueue's configuration needs (C(name), C(deviceClassNames)); empty without
    DRA pools.
  returned: always
  type: list
  elements: dict
charts:
  description: The Helm releases to install for Kueue (C(name), C(namespace), C(chart), C(chart_ref), C(version), C(values)).
  returned: always
  type: list
  elements: dict
operators:
  description: The olm_operator arguments for the Red Hat build of Kueue.
  returned: always
  type: list
  elements: dict
objects:
  description: The objects wanted, in apply order.
  returned: always
  type: list
  elements: dict
usage:
  description: Per team (and the shared queue) and pool and resource, C(quota), C(used), C(borrowed).
  returned: always
  type: list
  elements: dict
report:
  description: The usage as lines.
  returned: always
  type: list
  elements: str
changes:
  description: Each object written or deleted (or that would be), with its C(key) and the fields that differ.
  returned: always
  type: list
  elements: dict
diff:
  description:
    - C(before) and C(after), each a mapping of object key (C(kind/name) or C(kind/namespace/name)) to the fields that
      differ; an object changed twice in a run shows its first before and its last after.
    - Only in diff mode (C(--diff)), built from RV(changes), which lists the same changes in every mode.
  returned: in diff mode
  type: dict
ready:
  description: V(false) only when O(wait_round) ran out while waiting for the Kueue API; the task's C(until) calls again.
  returned: always
  type: bool
progress:
  description: The wait's progress (C(summary), C(pending), C(waited_s)).
  returned: when waiting for the Kueue API
  type: dict
"""

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import (
    apply_object,
    change_report,
    planned_change,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.args import (
    APPLY_ARG_SPEC,
    CLAIM_TEMPLATES_ARG_SPEC,
    PLATFORM_ARG_SPEC,
    POOLS_ARG_SPEC,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.converge import Converge, key
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import ClusterError
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.platform import detect_platform
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import Target, api_served
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import parse_claim_templates
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    KUEUE_GROUP,
    MANAGED_BY_LABEL,
    OPENSHIFT,
    PART_OF_LABEL,
    TENANCY_FIELD_MANAGER,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import SizingError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.install import (
    KUEUE_NAMESPACE,
    KUEUE_OPERAND_API,
    install_plan,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.kueue_config import (
    CONFIG_KEY,
    MANAGER_CONFIGMAP,
    YAML_IMPORT_ERROR,
    configured_mappings,
    device_class_mappings,
    missing_classes,
    missing_warning,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.objects import (
    KINDS,
    LABELS,
    PART_OF,
    desired_objects,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.quotas import (
    plan_quotas,
    pool_capacity,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.report import (
    report_lines,
    usage_rows,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.spec import (
    TenancyError,
    parse_settings,
)

SELECTOR = "%s=%s,%s=%s" % (MANAGED_BY_LABEL, LABELS[MANAGED_BY_LABEL], PART_OF_LABEL, PART_OF)
ERRORS = (TenancyError, PoolError, SizingError, DraError)


def observe(cluster, kueue_served):
    """Our objects of earlier runs (one list per kind) and the namespaces that exist."""
    ours = {}
    for api_version, kind in KINDS:
        if api_version.startswith(KUEUE_GROUP) and not kueue_served:
            continue
        for obj in cluster.list(api_version, kind, label_selector=SELECTOR):
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
            ours[key(obj)] = obj
    namespaces = dict((n["metadata"]["name"], n) for n in cluster.list("v1", "Namespace"))
    return ours, namespaces


def kueue_configuration(cluster, settings, platform):
    """(where, Configuration or None) of a Kueue the collection did not just install: the Red Hat build's operand
    (spec.config), or the chart's manager ConfigMap; None when it cannot be read."""
    try:
        if platform == OPENSHIFT:
            operand = cluster.get(KUEUE_OPERAND_API, "Kueue", "cluster")
            return "the Kueue CR 'cluster' (spec.config)", ((operand or {}).get("spec") or {}).get("config")
        namespace = settings.helm.get("namespace") or KUEUE_NAMESPACE
        name = MANAGER_CONFIGMAP % "kueue"
        configmap = cluster.get("v1", "ConfigMap", name, namespace)
        return ("Kueue's Configuration (ConfigMap %s/%s, the chart's managerConfig.controllerManagerConfigYaml)"
                % (namespace, name), ((configmap or {}).get("data") or {}).get(CONFIG_KEY))
    except ClusterError:
        return "Kueue's Configuration", None


def run(module):
    cluster, check, params = module.cluster, module.check_mode, module.params
    if YAML_IMPORT_ERROR is not None:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=str(YAML_IMPORT_ERROR))
    try:
        settings = parse_settings(params["settings"])
        capacity = pool_capacity(params["pools"], cluster.list("v1", "Node"))
        plan = plan_quotas(settings, capacity)
        mappings, warnings = device_class_mappings(capacity, parse_claim_templates(params["claim_templates"] or None))
    except ERRORS as e:
        module.fail_json(msg=str(e), changed=False)
    platform = detect_platform(cluster, params["platform"])
    served = bool(cluster.served_versions(KUEUE_GROUP))
    mappings = mappings if settings.kueue else []
    install = install_plan(settings, platform, served, mappings)
    if mappings and served:
        # Kueue was there before this run (or an earlier run installed it): say what its configuration lacks.
        where, config = kueue_configuration(cluster, settings, platform)
        missing = missing_classes(mappings, configured_mappings(config))
        if missing:
            warnings.append(missing_warning(mappings, missing, where))
    for warning in warnings:
        module.warn(warning)
    objects = desired_objects(settings, plan)
    result = {"platform": platform, "kueue_served": served, "capacity": capacity,
              "quotas": dict(plan["teams"], unassigned=plan["unassigned"]), "node_quotas": plan["node_quotas"],
              "device_class_mappings": mappings, "charts": install["charts"],
              "operators": install["operators"], "objects": objects, "ready": True}
    changes = []
    if params["apply"]:
        # The Red Hat build of Kueue serves kueue.x-k8s.io only once its operand (the Kueue CR) exists.
        for obj in install["operands"]:
            if check and cluster.resource(obj["apiVersion"], obj["kind"]) is None:
                # Check mode before the operator is installed: its CRD is not served, so the operand cannot be
                # dry-run (the server would only say the kind is missing); the plan shows it as new.
                changes.append(planned_change(obj, None))
                continue
            changes.append(apply_object(cluster, obj, check, field_manager=TENANCY_FIELD_MANAGER))
        if settings.kueue and not served and not check:
            outcome = module.wait_for(Target.custom(KUEUE_GROUP, read=lambda c: c.served_versions(KUEUE_GROUP)),
                                      api_served(KUEUE_GROUP), result)
            if not outcome.ready:
                return result
            served = True
        changes += write(cluster, objects, served, check)
    ours, dummy = observe(cluster, served)
    queues = [o for o in ours.values() if o["kind"] == "ClusterQueue"]
    quotas = [o for o in ours.values() if o["kind"] == "ResourceQuota"]
    result["usage"] = usage_rows(settings, plan, queues, quotas)
    result["report"] = report_lines(result["usage"])
    result.update(change_report(changes))
    return result


def write(cluster, objects, served, check):
    """Validate every write (dry run) before the first, then apply and prune; returns the Changes. The teams'
    Namespaces are objects of the plan (marked as the collection's when this run creates them); while Kueue is
    still to be installed (check mode), its objects are shown as new and not dry-run."""
    ours, namespaces = observe(cluster, served)
    return Converge(cluster, check, TENANCY_FIELD_MANAGER, ours=ours, namespaces=namespaces,
                    prune_kinds=[kind for dummy, kind in KINDS], later=() if served else (KUEUE_GROUP,)).run(objects)


def main():
    module = KubegpuModule(
        argument_spec={
            "settings": {"type": "dict", "default": {}},
        },
        shared=(POOLS_ARG_SPEC, CLAIM_TEMPLATES_ARG_SPEC, PLATFORM_ARG_SPEC, APPLY_ARG_SPEC),
        supports_check_mode=True,
        # Kueue's objects cannot be written before its API is served: no `wait` to leave the wait out.
        waits="always",
        timeout=900,
    )
    module.run(run)


if __name__ == "__main__":
    main()
