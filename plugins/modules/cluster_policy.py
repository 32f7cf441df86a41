#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_policy
short_description: Reconcile the GPU Operator's ClusterPolicy (and NVIDIADriver objects) and wait until it is ready
version_added: 0.1.0
description:
  - Builds the desired ClusterPolicy spec from a base and the task's O(settings), deep-merged (upstream field
    names). On OpenShift the base is the C(ClusterPolicy) entry of the installed C(gpu-operator-certified) CSV's
    C(alm-examples) (an empty spec fails, and OLM never updates the policy when the operator is upgraded); on
    Kubernetes it is what the upstream Helm chart renders from its default values.
  - Refuses, before anything is written, dead fields (C(cdi.default), C(operator.defaultRuntime),
    C(driver.useOpenKernelModules)) saying what to use instead, settings that are not ClusterPolicy sections, invalid
    values of C(driver.kernelModuleType), C(mig.strategy) and C(sandboxWorkloads.defaultWorkload) with the valid
    values, a second ClusterPolicy (the operator reconciles only one), and changes to the immutable NVIDIADriver
    fields C(driverType) and C(usePrecompiled). The API server then checks every object that would change in a
    server-side dry run with strict field validation, so a misspelt field is refused instead of silently dropped.
  - Applies the full desired spec with server-side apply on every run, so drift (a field edited by hand) is put
    back, and writes nothing when nothing differs. RV(changes) and RV(diff) show each field that differs, before
    and after.
  - What the API server defaults is never drift - a field the settings do not name is not compared (the live
    C(cdi.default) the CRD defaults to false, for one), and list items are compared as stored, with the defaults the
    CRD C(clusterpolicies.nvidia.com) gives their fields (read for this). So two runs in a row after the API server
    defaulted a field write nothing.
  - Waits for C(status.state=ready) (the collection's one waiter); when the policy is not ready by O(timeout) fails
    naming the policy, what was expected, the state and each condition's type, status, reason and message last seen,
    and for how long. With O(wait_round) the wait is spread over the rounds of the task's C(until) loop, each
    returning its RV(progress).
  - In check mode writes nothing (the changed objects are sent as server-side dry runs) and returns the
    desired spec, the changes and the diff.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  name:
    description:
      - Name of the ClusterPolicy. Default is the name in the CSV's alm-examples (C(gpu-cluster-policy)) on OpenShift,
        C(cluster-policy) (the Helm chart's) on Kubernetes.
    type: str
  platform:
    description: Where the base comes from. V(auto) is V(openshift) when the ClusterVersion C(version) exists.
  csv_namespace:
    description: Namespace of the C(gpu-operator-certified) CSV whose alm-examples give the base on OpenShift.
    type: str
    default: nvidia-gpu-operator
  settings:
    description:
      - 'ClusterPolicy spec fields merged deep over the base, in upstream names, for example
        C({cdi: {enabled: true}, driver: {kernelModuleType: open}, mig: {strategy: mixed}}).'
      - Mappings merge key by key; lists and values replace the base's; V(null) removes a field of the base.
    type: dict
    default: {}
  keep_live_fields:
    description:
      - Spec paths other stages own (the C(gpu_node_pools) module points C(devicePlugin.config) and
        C(migManager.config) at its ConfigMaps; the C(dra_nodes) module adds an entry to C(driver.manager.env)).
        Unless O(settings) names them, the values the live ClusterPolicy has are kept instead of the base's, so that
        the stages never undo each other.
    type: list
    elements: str
    default: [devicePlugin.config, migManager.config, driver.manager.env]
  nvidia_drivers:
    description:
      - NVIDIADriver objects (one driver per node pool), each C(name) and C(spec) (upstream fields such as
        C(driverType), C(usePrecompiled), C(kernelModuleType), C(version), C(nodeSelector)). Needs
        C(settings.driver.useNvidiaDriverCRD=true).
      - C(driverType) and C(usePrecompiled) of an existing object cannot change (immutable upstream), so such a change is
        refused; delete the object and run again to recreate it, which rebuilds the driver on its nodes.
    type: list
    elements: dict
    default: []
  wait:
    description: Wait for the ClusterPolicy's C(status.state) to be C(ready).
  timeout:
    description: Seconds to wait for C(ready) in all (from O(wait_started) when set).
    default: 1200
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubegpu.platform.wait
  - kubegpu.platform.wait.optional
  - kubegpu.platform.inputs.platform
attributes:
  check_mode:
    support: full
    description: Writes nothing (the API server validates each change in a dry run) and returns the spec and the diff.
  diff_mode:
    support: full
    description: Returns the fields that differ, before and after.
requirements:
  - kubernetes >= 24.2.0
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: Default ClusterPolicy for the installed operator, with open kernel modules
  kubegpu.platform.cluster_policy:
    settings:
      driver: {kernelModuleType: open}
  register: policy

- name: One driver per node pool with NVIDIADriver objects
  kubegpu.platform.cluster_policy:
    settings:
      driver: {useNvidiaDriverCRD: true}
    nvidia_drivers:
      - name: h100-precompiled
        spec:
          driverType: gpu
          usePrecompiled: true
          nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
      - name: l40s
        spec:
          driverType: gpu
          nodeSelector: {nvidia.com/gpu.product: NVIDIA-L40S}

- name: Show what would change
  kubegpu.platform.cluster_policy:
    settings: {cdi: {enabled: true}}
  check_mode: true
  diff: true
"""

RETURN = r"""
name:
  description: Name of the ClusterPolicy.
  returned: always
  type: str
  sample: gpu-cluster-policy
platform:
  description: The platform the base was chosen for.
  returned: always
  type: str
  sample: openshift
base:
  description: Where the base spec came from (the CSV whose alm-examples were used, or the Helm chart defaults).
  returned: always
  type: str
spec:
  description: The full desired spec, as applied.
  returned: always
  type: dict
state:
  description: The ClusterPolicy's C(status.state) at the end (C(ready), C(notReady), C(ignored) or null).
  returned: always
  type: str
conditions:
  description: The ClusterPolicy's conditions at the end, each C(type), C(status), C(reason) and C(message).
  returned: always
  type: list
  elements: dict
changes:
  description:
    - Each object written (or that would be, in check mode) in order, with C(key) (C(kind/name), or
      C(kind/namespace/name)), C(kind), C(namespace), C(name), the dotted C(fields) that differ and their values
      C(before) and C(after), nested as in the object (C(before) null for a new object).
  returned: always
  type: list
  elements: dict
diff:
  description:
    - C(before) and C(after), each a mapping of object key (C(ClusterPolicy/gpu-cluster-policy),
      C(NVIDIADriver/l40s)) to the fields that differ, nested as in the object.
    - Only in diff mode (C(--diff)), built from RV(changes), which lists the same changes in every mode.
  returned: in diff mode
  type: dict
  sample:
    before: {"ClusterPolicy/gpu-cluster-policy": {spec: {cdi: {enabled: false}}}}
    after: {"ClusterPolicy/gpu-cluster-policy": {spec: {cdi: {enabled: true}}}}
drivers:
  description: Each NVIDIADriver of O(nvidia_drivers) with C(name), C(changed), C(state) and C(conditions) as read before writing.
  returned: always
  type: list
  elements: dict
ready:
  description:
    - Whether the wait is over. V(false) only when O(wait_round) ran out first; the task's C(until) calls again.
  returned: always
  type: bool
progress:
  description:
    - 'What the wait saw (cluster/wait.py): C(summary) (one line, for example C(ClusterPolicy/cluster-policy: state
      notReady: Ready=False (reason OperandsNotReady): ... (40 s))), C(target), C(expected), C(ready), C(pending) and
      C(failed) (item to what was last seen and for how long), C(waited_s) (since O(wait_started)) and C(lines) (one
      per change seen, with its time).'
  returned: when the module waited
  type: dict
