# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubegpu_serving as the user writes it: parse_settings checks it and returns Settings.

    kubegpu_serving:
      platform: auto              # auto | openshift-ai | kserve (auto: OpenShift AI on OpenShift, KServe elsewhere)
      mode: auto                  # auto | knative | standard: the default deployment mode of the models
      install: true               # install what the platform lacks (operators or charts)
      namespace: llm              # models' namespace unless a model names its own
      openshift_ai: {channel: "", approval: Manual}
      kserve: {namespace: kserve, values: {}}     # Kubernetes: the KServe charts' release namespace and values
      keda: {namespace: keda, values: {}}         # Kubernetes: the KEDA chart's
      helm: {charts_dir: "", binary: "", wait: false}   # charts_dir laid out as shared/charts; empty: published charts
      wait: true                  # wait for each model: Ready, or scaled to zero when that is its idle state
      timeout: 1800               # seconds for the platform and for the models
      scale_to_zero:
        retention_period: 5m      # Knative: keep the last pod this long after the last request
        prometheus: ""            # KEDA: the Prometheus the ScaledObject queries (default per platform)
        query: ""                 # KEDA: the request count query (default: vLLM's running + waiting requests)
        threshold: 1              # KEDA: requests per replica
      cold_start_timeout: 1800    # seconds a model may take to become ready (image pull, weights, CUDA graphs)
      runtimes:
        - {name: vllm, type: vllm, image: "vllm/vllm-openai:v0.11.0"}
        - {name: vllm-embed, type: vllm-embed}
      models:
        - name: llama-8b
          runtime: vllm
          storage_uri: hf://meta-llama/Llama-3.1-8B-Instruct
          pool: llm-h100          # a node pool of kubegpu_node_pools, or
          claim_template: gpu-80g # a claim template of kubegpu_dra (one of the two)
          mig_profile: 3g.40gb    # MIG pools offering several profiles
          gpus: 1                 # devices per replica (whole GPUs: tensor parallel size)
          min_replicas: 0         # 0: scale to zero when idle
          max_replicas: 1
          mode: auto              # this model's deployment mode (auto: the platform's)
          sizing: {parameters: 8e9, precision: bf16, context: 8192}   # for the sizing planner
          args: []                # more runtime arguments
          env: []
          resources: {requests: {cpu: "4", memory: 32Gi}}
          tolerations: []

Errors are ServingError naming the model or runtime, the field, the value and what is valid. Nothing here
knows the cluster: pools, claim templates and the platform are checked by models.py and platform.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.errors import ServingError

AUTO = "auto"
OPENSHIFT_AI = "openshift-ai"
KSERVE = "kserve"
PLATFORMS = (AUTO, OPENSHIFT_AI, KSERVE)
KNATIVE = "knative"
STANDARD = "standard"
MODES = (AUTO, KNATIVE, STANDARD)
APPROVALS = ("Manual", "Automatic")

VLLM = "vllm"
VLLM_EMBED = "vllm-embed"
RUNTIME_TYPES = (VLLM, VLLM_EMBED)

DEFAULT_NAMESPACE = "llm"
DEFAULT_COLD_START = 1800
DEFAULT_RETENTION = "5m"

_SETTINGS_KEYS = ("platform", "mode", "install", "namespace", "openshift_ai", "kserve", "keda", "helm", "scale_to_zero",
                  "cold_start_timeout", "runtimes", "models", "wait", "timeout")
_HELM_KEYS = ("charts_dir", "binary", "wait")
_OPENSHIFT_AI_KEYS = ("channel", "approval", "source")
_CHART_KEYS = ("namespace", "values")
_SCALE_KEYS = ("retention_period", "prometheus", "query", "threshold")
_RUNTIME_KEYS = ("name", "type", "image", "args", "env", "resources")
_MODEL_KEYS = ("name", "namespace", "runtime", "storage_uri", "pool", "claim_template", "mig_profile", "gpus",
               "min_replicas", "max_replicas", "mode", "sizing", "args", "env", "resources", "tolerations")
# InferenceService names become Knative Service and Deployment names with suffixes (-predictor-00001-deployment):
# a DNS-1035 label short enough to leave room for them.
_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_NAME_MAX = 45
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DURATION = re.compile(r"^[0-9]+(s|m|h)$")


@dataclass(frozen=True)
class Runtime:
    """A ServingRuntime the models may name; rendered into each namespace a model using it lives in."""

    name: str
    type: str = VLLM
    image: str = ""
    args: Tuple[str, ...] = ()
    env: Tuple[Any, ...] = ()
    resources: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class Model:
    """One model to serve, as the user wrote it (placement and sizing are checked against the cluster later)."""

    name: str
    namespace: str
    runtime: str
    storage_uri: str
    pool: Optional[str] = None
    claim_template: Optional[str] = None
    mig_profile: Optional[str] = None
    gpus: Optional[int] = None
    min_replicas: int = 0
    max_replicas: int = 1
    mode: str = AUTO
    sizing: Optional[Dict[str, Any]] = None
    args: Tuple[str, ...] = ()
    env: Tuple[Any, ...] = ()
    resources: Optional[Dict[str, Any]] = None
    tolerations: Tuple[Any, ...] = ()

    @property
    def subject(self):
        return "model '%s'" % self.name


