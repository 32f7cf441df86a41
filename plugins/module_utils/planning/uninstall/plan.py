# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the uninstall removes, stage by stage, in which order (docs/uninstall.md).

The stages are undone in the reverse order of `site`: monitoring, serving, tenancy, dra, node_pools, gpu_operator.
Within a stage the objects come in steps: a workload before what it runs on (models before runtimes before the
platform's switches before the operators), so that each controller still runs while the objects it finalizes go.
The module deletes a step's objects and waits until they are gone before the next step.

`STEPS` names, per stage and step, the kinds to read and how an object of them is recognised as ours
(ownership.py): `label` (managed-by=kubegpu.platform, and the stage's own label key when given), `manager` (one of
the collection's field managers holds fields of it), `csv` (the CSV a Subscription of ours installed), `namespace`
(a Namespace labelled ours), `openshift_ai` / `openshift_ai_namespace` (what OpenShift AI's operator made by itself
- its DSCInitialization, its applications and monitoring namespaces - when the collection installed OpenShift AI,
`openshift_ai_ours`). A `helm` step uninstalls the stage's Helm releases, then the namespace Helm created
for one (`helm_namespace_removable`). `release` marks an object someone else made where a stage only set
fields: the uninstall gives those fields back (a server-side apply of nothing under that field manager) instead of
deleting the object.

What is left on purpose, and why, is `KEPT`: CRDs (OLM and Helm keep them; deleting one deletes every object of
its kind, the user's too) and OpenShift's FeatureGate (TechPreviewNoUpgrade cannot be switched off).

Pure: `plan_stage` takes what the module listed and returns the steps with the objects of each.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.cluster_policy import (
    CLUSTER_POLICY_API,
    NVIDIA_DRIVER_API,
    OLM_PACKAGE,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    CLAIM_TEMPLATE_LABEL,
    DEPLOY_LABEL_PREFIX,
    DEPLOY_TRUE,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DRAINED_ANNOTATION,
    DRA_PLUGIN_LABEL,
    DRA_FIELD_MANAGER,
    FIELD_MANAGER,
    FIELD_MANAGERS,
    GPU_COUNT_ANNOTATION,
    MONITORING_FIELD_MANAGER,
    MONITORING_LABEL,
    NODE_POOLS_FIELD_MANAGER,
    OPENSHIFT_CONSOLE_OPERATOR_API,
    POOL_LABEL,
    SERVING_FIELD_MANAGER,
    SERVING_MODEL_LABEL,
    SERVING_RUNTIME_LABEL,
    TEAM_LABEL,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.objects import console_plugins
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.objects import object_key
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.install import (
    APPLICATIONS_NAMESPACE,
    MONITORING_NAMESPACE,
    RHOAI_NAMESPACE,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.platform import (
    CMA,
    DSC_GROUP,
    DSCI_GROUP,
    RHOAI,
    SERVERLESS,
    SERVICE_MESH,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.install import (
    KUEUE_OPERAND_API,
    KUEUE_OPERATOR,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.uninstall.ownership import (
    automation_account,
    labelled_ours,
    our_managers,
)

# The order of site; the uninstall runs it backwards.
SITE_ORDER = ("gpu_operator", "node_pools", "dra", "tenancy", "serving", "monitoring")
ORDER = tuple(reversed(SITE_ORDER))

OLM_V1 = "operators.coreos.com/v1"
OLM_V1ALPHA1 = "operators.coreos.com/v1alpha1"
KUEUE_APIS = ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1")
DSC_APIS = tuple("%s/%s" % (DSC_GROUP, v) for v in ("v2", "v1"))
DSCI_APIS = tuple("%s/%s" % (DSCI_GROUP, v) for v in ("v2", "v1"))
# The namespaces OpenShift AI's operator creates for itself (its DSCInitialization's applications and monitoring
# namespaces, as the serving stage sets them): Red Hat's uninstall deletes them once the operator is gone.
OPENSHIFT_AI_NAMESPACES = (APPLICATIONS_NAMESPACE, MONITORING_NAMESPACE)
DRA_API = "resource.k8s.io/v1"
NFD_API = "nfd.openshift.io/v1"
MACHINE_SET_API = "machine.openshift.io/v1beta1"
HELM_MANAGER = "helm"

# The OLM packages each stage installs; a Subscription of ours of another package is the gpu_operator stage's.
PACKAGES = {
    "serving": (RHOAI, SERVERLESS, SERVICE_MESH, CMA),
    "tenancy": (KUEUE_OPERATOR,),
    "gpu_operator": (OLM_PACKAGE, "nfd"),
}
# The Helm charts each stage installs (chart name as `helm list` shows it, without its version), by release name.
CHARTS = {
    "serving": {"kserve-crd": "kserve-crd", "kserve": "kserve-resources", "keda": "keda"},
    "tenancy": {"kueue": "kueue"},
    "dra": {"dra-driver-nvidia-gpu": "dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu": "nvidia-dra-driver-gpu"},
    "gpu_operator": {"gpu-operator": "gpu-operator"},
}


def _rule(api_versions, kind, how, label=None, managers=None):
    if isinstance(api_versions, str):
        api_versions = (api_versions,)
    return {"api_versions": tuple(api_versions), "kind": kind, "how": how, "label": label,
            "managers": tuple(managers or FIELD_MANAGERS)}


def _operators(stage):
    """An OLM install of ours: the Subscription, the CSV it installed, then the OperatorGroup, in one step (once the
    Subscription is gone nothing tells which CSV it installed)."""
    return [_rule(OLM_V1ALPHA1, "Subscription", "subscription", managers=(FIELD_MANAGER,)),
            _rule(OLM_V1ALPHA1, "ClusterServiceVersion", "csv"),
            _rule(OLM_V1, "OperatorGroup", "operator_group", managers=(FIELD_MANAGER,))]


# stage -> [(step title, [rule])], in deletion order.
STEPS = {
    "monitoring": [
        # First, so the console never lists a plugin it has no ConsolePlugin for. The list is shared with the user's
        # plugins: only NVIDIA's name goes, and only from a Console the monitoring stage wrote.
        ("console plugin taken out of the console's plugins", [
            _rule(OPENSHIFT_CONSOLE_OPERATOR_API, "Console", "console", managers=(MONITORING_FIELD_MANAGER,))]),
        ("alert rules, dashboard and console plugin", [
            _rule("monitoring.coreos.com/v1", "PrometheusRule", "label", MONITORING_LABEL),
            _rule("v1", "ConfigMap", "label", MONITORING_LABEL),
            _rule("console.openshift.io/v1", "ConsolePlugin", "label", MONITORING_LABEL),
            _rule("apps/v1", "Deployment", "label", MONITORING_LABEL),
            _rule("v1", "Service", "label", MONITORING_LABEL)]),
    ],
    "serving": [
        ("models", [_rule("serving.kserve.io/v1beta1", "InferenceService", "label", SERVING_MODEL_LABEL)]),
        ("runtimes", [_rule("serving.kserve.io/v1alpha1", "ServingRuntime", "label", SERVING_RUNTIME_LABEL)]),
        ("serving platform", [
            _rule(DSC_APIS, "DataScienceCluster", "manager", managers=(SERVING_FIELD_MANAGER,)),
            _rule("keda.sh/v1alpha1", "KedaController", "manager", managers=(SERVING_FIELD_MANAGER,)),
            _rule(("operator.knative.dev/v1beta1",), "KnativeServing", "manager", managers=(SERVING_FIELD_MANAGER,))]),
        # What OpenShift AI's operator made by itself, only when the collection installed OpenShift AI
        # (`openshift_ai_ours`), in the order of Red Hat's uninstall: its DSCInitialization once the
        # DataScienceCluster is gone, then the operator (OLM takes the webhooks it created from the CSV with it),
        # then the namespaces the operator created.
        ("OpenShift AI's DSCInitialization", [_rule(DSCI_APIS, "DSCInitialization", "openshift_ai")]),
        ("serving operators", _operators("serving")),
        ("OpenShift AI's namespaces", [_rule("v1", "Namespace", "openshift_ai_namespace")]),
        ("serving charts", [{"helm": "serving"}]),
    ],
    "tenancy": [
        ("local queues and quotas", [
            _rule(KUEUE_APIS, "LocalQueue", "label"),
            _rule("v1", "ResourceQuota", "label", TEAM_LABEL)]),
        ("cluster queues", [_rule(KUEUE_APIS, "ClusterQueue", "label")]),
        ("flavors and priorities", [
            _rule(KUEUE_APIS, "ResourceFlavor", "label"),
            _rule(KUEUE_APIS, "WorkloadPriorityClass", "label"),
            _rule("scheduling.k8s.io/v1", "PriorityClass", "label")]),
        ("Kueue", [_rule(KUEUE_OPERAND_API, "Kueue", "label")]),
        ("Kueue operator", _operators("tenancy")),
        ("Kueue chart", [{"helm": "tenancy"}]),
    ],
    "dra": [
        ("claims", [_rule(DRA_API, "ResourceClaim", "label", CLAIM_TEMPLATE_LABEL)]),
        ("claim templates and device classes", [
            _rule(DRA_API, "ResourceClaimTemplate", "label", CLAIM_TEMPLATE_LABEL),
            _rule(DRA_API, "DeviceClass", "label", CLAIM_TEMPLATE_LABEL)]),
        ("DRA driver chart", [{"helm": "dra"}]),
        ("DRA driver's SCC grant", [
            _rule("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "manager", managers=(DRA_FIELD_MANAGER,)),
            _rule("rbac.authorization.k8s.io/v1", "ClusterRole", "manager", managers=(DRA_FIELD_MANAGER,))]),
    ],
    "node_pools": [
        ("nodes' annotations and deploy labels", [_rule("v1", "Node", "node")]),
        ("mig-parted and device-plugin configs", [
            _rule("v1", "ConfigMap", "manager", managers=(NODE_POOLS_FIELD_MANAGER,))]),
        ("MachineSet templates' pool labels", [
            _rule(MACHINE_SET_API, "MachineSet", "release", managers=(NODE_POOLS_FIELD_MANAGER,))]),
    ],
    "gpu_operator": [
        ("NVIDIADrivers", [_rule(NVIDIA_DRIVER_API, "NVIDIADriver", "manager", managers=(FIELD_MANAGER,))]),
        ("ClusterPolicy", [_rule(CLUSTER_POLICY_API, "ClusterPolicy", "manager", managers=(FIELD_MANAGER,))]),
        ("NFD instance and registry credentials", [
            _rule(NFD_API, "NodeFeatureDiscovery", "manager", managers=(FIELD_MANAGER,)),
            _rule("v1", "Secret", "manager", managers=(FIELD_MANAGER,))]),
        ("GPU Operator and NFD operators", _operators("gpu_operator")),
        ("GPU Operator chart", [{"helm": "gpu_operator"}]),
        # A namespace someone else made (say, nvidia-gpu-operator created by hand with its monitoring label, as
        # NVIDIA's OpenShift guide has it) stays: only the labels the collection's field managers alone set go.
        ("namespaces the collection created", [_rule("v1", "Namespace", "namespace"),
                                               _rule("v1", "Namespace", "foreign_namespace")]),
    ],
}

# Left on purpose, with why (docs/uninstall.md).
KEPT = {
    "CustomResourceDefinition": "OLM and Helm keep an operator's CRDs on uninstall: deleting one deletes every object "
                                "of its kind in the cluster, the user's too; delete them by hand when nothing uses them",
    "FeatureGate": "OpenShift cannot switch TechPreviewNoUpgrade (set for DRA on OpenShift 4.19/4.20) off again",
}


def rules_of(stage):
    """Every kind rule of a stage (for the module to list), in step order."""
    return [rule for dummy, rules in STEPS[stage] for rule in rules if "helm" not in rule]


def reads(stage, served):
    """The (api_version, kind) pairs the module lists for a stage, in step order: per rule, the first of its
    api_versions that `served(api_version, kind)` says the server serves, and no other.

    A kind served in several versions (Kueue's v1beta2 and v1beta1, OpenShift AI's v2 and v1) holds the same
    objects in each, and reading them in a version other than the stored one goes through the CRD's conversion
    webhook: that fails while the operator is down or once its chart is gone (the API server answers 429 "storage
    is (re)initializing" for that version), which would stop the uninstall at a list it does not need. A kind
    served in none of them is not read."""
    out = []
    for rule in rules_of(stage):
        for api_version in rule["api_versions"]:
            if served(api_version, rule["kind"]):
                if (api_version, rule["kind"]) not in out:
                    out.append((api_version, rule["kind"]))
                break
    return out


def _key(obj):
    meta = obj.get("metadata") or {}
    return object_key(obj.get("kind"), meta.get("name"), meta.get("namespace"))


def _has_label(obj, label):
    return label is None or label in ((obj.get("metadata") or {}).get("labels") or {})


def _package_stage(package):
    for stage, packages in PACKAGES.items():
        if package in packages:
            return stage
    return "gpu_operator"


def _ours(stage, rule, obj, context):
    """Whether `obj` (of the rule's kind) is ours to remove in this stage."""
    how = rule["how"]
    meta = obj.get("metadata") or {}
    if any(ref.get("controller") for ref in meta.get("ownerReferences") or []):
        # Made by a controller from an object of ours (a pod's claim from our template, with our labels): its owner's
        # deletion takes it.
        return False
    if automation_account(obj):
        return False
    if how == "label":
        return labelled_ours(obj) and _has_label(obj, rule["label"])
    if how in ("manager", "release"):
        return bool(our_managers(obj, rule["managers"]))
    if how == "subscription":
        package = (obj.get("spec") or {}).get("name")
        return bool(our_managers(obj, rule["managers"])) and _package_stage(package) == stage
    if how == "csv":
        return (meta.get("namespace"), meta.get("name")) in context["csvs"]
    if how == "operator_group":
        # Only in a namespace whose operator this step removed, and only if we wrote it (an adopted group is kept).
        return bool(our_managers(obj, rule["managers"])) and meta.get("namespace") in context["operator_namespaces"]
    if how == "namespace":
        return labelled_ours(obj)
    if how == "openshift_ai":
        return context["openshift_ai"]
    if how == "openshift_ai_namespace":
        return context["openshift_ai"] and meta.get("name") in OPENSHIFT_AI_NAMESPACES
    if how == "foreign_namespace":
        return not labelled_ours(obj) and bool(our_managers(obj, rule["managers"]))
    if how == "node":
        return bool(node_reset(obj))
    if how == "console":
        return console_plugins(obj, enable=False) is not None and bool(our_managers(obj, rule["managers"]))
    raise ValueError("unknown rule %r" % how)


def our_releases(stage, releases):
    """The Helm releases of ours in a stage: `releases` as `helm list -A -o json` gives them (name, namespace,
    chart <name>-<version>); a release is ours when its name and chart are those the stage installs."""
    charts = CHARTS.get(stage, {})
    out = []
    for release in releases or []:
        name, chart = release.get("name"), str(release.get("chart") or "")
        wanted = charts.get(name)
        if wanted and (chart == wanted or chart.startswith(wanted + "-")):
            out.append({"name": name, "namespace": release.get("namespace")})
    return sorted(out, key=lambda r: (r["namespace"] or "", r["name"]))


def helm_namespace_removable(namespace, releases):
    """Whether a release's namespace goes with it: Helm created it (`--create-namespace`: Helm is the only one
    that wrote it) and no release is left in it (`releases`: `helm list -A -o json` after the uninstall)."""
    if namespace is None:
        return False
    meta = namespace.get("metadata") or {}
    writers = set(e.get("manager") for e in meta.get("managedFields") or [])
    return writers == set([HELM_MANAGER]) and not any(r.get("namespace") == meta.get("name") for r in releases or [])


def plan_stage(stage, listed, releases=()):
    """The steps of a stage with the objects of ours in each.

    listed: {(api_version, kind): [objects]} for every rule of the stage (what the module read; a kind the server
    does not serve is absent or empty); one object served in several versions is taken once.
    releases: the cluster's Helm releases (`helm list -A -o json`).
    Returns [{"title", "delete": [object], "release": [(object, [manager])], "nodes": [(node, node_reset)],
    "helm": [release], "plugins": [Console to take NVIDIA's plugin out of]}], steps with
    nothing to do left out; objects already being deleted (deletionTimestamp) are listed to be waited for.
    """
    if stage not in STEPS:
        raise ValueError("unknown stage %r; valid: %s" % (stage, ", ".join(ORDER)))
    context = {"csvs": set(), "operator_namespaces": set(), "openshift_ai": openshift_ai_ours(listed)}
    steps = []
    for title, rules in STEPS[stage]:
        step = {"title": title, "delete": [], "release": [], "helm": [], "nodes": [], "plugins": []}
        seen = set()
        for rule in rules:
            if "helm" in rule:
                step["helm"] = our_releases(rule["helm"], releases)
                continue
            for api_version in rule["api_versions"]:
                for obj in listed.get((api_version, rule["kind"])) or []:
                    obj = dict(obj, apiVersion=obj.get("apiVersion") or api_version, kind=rule["kind"])
                    key = _key(obj)
                    if key in seen or not _ours(stage, rule, obj, context):
                        continue
                    seen.add(key)
                    if rule["how"] in ("release", "foreign_namespace"):
                        step["release"].append((obj, our_managers(obj, rule["managers"])))
                    elif rule["how"] == "node":
                        step["nodes"].append((obj, node_reset(obj)))
                    elif rule["how"] == "console":
                        step["plugins"].append(obj)
                    else:
                        step["delete"].append(obj)
                    if rule["how"] == "subscription":
                        _note_subscription(obj, context)
        if any(step[k] for k in ("delete", "release", "helm", "nodes", "plugins")):
            steps.append(step)
    return steps


def openshift_ai_ours(listed):
    """Whether the collection installed OpenShift AI: a Subscription of the rhods-operator package carries the
    collection's field manager. Once the uninstall deleted that Subscription (a wait round can end right after), the
    operator's namespace the collection created (labelled ours; it goes last, with the gpu_operator stage) tells it,
    as long as no other Subscription of the package is there. OpenShift AI installed by someone else: False, and
    nothing the operator made is touched."""
    subscriptions = [s for s in listed.get((OLM_V1ALPHA1, "Subscription")) or []
                     if (s.get("spec") or {}).get("name") == RHOAI]
    if subscriptions:
        return any(our_managers(s, (FIELD_MANAGER,)) for s in subscriptions)
    return any(labelled_ours(n) for n in listed.get(("v1", "Namespace")) or []
               if (n.get("metadata") or {}).get("name") == RHOAI_NAMESPACE)


def _note_subscription(sub, context):
    """The CSVs a Subscription of ours installed (installed and current), and its namespace."""
    namespace = sub["metadata"].get("namespace")
    context["operator_namespaces"].add(namespace)
    status = sub.get("status") or {}
    for name in (status.get("installedCSV"), status.get("currentCSV")):
        if name:
            context["csvs"].add((namespace, name))


def summary(steps):
    """Keys per step for the result: [{"step", "delete": [key], "release": [key], "nodes": [key],
    "helm": ["ns/name"]}]; a Console whose list loses NVIDIA's plugin counts as fields given back (release)."""
    return [{"step": s["title"], "delete": [_key(o) for o in s["delete"]],
             "release": [_key(o) for o, dummy in s["release"]] + [_key(o) for o in s["plugins"]],
             "nodes": [_key(o) for o, dummy in s["nodes"]],
             "helm": ["%s/%s" % (r["namespace"], r["name"]) for r in s["helm"]]} for s in steps]


def node_reset(node):
    """What is left of the collection on a node once no pool holds it (the node-pools stage released it, the DRA
    stage took its driver label back): {"labels": {...}, "annotations": {...}}, None to remove; {} when nothing.

    - our annotations: the GPU count recorded before its first change, the mark of a drain of ours;
    - the device plugin's deploy label, which the DRA stage set to "false" and removed for the GPU Operator to put its
      default "true" back: put back here, since the operator is about to go (the other deploy labels tell that the
      operator labelled the node).
    A node still in a pool, or still the DRA driver's, is left to those stages.
    """
    meta = node.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if POOL_LABEL in labels or DRA_PLUGIN_LABEL in labels:
        return {}
    out = {}
    notes = dict((k, None) for k in (GPU_COUNT_ANNOTATION, DRAINED_ANNOTATION) if k in annotations)
    if notes:
        out["annotations"] = notes
    deployed = [k for k in labels if k.startswith(DEPLOY_LABEL_PREFIX)]
    if deployed and DEVICE_PLUGIN_DEPLOY_LABEL not in labels:
        out["labels"] = {DEVICE_PLUGIN_DEPLOY_LABEL: DEPLOY_TRUE}
    return out
