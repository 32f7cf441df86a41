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
    back, and writes nothing when nothing differs. RV(diff) shows each field that differs, before and after.
  - Waits for C(status.state=ready); when the policy is not ready by O(timeout) fails naming each condition's
    type, status, reason and message.
  - In check mode writes nothing and returns the desired spec and the diff.
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
    type: str
    choices: [auto, openshift, kubernetes]
    default: auto
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
    type: bool
    default: true
  timeout:
    description: Seconds to wait for C(ready).
    type: int
    default: 1200
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
attributes:
  check_mode:
    support: full
    description: Writes nothing (the API server validates changes in a dry run) and returns the spec and the diff.
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
diff:
  description:
    - C(before) and C(after), each a mapping of dotted field path (for example C(spec.cdi.enabled)) to its value,
      for the fields that differ; NVIDIADriver fields are prefixed with C(NVIDIADriver <name>:).
  returned: always
  type: dict
  sample: {before: {spec.cdi.enabled: false}, after: {spec.cdi.enabled: true}}
drivers:
  description: Each NVIDIADriver of O(nvidia_drivers) with C(name), C(changed), C(state) and C(conditions) as read before writing.
  returned: always
  type: list
  elements: dict
progress:
  description: What was awaited and when, in seconds since the start.
  returned: always
  type: list
  elements: str
"""

import time

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import apply_object
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import (
    ClusterError,
    DynamicApiError,
    describe_api_error,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.platform import AUTO, detect_platform
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.cluster_policy import (
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
    describe_conditions,
    desired_spec,
    driver_objects,
    example_of,
    field_diff,
    pick_operator_csv,
    policy_object,
    policy_status,
    readiness,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    FIELD_MANAGER,
    GPU_OPERATOR_NAMESPACE_OPENSHIFT,
    KUBERNETES,
    OPENSHIFT,
)

POLL_SECONDS = 2.0
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


def server_dry_run(cluster, obj):
    """Let the API server validate obj (schema, enums, CEL rules, unknown fields) without storing it."""
    resource = cluster.resource(obj["apiVersion"], obj["kind"])
    if resource is None:
        raise ClusterError("the API server does not serve {0} {1}: install the GPU Operator (its CRDs) first".format(
            obj["apiVersion"], obj["kind"]))
    try:
        cluster.dynamic.server_side_apply(resource, body=obj, name=obj["metadata"]["name"], field_manager=FIELD_MANAGER,
                                          force_conflicts=True, dry_run="All",
                                          query_params=[("fieldValidation", "Strict")])
    except DynamicApiError as e:
        if getattr(e, "status", None) in (401, 403):
            raise ClusterError(describe_api_error("dry-run apply {0} {1}".format(obj["kind"], obj["metadata"]["name"]), e))
        summary = getattr(e, "summary", None)
        raise ClusterError("{0} {1}: the API server refused it in a dry run (HTTP {2}), so nothing was written: {3} "
                           "Check the field names and values against the {0} schema ({4}).".format(
                               obj["kind"], obj["metadata"]["name"], getattr(e, "status", None),
                               summary() if callable(summary) else e, obj["apiVersion"]))


class Reconcile(object):
    def __init__(self, module):
        self.module = module
        self.cluster = module.cluster
        self.start = time.monotonic()
        self.progress = []
        self.live = None
        self.result = {"changed": False, "name": None, "platform": None, "base": None, "spec": {}, "state": None,
                       "conditions": [], "diff": {"before": {}, "after": {}}, "drivers": [], "progress": self.progress}

    def note(self, what):
        if not self.progress or not self.progress[-1].endswith(": " + what):
            self.progress.append("{0:.0f} s: {1}".format(time.monotonic() - self.start, what))

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
        spec, warnings = desired_spec(base, p["settings"], (self.live or {}).get("spec"), p["keep_live_fields"])
        for warning in warnings:
            self.module.warn(warning)
        r["spec"] = spec
        drivers = driver_objects(p["nvidia_drivers"], spec)
        live_drivers = dict((d["metadata"]["name"], d) for d in self.cluster.list(NVIDIA_DRIVER_API, "NVIDIADriver")) \
            if drivers else {}
        check_immutable(drivers, live_drivers)
        before, after = field_diff({"spec": spec}, self.live)
        for obj in drivers:
            dname = obj["metadata"]["name"]
            d_before, d_after = field_diff({"spec": obj["spec"]}, live_drivers.get(dname))
            before.update(("NVIDIADriver {0}: {1}".format(dname, k), v) for k, v in d_before.items())
            after.update(("NVIDIADriver {0}: {1}".format(dname, k), v) for k, v in d_after.items())
            state, conditions = policy_status(live_drivers.get(dname))
            r["drivers"].append({"name": dname, "changed": bool(d_after), "state": state, "conditions": conditions})
        r["diff"] = {"before": before, "after": after}
        return [(policy_object(name, spec), self.live)] + [(d, live_drivers.get(d["metadata"]["name"])) for d in drivers]

    def apply(self, desired):
        changes = [apply_object(self.cluster, obj, True, current=live, current_known=True) for obj, live in desired]
        for (obj, live), change in zip(desired, changes):
            if change.changed:
                server_dry_run(self.cluster, obj)
        if not self.module.check_mode:
            changes = [apply_object(self.cluster, obj, False, current=live, current_known=True) if change.changed
                       else change for (obj, live), change in zip(desired, changes)]
        self.result["changed"] = any(c.changed for c in changes)
        return changes[0].changed

    def wait(self, policy_changed):
        p, r = self.module.params, self.result
        deadline = self.start + p["timeout"]
        obj = self.live
        if policy_changed:
            # Give the operator a moment to see the new generation before trusting a `ready` state.
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
            obj = None
        while True:
            if obj is None:
                obj = self.cluster.get(CLUSTER_POLICY_API, "ClusterPolicy", r["name"])
            r["state"], r["conditions"] = policy_status(obj)
            verdict, detail = readiness(obj, (obj or {}).get("metadata", {}).get("generation"))
            self.note("ClusterPolicy {0}: {1}".format(r["name"], detail))
            if verdict == "ready":
                return
            if verdict == "ignored":
                self.fail(detail)
            if time.monotonic() >= deadline:
                self.fail(self.timeout_message())
            time.sleep(max(0.0, min(POLL_SECONDS, deadline - time.monotonic())))
            obj = None

    def timeout_message(self):
        r = self.result
        msg = "ClusterPolicy {0} not ready after {1} s (state {2}): {3}".format(
            r["name"], self.module.params["timeout"], r["state"] or "none", describe_conditions(r["conditions"]))
        if not r["state"]:
            msg += (". The GPU Operator has written no status: is it running? (OpenShift: the {0} CSV in {1} must be "
                    "Succeeded; Kubernetes: a Deployment labelled app.kubernetes.io/component=gpu-operator)".format(
                        OLM_PACKAGE, self.module.params["csv_namespace"]))
        return msg


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
            "platform": {"type": "str", "choices": [AUTO, OPENSHIFT, KUBERNETES], "default": AUTO},
            "csv_namespace": {"type": "str", "default": GPU_OPERATOR_NAMESPACE_OPENSHIFT},
            "settings": {"type": "dict", "default": {}},
            "keep_live_fields": {"type": "list", "elements": "str", "default": list(KEEP_LIVE_DEFAULT)},
            "nvidia_drivers": {"type": "list", "elements": "dict", "default": []},
            "wait": {"type": "bool", "default": True},
            "timeout": {"type": "int", "default": 1200},
        },
        supports_check_mode=True,
    )
    module.run(run)


if __name__ == "__main__":
    main()
