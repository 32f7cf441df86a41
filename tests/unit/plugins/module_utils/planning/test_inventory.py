# -*- coding: utf-8 -*-
"""The inventory variables: check_inventory names every problem with the path the user wrote, all at once."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.preflight.inventory import (
    INVENTORY,
    check_inventory,
    describe,
    judge_inventory,
    leaf_paths,
    spec_at,
)

REPO = Path(__file__).resolve().parents[5]
DEMO = yaml.safe_load((REPO / "examples" / "demo" / "inventory.yml").read_text())["all"]["vars"]
ALL = ["gpu_operator", "node_pools", "dra", "serving"]


def test_the_demo_inventory_passes():
    assert check_inventory(DEMO, ALL) == {}


def test_no_variables_pass():
    assert check_inventory({}, ALL) == {}


@pytest.mark.parametrize("variables, variable, expected", [
    ({"kubegpu_gpu_operator": {"mig_stratgy": "mixed"}}, "kubegpu_gpu_operator",
     "kubegpu_gpu_operator: unknown key 'mig_stratgy' (did you mean 'mig_strategy'?)"),
    ({"kubegpu_gpu_operator": {"timeout": "soon"}}, "kubegpu_gpu_operator",
     "kubegpu_gpu_operator.timeout: expected an integer, got 'soon'"),
    ({"kubegpu_gpu_operator": {"mig_strategy": "all-1g"}}, "kubegpu_gpu_operator",
     "kubegpu_gpu_operator.mig_strategy: 'all-1g' is not valid; valid: none, single, mixed"),
    ({"kubegpu_gpu_operator": {"driver": {"enabeld": True}}}, "kubegpu_gpu_operator",
     "kubegpu_gpu_operator.driver: unknown key 'enabeld' (did you mean 'enabled'?)"),
    ({"kubegpu_gpu_operator": {"cluster_policy": {"cdi": {"default": True}}}}, "kubegpu_gpu_operator",
     "kubegpu_gpu_operator.cluster_policy.cdi.default: dead field"),
    ({"kubegpu_gpu_operator": {"cluster_policy": {"devicePlugn": {}}}}, "kubegpu_gpu_operator",
     "kubegpu_gpu_operator.cluster_policy.devicePlugn: not a ClusterPolicy spec section (the API server would drop "
     "it) (did you mean 'devicePlugin'?)"),
    ({"kubegpu_gpu_operator": {"cluster_policy": {"mig": {"strategy": "both"}}}}, "kubegpu_gpu_operator",
     "kubegpu_gpu_operator.cluster_policy.mig.strategy: 'both' is not valid"),
    ({"kubegpu_gpu_operator": {"driver": {"nvidia_drivers": [{"name": "a"}]}}}, "kubegpu_gpu_operator",
     "needs kubegpu_gpu_operator.driver.per_node_pool: true"),
    ({"kubegpu_gpu_operator": {"nfd": {"approval": "manual"}}}, "kubegpu_gpu_operator",
     "kubegpu_gpu_operator.nfd.approval: 'manual' is not valid (did you mean 'Manual'?)"),
    ({"kubegpu_gpu_operator": "v26.7.0"}, "kubegpu_gpu_operator",
     "kubegpu_gpu_operator: expected a mapping, got 'v26.7.0'"),
    ({"kubegpu_platform": "ocp"}, "kubegpu_platform", "kubegpu_platform: 'ocp' is not valid"),
    ({"kubegpu_node_pools": {"name": "a"}}, "kubegpu_node_pools", "kubegpu_node_pools: expected a list"),
    ({"kubegpu_node_pools": [{"name": "a", "selector": {"matchLabels": {"a": "b"}},
                              "sharing": {"strategy": "mig", "mig": {"layout": "all-balanced", "stratgy": "mixed"}}}]},
     "kubegpu_node_pools", "kubegpu_node_pools[0] (a).sharing.mig: unknown key 'stratgy' (did you mean 'strategy'?)"),
    ({"kubegpu_node_pools": [{"name": "a", "selector": {"matchLabels": {"a": "b"}},
                              "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": "many"}}}]},
     "kubegpu_node_pools", "kubegpu_node_pools[0] (a).sharing.time_slicing.replicas: expected an integer, got 'many'"),
    ({"kubegpu_node_pools": [{"name": "a", "selector": {"matchLabels": {"a": "b"}},
                              "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 1}}}]},
     "kubegpu_node_pools", "kubegpu_node_pools[0]: pool 'a': sharing.time_slicing.replicas is 1"),
    ({"kubegpu_dra": {"driver": {"feature_gates": {"NoSuchGate": True}}}}, "kubegpu_dra",
     "kubegpu_dra.driver.feature_gates: unknown gate 'NoSuchGate'"),
    ({"kubegpu_dra": {"driver": {"driver_ownr": "host"}}}, "kubegpu_dra",
     "kubegpu_dra.driver: unknown key 'driver_ownr' (did you mean 'driver_owner'?)"),
    ({"kubegpu_dra": {"claim_templates": [{"name": "x", "namespaces": ["llm"], "device": "tpu"}]}}, "kubegpu_dra",
     "kubegpu_dra.claim_templates[0]: claim template 'x'"),
    ({"kubegpu_node_pool": []}, "kubegpu_node_pool",
     "kubegpu_node_pool: not a variable of kubegpu.platform (did you mean 'kubegpu_node_pools'?)"),
])
def test_problems_name_the_path_the_user_wrote(variables, variable, expected):
    errors = check_inventory(variables, ALL)
    assert list(errors) == [variable], errors
    assert any(expected in message for message in errors[variable]), errors[variable]


def test_every_problem_is_reported_at_once_grouped_per_variable():
    variables = copy.deepcopy(DEMO)
    variables["kubegpu_gpu_operator"] = {"mig_stratgy": "mixed", "timeout": "soon", "approval": "sometimes"}
    variables["kubegpu_node_pools"][0]["sharing"]["mig"]["strategy"] = "half"
    variables["kubegpu_node_pools"][1]["sharing"]["time_slicing"]["replicas"] = 1
    errors = check_inventory(variables, ALL)
    assert sorted(errors) == ["kubegpu_gpu_operator", "kubegpu_node_pools"]
    assert len(errors["kubegpu_gpu_operator"]) == 3
    assert len(errors["kubegpu_node_pools"]) == 1  # the shape error first; pool_spec runs once the shape is right
    text = describe(errors)
    assert text.index("kubegpu_gpu_operator:") < text.index("kubegpu_node_pools:")


def test_only_the_stages_variables_are_checked():
    variables = {"kubegpu_gpu_operator": {"timeout": "soon"}}
    assert check_inventory(variables, ["node_pools"]) == {}


def test_future_stage_variables_are_accepted_as_they_are():
    assert check_inventory({"kubegpu_tenancy": {"anything": [1]}}, ALL) == {}


def test_ansible_spellings_of_booleans_and_numbers_pass_as_the_roles_accept_them():
    variables = {"kubegpu_gpu_operator": {"wait": "yes", "timeout": "120", "version": 26.7}}
    assert check_inventory(variables, ALL) == {}


def test_an_unknown_key_is_reported_with_the_problems_the_rest_has_without_it():
    # The pool's misspelt key hides nothing: pool_spec still judges the pool as the stage would read it.
    pool = {"name": "a", "selector": {"matchLabels": {"a": "b"}}, "sharing": {
        "strategy": "time-slicing", "time_slicing": {"replicas": 1, "replcas": 4}}}
    problems = check_inventory({"kubegpu_node_pools": [pool]}, ALL)["kubegpu_node_pools"]
    assert len(problems) == 2, problems
    assert "kubegpu_node_pools[0] (a).sharing.time_slicing: unknown key 'replcas' (did you mean 'replicas'?)" \
        in problems[0]
    assert "kubegpu_node_pools[0]: pool 'a': sharing.time_slicing.replicas is 1" in problems[1]


POOL = {"name": "a", "selector": {"matchLabels": {"a": "b"}}, "sharing": {"strategy": "none"}}


def test_the_variables_are_judged_without_their_unknown_keys():
    variables = {"kubegpu_dra": {"acknowledge_tech_preview": True, "driver": {"log_verbosity": 4, "verbose": 1}},
                 "kubegpu_node_pools": [dict(POOL, colour="red")]}
    judged = judge_inventory(variables, ["dra"])
    assert judged.variables["kubegpu_dra"] == {"driver": {"log_verbosity": 4}}
    assert judged.variables["kubegpu_node_pools"] == [POOL]
    assert sorted(judged.errors) == ["kubegpu_dra", "kubegpu_node_pools"]
    assert judged.unjudged == set()
    assert variables["kubegpu_dra"]["acknowledge_tech_preview"] is True  # the caller's variables are left as they are
    judged = judge_inventory({"kubegpu_dra": {"acknowledge_tech_preview": True, "timeout": "soon"}}, ["dra"])
    assert judged.unjudged == {"kubegpu_dra"}


# -- no drift: the inventory spec and the roles' defaults and argument specs describe the same keys


def _role_mappings():
    """{inventory path: (role, role option)} read from roles/*/defaults/main.yml."""
    import re
    found = {}
    for defaults in sorted((REPO / "roles").glob("*/defaults/main.yml")):
        role = defaults.parts[-3]
        for option, value in (yaml.safe_load(defaults.read_text()) or {}).items():
            if not isinstance(value, str) or "kubegpu_" not in value:
                continue
            match = re.search(r"\b(kubegpu_\w+)((?:\.\w+)*)", value)
            path = match.group(1) + match.group(2)
            gets = re.findall(r"\.get\('(\w+)'", value)
            if gets:
                path = match.group(1) + "".join("." + g for g in gets)
            found.setdefault(path, []).append((role, option))
    return found


