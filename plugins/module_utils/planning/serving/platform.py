# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which serving platform a cluster has (or will have once the stage installs it), and how it scales to zero.

detect_platform(facts, settings) reads observed facts and returns the platform plan; install.py turns the plan's
`missing` into operators, charts and objects. The rules (shared/reference/dra-kserve-openshift-ai.md, "KServe
v0.20.0" and "OpenShift AI"):

- OpenShift AI 2.x (DataScienceCluster v1): KServe in Knative mode (legacy name Serverless; needs OpenShift
  Serverless, Service Mesh 2 and Authorino) scales to zero through Knative's autoscaler; in RawDeployment mode
  only the HPA scales, which never goes below one replica.
- OpenShift AI 3.x (DataScienceCluster v2): Serverless mode and Service Mesh are gone; Standard mode scales to zero
  with serving.kserve.io/autoscalerClass: keda through the Custom Metrics Autoscaler operator (KEDA, in
  openshift-keda; Technology Preview).
- Upstream KServe (0.16 and later names the modes Knative and Standard): Knative mode when Knative Serving runs;
  Standard mode scales to zero with KEDA. The stage installs KServe and KEDA from their charts, never Knative.

Facts (what the access layer observes):
  openshift_version    ClusterVersion's desired version, None on Kubernetes
  groups               {API group: [versions served]} for the groups in GROUPS
  operators            {OLM package: installed CSV name} from the Subscriptions
  catalog              {OLM package: {default_channel, channels: {channel: head CSV}}} from PackageManifests
  dsc, dsci            the DataScienceCluster / DSCInitialization (with apiVersion), None when absent
  kserve_config        the parsed `deploy` entry of KServe's inferenceservice-config ConfigMap, None when absent
  kserve_controller    True when KServe's controller Deployment runs (Kubernetes)
  knative_serving      True when Knative Serving runs (its autoscaler Deployment in knative-serving)
  keda                 True when KEDA's operator Deployment runs (any namespace)
  keda_controller      True when the Custom Metrics Autoscaler's KedaController exists (OpenShift)
  kserve_crds          "helm" when KServe's CRDs were installed by a Helm release, "other" when by something
                       else, None when absent
  keda_crds            the same for KEDA's CRDs (its ScaledObject CRD)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import MANAGED_BY_LABEL
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.errors import ServingError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.spec import (
    AUTO,
    KNATIVE,
    KSERVE,
    OPENSHIFT_AI,
    STANDARD,
)

DSC_GROUP = "datasciencecluster.opendatahub.io"
DSCI_GROUP = "dscinitialization.opendatahub.io"
KSERVE_GROUP = "serving.kserve.io"
KNATIVE_GROUP = "serving.knative.dev"
KEDA_GROUP = "keda.sh"
GROUPS = (DSC_GROUP, DSCI_GROUP, KSERVE_GROUP, KNATIVE_GROUP, KEDA_GROUP)

RHOAI = "rhods-operator"
SERVERLESS = "serverless-operator"
SERVICE_MESH = "servicemeshoperator"
AUTHORINO = "authorino-operator"
CMA = "openshift-custom-metrics-autoscaler-operator"

OPENSHIFT_AI_2 = "openshift-ai-2"
OPENSHIFT_AI_3 = "openshift-ai-3"
KSERVE_UPSTREAM = "kserve"

# Scale-to-zero mechanisms.
KNATIVE_AUTOSCALER = "knative"
KEDA = "keda"

# The values of serving.kserve.io/deploymentMode: OpenShift AI 2.x ships a KServe that knows only the legacy names;
# KServe 0.16 and later (upstream, OpenShift AI 3.x) accept both and name them Knative / Standard.
MODE_NAMES = {
    OPENSHIFT_AI_2: {KNATIVE: "Serverless", STANDARD: "RawDeployment"},
    OPENSHIFT_AI_3: {KNATIVE: "Knative", STANDARD: "Standard"},
    KSERVE_UPSTREAM: {KNATIVE: "Knative", STANDARD: "Standard"},
}
_MODE_OF = {"Serverless": KNATIVE, "Knative": KNATIVE, "RawDeployment": STANDARD, "Standard": STANDARD}


def mode_from_name(name):
    """knative / standard for a deploymentMode value (legacy or new), None for anything else."""
    return _MODE_OF.get(name)


def _major(csv_name):
    """3 for rhods-operator.3.5.0 (or rhods-operator.v2.25.0), None when the name carries no version."""
    if not csv_name or "." not in csv_name:
        return None
    tail = csv_name.split(".", 1)[1].lstrip("v")
    head = tail.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _version(csv_name):
    if not csv_name or "." not in csv_name:
        return None
    return csv_name.split(".", 1)[1].lstrip("v")


def detect_platform(facts, settings):
    """Return the serving platform plan for observed facts and the user's Settings, or raise ServingError.

    The plan is a dict:
      platform        openshift-ai | kserve
      flavor          openshift-ai-2 | openshift-ai-3 | kserve
      version         the OpenShift AI release (installed, else the one the channel installs), None upstream
      mode            the models' default deployment mode: knative | standard
      mode_names      {knative: annotation value, standard: annotation value} on this platform
      scale_to_zero   {knative: mechanism or None, standard: mechanism or None}: what each mode scales to zero with
                      once the stage has installed what is missing
      installed       {component: bool} as observed
      missing         components the stage installs (empty when nothing is missing or install is off)
      warnings        sentences the user should read
    """
    if not isinstance(facts, Mapping):
        raise ServingError("serving platform facts are %r; expected a mapping" % (facts,))
    openshift = bool(facts.get("openshift_version"))
    platform = settings.platform
    if platform == AUTO:
        platform = OPENSHIFT_AI if openshift else KSERVE
    if platform == OPENSHIFT_AI and not openshift:
        raise ServingError("kubegpu_serving.platform is openshift-ai but this cluster is not OpenShift (no "
                           "ClusterVersion); use platform: kserve (or auto)")
    if platform == OPENSHIFT_AI:
        return _openshift_ai(facts, settings)
    return _kserve(facts, settings, openshift)


def _plan(platform, flavor, version, mode, scale_to_zero, installed, missing, warnings=()):
    return {"platform": platform, "flavor": flavor, "version": version, "mode": mode,
            "mode_names": dict(MODE_NAMES[flavor]), "scale_to_zero": scale_to_zero, "installed": installed,
            "missing": list(missing), "warnings": list(warnings)}


def _openshift_ai(facts, settings):
    groups = facts.get("groups") or {}
    operators = facts.get("operators") or {}
    installed_csv = operators.get(RHOAI)
    dsc = facts.get("dsc")
    major, version, source = None, None, None
    if installed_csv:
        major, version, source = _major(installed_csv), _version(installed_csv), "installed"
    elif dsc:
        major = 3 if dsc.get("apiVersion", "").endswith("/v2") else 2
        source = "DataScienceCluster %s" % dsc.get("apiVersion")
    if major is None:
        entry = (facts.get("catalog") or {}).get(RHOAI)
        if not entry:
            raise ServingError("OpenShift AI is not installed and the catalog has no package %s: add the "
                               "redhat-operators CatalogSource (or a mirror of it)" % RHOAI)
        channel = settings.openshift_ai.get("channel") or entry.get("default_channel")
        head = (entry.get("channels") or {}).get(channel)
        if head is None:
            raise ServingError("kubegpu_serving.openshift_ai.channel is %r; package %s offers %s" % (
                channel, RHOAI, ", ".join(sorted(entry.get("channels") or {})) or "no channel"))
        major, version, source = _major(head), _version(head), "channel %s" % channel
    if major is None or major < 2:
        raise ServingError("OpenShift AI %s (%s) is not supported; the serving stage knows 2.x and 3.x"
                           % (version or "of unknown version", source))
    if major == 2:
        return _openshift_ai_2(facts, settings, version, dsc, groups, operators)
    return _openshift_ai_3(facts, settings, version, operators)


def _dsc_kserve(dsc):
    return (((dsc or {}).get("spec") or {}).get("components") or {}).get("kserve") or {}


def _openshift_ai_2(facts, settings, version, dsc, groups, operators):
    mode = settings.mode
    if mode == AUTO:
        mode = mode_from_name(_dsc_kserve(dsc).get("defaultDeploymentMode")) or KNATIVE
    installed = {
        "openshift_ai": bool(operators.get(RHOAI)),
        "serverless": bool(operators.get(SERVERLESS)),
        "service_mesh": bool(operators.get(SERVICE_MESH)),
        "authorino": bool(operators.get(AUTHORINO)),
    }
    wanted = ["openshift_ai"]
    if mode == KNATIVE:
        wanted += ["serverless", "service_mesh", "authorino"]
    missing = [c for c in wanted if not installed[c]] if settings.install else []
    # Knative mode scales to zero as long as its operators are (or will be) there; RawDeployment has the HPA only.
    knative_ready = all(installed[c] or c in missing for c in ("serverless", "service_mesh", "authorino"))
    warnings = []
    if mode == KNATIVE and not knative_ready:
        raise ServingError(
            "OpenShift AI %s in Knative (Serverless) mode needs OpenShift Serverless, Service Mesh 2 and Authorino, "
            "and kubegpu_serving.install is false: install them, or set kubegpu_serving.install: true" % version,
            ["install the OLM packages %s, %s and %s" % (SERVERLESS, SERVICE_MESH, AUTHORINO)])
    return _plan(OPENSHIFT_AI, OPENSHIFT_AI_2, version, mode,
                 {KNATIVE: KNATIVE_AUTOSCALER if mode == KNATIVE else None, STANDARD: None},
                 installed, missing, warnings)


def _openshift_ai_3(facts, settings, version, operators):
    if settings.mode == KNATIVE:
        raise ServingError(
            "kubegpu_serving.mode is knative, but OpenShift AI %s removed Serverless (Knative) mode together with "
            "Service Mesh and Authorino; use mode: standard, which scales to zero through KEDA (the Custom Metrics "
            "Autoscaler operator)" % version)
    installed = {
        "openshift_ai": bool(operators.get(RHOAI)),
        "custom_metrics_autoscaler": bool(operators.get(CMA)),
        "keda_controller": bool(facts.get("keda_controller")),
    }
    missing = [c for c, ok in installed.items() if not ok] if settings.install else []
    keda = installed["custom_metrics_autoscaler"] and installed["keda_controller"] or bool(missing)
    warnings = ["OpenShift AI %s: scale to zero through KEDA (autoscalerClass keda, Custom Metrics Autoscaler) is a "
                "Technology Preview" % version]
    return _plan(OPENSHIFT_AI, OPENSHIFT_AI_3, version, STANDARD, {KNATIVE: None, STANDARD: KEDA if keda else None},
                 installed, missing, warnings)


def _kserve(facts, settings, openshift):
    installed = {
        "kserve": bool(facts.get("kserve_controller")) or facts.get("kserve_config") is not None,
        "knative_serving": bool(facts.get("knative_serving")),
        "keda": bool(facts.get("keda")),
    }
    mode = settings.mode
    if mode == AUTO:
        configured = mode_from_name((facts.get("kserve_config") or {}).get("defaultDeploymentMode"))
        if installed["kserve"] and configured and (configured != KNATIVE or installed["knative_serving"]):
            mode = configured
        else:
            mode = STANDARD
    if mode == KNATIVE and not installed["knative_serving"]:
        raise ServingError(
            "kubegpu_serving.mode is knative, but Knative Serving does not run on this cluster (no autoscaler "
            "Deployment in knative-serving); the collection installs KServe and KEDA, not Knative: install Knative "
            "Serving first, or use mode: standard (scale to zero through KEDA)",
            ["install Knative Serving (knative-serving namespace) with a networking layer"])
    # KEDA too in Knative mode: a model may run in Standard mode of its own (a DRA claim) and scale to zero.
    wanted = ["kserve", "keda"]
    missing = [c for c in wanted if not installed[c]] if settings.install else []
    if not installed["kserve"] and not settings.install:
        raise ServingError("KServe is not installed (no inferenceservice-config ConfigMap, no controller) and "
                           "kubegpu_serving.install is false: install KServe, or set install: true")
    if "keda" in missing and facts.get("keda_crds") == "other":
        # The keda chart carries its CRDs as templates: Helm refuses to install over objects no release owns
        # ("invalid ownership metadata"), after KServe's charts went in. Said before anything is written.
        raise ServingError(
            "KEDA's CRDs (scaledobjects.keda.sh) are on the cluster but KEDA's operator is not (no keda-operator "
            "Deployment), and no Helm release owns the CRDs: the keda chart cannot be installed over them. Delete "
            "the keda.sh CRDs left by an earlier install (kubectl get crd -o name | grep keda.sh), or install KEDA "
            "yourself, or let Helm adopt them (label {0}=Helm, annotate meta.helm.sh/release-name=keda and "
            "meta.helm.sh/release-namespace=<kubegpu_serving.keda.namespace>)".format(MANAGED_BY_LABEL),
            ["remove or adopt the keda.sh CRDs that no Helm release owns"])
    keda = installed["keda"] or "keda" in missing
    warnings = []
    if openshift:
        warnings.append("upstream KServe on OpenShift (kubegpu_serving.platform: kserve): OpenShift AI is the "
                        "supported way to run KServe there")
    return _plan(KSERVE, KSERVE_UPSTREAM, None, mode,
                 {KNATIVE: KNATIVE_AUTOSCALER if installed["knative_serving"] else None,
                  STANDARD: KEDA if keda else None},
                 installed, missing, warnings)
