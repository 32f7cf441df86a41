# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection may do on a cluster, stage by stage: the RBAC rules of the automation_access role.

One rule set per stage (STAGE_RULES), each rule with why the stage needs it, derived from what the stage's modules
and roles read and write (docs/automation-access.md lists them). A new stage adds its set here; the
automation_access role grants the sets of the stages it is given, and `forbidden_message` turns an API server's
403 into the verb, resource and namespace that was missing and the rule that grants it.

Pure: no network, no Ansible.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.scc import NAME as SCC_GRANT

READ = ("get", "list")
# Server-side apply is a patch (or a create for an object that does not exist); the ClusterPolicy's fields that
# apply cannot remove are put back with an update; a stage's own stale objects are deleted.
WRITE = ("get", "list", "create", "patch", "update")
PRUNE = WRITE + ("delete",)
# Helm keeps each release in Secrets of its namespace and reads the objects it installs before changing them.
HELM = ("get", "list", "create", "patch", "update", "delete")


def rule(groups, resources, verbs, why, names=None):
    out = {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs), "why": why}
    if names:
        out["resourceNames"] = list(names)
    return out


# Reads every playbook does before it writes (the preflight play) and the read-only stages build on.
_PREFLIGHT = [
    rule([""], ["nodes", "namespaces"], READ, "nodes of the pools, namespaces the stages install into"),
    rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], READ,
         "which operators' APIs are served, the ClusterPolicy CRD's schema"),
    rule(["config.openshift.io"], ["clusterversions", "featuregates"], READ,
         "platform detection (OpenShift serves ClusterVersion version), DRA feature gates"),
    rule(["packages.operators.coreos.com"], ["packagemanifests"], READ, "OLM channels and CSVs (OpenShift)"),
    rule(["operators.coreos.com"], ["clusterserviceversions", "subscriptions"], READ, "installed operators"),
    rule(["machine.openshift.io"], ["machinesets"], READ, "pools selected by MachineSet (OpenShift)"),
    rule(["nvidia.com"], ["clusterpolicies"], READ, "the GPU Operator's configuration"),
    rule(["resource.k8s.io"], ["resourceslices", "deviceclasses", "resourceclaimtemplates", "resourceclaims"], READ,
         "DRA devices and the claim templates models ask for"),
    rule(["serving.kserve.io"], ["inferenceservices", "servingruntimes"], READ, "served models"),
    rule(["datasciencecluster.opendatahub.io"], ["datascienceclusters"], READ, "OpenShift AI's components"),
    rule(["dscinitialization.opendatahub.io"], ["dscinitializations"], READ, "OpenShift AI's service mesh mode"),
    rule(["apps"], ["deployments", "daemonsets"], READ, "operators' and operands' readiness"),
    rule(["monitoring.coreos.com"], ["prometheusrules", "servicemonitors"], READ,
         "whether the Prometheus Operator's APIs are served (monitoring stage)"),
    rule(["console.openshift.io"], ["consoleplugins"], READ, "whether the console plugin API is served (OpenShift)"),
]

_OLM = [
    rule([""], ["namespaces"], WRITE, "the operator's namespace"),
    rule(["operators.coreos.com"], ["subscriptions", "operatorgroups", "installplans", "clusterserviceversions"],
         WRITE, "OLM install: Subscription, OperatorGroup, the approved InstallPlan"),
]

