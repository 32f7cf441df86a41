#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: olm_operator
short_description: Install or upgrade an operator through OLM, approving only the InstallPlan of the expected CSV
version_added: 0.1.0
description:
  - Looks the package up in the catalog (its PackageManifest in C(openshift-marketplace)) and refuses, before
    anything is written, a package the catalog does not have (listing the packages it has), a channel the package
    does not offer (listing its channels and the default) and a CSV that is not in the channel.
  - Creates or updates the Namespace, the OperatorGroup and the Subscription with server-side apply, each only
    when something differs, so a second run writes nothing.
  - With O(approval=Manual) approves only the InstallPlan whose C(spec.clusterServiceVersionNames) is exactly the
    CSV to install next, so there is never a surprise upgrade. Plans for other CSVs (OLM offers the channel's next CSV as soon as
    one is installed) stay unapproved and are returned in RV(pending_plans).
  - When O(csv) names a newer CSV of the channel than the installed one, upgrades one CSV at a time along the
    channel, approving exactly the plan of the next CSV and waiting for it, until O(csv) runs.
  - Waits (the collection's one waiter) for the CSV to reach phase C(Succeeded), reading the Subscription, the
    InstallPlans and the CSV every 2 seconds; fails with the CSV's reason and message when it fails, and on timeout
    names what was expected, what was last seen and for how long, the Subscription's state and conditions (such as
    C(ResolutionFailed)) and the InstallPlans left. With O(wait_round) the wait is spread over the rounds of the
    task's C(until) loop, each returning its RV(progress).
  - In check mode writes nothing (the objects that differ are sent as server-side dry runs; objects in a namespace
    that does not exist yet cannot be) and returns the plan of what would be created and approved.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  package:
    description: Name of the OLM package, as in its PackageManifest (for example C(gpu-operator-certified), C(nfd)).
    type: str
    required: true
  namespace:
    description: Namespace the operator is installed in (Subscription, OperatorGroup, CSV).
    type: str
    required: true
  channel:
    description: Channel to subscribe to. Default is the package's C(status.defaultChannel).
    type: str
  source:
    description: CatalogSource of the Subscription. Default is the PackageManifest's C(status.catalogSource).
    type: str
  source_namespace:
    description: Namespace of the CatalogSource. Default is the PackageManifest's C(status.catalogSourceNamespace).
    type: str
  csv:
    description:
      - The CSV expected to run, for example C(gpu-operator-certified.v26.3.3). Default is the channel's head
        (C(currentCSV)).
      - On a new install it is the Subscription's C(startingCSV); on an existing install a newer CSV of the channel
        is reached one upgrade at a time. A CSV older than the installed one is refused (OLM does not downgrade).
    type: str
  approval:
    description:
      - The Subscription's C(installPlanApproval).
      - With V(Manual) the module approves only the plan of the CSV it installs; OLM never upgrades on its own.
      - With V(Automatic) OLM approves every plan, including upgrades past O(csv) whenever the channel moves.
    type: str
    choices: [Manual, Automatic]
    default: Manual
  operator_group:
    description: The namespace's OperatorGroup. OLM allows one per namespace; one that already exists is adopted when its targets match.
    type: dict
    suboptions:
      name:
        description: Its name. Default is C(<namespace>-group), or the existing group's name.
        type: str
      target_namespaces:
        description: Namespaces the operator watches. Default is O(namespace) alone; V([]) means all namespaces.
        type: list
        elements: str
  create_namespace:
    description: Create the namespace when it does not exist. With V(false) a missing namespace is an error.
    type: bool
    default: true
  namespace_labels:
    description:
      - Labels the namespace must carry, for example C(openshift.io/cluster-monitoring=true) so that OpenShift
        monitoring scrapes the operator's metrics in a namespace other than C(nvidia-gpu-operator).
      - Labels already on the namespace and not named here are left alone.
    type: dict
  wait:
    description:
      - Wait until the expected CSV reaches phase C(Succeeded).
      - With V(false) the module still waits (up to O(timeout)) for the InstallPlan it must approve, approves it and
        returns; a multi-step upgrade then moves one step per run.
  timeout:
    description: Seconds to wait in all (from O(wait_started) when set).
    default: 1200
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubegpu.platform.wait
  - kubegpu.platform.wait.optional
attributes:
  check_mode:
    support: full
    description: Writes nothing (changes are server-side dry runs) and returns the plan (objects to create or update,
      InstallPlans to approve).
  diff_mode:
    support: full
    description: Shows the fields of the Namespace, OperatorGroup and Subscription that change.
notes:
  - OLM is part of OpenShift; on other clusters it must be installed first (the module fails when the
    C(packages.operators.coreos.com) API is not served).
