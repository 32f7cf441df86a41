#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: dra_claim_templates
short_description: Publish claim templates (DeviceClasses and ResourceClaimTemplates) and report which nodes satisfy each
version_added: 0.1.0
description:
  - Turns each claim template into a DeviceClass C(kubegpu-<name>) (one CEL selector built from the template's
    fields, a second one for its own C(cel), the NVIDIA driver's sharing config) and, in each of its namespaces, a
    ResourceClaimTemplate C(<name>) (or a ResourceClaim C(<name>) that pods share, with C(claim=shared)).
  - Every object that differs from the cluster is first validated by the API server with a server-side dry run; if
    one is refused (a C(cel) condition that does not compile), the error names the template and nothing is
    written. Then missing namespaces are created and the objects applied with server-side apply. Objects of
    earlier runs (labelled C(app.kubernetes.io/managed-by=kubegpu.platform) and C(kubegpu.io/claim-template))
    that no template wants any more are deleted. A ResourceClaimTemplate whose spec changes is replaced (its spec
    is immutable; claims already made for pods keep theirs); a shared ResourceClaim whose spec changes is refused.
  - Reports, for each template, the devices of each node that match it and the nodes where a whole claim fits,
    read from the ResourceSlices the DRA driver publishes, and warns about a template that no node satisfies
    (pods using it would stay Pending).
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  claim_templates:
    description:
      - The claim templates C(kubegpu_dra.claim_templates). Each has C(name) and C(namespaces), and optionally
        C(device) (C(gpu) or C(mig)), C(min_memory) (e.g. C(40Gi)), C(products) (model keys, C(gpu.product) labels or
        NVML names), C(mig_profile) (with C(device=mig)), C(count), C(same_pcie_root), C(sharing) (C(strategy)
        C(time-slicing) with C(interval), or C(mps) with C(mps.default_active_thread_percentage) and
        C(mps.default_pinned_device_memory_limit)), C(claim) (C(template) or C(shared)) and C(cel) (one more
        condition, a CEL expression over C(device)). See docs/dra.md.
  prune:
    description: Delete the DeviceClasses, ResourceClaimTemplates and ResourceClaims of templates no longer listed.
    type: bool
    default: true
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubegpu.platform.inputs.claim_templates
attributes:
  check_mode:
    support: full
    description: Returns the objects and the match report, runs the dry runs (which store nothing), writes nothing.
  diff_mode:
    support: full
    description: Shows each object before and after.
requirements:
  - kubernetes >= 24.2.0
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: Publish claim templates
  kubegpu.platform.dra_claim_templates:
    claim_templates:
      - {name: gpu-40g, namespaces: [llm], min_memory: 40Gi}
      - {name: h200-pair, namespaces: [llm], products: [H200], count: 2, same_pcie_root: true}
      - {name: shared-ts, namespaces: [llm], sharing: {strategy: time-slicing, interval: Long}, claim: shared}
  register: templates
"""

RETURN = r"""
templates:
  description: Per template, C(device_class), C(claims) (namespace/name), C(devices) (per node the matching device
    names), C(nodes) (where a whole claim fits) and C(exact) (false when the template's own C(cel) was not
    evaluated by the report).
  returned: always
  type: dict
api_version:
  description: The C(resource.k8s.io) version written.
  returned: always
  type: str
warnings_list:
  description: Every warning, also emitted as Ansible warnings.
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

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import change_report
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.args import CLAIM_TEMPLATES_ARG_SPEC
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.converge import Converge, key
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import (
    parse_claim_templates,
    render_objects,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.matching import match_templates
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.platform import GROUP, best_version
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    CLAIM_TEMPLATE_LABEL,
    DRA_FIELD_MANAGER,
    MANAGED_BY,
)

KINDS = ("DeviceClass", "ResourceClaimTemplate", "ResourceClaim")
# Kinds whose spec the API server never lets change.
IMMUTABLE_SPEC = ("ResourceClaimTemplate", "ResourceClaim")
SELECTOR = ",".join(["%s=%s" % item for item in MANAGED_BY.items()] + [CLAIM_TEMPLATE_LABEL])


def title(obj):
    meta = obj["metadata"]
    return "%s %s%s" % (obj["kind"], meta["namespace"] + "/" if meta.get("namespace") else "", meta["name"])


def observe(cluster, api_version):
    """Our objects of earlier runs (one list per kind) and the namespaces that exist."""
    ours = {}
    for kind in KINDS:
        for obj in cluster.list(api_version, kind, label_selector=SELECTOR):
            if (obj.get("metadata") or {}).get("ownerReferences"):
                # A claim the ResourceClaim controller made for a pod from one of our templates: it carries the
                # template's labels, but it is the pod's (deleted with it), never ours to prune.
                continue
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
            ours[key(obj)] = obj
    namespaces = dict((n["metadata"]["name"], n) for n in cluster.list("v1", "Namespace"))
    return ours, namespaces


def replaced(obj, change):
    """Whether an existing object is deleted and created again: its spec changes and the API server never lets it.
    A shared ResourceClaim is refused instead (pods may hold it)."""
    if obj["kind"] not in IMMUTABLE_SPEC or not any(f == "spec" or f.startswith("spec.") for f in change.fields):
        return False
    if obj["kind"] == "ResourceClaim":
        raise DraError("claim template '%s': the shared ResourceClaim %s/%s would change (%s), but a claim's spec "
                       "cannot change; delete it once no pod uses it, and run again"
                       % (obj["metadata"]["labels"][CLAIM_TEMPLATE_LABEL], obj["metadata"]["namespace"],
                          obj["metadata"]["name"], ", ".join(change.fields)))
    return True


def refused(obj, error):
    return DraError("claim template '%s': the API server refused %s, so nothing was written: %s"
                    % (obj["metadata"]["labels"][CLAIM_TEMPLATE_LABEL], title(obj), error))


def run(module):
    cluster, check = module.cluster, module.check_mode
    try:
        templates = parse_claim_templates(module.params["claim_templates"])
        api_version = best_version(cluster.served_versions(GROUP))
        if api_version is None:
            raise DraError("the API server serves no %s version, so claim templates cannot be written: run "
                           "kubegpu.platform.dra_platform (the dra role does) first" % GROUP)
        rendered = render_objects(templates, api_version)
        ours, namespaces = observe(cluster, api_version)
        # Claims first, their DeviceClass last.
        pipeline = Converge(cluster, check, DRA_FIELD_MANAGER, live=ours, ours=ours if module.params["prune"] else {},
                            namespaces=namespaces, prune_kinds=reversed(KINDS), replace=replaced, refused=refused)
        changes = pipeline.run(rendered["objects"])
    except DraError as e:
        module.fail_json(msg=str(e), changed=False)
    report = match_templates(templates, cluster.list(api_version, "ResourceSlice"))
    warnings = list(rendered["warnings"])
    for template in templates:
        entry = report[template.name]
        entry["device_class"] = template.class_name
        entry["claims"] = ["%s/%s" % (ns, template.name) for ns in template.namespaces]
        if not entry["nodes"]:
            warnings.append("claim template '%s': no node's devices satisfy it (%s); pods that use it stay Pending "
                            "until such a node joins a DRA pool" % (template.name, template.expression()))
        elif not entry["exact"]:
            warnings.append("claim template '%s': its cel condition is not evaluated by this report; the %d node(s) "
                            "listed satisfy the rest" % (template.name, len(entry["nodes"])))
    for warning in warnings:
        module.warn(warning)
    result = {"templates": report, "api_version": api_version, "warnings_list": warnings}
    result.update(change_report(changes))
    return result


def main():
    module = KubegpuModule(
        argument_spec={
            "prune": {"type": "bool", "default": True},
        },
        shared=(CLAIM_TEMPLATES_ARG_SPEC,),
        supports_check_mode=True,
    )
    module.run(run)


if __name__ == "__main__":
    main()
