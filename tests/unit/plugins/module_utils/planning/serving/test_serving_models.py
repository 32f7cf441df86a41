# -*- coding: utf-8 -*-
"""Models to ServingRuntimes and InferenceServices (models.py, runtimes.py, spec.py): placement, scale to zero,
sizing, and every refusal."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.errors import ServingError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.models import cluster_offers, plan_models
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.platform import detect_platform
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.slices import claim_template_slices, pool_slices
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.spec import parse_settings

POOLS = [
    {"name": "embed-l40s", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-L40S"}},
     "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}},
    {"name": "llm-h100", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
     "sharing": {"strategy": "mig", "mig": {"layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}}},
    {"name": "whole-a100", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
     "sharing": {"strategy": "none"}},
    {"name": "dra-h200", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H200"}},
     "sharing": {"strategy": "dra"}},
]
HARDWARE = {"embed-l40s": {"gpu": "L40S", "gpus_per_node": 4}, "llm-h100": {"gpu": "H100-80GB", "gpus_per_node": 8},
            "whole-a100": {"gpu": "A100-80GB", "gpus_per_node": 4}}
TEMPLATES = [{"name": "gpu-80g", "namespaces": ["llm"], "min_memory": "80G"}]
LLAMA_8B = {"parameters": 8030000000, "precision": "bf16", "context": 8192,
            "architecture": {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                             "head_dim": 128}}
RUNTIMES = [{"name": "vllm"}, {"name": "vllm-embed", "type": "vllm-embed"}]
KSERVE_KEDA = {"openshift_version": None, "kserve_config": {"defaultDeploymentMode": "Standard"},
               "kserve_controller": True, "keda": True}
KSERVE_HPA = {"openshift_version": None, "kserve_config": {"defaultDeploymentMode": "Standard"},
              "kserve_controller": True}
RHOAI_2 = {"openshift_version": "4.19.9", "operators": {
    "rhods-operator": "rhods-operator.2.25.0", "serverless-operator": "s.v1", "servicemeshoperator": "m.v2",
    "authorino-operator": "a.v1"}}
RHOAI_3 = {"openshift_version": "4.20.3", "operators": {"rhods-operator": "rhods-operator.3.5.0"}}


def model(name, **fields):
    base = {"name": name, "runtime": "vllm", "storage_uri": "hf://org/%s" % name}
    base.update(fields)
    return base


def plan(models, facts=None, runtimes=None, **raw):
    settings = parse_settings(dict(raw, runtimes=RUNTIMES if runtimes is None else runtimes, models=models))
    platform = detect_platform(facts or KSERVE_KEDA, settings)
    slices = pool_slices(POOLS, hardware=HARDWARE) + claim_template_slices(TEMPLATES)
    pools = dict((p["name"], {"strategy": p["sharing"]["strategy"], "error": None}) for p in POOLS)
    return plan_models(settings, platform, slices, pools, {"gpu-80g": ["llm"]})


def isvc(result, name):
    return next(o for o in result["objects"] if o["kind"] == "InferenceService" and o["metadata"]["name"] == name)


def test_the_four_placements():
    result = plan([
        model("bge", runtime="vllm-embed", pool="embed-l40s"),
        model("llama-8b", pool="llm-h100", mig_profile="3g.40gb", sizing=LLAMA_8B),
        model("llama-dra", claim_template="gpu-80g"),
        model("llama-70b", pool="whole-a100", gpus=2),
    ])
    predictors = dict((o["metadata"]["name"], o["spec"]["predictor"]) for o in result["objects"]
                      if o["kind"] == "InferenceService")
    assert predictors["bge"]["model"]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert predictors["bge"]["nodeSelector"] == {"kubegpu.io/node-pool": "embed-l40s"}
    assert predictors["llama-8b"]["model"]["resources"] == {"limits": {"nvidia.com/mig-3g.40gb": 1}}
    assert predictors["llama-8b"]["model"]["args"][:2] == ["--max-model-len", "8192"]
    assert "--gpu-memory-utilization" in predictors["llama-8b"]["model"]["args"]
    assert predictors["llama-dra"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-80g"}]
    assert predictors["llama-dra"]["model"]["resources"] == {"claims": [{"name": "gpu"}]}
    assert "nodeSelector" not in predictors["llama-dra"]
    assert predictors["llama-70b"]["model"]["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    assert predictors["llama-70b"]["model"]["args"] == ["--tensor-parallel-size", "2"]
    for predictor in predictors.values():
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in predictor["tolerations"]
    # One runtime object per runtime and namespace used, before the InferenceServices.
    assert [(o["kind"], o["metadata"]["name"]) for o in result["objects"][:2]] == [
        ("ServingRuntime", "vllm"), ("ServingRuntime", "vllm-embed")]
    embed = result["objects"][1]["spec"]["containers"][0]
    assert "--task=embed" in embed["args"] and "--served-model-name={{.Name}}" in embed["args"]
    assert result["models"]["llm/llama-8b"]["request"] == {"nvidia.com/mig-3g.40gb": 1}
    assert result["models"]["llm/llama-dra"]["request"] == {"claim": "gpu-80g"}


def test_standard_mode_scales_to_zero_with_keda():
    predictor_isvc = isvc(plan([model("m", pool="whole-a100")]), "m")
    annotations = predictor_isvc["metadata"]["annotations"]
    assert annotations == {"serving.kserve.io/deploymentMode": "Standard", "serving.kserve.io/autoscalerClass": "keda"}
    predictor = predictor_isvc["spec"]["predictor"]
    assert (predictor["minReplicas"], predictor["maxReplicas"]) == (0, 1)
    [metric] = predictor["autoScaling"]["metrics"]
    assert metric["type"] == "External" and metric["external"]["metric"]["backend"] == "prometheus"
    assert 'namespace="llm",model_name="m"' in metric["external"]["metric"]["query"]
    assert metric["external"]["target"] == {"type": "Value", "value": "1"}


def test_knative_mode_scales_to_zero_with_a_retention_period_and_a_cold_start_deadline():
    obj = isvc(plan([model("m", pool="whole-a100")], facts=RHOAI_2, cold_start_timeout=2400,
                    scale_to_zero={"retention_period": "10m"}), "m")
    assert obj["metadata"]["annotations"] == {
        "serving.kserve.io/deploymentMode": "Serverless",
        "serving.knative.dev/progress-deadline": "2400s",
        "autoscaling.knative.dev/scale-to-zero-pod-retention-period": "10m"}
    assert obj["spec"]["predictor"]["minReplicas"] == 0
    assert "autoScaling" not in obj["spec"]["predictor"]


def test_a_model_with_min_replicas_keeps_the_default_autoscaler():
    obj = isvc(plan([model("m", pool="whole-a100", min_replicas=1, max_replicas=3)]), "m")
    assert "serving.kserve.io/autoscalerClass" not in obj["metadata"]["annotations"]
    assert (obj["spec"]["predictor"]["minReplicas"], obj["spec"]["predictor"]["maxReplicas"]) == (1, 3)


def test_a_dra_model_in_standard_mode_on_openshift_ai_2():
    obj = isvc(plan([model("m", claim_template="gpu-80g", mode="standard", min_replicas=1)], facts=RHOAI_2), "m")
    assert obj["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "RawDeployment"


def test_sizing_picks_the_smallest_mig_slice_that_fits_when_no_profile_is_named():
    architecture = {"num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64}
    sizing = {"parameters": 1000000000, "precision": "bf16", "context": 2048, "architecture": architecture}
    result = plan([model("small", pool="llm-h100", sizing=sizing)])
    assert result["models"]["llm/small"]["request"] == {"nvidia.com/mig-1g.10gb": 1}


REFUSALS = [
    ([model("m", runtime="tgi", pool="whole-a100")], {}, "model 'm': runtime is 'tgi', which kubegpu_serving.runtimes "
     "does not list (listed: vllm, vllm-embed)"),
    ([model("m", pool="gpu-pool")], {}, "model 'm': pool is 'gpu-pool', which kubegpu_node_pools does not list"),
    ([model("m", claim_template="gpu-40g")], {}, "model 'm': claim_template is 'gpu-40g', which "
     "kubegpu_dra.claim_templates does not list (listed: gpu-80g)"),
    ([model("m", claim_template="gpu-80g", namespace="other")], {}, "has no ResourceClaimTemplate in namespace other"),
    ([model("m", pool="dra-h200")], {}, "pool 'dra-h200' shares its GPUs through DRA: name one of its claim templates"),
    ([model("m", pool="llm-h100", mig_profile="4g.40gb")], {}, "mig_profile is '4g.40gb', but pool 'llm-h100' does "
     "not offer it (it offers: 1g.10gb, 2g.20gb, 3g.40gb)"),
    ([model("m", pool="llm-h100")], {}, "pool 'llm-h100' offers several resources"),
    ([model("m", pool="embed-l40s", gpus=2)], {}, "gpus is 2, but pool 'embed-l40s'"),
    ([model("m", pool="llm-h100", mig_profile="3g.40gb", sizing=dict(LLAMA_8B, context=131072, concurrency=8))], {},
     "model 'm': model does not fit pool 'llm-h100' nvidia.com/mig-3g.40gb"),
    ([model("m", claim_template="gpu-80g")], {"facts": RHOAI_2}, "Knative Serving rejects pods with resource claims"),
    ([model("m", pool="whole-a100")], {"facts": KSERVE_HPA, "install": False}, "min_replicas is 0, but KServe's "
     "Standard mode without KEDA scales with the HPA only"),
    ([model("m", claim_template="gpu-80g", mode="standard")], {"facts": RHOAI_2}, "OpenShift AI 2.25.0 in "
     "RawDeployment mode scales with the HPA only"),
    ([model("m", pool="whole-a100", mode="knative")], {"facts": RHOAI_3}, "OpenShift AI 3.5.0 removed Serverless"),
    ([model("m", pool="whole-a100", sizing={"parameters": 1, "precision": "fp12"})], {}, "model 'm': sizing:"),
    ([model("m", pool="whole-a100", sizing={"params": 1})], {}, "sizing has a key size_model does not take"),
]


@pytest.mark.parametrize("models,kwargs,message", REFUSALS)
def test_refusals_name_the_model_and_what_to_do(models, kwargs, message):
    kwargs = dict(kwargs)
    facts = kwargs.pop("facts", None)
    with pytest.raises(ServingError) as e:
        plan(models, facts=facts, **kwargs)
    assert message in str(e.value)


SPEC_REFUSALS = [
    ({"models": [model("m", pool="a", claim_template="b")]}, "name exactly one of pool"),
    ({"models": [model("m")]}, "got neither"),
    ({"models": [model("M", pool="a")]}, "kubegpu_serving.models[0]: name is 'M'"),
    ({"models": [model("m", pool="a", storage_uri="llama")]}, "storage_uri is 'llama'"),
    ({"models": [model("m", pool="a", min_replicas=2, max_replicas=1)]}, "max_replicas is 1; expected at least"),
    ({"models": [model("m", pool="a"), model("m", pool="b")]}, "listed twice in namespace llm"),
    ({"mode": "serverless"}, "kubegpu_serving: mode is 'serverless'; expected one of auto, knative, standard"),
    ({"runtimes": [{"name": "x", "type": "tgi"}]}, "runtime 'x': type is 'tgi'"),
    ({"scale_to_zero": {"retention_period": "5 minutes"}}, "retention_period is '5 minutes'"),
    ({"colour": 1}, "unknown key colour in kubegpu_serving"),
]


@pytest.mark.parametrize("raw,message", SPEC_REFUSALS)
def test_settings_refusals(raw, message):
    raw = dict(raw)
    raw.setdefault("runtimes", RUNTIMES)
    with pytest.raises(ServingError) as e:
        parse_settings(raw)
    assert message in str(e.value)


def test_cluster_offers_keeps_a_pool_without_nodes_for_its_models_to_be_refused():
    slices, pools, templates = cluster_offers(POOLS[:1] + POOLS[3:], TEMPLATES, [])
    assert pools["dra-h200"] == {"strategy": "dra", "error": None}
    assert templates == {"gpu-80g": ["llm"]}
    assert [s.claim_template for s in slices if s.claim_template] == ["gpu-80g"]


def test_a_model_of_a_team_that_uses_kueue_is_queued_in_its_local_queue():
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.objects import queue_of
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.spec import (
        parse_settings as parse_tenancy,
    )
    settings = parse_settings(dict(runtimes=RUNTIMES, models=[model("bge", runtime="vllm-embed", pool="embed-l40s"),
                                                              model("other", runtime="vllm-embed", pool="embed-l40s",
                                                                    namespace="elsewhere")]))
    platform = detect_platform(KSERVE_KEDA, settings)
    slices = pool_slices(POOLS, hardware=HARDWARE) + claim_template_slices(TEMPLATES)
    pools = dict((p["name"], {"strategy": p["sharing"]["strategy"], "error": None}) for p in POOLS)
    for kueue, expected in ((True, {"kueue.x-k8s.io/queue-name": "serving", "kueue.x-k8s.io/priority-class": "serving"}),
                            (False, {})):
        tenancy = parse_tenancy({"kueue": kueue, "teams": [{"name": "serving", "namespaces": ["llm"],
                                                            "priority": "serving"}]})
        queues = dict((ns, queue_of(tenancy, ns)) for ns in ("llm", "elsewhere") if queue_of(tenancy, ns))
        result = plan_models(settings, platform, slices, pools, {}, queues)
        labels = isvc(result, "bge")["metadata"]["labels"]
        assert dict((k, v) for k, v in labels.items() if k.startswith("kueue.x-k8s.io/")) == expected
        assert not [k for k in isvc(result, "other")["metadata"]["labels"] if k.startswith("kueue.x-k8s.io/")]