requirements:
  - kubernetes >= 24.2.0
  - kubernetes.core collection
"""

EXAMPLES = r"""
- name: Install the NVIDIA GPU Operator from the certified catalog, default channel
  kubegpu.platform.olm_operator:
    package: gpu-operator-certified
    namespace: nvidia-gpu-operator
  register: gpu_operator

- name: Install Node Feature Discovery (automatic upgrades, monitored namespace)
  kubegpu.platform.olm_operator:
    package: nfd
    namespace: openshift-nfd
    channel: stable
    approval: Automatic
    namespace_labels:
      openshift.io/cluster-monitoring: "true"

- name: Pin the GPU Operator to one CSV of the v26.3 channel (upgrades one step at a time up to it)
  kubegpu.platform.olm_operator:
    package: gpu-operator-certified
    namespace: nvidia-gpu-operator
    channel: v26.3
    csv: gpu-operator-certified.v26.3.3
    timeout: 1800

- name: Show what would be created and approved
  kubegpu.platform.olm_operator:
    package: gpu-operator-certified
    namespace: nvidia-gpu-operator
  check_mode: true
  register: olm_plan
"""

RETURN = r"""
installed_csv:
  description: The CSV installed at the end (in check mode, the one installed now).
  returned: always
  type: str
  sample: gpu-operator-certified.v26.3.3
version:
  description: Version of the installed CSV (in check mode, of the CSV that would be installed when none is).
  returned: always
  type: str
  sample: 26.3.3
csv:
  description: The CSV expected to run (O(csv) or the channel head).
  returned: always
  type: str
channel:
  description: The channel subscribed to.
  returned: always
  type: str
  sample: v26.3
namespace:
  description: The operator's namespace.
  returned: always
  type: str
subscription:
  description: The Subscription's name, C(state) (for example C(AtLatestKnown), C(UpgradePending)), C(installed_csv),
    C(current_csv) and C(conditions) (type, status, reason, message).
  returned: always
  type: dict
approved_plans:
  description: InstallPlans this run approved (or would approve, in check mode), each with C(name) and C(csvs).
  returned: always
  type: list
  elements: dict
pending_plans:
  description:
    - InstallPlans of the Subscription left unapproved, each with C(name), C(csvs) and C(phase), such as the plan OLM
      offers for the channel's next CSV. Approve them by running the module with that O(csv).
  returned: always
  type: list
  elements: dict
plan:
  description:
    - What the run does (or would do, in check mode) before waiting. C(objects) lists each object with the fields
      that differ (C((new object)) when it is created); C(install) lists the CSVs to install in order, each with the
      InstallPlan to approve when it exists already.
  returned: always
  type: dict
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
    - C(before) and C(after), each a mapping of object key (for example
      C(Subscription/nvidia-gpu-operator/gpu-operator-certified)) to the fields that differ.
    - Only in diff mode (C(--diff)), built from RV(changes), which lists the same changes in every mode.
  returned: in diff mode
  type: dict
ready:
  description:
    - Whether the wait is over. V(false) only when O(wait_round) ran out first; the task's C(until) calls again.
  returned: always
  type: bool
progress:
  description:
    - 'What the wait saw (cluster/wait.py): C(summary) (one line), C(target), C(expected), C(ready), C(pending) and
      C(failed) (item to what was last seen and for how long), C(waited_s) (since O(wait_started)) and C(lines) (one
      per change seen, with its time, for example C(2 s: package gpu-operator-certified (Subscription ...): CSV
      gpu-operator-certified.v26.3.2 phase Installing (0 s))).'
  returned: when the module waited
  type: dict