STAGE_RULES = {
    "preflight": _PREFLIGHT,
    "gpu_operator": _OLM + [
        rule(["nvidia.com"], ["clusterpolicies", "nvidiadrivers"], WRITE,
             "the ClusterPolicy (and NVIDIADriver per pool) reconciled on every run"),
        rule(["nfd.openshift.io"], ["nodefeaturediscoveries"], WRITE, "Node Feature Discovery (OpenShift)"),
        rule(["apps"], ["daemonsets"], READ, "the operands' rollout"),
        rule([""], ["configmaps"], READ, "the operator's configuration"),
        # Kubernetes: the chart's release records.
        rule([""], ["secrets"], HELM, "Helm release records of the gpu-operator chart (Kubernetes)"),
    ],
    "node_pools": [
        rule([""], ["nodes"], ("list", "get", "patch"), "pool labels, MIG configuration, cordon for a MIG change"),
        rule([""], ["configmaps"], PRUNE, "mig-parted and device-plugin configurations, content-named"),
        rule([""], ["pods"], READ, "GPU pods in the way of a MIG change"),
        rule([""], ["pods/eviction"], ("create",), "drain a node before its MIG change"),
        rule(["nvidia.com"], ["clusterpolicies"], WRITE, "the device plugin's and mig-manager's configuration"),
        rule(["apps"], ["daemonsets"], ("get", "list", "patch"), "restart the device plugin once on a new config"),
        rule(["machine.openshift.io"], ["machinesets"], ("list", "get", "patch"),
             "pool labels on MachineSet templates, for nodes to come"),
    ],
    "dra": [
        rule([""], ["namespaces"], WRITE, "the DRA driver's namespace"),
        rule(["config.openshift.io"], ["featuregates"], ("get", "patch"),
             "TechPreviewNoUpgrade for DRA on OpenShift 4.20 (acknowledged in the inventory)"),
        rule([""], ["nodes"], ("list", "get", "patch"), "the DRA pool's nodes labelled for the driver"),
        rule(["config.openshift.io"], ["schedulers"], ("get", "patch"),
             "the scheduler profile DRA needs on OpenShift releases that do not enable it by default"),
        rule(["resource.k8s.io"], ["deviceclasses", "resourceclaimtemplates"], PRUNE,
             "the claim templates and their DeviceClasses"),
        rule(["resource.k8s.io"], ["resourceclaims"], PRUNE,
             "shared claims (claim: shared) and the labels of the claims made from our templates"),
        # The NVIDIA DRA driver chart (dra-driver-nvidia-gpu 0.4.1): what helm installs...
        rule([""], ["secrets"], HELM, "Helm release records of the DRA driver chart"),
        rule([""], ["serviceaccounts", "services"], HELM, "the driver's service accounts"),
        rule(["apps"], ["daemonsets", "deployments"], HELM, "the driver's controller and kubelet plugin"),
        rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], HELM, "the chart's ComputeDomain CRDs"),
        rule(["admissionregistration.k8s.io"],
             ["validatingadmissionpolicies", "validatingadmissionpolicybindings", "validatingwebhookconfigurations"],
             HELM, "the chart's admission policies"),
        rule(["networking.k8s.io"], ["networkpolicies"], HELM, "the chart's network policies"),
        rule(["rbac.authorization.k8s.io"], ["clusterroles", "clusterrolebindings", "roles", "rolebindings"], HELM,
             "the chart's own RBAC for the driver's service accounts"),
        # ...and what its roles grant: the API server lets a user create a role only with rights it holds itself.
        rule(["resource.nvidia.com"], ["computedomains", "computedomains/status", "computedomaincliques"],
             ("get", "list", "watch", "create", "update", "patch"), "held to create the driver chart's roles"),
        rule(["resource.k8s.io"], ["resourceclaimtemplates", "resourceslices"],
             ("get", "list", "watch", "create", "update", "delete"), "held to create the driver chart's roles"),
        rule(["resource.k8s.io"], ["resourceclaims"], ("watch",), "held to create the driver chart's roles"),
        rule(["coordination.k8s.io"], ["leases"], ("get", "create", "update"), "held to create the driver chart's roles"),
        rule([""], ["nodes"], ("watch", "update"), "held to create the driver chart's roles"),
        rule([""], ["pods"], ("get", "list", "watch", "patch"), "held to create the driver chart's roles"),
        rule(["apps"], ["daemonsets", "deployments"], ("watch",), "held to create the driver chart's roles"),
        # On OpenShift the stage grants the driver's service accounts the privileged SCC (planning/dra/scc.py):
        # a ClusterRole with `use` of it, which the account must hold to create.
        rule(["security.openshift.io"], ["securitycontextconstraints"], ("use",),
             "held to let the driver's service accounts use the privileged SCC (OpenShift)", names=["privileged"]),
        # The chart binds OpenShift's SCC roles to its service accounts: bind exactly those, hold none of them.
        rule(["rbac.authorization.k8s.io"], ["clusterroles"], ("bind",),
             "the chart binds these OpenShift SCC roles to its service accounts",
             names=["system:openshift:scc:privileged", "system:openshift:scc:anyuid"]),
    ],
    "serving": _OLM + [
        rule(["datasciencecluster.opendatahub.io"], ["datascienceclusters"], WRITE, "OpenShift AI's KServe component"),
        rule(["keda.sh"], ["kedacontrollers"], WRITE, "the Custom Metrics Autoscaler (scale to zero)"),
        rule(["dscinitialization.opendatahub.io"], ["dscinitializations"], WRITE,
             "OpenShift AI's initialization when its operator has not made one"),
        rule([""], ["configmaps"], READ, "KServe's and OpenShift AI's configuration"),
        rule(["serving.kserve.io"], ["inferenceservices", "servingruntimes"], PRUNE, "the models and their runtimes"),
        rule([""], ["secrets"], HELM, "Helm release records of KServe, KEDA, cert-manager (Kubernetes)"),
    ],
    "tenancy": _OLM + [
        rule([""], ["namespaces"], WRITE, "the teams' namespaces"),
        rule(["kueue.x-k8s.io"],
             ["resourceflavors", "clusterqueues", "localqueues", "workloadpriorityclasses", "cohorts"], PRUNE,
             "a ResourceFlavor per pool, ClusterQueues per team, LocalQueues, priorities"),
        rule(["scheduling.k8s.io"], ["priorityclasses"], PRUNE, "the teams' PriorityClasses"),
        rule([""], ["resourcequotas"], PRUNE, "plain ResourceQuotas per namespace (without Kueue)"),
        rule(["kueue.openshift.io"], ["kueues"], WRITE, "the Red Hat build of Kueue's operand (OpenShift)"),
        rule([""], ["configmaps"], READ, "Kueue's configuration (its DeviceClass mappings), when Kueue was there"),
        # Kubernetes: the Kueue chart's objects are not derived yet (as for the gpu-operator chart): docs/awx.md.
        rule([""], ["secrets"], HELM, "Helm release records of the Kueue chart (Kubernetes)"),
    ],
    "monitoring": [
        rule(["nvidia.com"], ["clusterpolicies"], WRITE, "the DCGM exporter's ServiceMonitor settings"),
        rule(["monitoring.coreos.com"], ["prometheusrules"], PRUNE, "the GPU alert rules"),
        rule([""], ["configmaps"], PRUNE,
             "the GPU dashboard, and user-workload monitoring in cluster-monitoring-config (OpenShift, when asked)"),
        rule([""], ["namespaces"], ("get", "list", "patch"),
             "the cluster-monitoring label on the GPU Operator's namespace (OpenShift)"),
        rule(["console.openshift.io"], ["consoleplugins"], PRUNE, "NVIDIA's GPU console plugin (OpenShift)"),
        rule(["apps"], ["deployments"], PRUNE, "the console plugin's nginx (OpenShift)"),
        rule([""], ["services"], PRUNE, "the console plugin's Service (OpenShift)"),
        rule(["operator.openshift.io"], ["consoles"], ("get", "update"),
             "enable the plugin in the console's spec.plugins (OpenShift, enable_console_plugin)"),
    ],
    # Deletes what the stages wrote (planning/uninstall/plan.py), gives back the node labels and MachineSet template
    # labels, and uninstalls the stages' Helm releases (the charts' objects: the same rules as their install).
    "uninstall": [
        rule([""], ["nodes"], ("list", "get", "patch"), "pool labels, MIG off, our annotations removed"),
        rule([""], ["pods"], READ, "GPU pods in the way of MIG off"),
        rule([""], ["pods/eviction"], ("create",), "drain a node before MIG off (uninstall_drain_gpu_pods)"),
        rule(["apps"], ["daemonsets"], ("get", "list", "patch"), "restart the device plugin once on the defaults"),
        rule([""], ["namespaces", "configmaps", "resourcequotas"], PRUNE,
             "namespaces the collection created, its ConfigMaps, plain ResourceQuotas"),
        rule([""], ["secrets"], HELM, "Helm release records; the registry credentials' pull Secret"),
        rule(["serving.kserve.io"], ["inferenceservices", "servingruntimes"], PRUNE, "the models and their runtimes"),
        rule(["datasciencecluster.opendatahub.io"], ["datascienceclusters"], PRUNE, "OpenShift AI's KServe component"),
        rule(["keda.sh"], ["kedacontrollers"], PRUNE, "the Custom Metrics Autoscaler's KedaController"),
        rule(["operator.knative.dev"], ["knativeservings"], PRUNE, "Knative Serving of the serving stage"),
        rule(["operators.coreos.com"], ["subscriptions", "operatorgroups", "clusterserviceversions"], PRUNE,
             "OLM installs: Subscription, the CSV it installed, OperatorGroup"),
        rule(["kueue.x-k8s.io"], ["resourceflavors", "clusterqueues", "localqueues", "workloadpriorityclasses"],
             PRUNE, "the teams' queues, flavors and priorities"),
        rule(["kueue.openshift.io"], ["kueues"], PRUNE, "the Red Hat build of Kueue's operand (OpenShift)"),
        rule(["scheduling.k8s.io"], ["priorityclasses"], PRUNE, "the teams' PriorityClasses"),
        rule(["resource.k8s.io"], ["deviceclasses", "resourceclaimtemplates", "resourceclaims"], PRUNE,
             "the claim templates, their DeviceClasses, shared claims"),
        rule(["rbac.authorization.k8s.io"], ["clusterroles", "clusterrolebindings"], PRUNE,
             "the DRA driver's privileged SCC grant (OpenShift)", names=[SCC_GRANT]),
        rule(["nvidia.com"], ["clusterpolicies", "nvidiadrivers"], PRUNE, "the ClusterPolicy and NVIDIADrivers"),
        rule(["nfd.openshift.io"], ["nodefeaturediscoveries"], PRUNE, "Node Feature Discovery's instance (OpenShift)"),
        rule(["monitoring.coreos.com"], ["prometheusrules"], PRUNE, "the GPU alert rules"),
        rule(["console.openshift.io"], ["consoleplugins"], PRUNE, "NVIDIA's GPU console plugin (OpenShift)"),
        rule(["apps"], ["deployments"], PRUNE, "the console plugin's nginx (OpenShift)"),
        rule([""], ["services"], PRUNE, "the console plugin's Service (OpenShift)"),
        rule(["operator.openshift.io"], ["consoles"], ("get", "list", "update"),
             "take the plugin out of the console's spec.plugins (OpenShift)"),
        rule(["machine.openshift.io"], ["machinesets"], ("list", "get", "patch"), "pool labels on MachineSet templates"),
    ],
    "doctor": [
        rule([""], ["pods"], READ, "GPU pods: OOMKilled, Pending for GPUs, CUDA they require"),
        rule(["monitoring.coreos.com"], ["servicemonitors"], READ, "whether the DCGM exporter is scraped"),
        rule(["apps"], ["daemonsets"], READ, "the DCGM exporter and device plugin DaemonSets"),
    ],
    "report": [
        rule([""], ["configmaps"], ("get", "list", "create", "patch"),
             "the previous report, when kept in a ConfigMap (report_previous_store: configmap, for AWX)"),
        rule([""], ["pods"], READ, "GPU pods per pool"),
        rule(["keda.sh"], ["scaledobjects"], READ, "which served models scale to zero"),
        rule(["serving.knative.dev"], ["services"], READ, "Knative-mode models' revisions"),
        rule([""], ["configmaps"], READ, "the pools' device-plugin configurations"),
        rule(["kueue.x-k8s.io"], ["clusterqueues"], READ, "the teams' quota, usage and borrowing per pool (Kueue)"),
        rule([""], ["resourcequotas"], READ, "the teams' quota and usage (plain ResourceQuotas)"),
    ],
}

