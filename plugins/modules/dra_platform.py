#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: dra_platform
short_description: Check that a cluster can serve Dynamic Resource Allocation, enable it on OpenShift when told, and plan the NVIDIA DRA driver
version_added: 0.1.0
description:
  - Reads the platform (the C(resource.k8s.io) versions the API server serves, C(/version), and on OpenShift the
    ClusterVersion, FeatureGate and Scheduler) and decides whether DRA can be used. Kubernetes 1.34 or later and
    OpenShift 4.21 or later are ready; Kubernetes 1.32/1.33 are refused with what the control plane needs.
  - On OpenShift 4.19/4.20 DRA is a Technology Preview behind C(featureSet TechPreviewNoUpgrade), which can never be
    undone and blocks every upgrade. The module sets it only with O(acknowledge_tech_preview_no_upgrade=true), then
    waits until the API servers serve C(resource.k8s.io); without it the run is refused and nothing is written.
  - Checks everything else the DRA stage will write before writing anything, so that a refusal leaves the cluster as
    it was; the DRA pools (C(sharing.strategy dra)) must not share a node with a device-plugin pool, the claim
    templates must parse, the driver settings must be valid, and each claim template's DeviceClass is validated by
    the API server with a server-side dry run (a C(cel) condition that does not compile is reported here).
  - On OpenShift, while a DRA pool exists, lets the DRA driver's controller and kubelet plugin service accounts use
    the C(privileged) SecurityContextConstraints (ClusterRole and ClusterRoleBinding
    C(kubegpu-dra-driver-privileged-scc), verb C(use) on C(securitycontextconstraints/privileged)), which the
    driver's privileged pods need to be admitted; takes them away again when no DRA pool remains or
    O(openshift_scc=false).
  - Returns the NVIDIA DRA driver's Helm release and chart values (GPU allocation acknowledged, C(nvidiaDriverRoot)
    from who installs the NVIDIA driver, the kubelet plugin on the DRA pools' nodes only, the feature gates the
    claim templates need) for the C(dra) role to install with C(kubernetes.core.helm).
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  pools:
    description:
      - The node pools (C(kubegpu_node_pools), see the gpu_node_pools module). Only pools with C(sharing.strategy dra)
        are the DRA stage's; the others are read to refuse a node in both kinds.
  claim_templates:
    description: The claim templates (C(kubegpu_dra.claim_templates), see the dra_claim_templates module).
  driver:
    description:
      - The NVIDIA DRA driver settings C(kubegpu_dra.driver) with C(chart_version) (default C(0.4.1)),
        C(driver_owner) (C(gpu-operator) or C(host); default read from the DRA nodes' C(nvidia.com/gpu.deploy.driver)
        label, else C(gpu-operator)), C(compute_domains), C(log_verbosity) and C(feature_gates).
    type: dict
    default: {}
  installed_release:
    description:
      - The driver release of the chart before 0.4 found in the cluster, as C(kubernetes.core.helm_info) returns it in
        C(status) (C(name), C(namespace), C(chart) such as C(nvidia-dra-driver-gpu-25.12.0)). Such a release is
        upgraded in place, under its own name and namespace with C(nameOverride nvidia-dra-driver-gpu), rather than
        a second driver installed beside it; a downgrade is refused.
    type: dict
  acknowledge_tech_preview_no_upgrade:
    description:
      - On OpenShift 4.19/4.20 with the default feature set, set FeatureGate C(cluster) C(spec.featureSet) to
        C(TechPreviewNoUpgrade). This cannot be undone and blocks every upgrade of the cluster.
    type: bool
    default: false
  openshift_scc:
    description:
      - On OpenShift, grant the DRA driver's service accounts the C(privileged) SCC (see the description). V(false)
        removes the grant this module made, for clusters where someone else grants it.
    type: bool
    default: true
  wait:
    description: After enabling the Technology Preview, wait until the API servers serve C(resource.k8s.io).
  timeout:
    description: Seconds to wait for C(resource.k8s.io) to be served.
    default: 1800
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubegpu.platform.wait
  - kubegpu.platform.wait.optional
  - kubegpu.platform.inputs.pools
  - kubegpu.platform.inputs.claim_templates