def _argument_specs(role):
    return yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())[
        "argument_specs"]["main"]["options"]


def test_inventory_spec_and_role_defaults_cover_the_same_keys():
    mapped = _role_mappings()
    unknown = []
    for path in mapped:
        try:
            spec_at(path)
        except KeyError:
            unknown.append(path)
    assert unknown == [], "role defaults read inventory keys the spec lacks"
    # A role may take a whole mapping (dra_driver: kubegpu_dra.driver): that covers the keys under it.
    unread = [leaf for leaf in leaf_paths() if not any(leaf == p or leaf.startswith(p + ".") for p in mapped)]
    assert unread == [], "the spec has inventory keys no role reads"


def test_inventory_spec_and_role_argument_specs_agree_on_types_choices_and_defaults():
    for path, targets in sorted(_role_mappings().items()):
        spec = spec_at(path)
        for role, option in targets:
            role_spec = _argument_specs(role)[option]
            assert role_spec["type"] == spec["type"], (path, role, option)
            assert role_spec.get("elements") == spec.get("elements"), (path, role, option)
            assert role_spec.get("choices") == spec.get("choices"), (path, role, option)
            if "default" in role_spec:
                assert spec.get("default") == role_spec["default"], (path, role, option)


def test_every_variable_has_a_spec():
    assert sorted(INVENTORY) == ["kubegpu_api", "kubegpu_dra", "kubegpu_gpu_operator", "kubegpu_monitoring",
                                 "kubegpu_node_pools", "kubegpu_platform", "kubegpu_serving", "kubegpu_tenancy"]


