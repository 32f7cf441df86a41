#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: preflight
short_description: Check the inventory and the cluster for the stages a playbook will run, before anything is written
version_added: 0.2.0
description:
  - Checks the inventory variables of every stage the playbook runs (C(kubegpu_platform), C(kubegpu_gpu_operator),
    C(kubegpu_node_pools), C(kubegpu_dra), C(kubegpu_serving)) - unknown keys anywhere, each named with its full
    path and the closest valid key (a model's C(min_replica) too); types and choices, named as the user wrote them
    (C(kubegpu_gpu_operator.timeout)); then each stage's own rules - the GPU Operator version's support window (an
    end-of-support line refused unless C(kubegpu_gpu_operator.allow_end_of_support), a deprecated one warned about),
    pools, ClusterPolicy sections, dead fields and enum values, NVIDIADriver entries, claim templates and DRA driver feature gates, serving runtimes and models
    (unknown runtimes, pools and claim templates, DRA claims in Knative mode, and models too big for a slice the
    inventory alone describes).
  - Then reads the cluster, and only reads it - every C(cluster_policy) field against the ClusterPolicy CRD's schema
    (from the cluster, or from the C(crds/) folder of a local chart; the API server would drop an unknown field
    silently); OpenShift - the GPU Operator's channel and CSV and NFD's channel in their PackageManifests; the
    pools resolved to the nodes of today (overlapping pools, MIG layouts per GPU model, GPU models without MIG,
    unknown MachineSets, a pool that selects no node); DRA - what the platform
    allows, the driver's feature gates for its release, and the C(cel) of claim templates, which the API server
    compiles in a server-side dry run of their DeviceClasses (a dry run stores nothing) once C(resource.k8s.io) is
    served; serving - the platform (OpenShift AI 2.x or 3.x, upstream KServe) and what its modes allow (no Knative
    mode on OpenShift AI 3.x, no C(min_replicas) 0 where only the HPA scales), and every model placed and sized on
    the slices its pool's nodes or its claim template offer.
  - Every problem is reported at once, grouped per variable (RV(errors)); the task fails when there is one, so the
    playbook stops before its first write. Every playbook of the collection runs it first, for all its stages.
  - Writes nothing, in check mode or not, and reports C(changed=false); its only requests besides reads are those
    dry runs.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  stages:
    description: The stages the playbook will run.
    type: list
    elements: str
    choices: [gpu_operator, node_pools, dra, tenancy, serving, monitoring, uninstall]
    required: true
  variables:
    description:
      - The C(kubegpu_*) variables as the play sees them (name - value). Absent ones take their defaults. A name
        close to a variable of the collection (C(kubegpu_node_pool)) is reported as a misspelling; variables of
        stages still being built (C(kubegpu_tenancy)) are accepted as they are.
    type: dict
    default: {}
  cluster:
    description:
      - Also read the cluster; V(false) checks the inventory alone.
      - With V(false) the check runs on the controller (the module's action plugin), with the same code and
        result, and no module process starts.
    type: bool
    default: true
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
attributes:
  check_mode:
    support: full
    description: Runs the same reads and checks; it never writes.
  diff_mode:
    support: none
    description: Nothing is changed, so there is nothing to show.
requirements:
  - kubernetes >= 24.2.0
  - PyYAML
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: Check every input before anything is written
  kubegpu.platform.preflight:
    stages: [gpu_operator, node_pools, dra, tenancy, serving]
    variables:
      kubegpu_platform: "{{ kubegpu_platform | default(omit) }}"
      kubegpu_gpu_operator: "{{ kubegpu_gpu_operator | default(omit) }}"
      kubegpu_node_pools: "{{ kubegpu_node_pools | default(omit) }}"
      kubegpu_dra: "{{ kubegpu_dra | default(omit) }}"
      kubegpu_serving: "{{ kubegpu_serving | default(omit) }}"
"""

RETURN = r"""
errors:
  description: Per variable (or stage, for what the cluster refuses), every problem found; empty when none.
  returned: always
  type: dict
checked:
  description: Per stage, what was checked (inventory variables, packages and channels, pools and their nodes, DRA).
  returned: always
  type: dict
requirements:
  description: What someone must change outside the collection before a stage can run (e.g. DRA on a control plane
    the collection does not own), as the DRA platform step reports it.
  returned: always
  type: list
  elements: str
platform:
  description: The platform the stages were judged for (V(openshift) or V(kubernetes)); empty when the cluster was not read.
  returned: always
  type: str
"""

import copy
import os

try:
    import yaml
except ImportError:  # PyYAML comes with ansible-core; without it a local chart's CRD file is not read
    yaml = None

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import dry_run_apply
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import ClusterError
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.dra import platform_facts
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.serving import platform_facts as serving_facts
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.cluster_policy import CLUSTER_POLICY_API, spec_schema
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import (
    device_class,
    parse_claim_templates,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.platform import best_version
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.objects import (
    CONSOLE_PLUGIN_API,
    PROMETHEUS_RULE_API,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    DRA_FIELD_MANAGER,
    MACHINE_API_NAMESPACE,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.olm import MARKETPLACE_NAMESPACE, PACKAGE_API
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.preflight.inventory import variables_of
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.preflight.checks import (
    ARGUMENT_SPEC,
    GPU_OPERATOR_PACKAGE,
    NFD_PACKAGE,
    check_cluster,
    check_inventory_of,
    failure_message,
    inventory_warnings,
    setting,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.install import KSERVE_NAMESPACE

MACHINESET_API = "machine.openshift.io/v1beta1"
CLUSTER_POLICY_CRD = "clusterpolicies.nvidia.com"
CLUSTER_POLICY_CRD_FILE = "nvidia.com_clusterpolicies.yaml"


def policy_schema(cluster, variables):
    """(schema of the ClusterPolicy spec, where it was read) from the cluster's CRD, else from the CRD a local
    chart brings (Kubernetes, helm.chart a folder), else (None, None)."""
    crd = cluster.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", CLUSTER_POLICY_CRD)
    if crd is not None:
        return spec_schema(crd), "CustomResourceDefinition " + CLUSTER_POLICY_CRD
    chart = setting(variables, "kubegpu_gpu_operator.helm.chart")
    path = os.path.join(str(chart), "crds", CLUSTER_POLICY_CRD_FILE)
    if yaml is not None and os.path.isfile(path):
        with open(path) as f:
            return spec_schema(yaml.safe_load(f)), path
    return None, None


def observe(cluster, variables, stages):
    """Read what check_cluster judges, with list and get calls only (and the CRD file of a local chart)."""
    observed = {}
    platform = setting(variables, "kubegpu_platform")
    if platform not in ("openshift", "kubernetes"):
        openshift = cluster.get("config.openshift.io/v1", "ClusterVersion", "version") is not None
        platform = "openshift" if openshift else "kubernetes"
    observed["platform"] = platform
    if "gpu_operator" in stages:
        observed["policy_schema"], observed["policy_schema_source"] = policy_schema(cluster, variables)
    if "gpu_operator" in stages and platform == "openshift":
        if cluster.resource(PACKAGE_API, "PackageManifest") is None:
            observed["packages"] = None
        else:
            observed["packages"] = dict((name, cluster.get(PACKAGE_API, "PackageManifest", name, MARKETPLACE_NAMESPACE))
                                        for name in (GPU_OPERATOR_PACKAGE, NFD_PACKAGE))
    if "node_pools" in stages or "dra" in stages or "serving" in stages or "tenancy" in stages:
        observed["nodes"] = cluster.list("v1", "Node")
    if "node_pools" in stages:
        observed["machinesets"] = (cluster.list(MACHINESET_API, "MachineSet", namespace=MACHINE_API_NAMESPACE)
                                   if cluster.resource(MACHINESET_API, "MachineSet") is not None else None)
        observed["cluster_policies"] = (cluster.list(CLUSTER_POLICY_API, "ClusterPolicy")
                                        if cluster.resource(CLUSTER_POLICY_API, "ClusterPolicy") is not None else None)
    if "dra" in stages:
        observed["dra_facts"] = platform_facts(cluster)
    if "monitoring" in stages:
        observed["monitoring_served"] = dict(
            (kind, cluster.resource(api, kind) is not None)
            for api, kind in ((PROMETHEUS_RULE_API, "PrometheusRule"), (CONSOLE_PLUGIN_API, "ConsolePlugin")))
    if "serving" in stages:
        observed["serving_facts"] = serving_facts(
            cluster, setting(variables, "kubegpu_serving.kserve.namespace") or KSERVE_NAMESPACE)
    return observed


def check_cel(cluster, variables, served_versions):
    """Dry-run the DeviceClass of each claim template with its own cel (the API server compiles CEL; a dry run
    stores nothing). Returns (problems, what was checked)."""
    templates = [t for t in parse_claim_templates((variables.get("kubegpu_dra") or {}).get("claim_templates") or [])
                 if t.cel]
    if not templates:
        return [], []
    api_version = best_version(served_versions or [])
    if api_version is None:
        return [], ["claim templates' cel: checked by the dra stage once resource.k8s.io is served"]
    problems = []
    for template in templates:
        obj = device_class(template, api_version)
        try:
            dry_run_apply(cluster, obj, DRA_FIELD_MANAGER)
        except ClusterError as e:
            problems.append("kubegpu_dra.claim_templates: claim template '%s': the API server refused its DeviceClass "
                            "%s, so nothing was written: %s (check the template's cel)"
                            % (template.name, obj["metadata"]["name"], e))
    return problems, ["claim templates' cel: %d DeviceClass(es) validated by the API server (dry run)" % len(templates)]


def run(module):
    stages, variables, errors, checked, unjudged = check_inventory_of(module.inventory, module.params["stages"])
    for warning in inventory_warnings(variables, stages):
        module.warn(warning)
    platform, requirements = "", []
    # The cluster is judged for the stages whose variables could be judged: a broken variable would only repeat its
    # error. One whose only problem is an unknown key is judged without it, as the stage would run.
    sound = [s for s in stages if not unjudged.intersection(variables_of([s]))]
    if module.params["cluster"] and sound:
        observed = observe(module.cluster, variables, sound)
        platform = observed["platform"]
        judged = check_cluster(variables, sound, observed)
        for stage, problems in judged["errors"].items():
            errors.setdefault(stage, []).extend(problems)
        for stage, done in judged["checked"].items():
            checked[stage].extend(done)
        requirements = judged["requirements"]
        if "dra" in sound and "dra" not in errors:
            problems, done = check_cel(module.cluster, variables, observed["dra_facts"]["served_versions"])
            if problems:
                errors["dra"] = problems
            checked["dra"].extend(done)
    result = {"changed": False, "errors": errors, "checked": checked, "platform": platform,
              "requirements": requirements}
    if errors:
        module.fail_json(msg=failure_message(errors, stages), **result)
    return result


def main():
    module = KubegpuModule(
        argument_spec=copy.deepcopy(ARGUMENT_SPEC),
        supports_check_mode=True,
    )
    # The variables hold what users keep secret (pull secrets and NGC keys in helm values, tokens in a model's
    # env). Every result's invocation repeats the module's parameters, so from here on they name the variables
    # without their values; the values are read from module.inventory.
    module.inventory = module.params["variables"]
    module.params["variables"] = sorted(module.inventory or {})
    module.run(run)


if __name__ == "__main__":
    main()
