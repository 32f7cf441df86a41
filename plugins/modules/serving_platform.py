#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: serving_platform
short_description: Detect the serving platform (OpenShift AI 2.x/3.x, KServe), plan what it lacks, check the models before any write
version_added: 0.1.0
description:
  - Reads the cluster (ClusterVersion, the API groups served, OLM Subscriptions, the C(rhods-operator)
    PackageManifest, the DataScienceCluster and DSCInitialization, KServe's C(inferenceservice-config) ConfigMap, and
    whether the KServe, Knative Serving and KEDA controllers run) and says which serving platform it has or will
    have - OpenShift AI 2.x (Knative, formerly Serverless, mode with scale to zero, or RawDeployment), OpenShift AI
    3.x (Standard mode, scale to zero through KEDA from the Custom Metrics Autoscaler), upstream KServe with Knative,
    or upstream KServe with KEDA - and how each deployment mode scales to zero there.
  - Plans what the platform lacks - the OLM operators (for the C(olm_operator) module), the Helm charts (for
    C(kubernetes.core.helm)) and the objects that switch it on (DSCInitialization, DataScienceCluster with KServe
    C(Managed), the Custom Metrics Autoscaler's KedaController).
  - Checks every model of O(settings) against the platform, the node pools and the claim templates (placement,
    MIG profile, sizing, deployment mode, scale to zero) so that a refusal comes before the stage writes anything.
  - Read-only unless O(apply=true) - then it applies the platform objects (server-side apply, field manager
    C(kubegpu.platform/serving), only what differs) and, with O(wait), waits until the DataScienceCluster is Ready
    and KServe's API is served.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  settings:
    description:
      - The serving settings C(kubegpu_serving) - C(platform) (V(auto), V(openshift-ai), V(kserve)), C(mode) (V(auto),
        V(knative), V(standard)), C(install), C(namespace), C(openshift_ai) (C(channel), C(approval), C(source)),
        C(kserve) and C(keda) (C(namespace), C(values)), C(helm) (C(charts_dir), C(binary)), C(scale_to_zero)
        (C(retention_period), C(prometheus), C(query), C(threshold)), C(cold_start_timeout), C(runtimes) and
        C(models). See docs/serving.md.
    type: dict
    default: {}
  pools:
    description: The node pools C(kubegpu_node_pools) the models are placed on.
  claim_templates:
    description: The claim templates C(kubegpu_dra.claim_templates) models may name.
  tenancy:
    description: The tenancy settings C(kubegpu_tenancy); a model in a namespace of a team that uses Kueue is queued in
      the team's LocalQueue (labels C(kueue.x-k8s.io/queue-name) and C(kueue.x-k8s.io/priority-class)).
    type: dict
    default: {}
  apply:
    description:
      - Apply the platform objects (DSCInitialization, DataScienceCluster, KedaController) once the operators run.
      - V(false) plans only - reads, plans and checks the models, writes nothing - as the C(serving) role's first call
        does before the operators are installed.
      - The alias O(apply) is deprecated and will be removed in 2.0.0.
    type: bool
    default: false
    aliases: [enable]
  wait:
    description: With O(apply), wait until the DataScienceCluster reports Ready and C(serving.kserve.io) is served.
  timeout:
    description: Seconds to wait.
    default: 900
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubegpu.platform.wait
  - kubegpu.platform.wait.optional
  - kubegpu.platform.inputs.pools
  - kubegpu.platform.inputs.claim_templates
attributes:
  check_mode:
    support: full
    description: Reads, plans and checks; writes nothing.
  diff_mode:
    support: full
    description: With O(apply), shows the platform objects before and after.
requirements:
  - kubernetes >= 24.2.0
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: Detect the serving platform and check the models
  kubegpu.platform.serving_platform:
    settings: "{{ kubegpu_serving }}"
    pools: "{{ kubegpu_node_pools }}"
    claim_templates: "{{ kubegpu_dra.claim_templates | default([]) }}"
  register: serving

- name: Switch OpenShift AI's KServe on once its operator runs
  kubegpu.platform.serving_platform:
    settings: "{{ kubegpu_serving }}"
    apply: true
"""

RETURN = r"""
platform:
  description: The platform plan - C(platform) (openshift-ai or kserve), C(flavor) (openshift-ai-2, openshift-ai-3 or
    kserve), C(version) (OpenShift AI's), C(mode) (the models' default, knative or standard), C(mode_names) (the
    C(serving.kserve.io/deploymentMode) value of each mode here), C(scale_to_zero) (per mode - knative, keda or
    null), C(installed), C(missing), C(warnings).
  returned: always
  type: dict
operators:
  description: The olm_operator arguments of each operator to install, dependencies first (empty on Kubernetes).
  returned: always
  type: list
  elements: dict
charts:
  description: The Helm releases to install - C(name), C(namespace), C(chart) (folder name under the charts
    directory), C(chart_ref), C(repo_url), C(version) and C(values), in order.
  returned: always
  type: list
  elements: dict
objects:
  description: The platform objects applied (or to apply) with O(apply).
  returned: always
  type: list
  elements: dict
models:
  description: Per model (C(namespace/name)) its deployment mode, scale-to-zero mechanism, slice, units, GPU request
    and sizing.
  returned: always
  type: dict
facts:
  description: What was observed.
  returned: always
  type: dict
warnings_list:
  description: Every warning, also emitted as Ansible warnings.
  returned: always
  type: list
  elements: str
changes:
  description: Each platform object written (or that would be), with its C(key) and the fields that differ.
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
  description: Whether the wait is over. V(false) only when O(wait_round) ran out first; the task's C(until) calls again.
  returned: always
  type: bool
progress:
  description: The wait's progress (C(summary), C(pending), C(waited_s)).
  returned: when waiting
  type: dict
"""

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import apply_object, change_report
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.args import (
    APPLY_ARG_SPEC,
    CLAIM_TEMPLATES_ARG_SPEC,
    POOLS_ARG_SPEC,
    renamed,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.serving import (
    FIELD_MANAGER,
    PLANNING_ERRORS,
    plan_serving,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import Target, api_served, condition
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.install import (
    chart_releases,
    operators,
    platform_objects,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.platform import KSERVE_GROUP


def run(module):
    cluster, check = module.cluster, module.check_mode
    try:
        settings, facts, platform, models = plan_serving(cluster, module.params["settings"], module.params["pools"],
                                                         module.params["claim_templates"], module.params["tenancy"])
    except PLANNING_ERRORS as e:
        module.fail_json(msg=str(e), requirements=list(getattr(e, "requirements", None) or []), changed=False)
    objects = platform_objects(platform, settings, facts)
    changes = []
    if module.params["apply"]:
        changes = [apply_object(cluster, obj, check, field_manager=FIELD_MANAGER) for obj in objects]
    warnings = platform["warnings"] + models["warnings"]
    for warning in warnings:
        module.warn(warning)
    result = {"platform": platform, "operators": operators(platform, settings),
              "charts": chart_releases(platform, settings, facts), "objects": objects, "models": models["models"],
              "facts": facts, "warnings_list": warnings, "ready": True}
    result.update(change_report(changes))
    dscs = [o for o in objects if o["kind"] == "DataScienceCluster"]
    if module.params["apply"] and module.params["wait"] and not check and dscs:
        dsc = dscs[0]
        outcome = module.wait_for(Target(dsc["apiVersion"], dsc["kind"], name=dsc["metadata"]["name"]),
                                  condition("Ready"), result)
        if outcome.ready:
            module.wait_for(Target.custom(KSERVE_GROUP, read=lambda c: c.served_versions(KSERVE_GROUP)),
                            api_served(KSERVE_GROUP), result)
    return result


def main():
    module = KubegpuModule(
        argument_spec={
            "settings": {"type": "dict", "default": {}},
            "tenancy": {"type": "dict", "default": {}},
            # "Plan only" has one name in every module (args.APPLY_ARG_SPEC); `enable` was this module's.
            "apply": renamed(APPLY_ARG_SPEC["apply"], "enable", "2.0.0"),
        },
        shared=(POOLS_ARG_SPEC, CLAIM_TEMPLATES_ARG_SPEC),
        supports_check_mode=True,
        waits=True,
        timeout=900,
    )
    module.run(run)


if __name__ == "__main__":
    main()