# The stages every run goes through, and the ones each playbook name grants (site: all of them).
ALWAYS = ("preflight",)

RBAC_GROUP = "rbac.authorization.k8s.io"


def stages_known():
    return sorted(STAGE_RULES)


def rules_for(stages):
    """The ClusterRole rules for `stages` (preflight always): one entry per rule, `why` prefixed by its stage.

    Raises ValueError naming an unknown stage and the known ones."""
    unknown = [s for s in stages if s not in STAGE_RULES]
    if unknown:
        raise ValueError("unknown stage(s) %s; known: %s" % (", ".join(unknown), ", ".join(stages_known())))
    out = []
    for stage in list(ALWAYS) + [s for s in stages if s not in ALWAYS]:
        for r in STAGE_RULES[stage]:
            r = dict(r, why="%s: %s" % (stage, r["why"]))
            out.append(r)
    return out


def cluster_role_rules(stages):
    """rules_for without `why` (the API server's PolicyRule has no such field), as a ClusterRole's rules."""
    return [dict((k, v) for k, v in r.items() if k != "why") for r in rules_for(stages)]


def granting(group, resource, verb, stages=None):
    """The rules (with their stage in `why`) that grant verb on group/resource; [] when none does."""
    found = []
    for r in rules_for(stages if stages is not None else stages_known()):
        if group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]:
            found.append(r)
    return found


