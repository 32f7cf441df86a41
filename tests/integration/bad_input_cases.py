"""The bad-input table (issue 9): one case per way a user gets the demo inventory wrong, every playbook.

Each case changes the demo inventory (examples/demo/inventory.yml) the way a user might get it wrong, runs a
playbook with ansible-playbook as users do (site or the stage's own), and expects the run to stop in the first
play (kubegpu.platform.preflight) with a message that names the variable path, the value and what is valid, and
the API server's audit log to show no write by the collection. The node_pools playbook's preflight checks the
inventory alone: the pools' cluster checks are gpu_node_pools' own, made before its first write on the fleet it
plans from (one Node list per run), so its cases may stop in the role's planning task instead.
test_site_lifecycle.py runs the table on a fresh cluster (no operator, nothing of ours), then again once the demo
inventory has converged through site.

A bad input stops the run in its first play, so a case costs one short ansible-playbook process; the cases run a
few at a time (KUBEGPU_BAD_INPUT_WORKERS, default 3) and the audit log is asserted for the whole table: no write by
the collection's user from its first case to its last (the simulators write as their own users).
"""
from __future__ import annotations

import copy
import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import yaml

from conftest import REPO

INVENTORY = REPO / "examples" / "demo" / "inventory.yml"
DEMO = yaml.safe_load(INVENTORY.read_text())["all"]["vars"]
PREFLIGHT_TASK = "Check the inventory and the cluster before anything is written"
POOLS_PLAN_TASK = ("Plan every pool, then reconcile the ConfigMaps, the ClusterPolicy and MachineSet templates and start "
                   "the first batch")
WORKERS = int(os.environ.get("KUBEGPU_BAD_INPUT_WORKERS", "3"))
SITE, OPERATOR, POOLS, DRA, SERVING = "site", "gpu_operator", "node_pools", "dra", "serving"
MONITORING, UNINSTALL = "monitoring", "uninstall"


def operator(**changes):
    """kubegpu_gpu_operator with some keys set (the demo has none)."""
    return {"kubegpu_gpu_operator": changes}


def pools(change):
    """kubegpu_node_pools of the demo, changed by change(list) in place."""
    value = copy.deepcopy(DEMO["kubegpu_node_pools"])
    change(value)
    return {"kubegpu_node_pools": value}


def add_pool(pool):
    return pools(lambda p: p.append(pool))


def set_in(index, path, value):
    def change(value_list):
        target = value_list[index]
        keys = path.split(".")
        for key in keys[:-1]:
            target = target.setdefault(key, {})
        target[keys[-1]] = value
    return change


def dra(**changes):
    """kubegpu_dra of the demo with some keys set; driver and its keys merged."""
    value = copy.deepcopy(DEMO["kubegpu_dra"])
    for key, item in changes.items():
        if key == "driver":
            value.setdefault("driver", {}).update(item)
        else:
            value[key] = item
    return {"kubegpu_dra": value}


def templates(*extra):
    return dra(claim_templates=copy.deepcopy(DEMO["kubegpu_dra"]["claim_templates"]) + list(extra))


CP = {"name": "x", "namespaces": ["llm"]}


def serving(**changes):
    """kubegpu_serving of the demo with some keys set."""
    return {"kubegpu_serving": dict(copy.deepcopy(DEMO["kubegpu_serving"]), **changes)}


def model(index, **keys):
    """kubegpu_serving of the demo with keys of its models[index] set."""
    value = copy.deepcopy(DEMO["kubegpu_serving"])
    value["models"][index].update(keys)
    return {"kubegpu_serving": value}


def monitoring(**changes):
    """kubegpu_monitoring of the demo with some keys set."""
    return {"kubegpu_monitoring": dict(copy.deepcopy(DEMO["kubegpu_monitoring"]), **changes)}


