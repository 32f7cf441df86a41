# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What can be refused before a playbook writes anything: the inventory, then the cluster as it is now.

check_inventory (inventory.py) needs no cluster. check_cluster judges what the preflight module read (plain dicts)
with the stages' own planning code, so a refusal here is the refusal the stage would give later, only earlier:

- gpu_operator: every field of cluster_policy against the ClusterPolicy CRD's schema when there is one to read
  (the API server would drop an unknown field silently); on OpenShift the GPU Operator's channel and CSV, and NFD's
  channel, in their PackageManifests (olm.select). On Kubernetes the chart is the role's to check (helm).
- node_pools: the pools resolved to today's nodes (overlaps, MIG layouts per GPU model, unknown GPU models:
  node_pools.plan_pools), their MachineSets (pool_writes.machineset_writes), and a pool that selects no node
  and names no MachineSet (a typo in a selector would otherwise share nothing, silently). Without the
  gpu_operator stage in the same run, a cluster without a ClusterPolicy is refused too.
- dra: what the DRA stage's platform step refuses (plan_platform), DRA pools that overlap device-plugin pools
  (dra_pool_nodes) and the driver values for the cluster's release and nodes (driver_values).
- monitoring: the kinds the monitoring stage writes are served (PrometheusRule: the Prometheus Operator's CRD;
  ConsolePlugin when asked for on OpenShift).
- serving: what the serving stage's platform step refuses (serving/platform.py detect_platform: OpenShift AI
  3.x without Knative mode, Knative mode without Knative Serving, OpenShift AI on Kubernetes), then every model
  placed and sized on the slices the nodes offer (serving/models.py plan_models: min_replicas 0 where only the HPA
  scales, a model that does not fit its slice). A model on a pool whose GPUs the nodes do not tell yet is left to
  the stage when the GPU Operator or node-pools stage runs before it in the same run.

