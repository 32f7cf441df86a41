#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: serving_models
short_description: Serve models with KServe - ServingRuntimes and InferenceServices placed on a pool's GPU slice or a DRA claim template, sized, scaling to zero
version_added: 0.1.0
description:
  - Turns C(kubegpu_serving.runtimes) into ServingRuntimes (vLLM for LLMs, vLLM's pooling runner for embedding and
    reranker models) in each namespace a model uses, and C(kubegpu_serving.models) into InferenceServices.
  - Each model names a node pool (C(kubegpu_node_pools)) or a claim template (C(kubegpu_dra)); the InferenceService
    gets the GPU request that implies (whole GPUs, C(nvidia.com/mig-<profile>), the time-sliced or MPS resource, or
    a resource claim), the pool's node selector C(kubegpu.io/node-pool), the platform's scale-to-zero settings
    (Knative's C(min-scale) 0 with a retention period, or KServe's KEDA autoscaler class), a progress deadline for
    a GPU cold start (Knative mode), and vLLM arguments sized for the slice (C(--max-model-len),
    C(--gpu-memory-utilization)).
  - Refuses before anything is written, naming the model - an unknown runtime, pool or claim template, a MIG
    profile the pool does not offer, a model that does not fit its slice, a DRA claim in Knative mode, C(min_replicas
    0) where only the HPA scales. Every object that differs is validated by the API server (server-side dry run)
    before the first write.
  - Writes with server-side apply under field manager C(kubegpu.platform/serving), only what differs (a second run
    writes nothing), and deletes the runtimes and InferenceServices of earlier runs that are no longer listed.
  - With O(wait), waits until each InferenceService is Ready (a model scaled to zero is Ready at zero replicas);
    a failure names the model and the condition that is not met.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  settings:
    description: The serving settings C(kubegpu_serving) (see the serving_platform module and docs/serving.md).
    type: dict
    default: {}
  pools:
    description: The node pools C(kubegpu_node_pools).
  claim_templates:
    description: The claim templates C(kubegpu_dra.claim_templates).
  tenancy:
    description: The tenancy settings C(kubegpu_tenancy); a model in a namespace of a team that uses Kueue is queued in
      the team's LocalQueue (labels C(kueue.x-k8s.io/queue-name) and C(kueue.x-k8s.io/priority-class)).
    type: dict
    default: {}
  prune:
    description: Delete the ServingRuntimes and InferenceServices of earlier runs that are no longer listed.
    type: bool
    default: true
  wait:
    description:
      - Wait until every InferenceService is Ready.
      - C(kubegpu_serving.wait) is the C(serving) role's, which passes it here; O(settings) does not change this
        option's default.
  timeout:
    description: Seconds to wait for the models in all. Default C(kubegpu_serving.timeout).
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubegpu.platform.wait
  - kubegpu.platform.wait.optional
  - kubegpu.platform.inputs.pools
  - kubegpu.platform.inputs.claim_templates
attributes:
  check_mode:
    support: full
    description: Plans, runs the dry runs (which store nothing), writes nothing.
  diff_mode:
    support: full
    description: Shows each object before and after.
requirements:
  - kubernetes >= 24.2.0
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: Serve the models
  kubegpu.platform.serving_models:
    settings:
      runtimes:
        - {name: vllm}
        - {name: vllm-embed, type: vllm-embed}
      models:
        - name: llama-8b
          runtime: vllm
          storage_uri: hf://meta-llama/Llama-3.1-8B-Instruct
          pool: llm-h100
          mig_profile: 3g.40gb
          sizing: {parameters: 8030000000, precision: bf16, context: 8192}
        - name: bge-large
          runtime: vllm-embed
          storage_uri: hf://BAAI/bge-large-en-v1.5
          pool: embed-l40s
    pools: "{{ kubegpu_node_pools }}"
    claim_templates: "{{ kubegpu_dra.claim_templates | default([]) }}"
  register: served
"""

RETURN = r"""
models:
  description: Per model (C(namespace/name)) - C(mode), C(deployment_mode), C(scale_to_zero), C(min_replicas),
    C(max_replicas), C(pool), C(claim_template), C(slice), C(units), C(request), C(sizing), and after the wait
    C(state) (Ready, or the failing condition) and C(replicas).
  returned: always
  type: dict
platform:
  description: The platform plan (see serving_platform).
  returned: always
  type: dict
warnings_list:
  description: Every warning, also emitted as Ansible warnings.
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
  description: Whether the wait is over. V(false) only when O(wait_round) ran out first; the task's C(until) calls again.
  returned: always
  type: bool