# (id, playbook, extra variables, words the error must contain[, states (default both), more args])
# Trimmed to keep the file's time: cases whose refusal another case's code path already makes (a second and third
# dead ClusterPolicy field, NFD's channel, key, timeout and helm.values beside the operator's own, a second choice of
# kubegpu_gpu_operator, a fourth claim-template parse error); their rules keep their unit tests.
CASES = [
    # -- gpu_operator (nfd keys live under kubegpu_gpu_operator.nfd)
    ("misspelt-mig-strategy", OPERATOR, operator(mig_stratgy="mixed"),
     ["kubegpu_gpu_operator: unknown key 'mig_stratgy'", "did you mean 'mig_strategy'"]),
    ("timeout-not-integer", SITE, operator(timeout="soon"),
     ["kubegpu_gpu_operator.timeout: expected an integer, got 'soon'"]),
    ("end-of-support-version", SITE, operator(version="v25.3.4"),
     ["kubegpu_gpu_operator.version: v25.3.4", "end of support", "kubegpu_gpu_operator.allow_end_of_support: true",
      "Nothing was written."]),
    ("mig-strategy-choice", OPERATOR, operator(mig_strategy="all-1g"),
     ["kubegpu_gpu_operator.mig_strategy: 'all-1g' is not valid", "none, single, mixed"]),
    ("dead-cdi-default", SITE, operator(cluster_policy={"cdi": {"default": True}}),
     ["kubegpu_gpu_operator.cluster_policy.cdi.default: dead field", "cdi.enabled"]),
    ("unknown-policy-section", OPERATOR, operator(cluster_policy={"devicePlugn": {"enabled": True}}),
     ["cluster_policy.devicePlugn: not a ClusterPolicy spec section", "did you mean 'devicePlugin'"]),
    ("policy-section-not-mapping", SITE, operator(cluster_policy={"gfd": True}),
     ["cluster_policy.gfd: must be a mapping"]),
    ("misspelt-policy-field", OPERATOR, operator(cluster_policy={"driver": {"enabeld": False}}),
     ["kubegpu_gpu_operator.cluster_policy.driver.enabeld: not a field of the ClusterPolicy", "did you mean 'enabled'"]),
    ("policy-field-type", SITE, operator(cluster_policy={"dcgmExporter": {"serviceMonitor": {"enabled": "sometimes"}}}),
     ["kubegpu_gpu_operator.cluster_policy.dcgmExporter.serviceMonitor.enabled: expected true or false"]),
    ("policy-enum", OPERATOR, operator(cluster_policy={"mig": {"strategy": "both"}}),
     ["cluster_policy.mig.strategy: 'both' is not valid", "mixed"]),
    ("unknown-channel", OPERATOR, operator(channel="v99.1"),
     ["channel v99.1 is not offered", "channels:"]),
    ("unknown-version", SITE, operator(version="v26.99.0"),
     ["gpu-operator-certified", "v26.99"]),
    ("approval-case", SITE, operator(approval="manual"),
     ["kubegpu_gpu_operator.approval: 'manual' is not valid", "did you mean 'Manual'"]),
    ("drivers-without-per-node-pool", SITE, operator(driver={"nvidia_drivers": [{"name": "a100"}]}),
     ["kubegpu_gpu_operator.driver.nvidia_drivers", "per_node_pool: true"]),
    ("driver-type-enum", OPERATOR,
     operator(driver={"per_node_pool": True, "nvidia_drivers": [{"name": "a100", "spec": {"driverType": "cuda"}}]}),
     ["NVIDIADriver a100: spec.driverType: 'cuda' is not valid", "gpu, vgpu"]),
    ("wait-not-bool", SITE, operator(wait="maybe"),
     ["kubegpu_gpu_operator.wait: expected true or false, got 'maybe'"]),
    ("platform-choice", OPERATOR, {"kubegpu_platform": "ocp"},
     ["kubegpu_platform: 'ocp' is not valid", "auto, openshift, kubernetes"]),
    ("operator-not-mapping", SITE, {"kubegpu_gpu_operator": "v26.7.0"},
     ["kubegpu_gpu_operator: expected a mapping, got 'v26.7.0'"]),
    # -- node_pools
    ("unknown-machineset", POOLS, pools(set_in(2, "machinesets", ["demo-gpu-a100-us-east-1b"])),
     ["MachineSet demo-gpu-a100-us-east-1b not found", "demo-gpu-a100-us-east-1a"]),
    ("empty-pool", SITE, add_pool({"name": "b200", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-B200"}},
                                   "sharing": {"strategy": "none"}}),
     ["pool 'b200': selects no node", "nvidia.com/gpu.product=NVIDIA-B200"]),
    ("overlapping-pools", POOLS, add_pool({"name": "all-h100", "machinesets": ["demo-gpu-h100-us-east-1a"],
                                           "sharing": {"strategy": "none"}}),
     ["pools 'llm-h100' and 'all-h100' both select"]),
    ("pool-misspelt-mig-strategy", SITE, pools(set_in(0, "sharing.mig.mig_stratgy", "mixed")),
     ["kubegpu_node_pools[0] (llm-h100).sharing.mig: unknown key 'mig_stratgy'", "did you mean 'strategy'"]),
    ("bad-mig-layout", POOLS, pools(set_in(0, "sharing.mig.layout", {"3g.40gb": 3})),
     ["pool 'llm-h100'", "3g.40gb"]),
    ("mig-on-gpu-without-mig", SITE, pools(set_in(1, "sharing", {"strategy": "mig", "mig": {"layout": "all-1g.10gb"}})),
     ["pool 'embed-l40s'", "not MIG-capable"]),
    ("mig-on-nodes-without-gpu-model", POOLS,
     add_pool({"name": "cpu", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "m6i.4xlarge"}},
               "sharing": {"strategy": "mig", "mig": {"layout": "all-1g.10gb"}}}),
     ["pool 'cpu'", "its GPU is unknown"]),
    ("replicas-too-few", SITE, pools(set_in(1, "sharing.time_slicing.replicas", 1)),
     ["pool 'embed-l40s': sharing.time_slicing.replicas is 1", ">= 2"]),
    ("replicas-not-integer", POOLS, pools(set_in(2, "sharing.mps.replicas", "many")),
     ["kubegpu_node_pools[2] (batch-a100).sharing.mps.replicas: expected an integer, got 'many'"]),
    ("strategy-choice", SITE, pools(set_in(1, "sharing.strategy", "timeslicing")),
     ["sharing.strategy: 'timeslicing' is not valid", "did you mean 'time-slicing'"]),
    ("max-unavailable-zero", POOLS, pools(set_in(1, "max_unavailable", 0)),
     ["pool 'embed-l40s': max_unavailable is 0", "'25%'"]),
    ("pool-name-invalid", SITE, pools(set_in(1, "name", "Embed_L40S")),
     ["name is 'Embed_L40S'", "lowercase letters"]),
    ("duplicate-pool-names", POOLS, pools(set_in(1, "name", "llm-h100")),
     ["name 'llm-h100' is already used"]),
    ("empty-selector", SITE, pools(set_in(1, "selector", {})),
     ["pool 'embed-l40s': selector is empty"]),
    ("misspelt-variable", POOLS, {"kubegpu_node_pool": DEMO["kubegpu_node_pools"]},
     ["kubegpu_node_pool: not a variable of kubegpu.platform", "did you mean 'kubegpu_node_pools'"]),
    ("operator-choice", SITE, pools(set_in(1, "selector", {"matchExpressions": [
        {"key": "nvidia.com/gpu.product", "operator": "Equals", "values": ["NVIDIA-L40S"]}]})),
     ["matchExpressions[0].operator: 'Equals' is not valid", "In, NotIn, Exists, DoesNotExist"]),
    ("mps-with-mig", POOLS, pools(set_in(0, "sharing.mps", {"replicas": 2})),
     ["MPS cannot share MIG devices"]),
    # -- dra
    ("unknown-feature-gate", DRA, dra(driver={"feature_gates": {"TimeSlicing": True}}),
     ["kubegpu_dra.driver.feature_gates: unknown gate 'TimeSlicing'", "TimeSlicingSettings"]),
    ("exclusive-feature-gates", SITE, dra(driver={"feature_gates": {"DynamicMIG": True, "MPSSupport": True}}),
     ["DynamicMIG and MPSSupport cannot both be enabled"]),
    ("gate-needed-by-template-off", DRA, dra(driver={"feature_gates": {"TimeSlicingSettings": False}}),
     ["feature_gates.TimeSlicingSettings is false", "shared-ts"]),
    ("template-bad-device", SITE, templates(dict(CP, device="tpu")),
     ["kubegpu_dra.claim_templates[3]: claim template 'x'", "tpu"]),
    ("template-misspelt-key", DRA, templates({"name": "x", "namespace": ["llm"]}),
     ["claim template 'x'", "namespace"]),
    ("template-duplicate-name", SITE, templates(dict(CP, name="gpu-80g")),
     ["claim template 'gpu-80g'", "already used"]),
    # The API server compiles CEL in a dry run of the DeviceClass (the local kube-apiserver serves resource.k8s.io).
    ("template-cel-does-not-compile", SITE,
     templates(dict(CP, cel="device.attributes['gpu.nvidia.com'].productName ==")),
     ["claim template 'x': the API server refused its DeviceClass kubegpu-x, so nothing was written"]),
    ("driver-owner-choice", SITE, dra(driver={"driver_owner": "nvidia"}),
     ["kubegpu_dra.driver.driver_owner: 'nvidia' is not valid", "gpu-operator, host"]),
    ("driver-misspelt-key", DRA, dra(driver={"featuregates": {}}),
     ["kubegpu_dra.driver: unknown key 'featuregates'", "did you mean 'feature_gates'"]),
    ("dra-pool-overlaps-device-plugin-pool", DRA,
     add_pool({"name": "dra-l40s", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-L40S"}},
               "sharing": {"strategy": "dra"}}),
     ["dra-l40s", "embed-l40s"]),
    ("tech-preview-not-acknowledged", DRA, dra(acknowledge_tech_preview_no_upgrade=False),
     ["TechPreviewNoUpgrade", "acknowledge_tech_preview_no_upgrade: true"], ("fresh",)),
    # -- serving: the inventory alone (spec.py, the models against the pools and claim templates), then the cluster
    # (OpenShift AI 3.x from the catalog's default channel; the nodes' slices)
    ("serving-misspelt-model-key", SERVING, model(1, min_replica=1),
     ["kubegpu_serving.models[1] (llama-8b): unknown key 'min_replica'", "did you mean 'min_replicas'"]),
    ("serving-unknown-runtime", SITE, model(0, runtime="vlm-embed"),
     ["kubegpu_serving.models[0] (bge-large): runtime is 'vlm-embed', which kubegpu_serving.runtimes does not list",
      "vllm, vllm-embed"]),
    ("serving-unknown-pool", SERVING, model(1, pool="llm-h10"),
     ["kubegpu_serving.models[1] (llama-8b): pool is 'llm-h10', which kubegpu_node_pools does not list", "llm-h100"]),
    ("serving-unknown-claim-template", SITE, model(2, claim_template="gpu-80"),
     ["kubegpu_serving.models[2] (llama-8b-dra): claim_template is 'gpu-80', which kubegpu_dra.claim_templates does "
      "not list", "gpu-80g"]),
    ("serving-mode-choice", SERVING, serving(mode="serverless"),
     ["kubegpu_serving.mode: 'serverless' is not valid", "auto, knative, standard"]),
    ("serving-dra-claim-in-knative-mode", SERVING, model(2, mode="knative"),
     ["kubegpu_serving.models[2] (llama-8b-dra): claim_template 'gpu-80g' asks for a DRA resource claim, but the "
      "model runs in Knative mode", "mode: standard"]),
    ("serving-knative-on-openshift-ai-3", SITE, model(0, mode="knative"),
     ["kubegpu_serving.models[0] (bge-large): mode is knative, but OpenShift AI 3", "use mode: standard"]),
    ("serving-too-big-for-its-slice", SITE, model(1, sizing=dict(DEMO["kubegpu_serving"]["models"][1]["sizing"],
                                                                 context=131072)),
     ["kubegpu_serving.models[1] (llama-8b): model does not fit pool 'llm-h100' nvidia.com/mig-3g.40gb"]),
    # OpenShift AI 3.x not installed and install: false: no KEDA, so Standard mode has the HPA only.
    ("serving-scale-to-zero-without-keda", SERVING, serving(install=False),
     ["kubegpu_serving.models[0] (bge-large): min_replicas is 0", "scales with the HPA only"], ("fresh",)),
    # -- monitoring
    ("monitoring-threshold-out-of-range", MONITORING, monitoring(alerts={"gpu_memory_used_percent": 150}),
     ["kubegpu_monitoring.alerts.gpu_memory_used_percent: 150 is out of range; valid: 1 to 100"]),
    ("monitoring-misspelt-threshold", SITE, monitoring(alerts={"gpu_temprature_celsius": 80}),
     ["kubegpu_monitoring.alerts: unknown key 'gpu_temprature_celsius'", "did you mean 'gpu_temperature_celsius'"]),
    ("monitoring-interval-not-a-duration", MONITORING, monitoring(service_monitor={"interval": "15 seconds"}),
     ["kubegpu_monitoring.service_monitor.interval: '15 seconds' is not a Prometheus duration"]),
    ("monitoring-console-plugin-image", MONITORING,
     monitoring(openshift={"console_plugin": True, "console_plugin_image": "quay.io/x/console plugin:0.3"}),
     ["kubegpu_monitoring.openshift.console_plugin_image: 'quay.io/x/console plugin:0.3' is not an image reference"]),
    # --tags dra on site: the first play is tagged always, so the DRA input is still checked first.
    # -- uninstall: it reads the inventory only for the helm binary; a wrong one stops it before anything goes.
    ("uninstall-misspelt-variable", UNINSTALL, {"kubegpu_tenancyy": {"helm": {"binary": "helm"}}},
     ["kubegpu_tenancyy: not a variable of kubegpu.platform", "did you mean 'kubegpu_tenancy'"]),
    ("uninstall-helm-binary-list", UNINSTALL, {"kubegpu_dra": {"helm": {"binary": ["helm"]}}},
     ["kubegpu_dra.helm.binary: expected a string, got ['helm']"]),
    ("uninstall-misspelt-helm-key", UNINSTALL, {"kubegpu_serving": {"helm": {"binry": "/usr/bin/helm"}}},
     ["kubegpu_serving.helm: unknown key 'binry'", "did you mean 'binary'"]),
    ("tags-dra-still-checks", SITE, dra(driver={"log_verbosity": "loud"}),
     ["kubegpu_dra.driver.log_verbosity: expected an integer, got 'loud'"], ("fresh", "converged"), ["--tags", "dra"]),
]


