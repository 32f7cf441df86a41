# -*- coding: utf-8 -*-
"""The uninstall's plan: what is ours (labels, field managers, the CSVs of our Subscriptions, namespaces we created),
in which order, what is left to others, Helm releases of our charts, and what is left of us on a node."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.uninstall.ownership import (
    labelled_ours,
    mark_created_namespace,
    our_managers,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.uninstall.plan import (
    ORDER,
    SITE_ORDER,
    STEPS,
    helm_namespace_removable,
    node_reset,
    our_releases,
    openshift_ai_ours,
    plan_stage,
    reads,
    rules_of,
    summary,
)

OURS = {"app.kubernetes.io/managed-by": "kubegpu.platform"}


def obj(kind, name, namespace=None, labels=None, managers=(), status_managers=(), owners=(), **extra):
    meta = {"name": name, "labels": dict(labels or {}),
            "managedFields": [{"manager": m, "operation": "Apply", "fieldsV1": {"f:spec": {}}} for m in managers]
            + [{"manager": m, "operation": "Update", "subresource": "status", "fieldsV1": {"f:status": {}}}
               for m in status_managers]}
    if namespace:
        meta["namespace"] = namespace
    if owners:
        meta["ownerReferences"] = [{"kind": k, "name": "x", "controller": True} for k in owners]
    return dict({"kind": kind, "metadata": meta}, **extra)


def keys(steps):
    return [(s["step"], s["delete"], s["release"], s["nodes"], s["helm"]) for s in summary(steps)]


def test_the_stages_go_in_the_reverse_order_of_site():
    assert ORDER == ("monitoring", "serving", "tenancy", "dra", "node_pools", "gpu_operator")
    assert tuple(reversed(ORDER)) == SITE_ORDER
    assert set(STEPS) == set(ORDER)


@pytest.mark.parametrize("labels, expected", [
    (OURS, True),
    ({"app.kubernetes.io/managed-by": "Helm"}, False),
    ({}, False),
])
def test_labelled_ours(labels, expected):
    assert labelled_ours(obj("ConfigMap", "x", labels=labels)) is expected


def test_our_managers_skip_status_and_others():
    o = obj("ClusterPolicy", "p", managers=("kubegpu.platform", "kubegpu.platform/dra", "kubectl"),
            status_managers=("kubegpu.platform/serving",))
    assert our_managers(o) == ["kubegpu.platform", "kubegpu.platform/dra"]
    assert our_managers(o, ("kubegpu.platform/dra",)) == ["kubegpu.platform/dra"]
    assert our_managers(obj("ClusterPolicy", "q", managers=("kubectl",))) == []


@pytest.mark.parametrize("current, marked", [
    (None, True),                                                     # this run creates it
    ({"metadata": {"name": "llm", "labels": dict(OURS)}}, True),      # created by an earlier run: kept marked
    ({"metadata": {"name": "llm", "labels": {"team": "a"}}}, False),  # the user's: never marked
])
def test_a_namespace_is_marked_only_when_the_collection_creates_it(current, marked):
    out = mark_created_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm"}}, current)
    assert labelled_ours(out) is marked
    assert out["metadata"]["name"] == "llm"


def test_serving_models_then_runtimes_then_platform_then_operators():
    listed = {
        ("serving.kserve.io/v1beta1", "InferenceService"): [
            obj("InferenceService", "llama", "llm", dict(OURS, **{"kubegpu.io/serving-model": "llama"})),
            obj("InferenceService", "users-own", "llm", {"kubegpu.io/serving-model": "x"})],
        ("serving.kserve.io/v1alpha1", "ServingRuntime"): [
            obj("ServingRuntime", "vllm", "llm", dict(OURS, **{"kubegpu.io/serving-runtime": "vllm"}))],
        ("datasciencecluster.opendatahub.io/v2", "DataScienceCluster"): [
            obj("DataScienceCluster", "default-dsc", managers=("kubegpu.platform/serving",))],
        # The same object served in v1 too: taken once.
        ("datasciencecluster.opendatahub.io/v1", "DataScienceCluster"): [
            obj("DataScienceCluster", "default-dsc", managers=("kubegpu.platform/serving",))],
        ("operators.coreos.com/v1alpha1", "Subscription"): [
            obj("Subscription", "rhods-operator", "redhat-ods-operator", managers=("kubegpu.platform",),
                spec={"name": "rhods-operator"}, status={"installedCSV": "rhods-operator.3.5.0"}),
            # The GPU Operator's Subscription is the gpu_operator stage's.
            obj("Subscription", "gpu-operator-certified", "nvidia-gpu-operator", managers=("kubegpu.platform",),
                spec={"name": "gpu-operator-certified"}, status={"installedCSV": "gpu-operator-certified.v26.7.0"}),
            # Someone else's operator.
            obj("Subscription", "other", "other-ns", managers=("kubectl",), spec={"name": "rhods-operator"},
                status={"installedCSV": "rhods-operator.3.4.0"})],
        ("operators.coreos.com/v1alpha1", "ClusterServiceVersion"): [
            obj("ClusterServiceVersion", "rhods-operator.3.5.0", "redhat-ods-operator"),
            obj("ClusterServiceVersion", "rhods-operator.3.4.0", "other-ns"),
            obj("ClusterServiceVersion", "gpu-operator-certified.v26.7.0", "nvidia-gpu-operator")],
        ("operators.coreos.com/v1", "OperatorGroup"): [
            obj("OperatorGroup", "redhat-ods-operator-group", "redhat-ods-operator", managers=("kubegpu.platform",)),
            obj("OperatorGroup", "other-group", "other-ns", managers=("kubegpu.platform",))],
    }
    steps = plan_stage("serving", listed)
    assert keys(steps) == [
        ("models", ["InferenceService/llm/llama"], [], [], []),
        ("runtimes", ["ServingRuntime/llm/vllm"], [], [], []),
        ("serving platform", ["DataScienceCluster/default-dsc"], [], [], []),
        ("serving operators", ["Subscription/redhat-ods-operator/rhods-operator",
                               "ClusterServiceVersion/redhat-ods-operator/rhods-operator.3.5.0",
                               "OperatorGroup/redhat-ods-operator/redhat-ods-operator-group"], [], [], []),
    ]
    assert [s["step"] for s in summary(plan_stage("gpu_operator", listed))] == ["GPU Operator and NFD operators"]


def _openshift_ai(sub_managers, namespace_labels=None):
    """A cluster with OpenShift AI 3.x installed (by `sub_managers`) and what its operator made by itself."""
    listed = {
        ("datasciencecluster.opendatahub.io/v2", "DataScienceCluster"): [
            obj("DataScienceCluster", "default-dsc", managers=("kubegpu.platform/serving",))],
        ("dscinitialization.opendatahub.io/v2", "DSCInitialization"): [
            obj("DSCInitialization", "default-dsci", managers=("rhods-operator", "kubegpu.platform/serving"))],
        # The same object served in v1 too: taken once.
        ("dscinitialization.opendatahub.io/v1", "DSCInitialization"): [obj("DSCInitialization", "default-dsci")],
        ("v1", "Namespace"): [obj("Namespace", "redhat-ods-operator", labels=namespace_labels),
                              obj("Namespace", "redhat-ods-applications", managers=("rhods-operator",)),
                              obj("Namespace", "redhat-ods-monitoring", managers=("rhods-operator",)),
                              obj("Namespace", "llm", labels=OURS)],
        ("operators.coreos.com/v1alpha1", "ClusterServiceVersion"): [
            obj("ClusterServiceVersion", "rhods-operator.3.5.0", "redhat-ods-operator")],
        ("operators.coreos.com/v1", "OperatorGroup"): [
            obj("OperatorGroup", "rhods", "redhat-ods-operator", managers=sub_managers or ())],
    }
    if sub_managers is not None:
        listed[("operators.coreos.com/v1alpha1", "Subscription")] = [
            obj("Subscription", "rhods-operator", "redhat-ods-operator", managers=sub_managers,
                spec={"name": "rhods-operator"}, status={"installedCSV": "rhods-operator.3.5.0"})]
    return listed


def test_openshift_ai_installed_by_us_goes_with_what_its_operator_made_in_red_hats_order():
    steps = plan_stage("serving", _openshift_ai(("kubegpu.platform",), OURS))
    assert keys(steps) == [
        ("serving platform", ["DataScienceCluster/default-dsc"], [], [], []),
        ("OpenShift AI's DSCInitialization", ["DSCInitialization/default-dsci"], [], [], []),
        ("serving operators", ["Subscription/redhat-ods-operator/rhods-operator",
                               "ClusterServiceVersion/redhat-ods-operator/rhods-operator.3.5.0",
                               "OperatorGroup/redhat-ods-operator/rhods"], [], [], []),
        # The operator's own namespace is the collection's (labelled): it goes last, with the gpu_operator stage.
        ("OpenShift AI's namespaces", ["Namespace/redhat-ods-applications", "Namespace/redhat-ods-monitoring"],
         [], [], []),
    ]


def test_openshift_ai_of_ours_is_still_told_once_its_subscription_is_gone():
    # A wait round ended after the operators' step: the namespace the collection created for the operator tells.
    listed = _openshift_ai(None, OURS)
    assert openshift_ai_ours(listed) is True
    assert [s["step"] for s in summary(plan_stage("serving", listed))] == [
        "serving platform", "OpenShift AI's DSCInitialization", "OpenShift AI's namespaces"]


@pytest.mark.parametrize("sub_managers, namespace_labels", [
    (("kubectl-create",), None),          # installed by someone else, in a namespace they made
    (("kubectl-create",), OURS),          # by someone else, whatever the namespace says: the Subscription tells
    (None, None),                         # no Subscription, and a namespace the collection did not create
])
def test_openshift_ai_someone_else_installed_is_left_whole(sub_managers, namespace_labels):
    listed = _openshift_ai(sub_managers, namespace_labels)
    assert openshift_ai_ours(listed) is False
    steps = summary(plan_stage("serving", listed))
    removed = [k for s in steps for k in s["delete"] + s["release"]]
    # Only the DataScienceCluster the serving stage applied goes; nothing of the operator's.
    assert removed == ["DataScienceCluster/default-dsc"], removed


def test_an_object_made_by_a_controller_from_ours_is_left_to_its_owner():
    claim = dict(OURS, **{"kubegpu.io/claim-template": "gpu-80g"})
    listed = {("resource.k8s.io/v1", "ResourceClaim"): [
        obj("ResourceClaim", "shared-ts", "llm", claim),
        obj("ResourceClaim", "pod-x-gpu-abc", "llm", claim, owners=("Pod",))]}
    assert keys(plan_stage("dra", listed)) == [("claims", ["ResourceClaim/llm/shared-ts"], [], [], [])]


def test_nothing_of_ours_plans_nothing():
    listed = {("v1", "Namespace"): [obj("Namespace", "default"), obj("Namespace", "team", labels={"a": "b"})],
              ("nvidia.com/v1", "ClusterPolicy"): [obj("ClusterPolicy", "theirs", managers=("kubectl",))]}
    assert plan_stage("gpu_operator", listed) == []
    assert plan_stage("serving", {}) == []


def test_the_gpu_operator_stage_ends_with_the_namespaces_we_created():
    listed = {("nvidia.com/v1", "ClusterPolicy"): [obj("ClusterPolicy", "gpu-cluster-policy",
                                                       managers=("kubegpu.platform", "kubegpu.platform/node-pools"),
                                                       status_managers=("gpu-operator",))],
              ("v1", "Namespace"): [obj("Namespace", "nvidia-gpu-operator", labels=OURS),
                                    obj("Namespace", "users", labels={"x": "y"})]}
    assert [(s["step"], s["delete"]) for s in summary(plan_stage("gpu_operator", listed))] == [
        ("ClusterPolicy", ["ClusterPolicy/gpu-cluster-policy"]),
        ("namespaces the collection created", ["Namespace/nvidia-gpu-operator"])]


def test_the_automation_account_is_not_the_uninstalls():
    """automation_access's namespace, token Secret, ServiceAccount and rights carry managed-by and our field manager
    like a stage's objects; the uninstall (which that account may run) leaves every one."""
    account = dict(OURS, **{"kubegpu.io/automation-access": "true"})
    listed = {("v1", "Namespace"): [obj("Namespace", "kubegpu-automation", labels=account, managers=("kubegpu.platform",)),
                                    obj("Namespace", "nvidia-gpu-operator", labels=OURS)],
              ("v1", "Secret"): [obj("Secret", "kubegpu-automation-token", "kubegpu-automation", labels=account,
                                     managers=("kubegpu.platform",)),
                                 obj("Secret", "kubegpu-registry-credentials", "nvidia-gpu-operator", labels=OURS,
                                     managers=("kubegpu.platform",))]}
    assert [(s["step"], s["delete"]) for s in summary(plan_stage("gpu_operator", listed))] == [
        ("NFD instance and registry credentials", ["Secret/nvidia-gpu-operator/kubegpu-registry-credentials"]),
        ("namespaces the collection created", ["Namespace/nvidia-gpu-operator"])]


