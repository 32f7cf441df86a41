#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: dra_crds
short_description: Serve the NVIDIA DRA driver chart's ComputeDomain CRDs, not the GPU Operator's older copy
version_added: 0.1.0
description:
  - The NVIDIA DRA driver chart and, since GPU Operator 26.7.0, the GPU Operator chart both ship the CRDs
    C(computedomains.resource.nvidia.com) and C(computedomaincliques.resource.nvidia.com). The operator's copy of
    C(computedomains) is older (it requires C(spec.numNodes)), Helm creates a chart's CRDs only when they are
    missing and never updates them, and the GPU Operator stage runs first, so without this module the operator's
    schema is served and a ComputeDomain valid for the DRA driver (without C(numNodes)) is refused.
  - While the DRA stage installs the driver, the driver chart's schema is the one served (upstream made the
    operator's copy the same after 26.7.0, NVIDIA/gpu-operator#2858). This module compares each CRD the cluster
    serves with the chart's (O(chart_crds)) and applies the chart's with server-side apply under the field manager
    C(kubegpu.platform/dra) only when the schema differs. A CRD not served yet is left to the chart's install.
  - Refused before anything is written when the cluster still stores objects in a version the chart's CRD no
    longer serves (C(status.storedVersions)).
  - Check mode returns the plan and sends each apply as a server-side dry run.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  chart_crds:
    description:
      - The documents of the DRA driver chart's C(crds/) folder, parsed (the role passes
        C(helm show crds <chart>) through C(from_yaml_all)). Documents other than the two ComputeDomain CRDs are
        ignored.
    type: list
    elements: raw
    required: true
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
attributes:
  check_mode:
    support: full
    description: Returns the plan and writes nothing (each apply is sent as a server-side dry run).
  diff_mode:
    support: full
    description: Shows each replaced CRD's C(spec.versions) before and after.
requirements:
  - kubernetes >= 24.2.0
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: Read the DRA driver chart's CRDs
  ansible.builtin.command:
    argv: [helm, show, crds, oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu, --version, 0.4.1]
  register: crds
  changed_when: false
  check_mode: false

- name: Serve the DRA driver's ComputeDomain CRDs
  kubegpu.platform.dra_crds:
    chart_crds: "{{ crds.stdout | from_yaml_all | list }}"
"""

RETURN = r"""
owner:
  description: Whose ComputeDomain CRDs are served after the run; V(dra-driver) here (the GPU Operator's copy is
    left only where the DRA stage installs no driver, and then this module is not called).
  returned: always
  type: str
crds:
  description:
    - Per CRD name, C(state) - V(chart) (served as the chart has it), V(replace) (served with another schema; the
      chart's was applied, or would be in check mode), V(missing) (not served; the chart's install creates it) -
      and C(differences), one line per schema field that differed (served value -> chart value).
  returned: always
  type: dict
changes:
  description:
    - Each object written (or that would be, in check mode) in order, with C(key) (C(kind/name)), C(kind),
      C(namespace), C(name), the dotted C(fields) that differ and their values C(before) and C(after).
  returned: always
  type: list
  elements: dict
diff:
  description:
    - C(before) and C(after), each a mapping of object key to the fields that differ.
    - Only in diff mode (C(--diff)), built from RV(changes).
  returned: in diff mode
  type: dict
"""

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import apply_object, change_report
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.crds import (
    COMPUTE_DOMAIN_CRDS,
    CRD_API,
    chart_crds,
    plan_crds,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DRA_FIELD_MANAGER


def run(module):
    cluster = module.cluster
    try:
        wanted = chart_crds(module.params["chart_crds"])
        if not wanted:
            module.warn("the DRA driver chart ships none of %s: nothing to serve from it"
                        % ", ".join(COMPUTE_DOMAIN_CRDS))
        served = dict((name, cluster.get(CRD_API, "CustomResourceDefinition", name)) for name in sorted(wanted))
        plan = plan_crds(wanted, served)
    except DraError as e:
        module.fail_json(msg=str(e), changed=False)
    changes = [apply_object(cluster, body, module.check_mode, current=served[body["metadata"]["name"]],
                            current_known=True, field_manager=DRA_FIELD_MANAGER)
               for body in plan["apply"]]
    result = {"owner": plan["owner"], "crds": plan["crds"]}
    result.update(change_report(changes))
    return result


def main():
    module = KubegpuModule(
        argument_spec={
            "chart_crds": {"type": "list", "elements": "raw", "required": True},
        },
        supports_check_mode=True,
    )
    module.run(run)


if __name__ == "__main__":
    main()