progress:
  description: The wait's progress - C(summary), C(pending) (each model not Ready with its condition), C(waited_s).
  returned: when waiting
  type: dict
"""

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import change_report
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.args import (
    CLAIM_TEMPLATES_ARG_SPEC,
    POOLS_ARG_SPEC,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.converge import Converge, key
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.serving import (
    FIELD_MANAGER,
    PLANNING_ERRORS,
    plan_serving,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import Target, condition
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.errors import ServingError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.models import API_VERSION, MODEL_LABEL
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.runtimes import (
    API_VERSION as RUNTIME_API_VERSION,
    MANAGED_BY,
    RUNTIME_LABEL,
)

KINDS = ((API_VERSION, "InferenceService", MODEL_LABEL), (RUNTIME_API_VERSION, "ServingRuntime", RUNTIME_LABEL))


def title(obj):
    return "%s %s/%s" % (obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])


def observe(cluster):
    """Our InferenceServices and ServingRuntimes of earlier runs (one list per kind), and the namespaces."""
    managed = ",".join("%s=%s" % item for item in MANAGED_BY.items())
    ours = {}
    for api_version, kind, label in KINDS:
        if cluster.resource(api_version, kind) is None:
            raise ServingError("the API server does not serve %s %s: KServe is not installed yet (the serving role "
                               "installs it before this step: run kubegpu.platform.serving)" % (api_version, kind))
        for obj in cluster.list(api_version, kind, label_selector="%s,%s" % (managed, label)):
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
            ours[key(obj)] = obj
    namespaces = dict((n["metadata"]["name"], n) for n in cluster.list("v1", "Namespace"))
    return ours, namespaces


def refused(obj, error):
    """A dry run refused (the schema, an admission webhook): before the first write."""
    return ServingError("%s: the API server refused it, so nothing was written: %s" % (title(obj), error))


def wait_models(module, isvcs, result):
    """Wait (through the one waiter) until each InferenceService is Ready: a model scaled to zero is Ready at zero
    replicas, its idle state. One list per namespace and poll; the detail of a model not ready is its Ready
    condition's reason and message (KServe copies the predictor's: MinimumReplicasUnavailable while a pod cannot
    be scheduled, RuntimeNotRecognized, a Knative webhook's refusal)."""
    by_namespace = {}
    for obj in isvcs:
        by_namespace.setdefault(obj["metadata"]["namespace"], []).append(obj["metadata"]["name"])
    states = {}
    for namespace, names in sorted(by_namespace.items()):
        target = Target(API_VERSION, "InferenceService", namespace=namespace, names=sorted(names),
                        label_selector=MODEL_LABEL, title="InferenceServices in %s" % namespace)
        outcome = module.wait_for(target, condition("Ready"), result, timeout=result["timeout"])
        for name, (dummy, detail) in outcome.items.items():
            states["%s/%s" % (namespace, name)] = detail
        if not outcome.ready:
            break
    return states


def run(module):
    cluster, check = module.cluster, module.check_mode
    try:
        settings, facts, platform, planned = plan_serving(cluster, module.params["settings"], module.params["pools"],
                                                          module.params["claim_templates"], module.params["tenancy"])
        ours, namespaces = observe(cluster)
        # Runtimes before the InferenceServices that name them (plan order); stale InferenceServices before runtimes.
        pipeline = Converge(cluster, check, FIELD_MANAGER, live=ours, ours=ours if module.params["prune"] else {},
                            namespaces=namespaces, prune_kinds=("InferenceService",), refused=refused)
        changes = pipeline.run(planned["objects"])
    except PLANNING_ERRORS as e:
        module.fail_json(msg=str(e), requirements=list(getattr(e, "requirements", None) or []), changed=False)
    reports = planned["models"]
    wait = module.params["wait"]
    result = {"models": reports, "platform": platform, "warnings_list": list(planned["warnings"]),
              "timeout": settings.timeout if module.params["timeout"] is None else module.params["timeout"],
              "ready": True}
    result.update(change_report(changes))
    for warning in result["warnings_list"]:
        module.warn(warning)
    if wait and not check:
        states = wait_models(module, [o for o in planned["objects"] if o["kind"] == "InferenceService"], result)
        for name, state in states.items():
            reports[name]["state"] = state
    return result


def main():
    module = KubegpuModule(
        argument_spec={
            "settings": {"type": "dict", "default": {}},
            "tenancy": {"type": "dict", "default": {}},
            "prune": {"type": "bool", "default": True},
        },
        shared=(POOLS_ARG_SPEC, CLAIM_TEMPLATES_ARG_SPEC),
        supports_check_mode=True,
        waits=True,
    )
    module.run(run)


if __name__ == "__main__":
    main()