@dataclass(frozen=True)
class Settings:
    platform: str = AUTO
    mode: str = AUTO
    install: bool = True
    namespace: str = DEFAULT_NAMESPACE
    openshift_ai: Dict[str, Any] = field(default_factory=dict)
    kserve: Dict[str, Any] = field(default_factory=dict)
    keda: Dict[str, Any] = field(default_factory=dict)
    helm: Dict[str, Any] = field(default_factory=dict)
    wait: bool = True
    timeout: int = DEFAULT_COLD_START
    scale_to_zero: Dict[str, Any] = field(default_factory=dict)
    cold_start_timeout: int = DEFAULT_COLD_START
    runtimes: Tuple[Runtime, ...] = ()
    models: Tuple[Model, ...] = ()

    def runtime(self, name):
        return next((r for r in self.runtimes if r.name == name), None)


def _fail(subject, field_name, value, expected):
    raise ServingError("%s: %s is %r; expected %s" % (subject, field_name, value, expected))


def _check_keys(subject, field_name, raw, valid):
    if not isinstance(raw, Mapping):
        _fail(subject, field_name, raw, "a mapping")
    unknown = sorted(set(raw) - set(valid))
    if unknown:
        raise ServingError("%s: unknown key%s %s in %s; valid keys: %s" % (
            subject, "s" if len(unknown) > 1 else "", ", ".join(unknown), field_name, ", ".join(valid)))


def _choice(subject, field_name, value, valid):
    if value not in valid:
        _fail(subject, field_name, value, "one of %s" % ", ".join(valid))
    return value


def _bool(subject, field_name, value):
    if not isinstance(value, bool):
        _fail(subject, field_name, value, "true or false")
    return value


def _int(subject, field_name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        _fail(subject, field_name, value, "a whole number >= %d" % minimum)
    return value


def _name(subject, field_name, value, maximum=_NAME_MAX):
    if not isinstance(value, str) or not _NAME.match(value) or len(value) > maximum:
        _fail(subject, field_name, value, "lowercase letters, digits and '-', starting with a letter, at most %d "
              "characters" % maximum)
    return value


def _namespace(subject, value):
    if not isinstance(value, str) or not _NAMESPACE.match(value) or len(value) > 63:
        _fail(subject, "namespace", value, "a namespace name (lowercase letters, digits and '-', at most 63)")
    return value


def _string_list(subject, field_name, value):
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        _fail(subject, field_name, value, "a list of strings")
    return tuple(value)


def _mapping_list(subject, field_name, value):
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, Mapping) for v in value):
        _fail(subject, field_name, value, "a list of mappings")
    return tuple(dict(v) for v in value)


def _optional_mapping(subject, field_name, value):
    if value is None:
        return None
    if not isinstance(value, Mapping):
        _fail(subject, field_name, value, "a mapping")
    return dict(value)


def parse_settings(raw):
    """Check kubegpu_serving and return Settings; raise ServingError on the first problem."""
    subject = "kubegpu_serving"
    raw = {} if raw is None else raw
    _check_keys(subject, "kubegpu_serving", raw, _SETTINGS_KEYS)
    openshift_ai = dict(raw.get("openshift_ai") or {})
    _check_keys(subject, "openshift_ai", openshift_ai, _OPENSHIFT_AI_KEYS)
    if "approval" in openshift_ai:
        _choice(subject, "openshift_ai.approval", openshift_ai["approval"], APPROVALS)
    charts = {}
    for key in ("kserve", "keda"):
        charts[key] = dict(raw.get(key) or {})
        _check_keys(subject, key, charts[key], _CHART_KEYS)
        if "namespace" in charts[key]:
            _namespace("%s.%s" % (subject, key), charts[key]["namespace"])
        _optional_mapping(subject, "%s.values" % key, charts[key].get("values"))
    helm = dict(raw.get("helm") or {})
    _check_keys(subject, "helm", helm, _HELM_KEYS)
    for key in ("charts_dir", "binary"):
        if not isinstance(helm.get(key) or "", str):
            _fail(subject, "helm.%s" % key, helm[key], "a path")
    scale = dict(raw.get("scale_to_zero") or {})
    _check_keys(subject, "scale_to_zero", scale, _SCALE_KEYS)
    retention = scale.setdefault("retention_period", DEFAULT_RETENTION)
    if not isinstance(retention, str) or not _DURATION.match(retention):
        _fail(subject, "scale_to_zero.retention_period", retention, "a duration such as 90s, 5m or 1h")
    scale["threshold"] = _int(subject, "scale_to_zero.threshold", scale.get("threshold", 1), 1)
    for key in ("prometheus", "query"):
        if not isinstance(scale.setdefault(key, ""), str):
            _fail(subject, "scale_to_zero.%s" % key, scale[key], "a string")
    namespace = _namespace(subject, raw.get("namespace", DEFAULT_NAMESPACE))
    runtimes = _parse_runtimes(raw.get("runtimes"))
    models = _parse_models(raw.get("models"), namespace, runtimes)
    return Settings(
        platform=_choice(subject, "platform", raw.get("platform", AUTO), PLATFORMS),
        mode=_choice(subject, "mode", raw.get("mode", AUTO), MODES),
        install=_bool(subject, "install", raw.get("install", True)),
        namespace=namespace, openshift_ai=openshift_ai, kserve=charts["kserve"], keda=charts["keda"], helm=helm,
        wait=_bool(subject, "wait", raw.get("wait", True)),
        timeout=_int(subject, "timeout", raw.get("timeout", DEFAULT_COLD_START), 1),
        scale_to_zero=scale,
        cold_start_timeout=_int(subject, "cold_start_timeout", raw.get("cold_start_timeout", DEFAULT_COLD_START), 60),
        runtimes=runtimes, models=models,
    )


