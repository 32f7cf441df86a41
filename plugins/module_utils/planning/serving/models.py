# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Models to InferenceServices: placement on a pool's slice or a claim template, sizing, scale to zero.

plan_models(settings, platform, slices, pools, templates) checks every model against the platform and the
cluster's pools and claim templates, and returns the ServingRuntimes and InferenceServices to write, or raises
ServingError before anything is built. Refusals, each naming the model:

- an unknown runtime, pool or claim template; a claim template that does not list the model's namespace;
- a pool of strategy dra (its GPUs are claimed through claim templates, not requested by name);
- a MIG profile the pool does not offer; a pool that offers several resources when the model names none;
- more devices than a pod can have on that slice;
- a DRA claim in Knative mode (Knative Serving rejects pod specs with resource claims, knative/serving#15332):
  DRA with scale to zero is Standard mode with KEDA;
- min_replicas 0 in a mode that cannot scale to zero here (Standard mode with the HPA only: KServe clamps its
  minimum to 1);
- a model whose sizing does not fit the slice it asks for (fit.fit names the need, the slice and what fits).

What each InferenceService gets (spec.predictor):
- the GPU request its placement implies: limits {nvidia.com/gpu: n} for whole GPUs, {nvidia.com/mig-<profile>: 1}
  for a MIG slice, the pool's time-sliced or MPS resource (renamed <resource>.shared when the pool renames), or a
  resource claim (resourceClaims [{name: gpu, resourceClaimTemplateName}] and the container's resources.claims);
- nodeSelector kubegpu.io/node-pool=<pool> (not for claims: the claim's devices choose the node) and a toleration
  of the nvidia.com/gpu NoSchedule taint GPU nodes commonly carry, plus the model's own tolerations;
- scale to zero: minReplicas 0 with, in Knative mode, autoscaling.knative.dev/scale-to-zero-pod-retention-period
  (KServe turns minReplicas into autoscaling.knative.dev/min-scale), or in Standard mode
  serving.kserve.io/autoscalerClass: keda (KServe creates the KEDA ScaledObject with minReplicaCount 0 from
  autoScaling.metrics: a Prometheus query of requests);
- a progress deadline for a GPU cold start: serving.knative.dev/progress-deadline in Knative mode. KServe's
  Standard mode has no field or annotation for its Deployment's progressDeadlineSeconds: the Deployment keeps
  Kubernetes' 600 s, after which it reports Progressing=False but keeps its pod starting (docs/serving.md);
- the runtime arguments sizing computed (--max-model-len, --gpu-memory-utilization, --max-num-seqs,
  --tensor-parallel-size), before the model's own args.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import parse_claim_templates
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import canonical_profile_name
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    CLAIM_TEMPLATE_LABEL as TEMPLATE_LABEL,
    POOL_LABEL,
    KUEUE_PRIORITY_LABEL,
    KUEUE_QUEUE_LABEL,
    SERVING_MODEL_LABEL as MODEL_LABEL,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError, parse_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.errors import ServingError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.fit import fit
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.platform import (
    KEDA,
    KNATIVE_AUTOSCALER,
    OPENSHIFT_AI,
    OPENSHIFT_AI_3,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.runtimes import (
    MANAGED_BY,
    MODEL_FORMAT,
    runtime_object,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import SizingError, size_model
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.slices import (
    claim_template_slices,
    pool_slices,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.spec import AUTO, KNATIVE, STANDARD

API_VERSION = "serving.kserve.io/v1beta1"
CLAIM_NAME = "gpu"
DRA_STRATEGY = "dra"
DEPLOYMENT_MODE = "serving.kserve.io/deploymentMode"
AUTOSCALER_CLASS = "serving.kserve.io/autoscalerClass"
RETENTION = "autoscaling.knative.dev/scale-to-zero-pod-retention-period"
PROGRESS_DEADLINE = "serving.knative.dev/progress-deadline"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# Where KEDA asks Prometheus by default: OpenShift's user-workload monitoring through Thanos, or a Prometheus
# Operator's service on Kubernetes. scale_to_zero.prometheus overrides it.
PROMETHEUS = {
    OPENSHIFT_AI: "https://thanos-querier.openshift-monitoring.svc.cluster.local:9092",
    "kserve": "http://prometheus-operated.monitoring.svc:9090",
}
# Requests in flight and queued at the model's vLLM servers; $namespace and $name are the InferenceService's.
# PromQL has braces of its own, so the placeholders are replaced as text, not with str.format.
DEFAULT_QUERY = ('sum(vllm:num_requests_running{namespace="$namespace",model_name="$name"} or vector(0)) + '
                 'sum(vllm:num_requests_waiting{namespace="$namespace",model_name="$name"} or vector(0))')


def model_mode(model, platform):
    """The deployment mode of one model: its own, else the platform's default."""
    return platform["mode"] if model.mode == AUTO else model.mode


def plan_models(settings, platform, slices, pools, templates, queues=None):
    """Return {"objects": [...], "models": {name: report}, "warnings": [...]}; raise ServingError.

    slices: slices.Slice of every pool and claim template (serving.slices). pools: {pool name: {"strategy": ...,
    "error": None or why its slices could not be read}} of kubegpu_node_pools. templates: {claim template name:
    [namespaces]} of kubegpu_dra. queues: {namespace: (LocalQueue, priority class or None)} of the teams that use
    Kueue (tenancy/objects.queue_of): a model in such a namespace is queued there (Kueue's labels).
    """
    reports, isvcs, runtimes_needed, warnings = {}, [], {}, []
    for model in settings.models:
        report, isvc = _plan_model(settings, platform, model, slices, pools, templates)
        reports["%s/%s" % (model.namespace, model.name)] = report
        queue = (queues or {}).get(model.namespace)
        if queue:
            isvc["metadata"]["labels"][KUEUE_QUEUE_LABEL] = queue[0]
            if queue[1]:
                isvc["metadata"]["labels"][KUEUE_PRIORITY_LABEL] = queue[1]
        isvcs.append(isvc)
        runtimes_needed.setdefault(model.runtime, set()).add(model.namespace)
        warnings.extend(report.pop("warnings"))
    objects = [runtime_object(settings.runtime(name), namespace)
               for name in sorted(runtimes_needed) for namespace in sorted(runtimes_needed[name])]
    return {"objects": objects + isvcs, "models": reports, "warnings": warnings}


def _plan_model(settings, platform, model, slices, pools, templates):
    subject = model.subject
    mode = model_mode(model, platform)
    if mode == KNATIVE and platform["flavor"] == OPENSHIFT_AI_3:
        raise ServingError("%s: mode is knative, but OpenShift AI %s removed Serverless (Knative) mode; use mode: "
                           "standard (scale to zero through KEDA)" % (subject, platform["version"]))
    if mode == KNATIVE and platform["scale_to_zero"].get(KNATIVE) is None and platform["flavor"] == "kserve":
        raise ServingError("%s: mode is knative, but Knative Serving does not run on this cluster; use mode: standard"
                           % subject)
    candidates = _candidates(model, mode, slices, pools, templates)
    sized, item, units = _size(model, candidates, slices)
    mechanism = None
    if model.min_replicas == 0:
        mechanism = platform["scale_to_zero"].get(mode)
        if mechanism is None:
            raise ServingError(_no_scale_to_zero(subject, mode, platform))
    isvc = _inference_service(settings, platform, model, mode, mechanism, item, units, sized)
    report = {
        "mode": mode, "deployment_mode": platform["mode_names"][mode],
        "scale_to_zero": mechanism, "min_replicas": model.min_replicas, "max_replicas": model.max_replicas,
        "pool": model.pool, "claim_template": model.claim_template,
        "slice": item.to_dict(), "units": units,
        "request": dict(isvc["spec"]["predictor"]["model"]["resources"].get("limits") or {}) or {
            "claim": model.claim_template},
        "sizing": sized, "warnings": [],
    }
    return report, isvc


def offline_problems(settings, raw_pools, raw_templates):
    """The refusals of plan_models that the inventory alone decides, one message per model refused: an unknown
    pool or claim template, a claim template without the model's namespace, a pool of strategy dra, a DRA claim
    in Knative mode (the model's or kubegpu_serving's mode; auto is the platform's, judged with the cluster), a
    MIG profile or a device count the pool does not offer, and a model that does not fit its slice. A pool's
    slices are known here only when its selector names its GPU model and count (nvidia.com/gpu.product and
    gpu.count); a model on another pool is placed and sized with the cluster's nodes (plan_models)."""
    slices, pools, templates = cluster_offers(raw_pools, raw_templates, [])
    problems = []
    for model in settings.models:
        pool = pools.get(model.pool) if model.pool is not None else None
        if pool is not None and pool["strategy"] != DRA_STRATEGY and pool["error"]:
            continue
        mode = model.mode if model.mode != AUTO else settings.mode
        try:
            _size(model, _candidates(model, mode, slices, pools, templates), slices)
        except ServingError as e:
            problems.append(str(e))
    return problems


def _no_scale_to_zero(subject, mode, platform):
    if mode == STANDARD:
        where = ("OpenShift AI %s in RawDeployment mode" % platform["version"] if platform["platform"] == OPENSHIFT_AI
                 else "KServe's Standard mode without KEDA")
        return ("%s: min_replicas is 0, but %s scales with the HPA only, which never goes below 1 replica; set "
                "min_replicas: 1, or %s" % (subject, where, "use mode: knative (Serverless)" if platform["flavor"] ==
                                            "openshift-ai-2" else "let the stage install KEDA (kubegpu_serving.install: "
                                            "true)"))
    return ("%s: min_replicas is 0, but Knative Serving is not available to scale it to zero; set min_replicas: 1 or "
            "install Knative Serving" % subject)


def _candidates(model, mode, slices, pools, templates):
    subject = model.subject
    if model.claim_template is not None:
        name = model.claim_template
        if name not in templates:
            raise ServingError("%s: claim_template is %r, which kubegpu_dra.claim_templates does not list (listed: %s)"
                               % (subject, name, ", ".join(sorted(templates)) or "none"))
        if model.namespace not in templates[name]:
            raise ServingError("%s: claim template '%s' has no ResourceClaimTemplate in namespace %s (its namespaces: "
                               "%s); add %s to the template's namespaces" % (
                                   subject, name, model.namespace, ", ".join(templates[name]), model.namespace))
        if mode == KNATIVE:
            raise ServingError(
                "%s: claim_template '%s' asks for a DRA resource claim, but the model runs in Knative mode, and Knative "
                "Serving rejects pods with resource claims (knative/serving#15332); use mode: standard for this model "
                "(scale to zero through KEDA), or a node pool" % (subject, name))
        found = [s for s in slices if s.claim_template == name]
        if not found:
            raise ServingError("%s: claim template '%s' offers no slice to size against" % (subject, name))
        return found
    pool = pools.get(model.pool)
    if pool is None:
        known = sorted(pools)
        raise ServingError("%s: pool is %r, which kubegpu_node_pools does not list (listed: %s)"
                           % (subject, model.pool, ", ".join(known) or "none"))
    if pool["strategy"] == DRA_STRATEGY:
        raise ServingError("%s: pool '%s' shares its GPUs through DRA: name one of its claim templates "
                           "(claim_template) instead of the pool" % (subject, model.pool))
    if pool.get("error"):
        raise ServingError("%s: pool '%s': %s" % (subject, model.pool, pool["error"]))
    found = [s for s in slices if s.pool == model.pool and not s.claim_template]
    if not found:
        raise ServingError("%s: pool '%s' offers no GPU resource (no node of the pool was found, or its GPUs are "
                           "unknown)" % (subject, model.pool))
    if model.mig_profile is not None:
        profile = canonical_profile_name(model.mig_profile)
        offered = sorted(set(s.profile for s in found if s.profile))
        found = [s for s in found if s.profile == profile]
        if not found:
            raise ServingError("%s: mig_profile is %r, but pool '%s' does not offer it (it offers: %s); name one of "
                               "those, or change the pool's MIG layout" % (
                                   subject, model.mig_profile, model.pool, ", ".join(offered) or "no MIG device"))
    return found


def _size(model, candidates, slices):
    """(fit result or None, the Slice, units per replica). With sizing, fit() chooses among the candidates (the
    smallest that fits) and, when none fits, names the slices of the whole cluster that would."""
    subject = model.subject
    if model.sizing:
        try:
            need = size_model(**model.sizing)
        except TypeError as e:
            raise ServingError("%s: sizing has a key size_model does not take (%s); see docs/serving.md" % (subject, e))
        except SizingError as e:
            raise ServingError("%s: sizing: %s" % (subject, e))
        if model.claim_template:
            requested = {"claim_template": model.claim_template}
        elif len(candidates) == 1:
            requested = {"pool": model.pool, "resource_name": candidates[0].resource_name}
        else:
            requested = {"pool": model.pool}
        if model.gpus:
            requested["units"] = model.gpus
        try:
            result = fit(need, [s for s in slices if s in candidates or s.memory_bytes is not None],
                         requested=requested)
        except SizingError as e:
            raise ServingError("%s: %s" % (subject, e))
        chosen = next((s for s in candidates if s.to_dict() == result["slice"]), None)
        if chosen is None:
            raise ServingError("%s: sizing chose %s, which is not the pool's or claim template's" % (
                subject, result["slice"]))
        return result, chosen, result["units"]
    if len(candidates) > 1:
        raise ServingError("%s: pool '%s' offers several resources (%s); name one with mig_profile, or give sizing so "
                           "that the smallest that fits is chosen" % (
                               subject, model.pool, ", ".join(s.resource_name for s in candidates)))
    item = candidates[0]
    units = model.gpus or item.min_units_per_pod
    if units > item.max_units_per_pod or units < item.min_units_per_pod:
        raise ServingError("%s: gpus is %d, but %s gives %s per pod" % (
            subject, units, item.label(), "exactly %d" % item.min_units_per_pod
            if item.min_units_per_pod == item.max_units_per_pod else "1 to %d" % item.max_units_per_pod))
    return None, item, units


def _inference_service(settings, platform, model, mode, mechanism, item, units, sized):
    annotations = {DEPLOYMENT_MODE: platform["mode_names"][mode]}
    labels = dict(MANAGED_BY, **{MODEL_LABEL: model.name})
    resources = dict((k, dict(v)) for k, v in (model.resources or {}).items())
    predictor = {"minReplicas": model.min_replicas, "maxReplicas": model.max_replicas,
                 "tolerations": [dict(GPU_TOLERATION)] + [dict(t) for t in model.tolerations]}
    if model.claim_template:
        labels[TEMPLATE_LABEL] = model.claim_template
        predictor["resourceClaims"] = [{"name": CLAIM_NAME, "resourceClaimTemplateName": model.claim_template}]
        resources["claims"] = [{"name": CLAIM_NAME}]
    else:
        labels[POOL_LABEL] = model.pool
        predictor["nodeSelector"] = {POOL_LABEL: model.pool}
        limits = dict(resources.get("limits") or {})
        limits[item.resource_name] = units
        resources["limits"] = limits
    if mode == KNATIVE:
        annotations[PROGRESS_DEADLINE] = "%ds" % settings.cold_start_timeout
        if mechanism == KNATIVE_AUTOSCALER:
            annotations[RETENTION] = settings.scale_to_zero["retention_period"]
    elif mechanism == KEDA:
        annotations[AUTOSCALER_CLASS] = KEDA
        predictor["autoScaling"] = {"metrics": [_keda_metric(settings, platform, model)]}
    args = list(sized["vllm_args"]) if sized else []
    if not sized and units > 1:  # whole GPUs or a claim of several devices: one vLLM across them
        args += ["--tensor-parallel-size", str(units)]
    predictor["model"] = {"modelFormat": {"name": MODEL_FORMAT}, "runtime": model.runtime,
                          "storageUri": model.storage_uri, "resources": resources}
    if args or model.args:
        predictor["model"]["args"] = args + list(model.args)
    if model.env:
        predictor["model"]["env"] = [dict(e) for e in model.env]
    return {"apiVersion": API_VERSION, "kind": "InferenceService",
            "metadata": {"name": model.name, "namespace": model.namespace, "labels": labels,
                         "annotations": annotations},
            "spec": {"predictor": predictor}}


def _keda_metric(settings, platform, model):
    scale = settings.scale_to_zero
    query = (scale.get("query") or DEFAULT_QUERY).replace("$namespace", model.namespace).replace("$name", model.name)
    return {"type": "External", "external": {
        "metric": {"backend": "prometheus", "serverAddress": scale.get("prometheus") or PROMETHEUS[platform["platform"]],
                   "query": query},
        "target": {"type": "Value", "value": str(scale["threshold"])}}}


def cluster_offers(raw_pools, raw_templates, nodes):
    """(slices, pools, templates) for plan_models from kubegpu_node_pools, kubegpu_dra.claim_templates and the
    cluster's Node objects. A pool whose slices cannot be read (no node, unknown GPU) is kept with its error, so
    that only a model placed on it is refused."""
    parsed = parse_pools(raw_pools or [])
    slices, pools = [], {}
    for pool in parsed:
        pools[pool.name] = {"strategy": pool.strategy, "error": None}
        if pool.strategy == DRA_STRATEGY:
            continue
        try:
            slices.extend(pool_slices([pool], nodes))
        except (SizingError, PoolError) as e:
            pools[pool.name]["error"] = str(e)
    templates = parse_claim_templates(raw_templates or [])
    slices.extend(claim_template_slices(templates))
    return slices, pools, dict((t.name, list(t.namespaces)) for t in templates)