attributes:
  check_mode:
    support: full
    description: Returns the plan (and runs the dry runs, which store nothing) and writes nothing.
  diff_mode:
    support: full
    description: Shows the FeatureGate and Scheduler changes.
requirements:
  - kubernetes >= 24.2.0
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: Check the platform and plan the DRA driver
  kubegpu.platform.dra_platform:
    pools: "{{ kubegpu_node_pools }}"
    claim_templates: "{{ kubegpu_dra.claim_templates }}"
    driver: {driver_owner: gpu-operator}
  register: dra

- name: Enable the DRA Technology Preview on OpenShift 4.20 (irreversible)
  kubegpu.platform.dra_platform:
    acknowledge_tech_preview_no_upgrade: true
"""

RETURN = r"""
ready:
  description:
    - Whether the wait is over. V(false) only when O(wait_round) ran out first; the task's C(until) calls again.
  returned: always
  type: bool
progress:
  description:
    - 'What the last wait saw (cluster/wait.py): C(summary) (one line, for example C(ResourceSlices: 1/2 ready;
      gpu-2: no ResourceSlice of gpu.nvidia.com (40 s))), C(target), C(expected), C(ready) (items ready),
      C(pending) and C(failed) (item to what was last seen and for how long), C(waited_s) (since O(wait_started))
      and C(lines) (one per change seen, with its time).'
  returned: when the module waited
  type: dict
platform:
  description: The platform plan; C(platform), C(version), C(api_version) (the resource.k8s.io version written),
    C(ready), C(writes), C(wait_for), C(warnings).
  returned: always
  type: dict
api_version:
  description: The C(resource.k8s.io) version to write (C(resource.k8s.io/v1) and so on); null while none is served.
  returned: always
  type: str
dra_pools:
  description: Per DRA pool, the names of its nodes.
  returned: always
  type: dict
driver:
  description: The driver's Helm C(release) (name, namespace, chart, repository, chart_version, name_override),
    chart C(values), C(owner) (who installs the NVIDIA driver, V(gpu-operator) or V(host)), C(warnings) and
    C(requirements) (what the control plane must have).
  returned: always
  type: dict
warnings_list:
  description: Every warning of the plan, also emitted as Ansible warnings.
  returned: always
  type: list
  elements: str
requirements:
  description: On a refusal, what someone must change outside the collection.
  returned: on failure
  type: list
  elements: str
scc:
  description: The service accounts (C(namespace/name)) granted the C(privileged) SCC; empty when none is.
  returned: always
  type: list
  elements: str
changes:
  description:
    - Each object written (or that would be, in check mode) in order, with C(key) (C(kind/name), or
      C(kind/namespace/name)), C(kind), C(namespace), C(name), the dotted C(fields) that differ and their values
      C(before) and C(after), nested as in the object (C(before) null for a new object, C(after) null for a deleted one).
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
"""

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import (
    apply_object,
    change_report,
    delete_object,
    dry_run_apply,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.args import (
    CLAIM_TEMPLATES_ARG_SPEC,
    POOLS_ARG_SPEC,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import ClusterError
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.dra import platform_facts, served_target
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import api_served
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import (
    device_class,
    needed_gates,
    parse_claim_templates,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.driver_values import (
    GPU_OPERATOR,
    driver_owner_from_nodes,
    driver_values,
    installed_from_helm,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.platform import GROUP, OPENSHIFT, plan_platform
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.pools import dra_pool_nodes
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.scc import LABELS, scc_objects, service_accounts
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    CLAIM_TEMPLATE_LABEL,
    DRA_FIELD_MANAGER,
    DRIVER_DEPLOY_LABEL,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError


def validate_device_classes(cluster, templates, api_version):
    """Dry-run each template's DeviceClass: the API server compiles the CEL; raise DraError naming the template."""
    for template in templates:
        obj = device_class(template, api_version)
        try:
            dry_run_apply(cluster, obj, DRA_FIELD_MANAGER)
        except ClusterError as e:
            raise DraError("claim template '%s': the API server refused its DeviceClass %s, so nothing was written: "
                           "%s (check the template's cel)"
                           % (obj["metadata"]["labels"][CLAIM_TEMPLATE_LABEL], obj["metadata"]["name"], e))