def test_a_namespace_someone_else_made_stays_and_gets_back_only_our_fields():
    made_by_hand = obj("Namespace", "nvidia-gpu-operator", labels={"openshift.io/cluster-monitoring": "true"},
                       managers=("kubectl-create", "kubegpu.platform"))
    steps = plan_stage("gpu_operator", {("v1", "Namespace"): [made_by_hand, obj("Namespace", "other")]})
    assert keys(steps) == [("namespaces the collection created", [], ["Namespace/nvidia-gpu-operator"], [], [])]
    assert steps[0]["release"][0][1] == ["kubegpu.platform"]


def test_a_machineset_gives_back_the_template_labels_instead_of_going():
    ms = obj("MachineSet", "gpu-a", "openshift-machine-api", managers=("machine-api", "kubegpu.platform/node-pools"))
    steps = plan_stage("node_pools", {("machine.openshift.io/v1beta1", "MachineSet"): [ms]})
    assert keys(steps) == [("MachineSet templates' pool labels", [], ["MachineSet/openshift-machine-api/gpu-a"], [], [])]
    assert steps[0]["release"][0][1] == ["kubegpu.platform/node-pools"]


@pytest.mark.parametrize("releases, expected", [
    ([{"name": "dra-driver-nvidia-gpu", "namespace": "dra-driver-nvidia-gpu", "chart": "dra-driver-nvidia-gpu-0.4.0"}],
     [{"name": "dra-driver-nvidia-gpu", "namespace": "dra-driver-nvidia-gpu"}]),
    # Same release name, another chart: not ours.
    ([{"name": "dra-driver-nvidia-gpu", "namespace": "x", "chart": "something-else-1.0"}], []),
    ([{"name": "gpu-operator", "namespace": "gpu-operator", "chart": "gpu-operator-v26.7.0"}], []),
    ([], []),
])
def test_helm_releases_of_the_stages_charts(releases, expected):
    assert our_releases("dra", releases) == expected