# -- kubegpu_serving: its shape here, its values in serving/spec.py, its models against the pools and templates


def serving(change, demo=DEMO):
    """The demo's variables with kubegpu_serving changed by change(kubegpu_serving) in place."""
    variables = copy.deepcopy(demo)
    change(variables["kubegpu_serving"])
    return variables


def model(index, **keys):
    def change(value):
        value["models"][index].update(keys)
    return change


# A pool whose selector names its GPU model and count: its slices are known without the cluster.
A100_PAIR = {"name": "a100-pair", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                                                               "nvidia.com/gpu.count": "2"}},
             "sharing": {"strategy": "none"}}
# The demo's 70B model in FP8 (two H200s through a claim template), placed on a pool instead.
LLAMA_70B = dict(DEMO["kubegpu_serving"]["models"][3], name="big", claim_template=None)


@pytest.mark.parametrize("change, expected", [
    (model(1, min_replica=1), "kubegpu_serving.models[1] (llama-8b): unknown key 'min_replica' (did you mean "
                              "'min_replicas'?)"),
    (model(0, runtime="vlm-embed"), "kubegpu_serving.models[0] (bge-large): runtime is 'vlm-embed', which "
                                    "kubegpu_serving.runtimes does not list (listed: vllm, vllm-embed)"),
    (model(1, pool="llm-h10"), "kubegpu_serving.models[1] (llama-8b): pool is 'llm-h10', which kubegpu_node_pools "
                               "does not list"),
    (model(2, claim_template="gpu-80"), "kubegpu_serving.models[2] (llama-8b-dra): claim_template is 'gpu-80', which "
                                        "kubegpu_dra.claim_templates does not list"),
    (model(2, mode="knative"), "kubegpu_serving.models[2] (llama-8b-dra): claim_template 'gpu-80g' asks for a DRA "
                               "resource claim, but the model runs in Knative mode"),
    (lambda v: v.update(mode="serverless"), "kubegpu_serving.mode: 'serverless' is not valid"),
    (lambda v: v.update(mode="knative"), "kubegpu_serving.models[2] (llama-8b-dra): claim_template 'gpu-80g'"),
    (model(1, pool="dra-h200", mig_profile=None), "pool 'dra-h200' shares its GPUs through DRA"),
    (model(1, min_replicas="none"), "kubegpu_serving.models[1] (llama-8b).min_replicas: expected an integer"),
    (model(1, max_replicas=0), "kubegpu_serving.models[1] (llama-8b): max_replicas is 0; expected a whole number >= 1"),
    (lambda v: v["runtimes"][1].update(typ="vllm-embed"),
     "kubegpu_serving.runtimes[1] (vllm-embed): unknown key 'typ' (did you mean 'type'?)"),
    (lambda v: v["runtimes"][1].update(type="embed"), "kubegpu_serving.runtimes[1] (vllm-embed).type: 'embed' is not "
                                                      "valid"),
    (lambda v: v.update(scale_to_zero={"retention_period": "five minutes"}),
     "kubegpu_serving: scale_to_zero.retention_period is 'five minutes'; expected a duration"),
    (lambda v: v.update(scale_to_zero={"treshold": 2}), "kubegpu_serving.scale_to_zero: unknown key 'treshold' (did "
                                                        "you mean 'threshold'?)"),
    (model(1, sizing={"precison": "bf16"}), "kubegpu_serving.models[1] (llama-8b).sizing: unknown key 'precison' "
                                            "(did you mean 'precision'?)"),
    (model(3, claim_template="gpu-80g"), "kubegpu_serving.models[3] (llama-70b): "),
    (lambda v: v.update(models="llama"), "kubegpu_serving.models: expected a list, got 'llama'"),
])
def test_serving_problems_name_the_model_and_the_path(change, expected):
    errors = check_inventory(serving(change), ALL)
    assert list(errors) == ["kubegpu_serving"], errors
    assert any(expected in message for message in errors["kubegpu_serving"]), errors["kubegpu_serving"]