def plan_driver(module, nodes, dra_pools, templates, kubernetes_version):
    settings = dict(module.params["driver"] or {})
    warnings = []
    if not settings.get("driver_owner"):
        names = set(n for pool in dra_pools.values() for n in pool)
        owner = driver_owner_from_nodes([n for n in nodes if n["metadata"]["name"] in names])
        if owner is None:
            owner = GPU_OPERATOR
            if names:
                warnings.append("no DRA node says who installs the NVIDIA driver (%s); assuming the GPU Operator "
                                "(set kubegpu_dra.driver.driver_owner: host otherwise)" % DRIVER_DEPLOY_LABEL)
        settings["driver_owner"] = owner
    installed = installed_from_helm(module.params["installed_release"])
    driver = driver_values(settings, kubernetes_version, needed_gates(templates), installed)
    driver["warnings"] = warnings + driver["warnings"]
    driver["owner"] = settings["driver_owner"]
    return driver


def reconcile_scc(cluster, check, wanted, release):
    """Apply the privileged-SCC grant when wanted, else delete the one this module made. Returns Changes."""
    objects = scc_objects(release)
    if wanted:
        return [apply_object(cluster, obj, check, field_manager=DRA_FIELD_MANAGER) for obj in objects]
    changes = []
    for obj in objects:
        live = cluster.get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"])
        labels = ((live or {}).get("metadata") or {}).get("labels") or {}
        if live is not None and all(labels.get(k) == v for k, v in LABELS.items()):
            changes.append(delete_object(cluster, live, check))
    return changes


def run(module):
    cluster, check = module.cluster, module.check_mode
    try:
        templates = parse_claim_templates(module.params["claim_templates"])
        nodes = cluster.list("v1", "Node")
        dra_pools = dra_pool_nodes(module.params["pools"], nodes)
        facts = platform_facts(cluster)
        plan = plan_platform(facts, module.params["acknowledge_tech_preview_no_upgrade"])
        driver = plan_driver(module, nodes, dra_pools, templates, facts["kubernetes_version"])
        if plan["api_version"]:
            validate_device_classes(cluster, templates, plan["api_version"])
    except (DraError, PoolError) as e:
        module.fail_json(msg=str(e), requirements=list(getattr(e, "requirements", None) or []), changed=False)
    changes = [apply_object(cluster, obj, check, field_manager=DRA_FIELD_MANAGER) for obj in plan["writes"]]
    scc = plan["platform"] == OPENSHIFT and bool(dra_pools) and module.params["openshift_scc"]
    changes += reconcile_scc(cluster, check, scc, driver["release"])
    api_version = plan["api_version"]
    waited = {"ready": True}
    if not api_version and not check and module.params["wait"]:
        # Written now or by an earlier round: the control plane rolls the feature set out node by node.
        waited = change_report(changes)
        outcome = module.wait_for(served_target(), api_served(GROUP), waited, interval=5.0)
        if outcome.ready:
            api_version = "resource.k8s.io/" + outcome.observed[0]
    warnings = plan["warnings"] + driver["warnings"]
    for warning in warnings:
        module.warn(warning)
    result = {"platform": plan, "api_version": api_version,
              "dra_pools": dra_pools, "driver": driver, "warnings_list": warnings,
              "scc": ["%s/%s" % sa for sa in service_accounts(driver["release"])] if scc else [],
              "ready": waited["ready"]}
    if "progress" in waited:
        result["progress"] = waited["progress"]
    result.update(change_report(changes))
    return result


def main():
    module = KubegpuModule(
        argument_spec={
            "driver": {"type": "dict", "default": {}},
            "installed_release": {"type": "dict"},
            "acknowledge_tech_preview_no_upgrade": {"type": "bool", "default": False},
            "openshift_scc": {"type": "bool", "default": True},
        },
        shared=(POOLS_ARG_SPEC, CLAIM_TEMPLATES_ARG_SPEC),
        supports_check_mode=True,
        waits=True,
        timeout=1800,
    )
    module.run(run)


if __name__ == "__main__":
    main()
