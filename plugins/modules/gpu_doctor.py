#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_doctor
short_description: Diagnose GPU nodes and GPU pods for known failure patterns
version_added: 0.1.0
description:
  - Reads the cluster once and looks for the failures people otherwise troubleshoot by hand, on every GPU node and
    every pod that requests an C(nvidia.com/*) resource. Each finding names its evidence (object, field, value) and
    the fix.
  - "Patterns: C(cuda_mismatch) (the CUDA an image declares in C(NVIDIA_REQUIRE_CUDA) above what the node's driver
    supports), C(oom_killed), C(pending_for_gpu) (with the pools that could host the pod), C(mig_failed),
    C(mig_pending_too_long), C(operands_paused) (left paused-for-mig-change), C(device_plugin_not_advertising),
    C(dcgm_exporter_missing), C(dcgm_not_scraped), C(time_slicing_oversubscribed), C(gpu_lost). See docs/doctor.md."
  - "Verdict: C(failing) when any finding is failing (work cannot run, or hardware is lost), C(degraded) when any is
    degraded (work runs but is at risk or unobserved), else C(healthy)."
  - Read-only (list and get requests only, a fixed number of them whatever the fleet's size); the same in check mode.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  mig_pending_timeout:
    description:
      - Seconds a node's C(nvidia.com/mig.config.state) may stay C(pending) before it is reported as stuck.
      - The start of the change is when the label was last written, from the node's C(metadata.managedFields)
        (the API server stamps each writer's entry with the time of its last change).
    type: int
    default: 900
  fail_on:
    description:
      - The verdict from which C(unhealthy) is true; the doctor role fails the run on it.
      - C(failing) only a failing verdict, C(degraded) a degraded or failing one, C(never) none.
      - The module itself never fails on a verdict, so that its findings are always returned.
    type: str
    choices: [failing, degraded, never]
    default: failing
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
requirements:
  - kubernetes >= 24.2.0
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: Diagnose the GPU fleet
  kubegpu.platform.gpu_doctor:
  register: doctor

- name: Fail on anything that blocks GPU work
  ansible.builtin.assert:
    that: doctor.summary.verdict != 'failing'
    fail_msg: "{{ doctor.findings | map(attribute='message') | list }}"

- name: Be patient with slow MIG changes (30 minutes)
  kubegpu.platform.gpu_doctor:
    mig_pending_timeout: 1800
"""

RETURN = r"""
summary:
  description:
    - C(verdict) (healthy, degraded, failing), C(findings) (their number), C(counts) (findings per pattern, every
      pattern listed) and C(severities) (findings per severity).
  returned: always
  type: dict
  sample:
    verdict: failing
    findings: 2
    counts: {mig_failed: 1, oom_killed: 1, cuda_mismatch: 0}
    severities: {failing: 1, degraded: 1}
findings:
  description:
    - One entry per problem found, worst first, each with C(pattern), C(severity) (failing or degraded), C(object)
      (Kind/namespace/name), C(field), C(value) (the evidence), C(message) and C(fix) (what to run or change).
  returned: always
  type: list
  elements: dict
  sample:
    - pattern: mig_failed
      severity: failing
      object: Node/gpu-h100-0
      field: metadata.labels[nvidia.com/mig.config.state]
      value: failed
      message: "mig-manager could not apply MIG config 'kubegpu-llm-h100' on node gpu-h100-0 (pool llm-h100)"
      fix: "Read the nvidia-mig-manager pod's log on gpu-h100-0 ..."
checked:
  description: What was examined, C(gpu_nodes) and C(gpu_pods) (pods requesting an nvidia.com/* resource).
  returned: always
  type: dict
  sample: {gpu_nodes: 6, gpu_pods: 12}
notes:
  description:
    - What cannot be measured, per node pool - C(pool), C(nodes) (count), C(field), C(message), C(fix). Today the
      DRA pools, whose GPU metrics carry no pod under a ClusterPolicy. Notes leave the verdict alone.
  returned: when there is one
  type: list
  elements: dict
unhealthy:
  description: Whether the verdict reaches C(fail_on).
  returned: always
  type: bool
platform:
  description: The platform the cluster runs (openshift or kubernetes).
  returned: always
  type: str
"""

import time

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.platform import detect_platform
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.diagnose import (
    DEFAULT_MIG_PENDING_TIMEOUT,
    diagnose,
    reconciled_policy,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.doctor.findings import FAIL_ON, should_fail

SERVICE_MONITOR_API = "monitoring.coreos.com/v1"


def gather(module):
    cluster = module.cluster
    policies = cluster.list("nvidia.com/v1", "ClusterPolicy")
    namespace = ((reconciled_policy(policies) or {}).get("status") or {}).get("namespace")
    daemonsets, service_monitors, ns = [], None, None
    if namespace:
        daemonsets = cluster.list("apps/v1", "DaemonSet", namespace=namespace)
        if cluster.resource(SERVICE_MONITOR_API, "ServiceMonitor") is not None:
            service_monitors = cluster.list(SERVICE_MONITOR_API, "ServiceMonitor", namespace=namespace)
        ns = cluster.get("v1", "Namespace", namespace)
    platform = detect_platform(cluster)
    result = diagnose(cluster.list("v1", "Node"), cluster.list("v1", "Pod"), policies=policies,
                      daemonsets=daemonsets, service_monitors=service_monitors, namespace=ns, platform=platform,
                      now=time.time(), mig_pending_timeout=module.params["mig_pending_timeout"])
    return dict(result, changed=False, platform=platform,
                unhealthy=should_fail(result["summary"]["verdict"], module.params["fail_on"]))


def main():
    module = KubegpuModule(argument_spec={
        "mig_pending_timeout": {"type": "int", "default": DEFAULT_MIG_PENDING_TIMEOUT},
        "fail_on": {"type": "str", "choices": list(FAIL_ON), "default": "failing"},
    }, supports_check_mode=True)
    module.run(gather)


if __name__ == "__main__":
    main()