Observed (what the module reads; a key is absent when its stage is not run):
  platform          "openshift" | "kubernetes"
  packages          {package name: PackageManifest or None}, None when OLM is not served
  nodes             [Node]
  machinesets       [MachineSet] or None when the cluster does not serve them
  cluster_policies  [ClusterPolicy] or None when the kind is not served
  dra_facts         cluster/dra.platform_facts
  policy_schema     the ClusterPolicy CRD's schema of spec, or None when there is none to read
  policy_schema_source  where it was read: the cluster's CRD, or the local chart's crds/ folder
  serving_facts     cluster/serving.platform_facts
  monitoring_served {kind: whether the API server serves it} for PrometheusRule and ConsolePlugin
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from dataclasses import replace

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator import cluster_policy
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.support import dra_driver_note
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import (
    needed_gates,
    parse_claim_templates,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.driver_values import (
    GPU_OPERATOR,
    driver_owner_from_nodes,
    driver_values,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.platform import plan_platform
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.pools import dra_pool_nodes
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.preflight.inventory import (
    INVENTORY,
    as_bool,
    describe,
    judge_inventory,
    operator_support,
    serving_message,
    variables_of,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring import settings as monitoring_settings
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import empty_pools, plan_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.olm import OlmError, select
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError, parse_pools
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.writes import machineset_writes
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.errors import ServingError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.models import (
    DRA_STRATEGY,
    cluster_offers,
    plan_models,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.platform import detect_platform
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.sizing import SizingError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving.spec import parse_settings
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.quotas import plan_quotas, pool_capacity
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.spec import TenancyError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy.spec import parse_settings as parse_tenancy

GPU_OPERATOR_PACKAGE = "gpu-operator-certified"
NFD_PACKAGE = "nfd"
STAGE_ORDER = ("gpu_operator", "node_pools", "dra", "tenancy", "serving", "monitoring", "uninstall")
# The preflight's own options: the module's, and its action plugin's when it checks the inventory alone.
ARGUMENT_SPEC = {
    "stages": {"type": "list", "elements": "str", "required": True, "choices": list(STAGE_ORDER)},
    "variables": {"type": "dict", "default": {}},
    "cluster": {"type": "bool", "default": True},
}


def check_inventory_of(variables, stages):
    """The inventory half of the preflight: (stages in run order, variables, errors, checked, unjudged).

    variables are the variables set, as judged: unknown keys left out, so the cluster is judged as if they were
    absent (judge_inventory); unjudged names the variables whose problems keep the cluster checks that read them
    from running. The module runs it before it reads the cluster; with cluster: false the action plugin runs it
    alone on the controller, with no module to start (a playbook that judges the cluster in its own first task,
    node_pools)."""
    stages = [s for s in STAGE_ORDER if s in stages]
    variables = dict((k, v) for k, v in (variables or {}).items() if v is not None)
    judgement = judge_inventory(variables, stages)
    checked = dict((stage, ["inventory: " + ", ".join(variables_of([stage]))]) for stage in stages)
    return stages, judgement.variables, judgement.errors, checked, judgement.unjudged


def inventory_warnings(variables, stages):
    """What the run may go on with but the user should hear (Ansible warnings): a deprecated GPU Operator line, an
    end-of-support one that was acknowledged, a DRA driver version NVIDIA does not pair with the operator's line."""
    warnings = []
    operator = variables.get("kubegpu_gpu_operator") or {}
    if not isinstance(operator, dict):
        return warnings
    if "gpu_operator" in stages:
        warning = operator_support(operator)[1]
        if warning:
            warnings.append(warning)
    driver = (variables.get("kubegpu_dra") or {}).get("driver") if isinstance(variables.get("kubegpu_dra"), dict) else None
    # Only a chart version the user chose: the collection's default is the release the material holds.
    if "dra" in stages and isinstance(driver, dict) and driver.get("chart_version"):
        note = dra_driver_note(setting(variables, "kubegpu_gpu_operator.version"), driver["chart_version"])
        if note:
            warnings.append("kubegpu_dra.driver.chart_version: " + note)
    return warnings


def failure_message(errors, stages):
    count = sum(len(problems) for problems in errors.values())
    return "%d problem%s found before anything was written (stages %s); nothing was written:\n%s" % (
        count, "" if count == 1 else "s", ", ".join(stages), describe(errors))


def setting(variables, path):
    """The value of kubegpu_x.a.b as the role will see it: the user's, else INVENTORY's default."""
    parts = path.split(".")
    value, spec = variables.get(parts[0]), INVENTORY[parts[0]]
    for part in parts[1:]:
        spec = spec["options"][part]
        value = value.get(part) if isinstance(value, dict) else None
    return spec.get("default") if value is None else value


def operator_release(variables):
    """(channel, csv) the gpu_operator role asks OLM for: version v26.7.0 -> (v26.7, gpu-operator-certified.v26.7.0)."""
    version = str(setting(variables, "kubegpu_gpu_operator.version") or "")
    version = ("v" + version.lstrip("v")) if version else ""
    channel = setting(variables, "kubegpu_gpu_operator.channel") or (".".join(version.split(".")[:2]) if version else "")
    return channel or None, (GPU_OPERATOR_PACKAGE + "." + version) if version else None


def check_cluster(variables, stages, observed):
    """Judge the observed cluster for the stages.

    Returns {"errors": {stage: [problem]}, "checked": {stage: [what was checked]}, "requirements": [what someone
    must change outside the collection, as the DRA platform step reports it]}.
    """
    errors, checked, requirements = {}, {}, []
    for stage, check in (("gpu_operator", _gpu_operator), ("node_pools", _node_pools), ("dra", _dra),
                         ("tenancy", _tenancy), ("serving", _serving), ("monitoring", _monitoring)):
        if stage in stages:
            problems, done = check(variables, stages, observed, requirements)
            if problems:
                errors[stage] = problems
            checked[stage] = done
    return {"errors": errors, "checked": checked, "requirements": requirements}


def _gpu_operator(variables, stages, observed, requirements):
    problems, done = _policy_fields(variables, observed.get("policy_schema"), observed.get("policy_schema_source"))
    if observed["platform"] != "openshift":
        return problems, done + ["platform kubernetes: the operator comes from its Helm chart (OLM not used)"]
    packages = observed.get("packages")
    if packages is None:
        return problems + [
            "the API server does not serve packages.operators.coreos.com/v1 PackageManifest: OLM is not installed on "
            "this OpenShift cluster (set kubegpu_platform: kubernetes to install with Helm)"], done
    channel, csv = operator_release(variables)
    wanted = [(GPU_OPERATOR_PACKAGE, channel, csv, "kubegpu_gpu_operator.channel / version")]
    if as_bool(setting(variables, "kubegpu_gpu_operator.nfd.enabled")):
        wanted.append((NFD_PACKAGE, setting(variables, "kubegpu_gpu_operator.nfd.channel"), None,
                       "kubegpu_gpu_operator.nfd.channel"))
    for package, channel, csv, keys in wanted:
        manifest = packages.get(package)
        if manifest is None:
            problems.append("%s: package %s is not in the cluster's catalogs (PackageManifest openshift-marketplace/%s "
                            "not found); check the catalog sources" % (keys, package, package))
            continue
        try:
            choice = select(manifest, channel, csv)
        except OlmError as e:
            problems.append("%s: %s" % (keys, e))
            continue
        done.append("OLM package %s: channel %s, CSV %s offered" % (package, choice["channel"], choice["csv"]))
    return problems, done


def _policy_fields(variables, schema, source):
    """kubegpu_gpu_operator.cluster_policy against the ClusterPolicy CRD's schema, when one could be read."""
    if schema is None:
        return [], ["cluster_policy: sections and dead fields of the known release (no ClusterPolicy CRD to read)"]
    policy = (variables.get("kubegpu_gpu_operator") or {}).get("cluster_policy") or {}
    problems = cluster_policy.schema_problems(policy, schema, "kubegpu_gpu_operator.cluster_policy.")
    return problems, ["cluster_policy: every field against the ClusterPolicy CRD's schema (%s)" % source]


def _pools(variables):
    return parse_pools(variables.get("kubegpu_node_pools") or [])


def _node_pools(variables, stages, observed, requirements):
    problems, done = [], []
    nodes = observed["nodes"]
    if "gpu_operator" not in stages and not observed.get("cluster_policies"):
        problems.append("no ClusterPolicy in the cluster: the GPU Operator is not installed; run the playbook "
                        "kubegpu.platform.gpu_operator (or site) first")
    try:
        pools = _pools(variables)
        plan = plan_pools(pools, nodes)
        machineset_writes(plan, pools, observed.get("machinesets"))
    except PoolError as e:
        return problems + ["kubegpu_node_pools: %s" % e], done
    problems += ["kubegpu_node_pools: %s" % problem for problem in empty_pools(pools, plan, len(nodes))]
    done += ["pool %s (%s): %s" % (pool.name, pool.strategy, ", ".join(entry["nodes"]) or
                                   "no node yet (MachineSets %s)" % ", ".join(pool.machinesets))
             for pool, entry in zip(pools, plan["pools"]) if entry["nodes"] or pool.machinesets]
    return problems, done


def _dra(variables, stages, observed, requirements):
    problems, done = [], []
    dra = variables.get("kubegpu_dra") or {}
    facts = observed["dra_facts"]
    try:
        plan = plan_platform(facts, bool(as_bool(setting(variables, "kubegpu_dra.acknowledge_tech_preview_no_upgrade"))))
        done.append("platform %s %s: DRA %s" % (plan["platform"], plan["version"], plan["api_version"] or
                                                "to be enabled (%s)" % ", ".join(w["kind"] for w in plan["writes"])))
    except DraError as e:
        problems.append("kubegpu_dra: %s" % e)
        requirements.extend(getattr(e, "requirements", None) or [])
    try:
        pools = dra_pool_nodes(variables.get("kubegpu_node_pools") or [], observed["nodes"])
        templates = parse_claim_templates(dra.get("claim_templates") or [])
        settings = dict(dra.get("driver") or {})
        if not settings.get("driver_owner"):
            names = set(n for members in pools.values() for n in members)
            settings["driver_owner"] = driver_owner_from_nodes(
                [n for n in observed["nodes"] if n["metadata"]["name"] in names]) or GPU_OPERATOR
        driver = driver_values(settings, facts.get("kubernetes_version"), needed_gates(templates))
        done.append("DRA pools: %s" % (", ".join("%s (%s)" % (p, ", ".join(n) or "no node")
                                                 for p, n in pools.items()) or "none"))
        done.append("DRA driver %s, feature gates %s" % (driver["release"]["chart_version"],
                                                         driver["values"]["featureGates"] or "default"))
    except DraError as e:
        problems.append("kubegpu_dra: %s" % e)
        requirements.extend(getattr(e, "requirements", None) or [])
    except PoolError as e:
        problems.append("kubegpu_node_pools: %s" % e)
    return problems, done


def _serving(variables, stages, observed, requirements):
    problems, done = [], []
    try:
        settings = parse_settings(variables.get("kubegpu_serving"))
        platform = detect_platform(observed["serving_facts"], settings)
        done.append("platform %s%s: models in %s mode by default; scale to zero: %s; to install: %s" % (
            platform["flavor"], " " + platform["version"] if platform["version"] else "", platform["mode"],
            ", ".join("%s mode %s" % (mode, how or "none") for mode, how in sorted(platform["scale_to_zero"].items())),
            ", ".join(platform["missing"]) or "nothing"))
        slices, pools, templates = cluster_offers(variables.get("kubegpu_node_pools") or [],
                                                  (variables.get("kubegpu_dra") or {}).get("claim_templates") or [],
                                                  observed["nodes"])
        later = []
        if "gpu_operator" in stages or "node_pools" in stages:
            # The GPU Operator's feature discovery labels the nodes with their GPUs: a pool's slices may only be
            # known once an earlier stage of this run has run.
            later = [m for m in settings.models if m.pool in pools and pools[m.pool]["strategy"] != DRA_STRATEGY
                     and pools[m.pool]["error"]]
        placed = [m for m in settings.models if m not in later]
        plan = plan_models(replace(settings, models=tuple(placed)), platform, slices, pools, templates)
        for name, report in sorted(plan["models"].items()):
            done.append("model %s: %s on %s %s x%d (%s mode%s)" % (
                name, report["slice"]["resource_name"], "pool" if report["pool"] else "claim template",
                report["pool"] or report["claim_template"], report["units"], report["mode"],
                ", scales to zero with %s" % report["scale_to_zero"] if report["scale_to_zero"] else ""))
        for model in later:
            done.append("model %s/%s: pool %s's GPUs are not known yet (%s); placed and sized by the serving stage"
                        % (model.namespace, model.name, model.pool, pools[model.pool]["error"]))
    except (ServingError, SizingError, PoolError, DraError) as e:
        problems.append(serving_message(str(e), variables.get("kubegpu_serving") or {}))
        requirements.extend(getattr(e, "requirements", None) or [])
    return problems, done


def _monitoring(variables, stages, observed, requirements):
    """The kinds the monitoring stage writes must be served, or its first write would fail after earlier stages."""
    settings = monitoring_settings.parse_settings(variables.get("kubegpu_monitoring"))
    served = observed.get("monitoring_served") or {}
    problems, done = [], []
    if settings["alerts"]["enabled"]:
        if served.get("PrometheusRule"):
            done.append("PrometheusRule (monitoring.coreos.com/v1) served")
        else:
            problems.append("kubegpu_monitoring.alerts: the cluster does not serve monitoring.coreos.com/v1 "
                            "PrometheusRule; install the Prometheus Operator (kube-prometheus-stack; on OpenShift "
                            "it is built in) or set kubegpu_monitoring.alerts.enabled: false")
    if settings["openshift"]["console_plugin"] and observed.get("platform") == "openshift":
        if served.get("ConsolePlugin"):
            done.append("ConsolePlugin (console.openshift.io/v1) served")
        else:
            problems.append("kubegpu_monitoring.openshift.console_plugin: the cluster does not serve "
                            "console.openshift.io/v1 ConsolePlugin; set it to false")
    return problems, done


def _tenancy(variables, stages, observed, requirements):
    """The teams' quotas against what the pools (as the inventory wants them, so a layout change of this run
    counts) offer on the observed nodes: unknown pools and resources, over-subscription with the teams named."""
    try:
        settings = parse_tenancy(variables.get("kubegpu_tenancy"))
        capacity = pool_capacity(variables.get("kubegpu_node_pools") or [], observed["nodes"])
        plan = plan_quotas(settings, capacity)
    except SizingError as e:
        if "gpu_operator" in stages:
            # GPU Feature Discovery labels the nodes with their GPUs once the GPU Operator of this run is installed.
            return [], ["quotas: the pools' GPUs are not known yet (%s); checked by the tenancy stage" % e]
        return [str(e)], []
    except (TenancyError, PoolError, DraError) as e:
        return [str(e)], []
    return [], ["team %s: %s" % (team, ", ".join("pool %s %s" % (pool, ", ".join(
        "%s %d" % item for item in sorted(res.items()))) for pool, res in sorted(quotas.items())) or "no quota")
        for team, quotas in sorted(plan["teams"].items())]