def test_the_dra_stage_uninstalls_its_release_after_the_templates():
    steps = plan_stage("dra", {("resource.k8s.io/v1", "DeviceClass"): [
        obj("DeviceClass", "kubegpu-gpu-80g", labels=dict(OURS, **{"kubegpu.io/claim-template": "gpu-80g"}))]},
        releases=[{"name": "dra-driver-nvidia-gpu", "namespace": "dra-driver-nvidia-gpu",
                   "chart": "dra-driver-nvidia-gpu-0.4.0"}])
    assert [s["step"] for s in summary(steps)] == ["claim templates and device classes", "DRA driver chart"]
    assert summary(steps)[1]["helm"] == ["dra-driver-nvidia-gpu/dra-driver-nvidia-gpu"]


@pytest.mark.parametrize("managers, releases, removable", [
    (("helm",), [], True),
    (("helm",), [{"name": "other", "namespace": "ns"}], False),   # another release lives there
    (("helm", "kubectl"), [], False),                             # someone else wrote to it
    ((), [], False),
])
def test_a_helm_made_namespace_goes_with_its_last_release(managers, releases, removable):
    namespace = {"metadata": {"name": "ns", "managedFields": [{"manager": m} for m in managers]}}
    assert helm_namespace_removable(namespace, releases) is removable
    assert helm_namespace_removable(None, []) is False