def _parse_runtimes(raw):
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)):
        _fail("kubegpu_serving", "runtimes", raw, "a list of runtimes")
    out, seen = [], set()
    for index, entry in enumerate(raw):
        subject = "kubegpu_serving.runtimes[%d]" % index
        _check_keys(subject, "the runtime", entry, _RUNTIME_KEYS)
        name = _name(subject, "name", entry.get("name"))
        subject = "runtime '%s'" % name
        if name in seen:
            raise ServingError("%s: listed twice in kubegpu_serving.runtimes; names must be unique" % subject)
        seen.add(name)
        image = entry.get("image", "")
        if not isinstance(image, str):
            _fail(subject, "image", image, "an image reference")
        out.append(Runtime(
            name=name, type=_choice(subject, "type", entry.get("type", VLLM), RUNTIME_TYPES), image=image,
            args=_string_list(subject, "args", entry.get("args")), env=_mapping_list(subject, "env", entry.get("env")),
            resources=_optional_mapping(subject, "resources", entry.get("resources"))))
    return tuple(out)


def _parse_models(raw, namespace, runtimes):
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)):
        _fail("kubegpu_serving", "models", raw, "a list of models")
    known = [r.name for r in runtimes]
    out, seen = [], set()
    for index, entry in enumerate(raw):
        model = _parse_model(index, entry, namespace, known)
        where = (model.namespace, model.name)
        if where in seen:
            raise ServingError("%s: listed twice in namespace %s; names must be unique per namespace"
                               % (model.subject, model.namespace))
        seen.add(where)
        out.append(model)
    return tuple(out)


def _parse_model(index, entry, default_namespace, runtimes):
    subject = "kubegpu_serving.models[%d]" % index
    _check_keys(subject, "the model", entry, _MODEL_KEYS)
    name = _name(subject, "name", entry.get("name"))
    subject = "model '%s'" % name
    runtime = entry.get("runtime")
    if runtime not in runtimes:
        raise ServingError("%s: runtime is %r, which kubegpu_serving.runtimes does not list (listed: %s); add the "
                           "runtime or name one of those" % (subject, runtime, ", ".join(runtimes) or "none"))
    storage_uri = entry.get("storage_uri")
    if not isinstance(storage_uri, str) or "://" not in storage_uri:
        _fail(subject, "storage_uri", storage_uri, "a URI such as hf://org/model, s3://bucket/path or pvc://claim/path")
    pool, template = entry.get("pool"), entry.get("claim_template")
    if (pool is None) == (template is None):
        raise ServingError("%s: name exactly one of pool (a node pool of kubegpu_node_pools) and claim_template (a "
                           "claim template of kubegpu_dra); got %s" % (
                               subject, "both" if pool is not None else "neither"))
    for key, value in (("pool", pool), ("claim_template", template)):
        if value is not None and not isinstance(value, str):
            _fail(subject, key, value, "a name")
    profile = entry.get("mig_profile")
    if profile is not None and (not isinstance(profile, str) or template is not None):
        _fail(subject, "mig_profile", profile, "a MIG profile name such as 3g.40gb, with a pool (a claim template "
              "names its own profile)")
    gpus = entry.get("gpus")
    if gpus is not None:
        _int(subject, "gpus", gpus, 1)
    min_replicas = _int(subject, "min_replicas", entry.get("min_replicas", 0), 0)
    max_replicas = _int(subject, "max_replicas", entry.get("max_replicas", max(1, min_replicas)), 1)
    if max_replicas < min_replicas:
        _fail(subject, "max_replicas", max_replicas, "at least min_replicas (%d)" % min_replicas)
    sizing = _optional_mapping(subject, "sizing", entry.get("sizing"))
    return Model(
        name=name, namespace=_namespace(subject, entry.get("namespace", default_namespace)), runtime=runtime,
        storage_uri=storage_uri, pool=pool, claim_template=template, mig_profile=profile, gpus=gpus,
        min_replicas=min_replicas, max_replicas=max_replicas, mode=_choice(subject, "mode", entry.get("mode", AUTO), MODES),
        sizing=sizing, args=_string_list(subject, "args", entry.get("args")),
        env=_mapping_list(subject, "env", entry.get("env")),
        resources=_optional_mapping(subject, "resources", entry.get("resources")),
        tolerations=_mapping_list(subject, "tolerations", entry.get("tolerations")),
    )
