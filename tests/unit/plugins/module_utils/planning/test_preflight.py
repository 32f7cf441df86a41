# -*- coding: utf-8 -*-
"""check_cluster: what the preflight module read, judged with the stages' own planning code."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.preflight.checks import (
    check_cluster,
    operator_release,
    setting,
)

from pool_builders import A100, L40S, by_label, node, raw_pool  # noqa: E402  pylint: disable=wrong-import-order

GPU = "gpu-operator-certified"


def manifest(name, channels, default):
    return {"metadata": {"name": name, "namespace": "openshift-marketplace"},
            "status": {"packageName": name, "defaultChannel": default, "catalogSource": "certified-operators",
                       "channels": [{"name": ch, "currentCSV": csvs[-1], "entries": [{"name": c} for c in csvs]}
                                    for ch, csvs in channels.items()]}}


PACKAGES = {GPU: manifest(GPU, {"v26.7": [GPU + ".v26.7.0"], "v26.3": [GPU + ".v26.3.3"]}, "v26.7"),
            "nfd": manifest("nfd", {"stable": ["nfd.4.20.0"]}, "stable")}
NODES = [node("h100-0", machine="gpu-h100-a-x1"), node("h100-1", machine="gpu-h100-a-x2"),
         node("l40s-0", product=L40S, count=4), node("a100-0", product=A100), node("cpu-0", product=None)]
MACHINESETS = [{"metadata": {"name": "gpu-h100-a", "namespace": "openshift-machine-api"}}]
POLICIES = [{"metadata": {"name": "gpu-cluster-policy"}}]
DRA_FACTS = {"served_versions": ["v1"], "kubernetes_version": "v1.34.2", "openshift_version": None,
             "feature_set": None, "scheduler_dra": None}
H100_POOL = raw_pool("llm-h100", by_label("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
                     {"strategy": "mig", "mig": {"layout": {"3g.40gb": 2}}})
L40S_POOL = raw_pool("embed", by_label("nvidia.com/gpu.product", L40S),
                     {"strategy": "time-slicing", "time_slicing": {"replicas": 4}})


def observed(**changes):
    seen = {"platform": "openshift", "packages": PACKAGES, "nodes": NODES, "machinesets": MACHINESETS,
            "cluster_policies": POLICIES, "dra_facts": DRA_FACTS}
    seen.update(changes)
    return seen


def test_the_release_the_role_asks_for():
    assert operator_release({}) == ("v26.7", GPU + ".v26.7.0")
    assert operator_release({"kubegpu_gpu_operator": {"version": "26.3.3"}}) == ("v26.3", GPU + ".v26.3.3")
    assert operator_release({"kubegpu_gpu_operator": {"channel": "v26.3", "version": ""}}) == ("v26.3", None)
    assert setting({"kubegpu_gpu_operator": {"nfd": {}}}, "kubegpu_gpu_operator.nfd.channel") == "stable"


def test_good_input_passes_and_says_what_was_checked():
    variables = {"kubegpu_node_pools": [H100_POOL, L40S_POOL]}
    judged = check_cluster(variables, ["gpu_operator", "node_pools", "dra"], observed())
    assert judged["errors"] == {}
    assert "OLM package gpu-operator-certified: channel v26.7, CSV gpu-operator-certified.v26.7.0 offered" in \
        judged["checked"]["gpu_operator"]
    assert "pool llm-h100 (mig): h100-0, h100-1" in judged["checked"]["node_pools"]


@pytest.mark.parametrize("stages, variables, seen, stage, words", [
    (["gpu_operator"], {"kubegpu_gpu_operator": {"channel": "v99.1"}}, {}, "gpu_operator",
     ["kubegpu_gpu_operator.channel / version", "channel v99.1 is not offered", "v26.3, v26.7"]),
    (["gpu_operator"], {"kubegpu_gpu_operator": {"version": "v26.7.9"}}, {}, "gpu_operator",
     ["csv gpu-operator-certified.v26.7.9 is not in channel v26.7"]),
    (["gpu_operator"], {"kubegpu_gpu_operator": {"nfd": {"channel": "4.99"}}}, {}, "gpu_operator",
     ["kubegpu_gpu_operator.nfd.channel", "channel 4.99 is not offered"]),
    (["gpu_operator"], {}, {"packages": None}, "gpu_operator", ["OLM is not installed"]),
    (["gpu_operator"], {}, {"packages": {GPU: None, "nfd": PACKAGES["nfd"]}}, "gpu_operator",
     ["package gpu-operator-certified is not in the cluster's catalogs"]),
    (["node_pools"], {"kubegpu_node_pools": [dict(L40S_POOL, machinesets=["gpu-l40s-a"])]}, {}, "node_pools",
     ["MachineSet gpu-l40s-a not found", "gpu-h100-a"]),
    (["node_pools"], {"kubegpu_node_pools": [raw_pool("b200", by_label("nvidia.com/gpu.product", "NVIDIA-B200"))]},
     {}, "node_pools", ["pool 'b200': selects no node", "nvidia.com/gpu.product=NVIDIA-B200", "5 nodes"]),
    (["node_pools"], {"kubegpu_node_pools": [H100_POOL, raw_pool("all", by_label("nvidia.com/gpu.present", "true"))]},
     {}, "node_pools", ["pools 'llm-h100' and 'all' both select"]),
    (["node_pools"], {"kubegpu_node_pools": [dict(L40S_POOL, sharing={"strategy": "mig", "mig": {"layout": "all-1g.10gb"}})]},
     {}, "node_pools", ["pool 'embed'", "not MIG-capable"]),
    (["node_pools"], {"kubegpu_node_pools": [dict(H100_POOL, sharing={"strategy": "mig", "mig": {"layout": {"3g.40gb": 3}}})]},
     {}, "node_pools", ["pool 'llm-h100'", "3g.40gb"]),
    (["node_pools"], {"kubegpu_node_pools": [H100_POOL]}, {"cluster_policies": []}, "node_pools",
     ["no ClusterPolicy in the cluster", "kubegpu.platform.gpu_operator"]),
    (["dra"], {}, {"dra_facts": dict(DRA_FACTS, openshift_version="4.20.3", feature_set="", served_versions=[])}, "dra",
     ["TechPreviewNoUpgrade", "irreversible"]),
    (["dra"], {"kubegpu_node_pools": [raw_pool("dra", by_label("nvidia.com/gpu.product", L40S), {"strategy": "dra"}),
                                      dict(L40S_POOL, name="ts")]}, {}, "dra",
     ["pool 'dra' (strategy dra) and pool 'ts'"]),
])
def test_refusals(stages, variables, seen, stage, words):
    judged = check_cluster(variables, stages, observed(**seen))
    assert list(judged["errors"]) == [stage], judged["errors"]
    message = " ".join(judged["errors"][stage])
    for word in words:
        assert word in message, (word, message)


def test_the_operator_stage_in_the_same_run_installs_the_cluster_policy():
    judged = check_cluster({"kubegpu_node_pools": [H100_POOL]}, ["gpu_operator", "node_pools"],
                           observed(cluster_policies=None))
    assert judged["errors"] == {}


def test_a_pool_of_machinesets_scaled_to_zero_is_accepted():
    pool = raw_pool("later", None, {"strategy": "none"}, machinesets=["gpu-h100-a"])
    del pool["selector"]
    nodes = [n for n in NODES if not n["metadata"]["name"].startswith("h100")]
    assert check_cluster({"kubegpu_node_pools": [pool]}, ["node_pools"], observed(nodes=nodes))["errors"] == {}


def test_kubernetes_needs_no_olm():
    judged = check_cluster({"kubegpu_gpu_operator": {"channel": "v99.1"}}, ["gpu_operator"],
                           observed(platform="kubernetes", packages=None))
    assert judged["errors"] == {}


def test_dra_requirements_are_returned():
    facts = dict(DRA_FACTS, openshift_version="4.20.3", feature_set="", served_versions=[])
    judged = check_cluster({}, ["dra"], observed(dra_facts=facts))
    assert judged["requirements"] == [
        "set kubegpu_dra.acknowledge_tech_preview_no_upgrade: true, or upgrade to OpenShift 4.21 where DRA is GA"]


SCHEMA = {"type": "object", "properties": {
    "driver": {"type": "object", "properties": {
        "enabled": {"type": "boolean"}, "version": {"type": "string"},
        "env": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "value": {"type": "string"}}}},
        "resources": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {}},
        "maxUnavailable": {"x-kubernetes-int-or-string": True, "type": "string"}}},
    "mig": {"type": "object", "properties": {"strategy": {"type": "string"}}}}}


@pytest.mark.parametrize("policy, words", [
    ({"driver": {"enabeld": False}}, ["kubegpu_gpu_operator.cluster_policy.driver.enabeld: not a field",
                                      "did you mean 'enabled'", "valid: enabled, env, maxUnavailable"]),
    ({"driver": {"enabled": "no"}}, ["kubegpu_gpu_operator.cluster_policy.driver.enabled: expected true or false"]),
    ({"driver": {"env": [{"name": "A", "valu": "1"}]}}, ["cluster_policy.driver.env[0].valu: not a field",
                                                         "did you mean 'value'"]),
    ({"mig": {"strategy": 1}}, ["cluster_policy.mig.strategy: expected a string, got 1"]),
])
def test_cluster_policy_fields_against_the_crd_schema(policy, words):
    judged = check_cluster({"kubegpu_gpu_operator": {"cluster_policy": policy}}, ["gpu_operator"],
                           observed(policy_schema=SCHEMA, policy_schema_source="test"))
    message = " ".join(judged["errors"]["gpu_operator"])
    for word in words:
        assert word in message, (word, message)


def test_cluster_policy_fields_the_schema_leaves_open_pass():
    policy = {"driver": {"resources": {"limits": {"cpu": 1}}, "maxUnavailable": 2, "version": None}}
    judged = check_cluster({"kubegpu_gpu_operator": {"cluster_policy": policy}}, ["gpu_operator"],
                           observed(policy_schema=SCHEMA, policy_schema_source="test"))
    assert judged["errors"] == {}


def test_the_shipped_crd_schema_takes_the_demo_settings():
    import yaml
    from pathlib import Path
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.cluster_policy import (
        CHART_VALUES,
        chart_spec,
        schema_problems,
        spec_schema,
    )
    crd = Path(__file__).resolve().parents[6] / "shared" / "crds" / "nvidia" / "nvidia.com_clusterpolicies.yaml"
    if not crd.exists():
        pytest.skip("no ../shared/crds beside the checkout")
    schema = spec_schema(yaml.safe_load(crd.read_text()))
    assert schema_problems(chart_spec(CHART_VALUES), schema, "spec.") == []
    assert schema_problems({"driver": {"enabeld": True}}, schema, "spec.")[0].startswith(
        "spec.driver.enabeld: not a field of the ClusterPolicy")


# -- serving: the platform the facts show, then every model placed and sized on the nodes' slices

CATALOG = {"rhods-operator": {"default_channel": "fast-3.x", "channels": {
    "fast-3.x": "rhods-operator.3.5.0", "stable": "rhods-operator.2.25.0"}}}
OPENSHIFT_AI_3 = {"openshift_version": "4.20.3", "operators": {}, "catalog": CATALOG, "groups": {}}
OPENSHIFT_AI_2_RAW = dict(OPENSHIFT_AI_3, operators={"rhods-operator": "rhods-operator.2.25.0"},
                          dsc={"apiVersion": "datasciencecluster.opendatahub.io/v1",
                               "spec": {"components": {"kserve": {"defaultDeploymentMode": "RawDeployment"}}}})
KSERVE = {"openshift_version": None, "groups": {}, "kserve_controller": True, "keda": False}
LLAMA = {"precision": "bf16", "context": 8192, "concurrency": 4, "hf_config": {
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072}}


def served(*models, **settings):
    base = {"runtimes": [{"name": "vllm"}],
            "models": [dict({"runtime": "vllm", "storage_uri": "hf://org/m"}, **m) for m in models]}
    base.update(settings)
    return {"kubegpu_node_pools": [H100_POOL, L40S_POOL], "kubegpu_serving": base}


def test_models_on_the_nodes_slices_pass_and_say_where_they_land():
    variables = served({"name": "llama", "pool": "llm-h100", "sizing": LLAMA})
    judged = check_cluster(variables, ["serving"], observed(serving_facts=OPENSHIFT_AI_3))
    assert judged["errors"] == {}, judged["errors"]
    assert judged["checked"]["serving"][0].startswith("platform openshift-ai-3 3.5.0: models in standard mode")
    assert "model llm/llama: nvidia.com/gpu on pool llm-h100 x1 (standard mode, scales to zero with keda)" in \
        judged["checked"]["serving"]


@pytest.mark.parametrize("variables, facts, words", [
    (served({"name": "m", "pool": "embed"}, mode="knative"), OPENSHIFT_AI_3,
     ["kubegpu_serving.mode is knative, but OpenShift AI 3.5.0 removed Serverless"]),
    (served({"name": "m", "pool": "embed", "mode": "knative"}), OPENSHIFT_AI_3,
     ["kubegpu_serving.models[0] (m): mode is knative, but OpenShift AI 3.5.0 removed"]),
    (served({"name": "m", "pool": "embed"}), OPENSHIFT_AI_2_RAW,
     ["kubegpu_serving.models[0] (m): min_replicas is 0", "RawDeployment mode scales with the HPA only"]),
    (served({"name": "m", "pool": "embed"}, install=False), KSERVE,
     ["kubegpu_serving.models[0] (m): min_replicas is 0", "KServe's Standard mode without KEDA"]),
    (served({"name": "m", "pool": "embed", "mode": "knative"}), dict(KSERVE, keda=True),
     ["mode is knative, but Knative Serving does not run on this cluster"]),
    (served({"name": "m", "pool": "embed", "sizing": dict(LLAMA, context=131072)}), OPENSHIFT_AI_3,
     ["kubegpu_serving.models[0] (m): model does not fit pool 'embed'"]),
    (served({"name": "m", "pool": "embed"}, platform="openshift-ai"), KSERVE,
     ["kubegpu_serving.platform is openshift-ai but this cluster is not OpenShift"]),
])
def test_serving_refusals(variables, facts, words):
    judged = check_cluster(variables, ["serving"], observed(serving_facts=facts))
    assert list(judged["errors"]) == ["serving"], judged["errors"]
    message = " ".join(judged["errors"]["serving"])
    for word in words:
        assert word in message, (word, message)


def test_a_pool_whose_gpus_the_nodes_do_not_tell_yet_is_left_to_the_stage_when_the_operator_runs_first():
    nodes = [node("l40s-0", product=None, labels={"pool": "embed"})]
    variables = served({"name": "m", "pool": "cpu"})
    variables["kubegpu_node_pools"] = [raw_pool("cpu", by_label("pool", "embed"))]
    seen = observed(nodes=nodes, serving_facts=OPENSHIFT_AI_3)
    judged = check_cluster(variables, ["gpu_operator", "node_pools", "serving"], dict(seen, platform="kubernetes"))
    assert "serving" not in judged["errors"], judged["errors"]
    assert any("pool cpu's GPUs are not known yet" in line for line in judged["checked"]["serving"])
    assert list(check_cluster(variables, ["serving"], seen)["errors"]) == ["serving"]


def test_tenancy_quotas_are_judged_against_the_pools_as_the_inventory_wants_them():
    # The L40S node (4 GPUs x 4 replicas = 16): a share that fits, then units above it after a pool change.
    teams = [{"name": "research", "quotas": [{"pool": "embed", "units": 12}]}]
    variables = {"kubegpu_node_pools": [L40S_POOL], "kubegpu_tenancy": {"teams": teams}}
    judged = check_cluster(variables, ["tenancy"], observed())
    assert judged["errors"] == {} and judged["checked"]["tenancy"] == ["team research: pool embed nvidia.com/gpu 12"]
    fewer = dict(L40S_POOL, sharing={"strategy": "time-slicing", "time_slicing": {"replicas": 2}})
    judged = check_cluster(dict(variables, kubegpu_node_pools=[fewer]), ["node_pools", "tenancy"], observed())
    assert "the teams' quotas add up to 12 (research: 12), above the 8 the pool offers" in judged["errors"]["tenancy"][0]


# -- a misspelt key is reported with the problems its absence causes, in one run


class FailedPreflight(Exception):
    pass


class FakeModule:
    """What preflight.run uses of its module: the inventory, the options, fail_json; no cluster is read here."""

    def __init__(self, variables, stages):
        self.inventory = variables
        self.params = {"stages": stages, "cluster": True}
        self.cluster = None

    def fail_json(self, **result):
        raise FailedPreflight(result)


def test_a_misspelt_key_and_the_refusal_its_absence_causes_come_in_one_report(monkeypatch):
    from ansible_collections.kubegpu.platform.plugins.modules import preflight

    seen = {}

    def observe(cluster, variables, stages):
        seen["variables"], seen["stages"] = variables, stages
        return observed(dra_facts=dict(DRA_FACTS, openshift_version="4.20.3", feature_set="", served_versions=[]))

    monkeypatch.setattr(preflight, "observe", observe)
    module = FakeModule({"kubegpu_dra": {"acknowledge_tech_preview": True}}, ["dra"])
    with pytest.raises(FailedPreflight) as failed:
        preflight.run(module)
    result = failed.value.args[0]
    assert seen["stages"] == ["dra"]
    # The cluster was judged as the dra stage would run: without the key it does not know.
    assert seen["variables"]["kubegpu_dra"] == {}
    problems = result["errors"]["kubegpu_dra"] + result["errors"]["dra"]
    assert any("unknown key 'acknowledge_tech_preview' (did you mean 'acknowledge_tech_preview_no_upgrade'?)" in p
               for p in problems), problems
    assert any("TechPreviewNoUpgrade" in p and "irreversible" in p for p in problems), problems
    assert result["requirements"] == [
        "set kubegpu_dra.acknowledge_tech_preview_no_upgrade: true, or upgrade to OpenShift 4.21 where DRA is GA"]
    assert "2 problems found before anything was written" in result["msg"]


def test_a_shape_error_still_keeps_the_cluster_checks_of_its_variable_from_running(monkeypatch):
    from ansible_collections.kubegpu.platform.plugins.modules import preflight

    monkeypatch.setattr(preflight, "observe", lambda cluster, variables, stages: pytest.fail("cluster read"))
    module = FakeModule({"kubegpu_dra": {"acknowledge_tech_preview": True, "timeout": "soon"}}, ["dra"])
    with pytest.raises(FailedPreflight) as failed:
        preflight.run(module)
    assert list(failed.value.args[0]["errors"]) == ["kubegpu_dra"]
    assert len(failed.value.args[0]["errors"]["kubegpu_dra"]) == 2