# The API server's forbidden message (k8s.io/apiserver authorization): `<what> is forbidden: User "<user>" cannot
# <verb> resource "<resource>[/<subresource>]" in API group "<group>" (in the namespace "<ns>" | at the cluster scope)`.
_FORBIDDEN = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]*)"'
    r'(?: in API group "(?P<group>[^"]*)")?'
    r'(?: in the namespace "(?P<namespace>[^"]*)"| at the cluster scope)?')


def parse_forbidden(message):
    """{user, verb, resource, group, namespace} from an API server's 403 message, or None when it is not one."""
    m = _FORBIDDEN.search(message or "")
    if not m:
        return None
    out = m.groupdict()
    out["group"] = out["group"] or ""
    out["namespace"] = out["namespace"] or ""
    return out


_ESCALATION = re.compile(r'(?P<what>\S+ "[^"]*") is forbidden: user "(?P<user>[^"]*)".*?is attempting to grant RBAC '
                         r'permissions not currently held:\s*(?P<rules>.*)', re.S)


def escalation_message(message):
    """An RBAC escalation refusal (a role granting rights the account lacks) in automation_access's words, or None."""
    m = _ESCALATION.search(message or "")
    if not m:
        return None
    return ("forbidden: {what} grants rights {user} does not hold itself: {rules}; the API server lets an account "
            "create a role only with rights it holds: add them to the automation_access rules of the stage that "
            "writes this role (plugins/module_utils/planning/access.py)").format(
                what=m.group("what"), user=m.group("user"), rules=" ".join(m.group("rules").split()).rstrip("."))