def _case(case):
    name, playbook, variables, words = case[:4]
    states = case[4] if len(case) > 4 else ("fresh", "converged")
    args = case[5] if len(case) > 5 else []
    return name, playbook, variables, words, states, args


def _run(dc, playbook, variables, args=()):
    """ansible-playbook <playbook> -i demo inventory -e @variables: (json result or None, process, seconds)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(variables, f)
    t0 = time.monotonic()
    try:
        proc = dc.playbook(f"playbooks/{playbook}.yml", "-i", str(INVENTORY), "-e", f"@{f.name}", *args)
    finally:
        os.unlink(f.name)
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        out = None
    return out, proc, time.monotonic() - t0


def _failures(out):
    return [(task["task"]["name"].split(" : ", 1)[-1], task["hosts"]["localhost"].get("msg") or "")
            for play in out["plays"] for task in play["tasks"] if task["hosts"].get("localhost", {}).get("failed")]


def _judge(case, result):
    """The case's problem, or None when the run stopped in the preflight with every expected word."""
    name, playbook, _variables, words, _states, _args = _case(case)
    out, proc, seconds = result
    if out is None:
        return f"{name} ({playbook}): no JSON from ansible-playbook (rc {proc.returncode}): {proc.stderr[-1500:]}"
    failures = _failures(out)
    if not failures:
        return f"{name} ({playbook}): the run did not fail (rc {proc.returncode})"
    task, message = failures[0]
    if task != PREFLIGHT_TASK and not (playbook == POOLS and task == POOLS_PLAN_TASK):
        return f"{name} ({playbook}): the first failure was in {task!r}, not the preflight: {message}"
    missing = [w for w in words if w not in message]
    if missing:
        return f"{name} ({playbook}): message lacks {missing}: {message}"
    return None