def test_every_models_problem_is_reported_at_once():
    def change(value):
        value["models"][0]["runtime"] = "vlm"
        value["models"][1]["gpus"] = 0
    problems = check_inventory(serving(change), ALL)["kubegpu_serving"]
    assert [p.split(":")[0] for p in problems] == ["kubegpu_serving.models[0] (bge-large)",
                                                   "kubegpu_serving.models[1] (llama-8b)"], problems


def test_a_model_too_big_for_a_pool_whose_gpus_the_selector_names_is_refused_without_the_cluster():
    variables = copy.deepcopy(DEMO)
    variables["kubegpu_node_pools"].append(A100_PAIR)
    variables["kubegpu_serving"]["models"].append(dict(LLAMA_70B, pool="a100-pair", gpus=1))
    problems = check_inventory(variables, ALL)["kubegpu_serving"]
    assert len(problems) == 1 and problems[0].startswith("kubegpu_serving.models[4] (big): "), problems
    # Two GPUs (tensor parallel) with a quarter of the context fit.
    variables["kubegpu_serving"]["models"][4].update(gpus=2, sizing=dict(LLAMA_70B["sizing"], context=8192))
    assert check_inventory(variables, ALL) == {}


def test_pools_whose_gpus_only_the_cluster_tells_are_sized_with_the_cluster():
    variables = serving(model(0, sizing=dict(LLAMA_70B["sizing"])))     # 70B on a quarter of an L40S
    assert check_inventory(variables, ALL) == {}


def test_serving_is_checked_only_for_the_serving_stage():
    variables = serving(model(1, pool="llm-h10"))
    assert check_inventory(variables, ["gpu_operator", "node_pools", "dra"]) == {}
    assert list(check_inventory(variables, ["serving"])) == ["kubegpu_serving"]


def test_models_are_not_placed_while_the_pools_are_broken():
    variables = serving(model(1, pool="llm-h10"))
    variables["kubegpu_node_pools"][1]["sharing"]["time_slicing"]["replicas"] = 1
    assert list(check_inventory(variables, ["serving"])) == ["kubegpu_node_pools"]


POOL = {"name": "gb200", "selector": {"matchLabels": {"a": "b"}}, "sharing": {"strategy": "none"},
        "driver": {"version": "580.173.02"}}


def test_pool_drivers_need_nvidiadriver_mode():
    errors = check_inventory({"kubegpu_node_pools": [POOL, dict(POOL, name="b200")]}, ALL)
    assert errors == {"kubegpu_gpu_operator": [
        "kubegpu_gpu_operator.driver.per_node_pool: false, but pools 'gb200', 'b200' of kubegpu_node_pools name a "
        "driver; the GPU Operator reads NVIDIADriver objects only in NVIDIADriver mode: set per_node_pool: true, or "
        "remove the pools' driver"]}


def test_pool_drivers_in_nvidiadriver_mode_pass():
    assert check_inventory({"kubegpu_node_pools": [POOL],
                            "kubegpu_gpu_operator": {"driver": {"per_node_pool": True}}}, ALL) == {}


def test_pool_drivers_without_the_gpu_operator_stage_are_left_to_the_node_pools_stage():
    assert check_inventory({"kubegpu_node_pools": [POOL]}, ["node_pools"]) == {}


def test_bad_pool_driver_is_the_pools_problem():
    errors = check_inventory({"kubegpu_node_pools": [dict(POOL, driver={"version": "580"})]}, ALL)
    assert list(errors) == ["kubegpu_node_pools"]
    assert "driver.version is '580', a branch" in errors["kubegpu_node_pools"][0]