@pytest.mark.parametrize("labels, annotations, expected", [
    # Released by the node-pools stage: our GPU-count record goes; the device plugin's deploy label comes back.
    ({"nvidia.com/gpu.deploy.driver": "true"}, {"kubegpu.io/gpu-count": "8"},
     {"labels": {"nvidia.com/gpu.deploy.device-plugin": "true"}, "annotations": {"kubegpu.io/gpu-count": None}}),
    ({"nvidia.com/gpu.deploy.driver": "true", "nvidia.com/gpu.deploy.device-plugin": "true"},
     {"kubegpu.io/drained-for-mig-change": "true"}, {"annotations": {"kubegpu.io/drained-for-mig-change": None}}),
    # Still in a pool, or still the DRA driver's: those stages' business.
    ({"kubegpu.io/node-pool": "a"}, {"kubegpu.io/gpu-count": "8"}, {}),
    ({"nvidia.com/dra-kubelet-plugin": "true"}, {}, {}),
    # A CPU node, and a GPU node as the operator left it.
    ({}, {}, {}),
    ({"nvidia.com/gpu.deploy.device-plugin": "false"}, {}, {}),
])
def test_node_reset(labels, annotations, expected):
    assert node_reset({"metadata": {"name": "n", "labels": labels, "annotations": annotations}}) == expected