"""

import time

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import change_report
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.args import PLATFORM_ARG_SPEC
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import ClusterError
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.converge import Converge, key
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.platform import detect_platform
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import Target, state_ready
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.cluster_policy import (
    CLUSTER_POLICY_API,
    KEEP_LIVE_DEFAULT,
    KUBERNETES_DEFAULT_NAME,
    NVIDIA_DRIVER_API,
    OLM_PACKAGE,
    OPENSHIFT_DEFAULT_NAME,
    PolicyError,
    chart_spec,
    check_immutable,
    check_single_policy,
    desired_spec,
    driver_objects,
    example_of,
    pick_operator_csv,
    policy_object,
    policy_status,
    spec_schema,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    GPU_OPERATOR_NAMESPACE_OPENSHIFT,
    KUBERNETES,
)

POLL_SECONDS = 2.0
CRD_API = "apiextensions.k8s.io/v1"
CRD = "clusterpolicies.nvidia.com"
CSV_API = "operators.coreos.com/v1alpha1"


def base_policy(module, platform):
    """(default name, base spec, description of the base)."""
    if platform == KUBERNETES:
        return KUBERNETES_DEFAULT_NAME, chart_spec(), "Helm chart defaults (gpu-operator values.yaml)"
    ns = module.params["csv_namespace"]
    csv = pick_operator_csv(module.cluster.list(CSV_API, "ClusterServiceVersion", namespace=ns))
    if csv is None:
        raise PolicyError("no {0} ClusterServiceVersion in namespace {1}: install the GPU Operator first "
                          "(kubegpu.platform.olm_operator package={0} namespace={1}) or set csv_namespace".format(
                              OLM_PACKAGE, ns))
    name, spec = example_of(csv, "ClusterPolicy")
    return name or OPENSHIFT_DEFAULT_NAME, spec, "alm-examples of ClusterServiceVersion {0}/{1}".format(
        ns, csv["metadata"]["name"])


class Reconcile(object):
    def __init__(self, module):
        self.module = module
        self.cluster = module.cluster
        self.live = None
        self.result = {"changed": False, "name": None, "platform": None, "base": None, "spec": {}, "state": None,
                       "conditions": [], "changes": [], "drivers": [], "ready": True}

    def fail(self, msg):
        self.module.fail_json(msg=msg, **self.result)

    def plan(self):
        """Read, build and check everything; nothing is written here. Returns [(object, live object)]."""
        p, r = self.module.params, self.result
        if self.cluster.resource(CLUSTER_POLICY_API, "ClusterPolicy") is None:
            raise PolicyError("the API server does not serve {0} ClusterPolicy: install the GPU Operator first".format(
                CLUSTER_POLICY_API))
        r["platform"] = detect_platform(self.cluster, self.module.params["platform"])
        default_name, base, r["base"] = base_policy(self.module, r["platform"])
        r["name"] = name = p["name"] or default_name
        policies = self.cluster.list(CLUSTER_POLICY_API, "ClusterPolicy")
        check_single_policy(policies, name)
        self.live = next((x for x in policies if x["metadata"]["name"] == name), None)
        r["state"], r["conditions"] = policy_status(self.live)
        spec, warnings = desired_spec(base, p["settings"], (self.live or {}).get("spec"), p["keep_live_fields"],
                                      schema=spec_schema(self.cluster.get(CRD_API, "CustomResourceDefinition", CRD)))
        for warning in warnings:
            self.module.warn(warning)
        r["spec"] = spec
        drivers = driver_objects(p["nvidia_drivers"], spec)
        live_drivers = dict((d["metadata"]["name"], d) for d in self.cluster.list(NVIDIA_DRIVER_API, "NVIDIADriver")) \
            if drivers else {}
        check_immutable(drivers, live_drivers)
        for obj in drivers:
            state, conditions = policy_status(live_drivers.get(obj["metadata"]["name"]))
            r["drivers"].append({"name": obj["metadata"]["name"], "state": state, "conditions": conditions})
        return [(policy_object(name, spec), self.live)] + [(d, live_drivers.get(d["metadata"]["name"])) for d in drivers]

    def apply(self, desired):
        """Every object that differs is dry-run first (check mode stops there), then applied; nothing is pruned."""
        live = dict((key(obj), current) for obj, current in desired if current is not None)
        changes = Converge(self.cluster, self.module.check_mode, live=live).run([obj for obj, dummy in desired])
        changed = set(c.key for c in changes if c.changed)
        for entry, (obj, dummy) in zip(self.result["drivers"], desired[1:]):
            entry["changed"] = key(obj) in changed
        self.result.update(change_report(changes))
        return key(desired[0][0]) in changed

    def wait(self, policy_changed):
        r = self.result
        if policy_changed:
            # Give the operator a moment to see the new generation before trusting a `ready` state.
            time.sleep(POLL_SECONDS)
        self.module.wait_for(Target(CLUSTER_POLICY_API, "ClusterPolicy", name=r["name"]), state_ready(), r,
                             interval=POLL_SECONDS, observe=self.observe)

    def observe(self, policy):
        """Put the last read into the result; on an error, say what to check when the operator wrote no status."""
        r = self.result
        r["state"], r["conditions"] = policy_status(policy)
        if not r["state"]:
            return ("The GPU Operator has written no status: is it running? (OpenShift: the {0} CSV in {1} must be "
                    "Succeeded; Kubernetes: a Deployment labelled app.kubernetes.io/component=gpu-operator)".format(
                        OLM_PACKAGE, self.module.params["csv_namespace"]))
        return None


def run(module):
    rec = Reconcile(module)
    try:
        desired = rec.plan()
    except PolicyError as e:
        rec.fail(str(e))
    try:
        changed = rec.apply(desired)
    except ClusterError as e:
        rec.fail(str(e))
    if not module.check_mode and module.params["wait"]:
        rec.wait(changed)
    return rec.result


def main():
    module = KubegpuModule(
        argument_spec={
            "name": {"type": "str"},
            "csv_namespace": {"type": "str", "default": GPU_OPERATOR_NAMESPACE_OPENSHIFT},
            "settings": {"type": "dict", "default": {}},
            "keep_live_fields": {"type": "list", "elements": "str", "default": list(KEEP_LIVE_DEFAULT)},
            "nvidia_drivers": {"type": "list", "elements": "dict", "default": []},
        },
        shared=(PLATFORM_ARG_SPEC,),
        supports_check_mode=True,
        waits=True,
        timeout=1200,
    )
    module.run(run)


if __name__ == "__main__":
    main()