def touched(dc):
    """What an earlier run left that a fresh cluster lacks: a ClusterPolicy, node labels of ours."""
    policies = dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy").get().items
    nodes = [n.to_dict()["metadata"] for n in dc.admin.resources.get(api_version="v1", kind="Node").get().items]
    labelled = [n["name"] for n in nodes if any(k.startswith("kubegpu.io/") or k == "nvidia.com/dra-kubelet-plugin"
                                                for k in n.get("labels") or {})]
    return [p.metadata.name for p in policies] + labelled


def table(dc, state):
    """Every case of `state` ("fresh" or "converged") run against dc: (problems, the collection's writes)."""
    cases = [c for c in CASES if state in _case(c)[4]]
    mark = dc.audit.mark()
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = list(pool.map(lambda c: _run(dc, _case(c)[1], _case(c)[2], _case(c)[5]), cases))
    seconds = time.monotonic() - t0
    problems = [p for p in (_judge(c, r) for c, r in zip(cases, results)) if p]
    writes = [str(e) for e in dc.audit.writes(mark)]
    slowest = max(r[2] for r in results)
    print(f"\n{state}: {len(cases)} bad inputs in {seconds:.1f} s ({WORKERS} at a time, slowest {slowest:.1f} s), "
          f"{len(problems)} not refused as expected, {len(writes)} writes")
    return problems, writes