def forbidden_message(message):
    """The 403 `message` in the words of automation_access, or None when it does not say what was denied.

    forbidden: patch nodes (API group "") at the cluster scope for system:serviceaccount:ns:sa: grant it in
    automation_access (stage node_pools: rule "nodes: pool labels, ...")"""
    f = parse_forbidden(message)
    if f is None:
        return escalation_message(message)
    where = "in namespace %s" % f["namespace"] if f["namespace"] else "at the cluster scope"
    group = f["group"] or "core"
    rules = granting(f["group"], f["resource"], f["verb"])
    if rules:
        grant = "grant it with the automation_access role (rule {0})".format(
            " or ".join('"{0}" of stage {1}'.format(r["why"].split(": ", 1)[1], r["why"].split(": ", 1)[0])
                        for r in rules[:3]))
    else:
        grant = ("no stage of automation_access grants it: add a rule to the stage that needs it "
                 "(plugins/module_utils/planning/access.py)")
    return "forbidden: {verb} {resource} (API group {group}) {where} for {user}: {grant}".format(
        verb=f["verb"], resource=f["resource"], group=group, where=where, user=f["user"], grant=grant)


def markdown():
    """The rules of every stage as Markdown tables (docs/awx.md holds this text between its rules markers)."""
    lines = []
    for stage in stages_known():
        lines += ["### %s" % stage, "", "| API group | resources | verbs | why |", "|---|---|---|---|"]
        for r in STAGE_RULES[stage]:
            resources = ", ".join(r["resources"])
            if r.get("resourceNames"):
                resources += " (only %s)" % ", ".join(r["resourceNames"])
            lines.append("| %s | %s | %s | %s |" % (", ".join(g or "core" for g in r["apiGroups"]), resources,
                                                    ", ".join(r["verbs"]), r["why"]))
        lines.append("")
    return "\n".join(lines)