"""

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import (
    apply_object,
    change_report,
    patch_object,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import FAILED as WAIT_FAILED
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import READY, WAITING, Predicate, Target
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.olm import (
    APPROVE,
    DONE,
    FAILED,
    MARKETPLACE_NAMESPACE,
    WAIT,
    OLM_V1,
    OLM_V1ALPHA1,
    PACKAGE_API,
    OlmError,
    choose_operator_group,
    csv_phase,
    csv_version,
    describe_subscription,
    find_subscription,
    namespace_object,
    next_step,
    not_found_message,
    package_csvs,
    pending_plans,
    plan_for,
    plans_of,
    select,
    subscription_object,
    subscription_status,
    upgrade_steps,
    watched_csv,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.uninstall.ownership import mark_created_namespace

POLL_SECONDS = 2.0


class Install(object):
    """One run: what was resolved and observed, what was written, and what the wait saw."""

    def __init__(self, module):
        self.module = module
        self.cluster = module.cluster
        self.params = module.params
        self.changes, self.approved = [], []
        self.waited = {"ready": True}
        self.choice = self.manifest = self.sub = self.sub_name = None
        self.plans, self.csv, self.planned_install = [], None, []

    def fail(self, msg):
        self.module.fail_json(msg=msg, **self.result())

    # -- reads and checks: everything that can be refused is refused here, before any write
    def resolve(self):
        p = self.params
        if self.cluster.resource(PACKAGE_API, "PackageManifest") is None:
            self.module.fail_json(msg="the API server does not serve {0} PackageManifest: OLM is not installed on this "
                                      "cluster (on Kubernetes, install the operator with Helm)".format(PACKAGE_API))
        self.manifest = self.cluster.get(PACKAGE_API, "PackageManifest", p["package"], MARKETPLACE_NAMESPACE)
        if self.manifest is None:
            names = [m["metadata"]["name"] for m in
                     self.cluster.list(PACKAGE_API, "PackageManifest", namespace=MARKETPLACE_NAMESPACE)]
            self.module.fail_json(msg=not_found_message(p["package"], names))
        self.choice = select(self.manifest, p["channel"], p["csv"], p["source"], p["source_namespace"])

    def observe(self):
        ns = self.params["namespace"]
        current_ns = self.cluster.get("v1", "Namespace", ns)
        if current_ns is None and not self.params["create_namespace"]:
            self.module.fail_json(msg="namespace {0} does not exist: create it or set create_namespace: true".format(ns))
        exists = current_ns is not None
        groups = self.cluster.list(OLM_V1, "OperatorGroup", namespace=ns) if exists else []
        subs = self.cluster.list(OLM_V1ALPHA1, "Subscription", namespace=ns) if exists else []
        self.sub = find_subscription(subs, self.choice["package"])
        self.plans = self.own_plans(self.cluster.list(OLM_V1ALPHA1, "InstallPlan", namespace=ns) if self.sub else [])
        installed = ((self.sub or {}).get("status") or {}).get("installedCSV")
        upgrade_steps(self.choice["chain"], installed, self.choice["csv"])  # refuses a downgrade before writing
        og = self.params["operator_group"] or {}
        targets = og.get("target_namespaces")
        group = choose_operator_group(groups, ns, og.get("name") or "{0}-group".format(ns), bool(og.get("name")),
                                      [ns] if targets is None else targets)
        self.sub_name = self.sub["metadata"]["name"] if self.sub else self.choice["package"]
        # startingCSV only matters for the first install: keep what an existing Subscription has, so that an
        # upgrade does not rewrite it.
        starting = ((self.sub or {}).get("spec") or {}).get("startingCSV") if self.sub else self.choice["csv"]
        desired = []
        if self.params["create_namespace"] or self.params["namespace_labels"]:
            # Marked managed-by when this run creates it, so that the uninstall knows the namespace is ours.
            desired.append((mark_created_namespace(namespace_object(ns, self.params["namespace_labels"]), current_ns),
                            current_ns))
        desired.append((group, next((g for g in groups if g["metadata"]["name"] == group["metadata"]["name"]), None)))
        desired.append((subscription_object(self.sub_name, ns, self.choice, self.params["approval"], starting), self.sub))
        return desired

    def own_plans(self, plans):
        return plans_of(plans, self.sub, package_csvs(self.manifest))

    # -- plan
    def install_plan(self):
        installed = ((self.sub or {}).get("status") or {}).get("installedCSV")
        steps = upgrade_steps(self.choice["chain"], installed, self.choice["csv"])
        out = []
        for csv in steps:
            to_approve, approved = plan_for(self.plans, csv)
            plan = to_approve or approved
            out.append({"csv": csv, "install_plan": plan["metadata"]["name"] if plan else None,
                        "approved": bool(approved) or self.params["approval"] == "Automatic"})
        return out

    # -- writes and the wait
    def apply(self, desired):
        for obj, current in desired:
            self.changes.append(apply_object(self.cluster, obj, self.module.check_mode, current=current,
                                             current_known=True))

    def read_progress(self):
        ns = self.params["namespace"]
        self.sub = self.cluster.get(OLM_V1ALPHA1, "Subscription", self.sub_name, ns)
        self.plans = self.own_plans(self.cluster.list(OLM_V1ALPHA1, "InstallPlan", namespace=ns)) if self.sub else []
        target = watched_csv(self.choice, self.params["approval"], self.sub)[0]
        self.csv = self.cluster.get(OLM_V1ALPHA1, "ClusterServiceVersion", target, ns)

    def converge(self, outcome):
        """Wait through the one waiter. Each poll reads the Subscription, its InstallPlans and the CSV, and approves
        the next InstallPlan when one is due: on a Manual Subscription the install only moves by our approvals, so
        approving is part of taking the next step of the wait."""
        p = self.params
        # Nothing written and a Subscription seen: what observe() read is current, only the CSV is missing.
        fresh = [self.sub is not None and not any(c.changed for c in self.changes)]

        def step(cluster):
            first_fresh = fresh.pop() if fresh else False
            if not first_fresh:
                self.read_progress()
            else:
                target = watched_csv(self.choice, p["approval"], self.sub)[0]
                self.csv = self.cluster.get(OLM_V1ALPHA1, "ClusterServiceVersion", target, p["namespace"])
            action, detail = next_step(self.choice, p["approval"], self.sub, self.plans,
                                       {self.csv["metadata"]["name"]: self.csv} if self.csv else {})
            if action == APPROVE:
                plan, csv = detail
                patch_object(self.cluster, OLM_V1ALPHA1, "InstallPlan", plan["metadata"]["name"],
                             {"spec": {"approved": True}}, p["namespace"])
                self.approved.append({"name": plan["metadata"]["name"], "csvs": [csv]})
                return "approved", "approved InstallPlan {0} for {1}".format(plan["metadata"]["name"], csv)
            return action, detail

        def judge(observed, target):
            action, detail = observed
            if action == DONE:
                return {target.title: (READY, "CSV {0} Succeeded".format(detail))}
            if action == FAILED:
                return {target.title: (WAIT_FAILED, detail)}
            # With wait false the task ends once nothing is left for it to approve now.
            done_for_now = not p["wait"] and action in ("approved", WAIT)
            return {target.title: (READY if done_for_now else WAITING, detail)}

        title = "package {0} (Subscription {1}/{2})".format(self.choice["package"], p["namespace"], self.sub_name)
        self.module.wait_for(Target.custom(title, read=step), Predicate("CSV {0} Succeeded".format(
            self.choice["csv"]), judge), outcome, interval=POLL_SECONDS, observe=self.hint, fail=self.fail)

    def hint(self, observed):
        """What to look at when the wait ends without the CSV: the phase last seen, the Subscription, plans left."""
        pending = pending_plans(self.plans, excluding=[a["name"] for a in self.approved])
        return "last CSV phase seen: {0}; {1}; pending InstallPlans: {2}".format(
            csv_phase(self.csv) or "(no CSV yet)", describe_subscription(self.sub),
            ", ".join("{0} ({1})".format(x["name"], ", ".join(x["csvs"])) for x in pending) or "none")

    def result(self):
        sub = subscription_status(self.sub)
        choice = self.choice or {}
        installed = sub["installed_csv"]
        version = None
        if self.csv is not None and self.csv["metadata"]["name"] == installed:
            version = (self.csv.get("spec") or {}).get("version")
        if installed and not version:
            version = csv_version(installed)
        out = {
            "installed_csv": installed, "version": version or choice.get("version"),
            "csv": choice.get("csv"), "channel": choice.get("channel"), "namespace": self.params["namespace"],
            "subscription": sub, "approved_plans": self.approved,
            "pending_plans": pending_plans(self.plans, excluding=[a["name"] for a in self.approved]),
            "plan": {"objects": [{"kind": c.kind, "name": c.name, "namespace": c.namespace, "fields": c.fields}
                                 for c in self.changes if c.changed],
                     "install": self.planned_install},
        }
        out.update(change_report(self.changes))
        out["changed"] = out["changed"] or bool(self.approved)
        out.update(self.waited)
        return out


def run(module):
    install = Install(module)
    try:
        install.resolve()
        desired = install.observe()
    except OlmError as e:
        module.fail_json(msg=str(e))
    install.planned_install = install.install_plan()
    install.apply(desired)
    if module.check_mode:
        install.approved = [{"name": step["install_plan"], "csvs": [step["csv"]]} for step in install.planned_install
                            if not step["approved"]]
        return install.result()
    try:
        install.converge(install.waited)
    except OlmError as e:
        install.fail(str(e))
    return install.result()


def main():
    module = KubegpuModule(
        argument_spec={
            "package": {"type": "str", "required": True},
            "namespace": {"type": "str", "required": True},
            "channel": {"type": "str"},
            "source": {"type": "str"},
            "source_namespace": {"type": "str"},
            "csv": {"type": "str"},
            "approval": {"type": "str", "choices": ["Manual", "Automatic"], "default": "Manual"},
            "operator_group": {"type": "dict", "options": {
                "name": {"type": "str"},
                "target_namespaces": {"type": "list", "elements": "str"},
            }},
            "create_namespace": {"type": "bool", "default": True},
            "namespace_labels": {"type": "dict"},
        },
        supports_check_mode=True,
        waits=True,
        timeout=1200,
    )
    module.run(run)


if __name__ == "__main__":
    main()