def test_every_rule_names_a_known_way_to_tell_ours():
    for stage in ORDER:
        for rule in rules_of(stage):
            assert rule["how"] in ("label", "manager", "release", "subscription", "csv", "operator_group",
                                   "namespace", "foreign_namespace", "node", "console", "openshift_ai",
                                   "openshift_ai_namespace"), rule
    with pytest.raises(ValueError, match="unknown stage 'report'"):
        plan_stage("report", {})


KUEUE_KINDS = ["LocalQueue", "ClusterQueue", "ResourceFlavor", "WorkloadPriorityClass"]


@pytest.mark.parametrize("served_versions, expected", [
    # Kueue 0.19's chart serves both and stores v1beta2: v1beta1 would go through its conversion webhook, which
    # fails once Kueue's pods are gone (or have not started): only v1beta2 is read.
    (("v1beta2", "v1beta1"), "v1beta2"),
    (("v1beta1",), "v1beta1"),          # an older Kueue
    ((), None),                         # no Kueue: nothing of its kinds is read
])
def test_a_kind_served_in_several_versions_is_read_in_the_first_served_only(served_versions, expected):
    served = set("kueue.x-k8s.io/" + v for v in served_versions)
    read = reads("tenancy", lambda api_version, kind: api_version in served or not api_version.startswith("kueue."))
    kueue = [(v, k) for v, k in read if v.startswith("kueue.")]
    assert kueue == ([("kueue.x-k8s.io/" + expected, k) for k in KUEUE_KINDS] if expected else []), read
    assert ("v1", "ResourceQuota") in read and ("scheduling.k8s.io/v1", "PriorityClass") in read
    # What is read is what the plan takes: a LocalQueue of ours listed in the version read is planned.
    queue = obj("LocalQueue", "research", "research", labels=OURS)
    if expected:
        listed = dict((pair, [queue] if pair[1] == "LocalQueue" else []) for pair in read)
        assert keys(plan_stage("tenancy", listed))[0][1] == ["LocalQueue/research/research"]


def test_every_rule_is_read_once_in_one_version_when_all_are_served():
    for stage in ORDER:
        read = reads(stage, lambda api_version, kind: True)
        assert len(read) == len(set(read))
        assert set(k for v, k in read) == set(r["kind"] for r in rules_of(stage))
        for api_version, kind in read:
            assert any(r["kind"] == kind and r["api_versions"][0] == api_version for r in rules_of(stage))


def test_monitoring_takes_nvidias_plugin_out_of_the_console_first_then_deletes_the_plugins_objects():
    labels = dict(OURS, **{"kubegpu.io/monitoring": "console-plugin"})
    console = obj("Console", "cluster", managers=("kubegpu.platform/monitoring",),
                  spec={"plugins": ["users-plugin", "console-plugin-nvidia-gpu"]})
    listed = {("operator.openshift.io/v1", "Console"): [console],
              ("apps/v1", "Deployment"): [obj("Deployment", "console-plugin-nvidia-gpu", "nvidia-gpu-operator",
                                              labels=labels),
                                          obj("Deployment", "users-app", "nvidia-gpu-operator")],
              ("v1", "Service"): [obj("Service", "console-plugin-nvidia-gpu", "nvidia-gpu-operator", labels=labels)],
              ("console.openshift.io/v1", "ConsolePlugin"): [obj("ConsolePlugin", "console-plugin-nvidia-gpu",
                                                                 labels=labels)]}
    steps = plan_stage("monitoring", listed)
    assert keys(steps) == [
        ("console plugin taken out of the console's plugins", [], ["Console/cluster"], [], []),
        ("alert rules, dashboard and console plugin",
         ["ConsolePlugin/console-plugin-nvidia-gpu", "Deployment/nvidia-gpu-operator/console-plugin-nvidia-gpu",
          "Service/nvidia-gpu-operator/console-plugin-nvidia-gpu"], [], [], [])]
    assert steps[0]["plugins"] == [dict(console, apiVersion="operator.openshift.io/v1")]


@pytest.mark.parametrize("plugins, managers", [
    (["users-plugin"], ("kubegpu.platform/monitoring",)),          # ours already out of the list: done
    (["console-plugin-nvidia-gpu"], ("console-operator", "kubectl-edit")),   # the user enabled it: theirs
])
def test_a_console_without_our_plugin_or_not_written_by_us_is_left_alone(plugins, managers):
    console = obj("Console", "cluster", managers=managers, spec={"plugins": plugins})
    assert plan_stage("monitoring", {("operator.openshift.io/v1", "Console"): [console]}) == []
