"""The simulators' decisions against their input/output cases: no cluster, no clock (as kwok tests its stages).

Each file tools/devcluster/tests/cases/<simulator>/*.yaml is a list of cases: `why` (one line), `input` and
`output`. The output is compared whole: a case says everything the decision writes, and nothing else may come
out. The live tests beside this file check that the simulators read, time and write what the decisions say.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubegpu_devcluster import device_plugin_checker as nvidia
from kubegpu_devcluster import hardware
from kubegpu_devcluster.simulators.decisions import device_plugin, dra_plugin, mig_manager, nvidia_driver
from kubegpu_devcluster.simulators.decisions.gpus import applied_geometry, node_model, physical_gpus

CASES = Path(__file__).resolve().parent / "cases"


def _node(raw: dict | None) -> dict | None:
    """A Node as the simulators read it (decoded JSON): the case's metadata and status, nothing defaulted."""
    if raw is None:
        return None
    meta = dict(raw.get("metadata") or {})
    meta.setdefault("uid", "uid-" + meta["name"])
    return {"metadata": meta, "status": raw.get("status") or {}}


def _merge(node: dict, labels: dict, annotations: dict) -> dict:
    """The node after a merge patch of its labels and annotations (None removes a key)."""
    meta = dict(node["metadata"])
    for field, patch in (("labels", labels), ("annotations", annotations)):
        merged = dict(meta.get(field) or {})
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        meta[field] = merged
    return dict(node, metadata=meta)


def _without_empty(out: dict) -> dict:
    return {k: v for k, v in out.items() if v not in (None, "", {}, [], ())}


def run_mig_manager(given: dict) -> dict:
    """One label change seen from start to end: the patches written in order and how it ends."""
    node = _node(given["node"])
    document = given.get("document")
    if document is not None and document != mig_manager.MISSING:
        document = mig_manager.mig_configs(document)
    step = mig_manager.start(node, document, given.get("failed"))
    steps = [step]
    if step.outcome == "pending":
        node = _merge(node, step.labels, step.annotations)
        steps.append(mig_manager.finish(node, step.job, given.get("knobs") or {}))
    writes = [_without_empty({"labels": s.labels, "annotations": s.annotations})
              for s in steps if s.labels or s.annotations]
    return _without_empty({"outcome": steps[-1].outcome, "reason": steps[-1].reason, "writes": writes})


def run_device_plugin(given: dict) -> dict:
    pods = given.get("pods") or {}
    configs = pods.get("configmap")
    plugin = device_plugin.Pods(configs, pods.get("default", ""), pods.get("mig_strategy", "single"))
    running = None
    if "running" in given:   # the key the node's plugin runs now, read from the same ConfigMap content
        key = given["running"]
        running = device_plugin.Choice(key, device_plugin.parse_config(configs[key]) if key else
                                       device_plugin.PluginConfig())
    choice, update = device_plugin.decide(_node(given["node"]), plugin, running, given.get("knobs") or {})
    if update is None:
        return {"acts": False}
    out = {} if choice.key is None else {"config": choice.key}   # "": the plugin runs without a config
    return dict(out, **_without_empty({"skipped": dict(choice.skipped), "labels": update.labels,
                                       "capacity": update.capacity, "allocatable": update.allocatable,
                                       "annotations": update.annotations, "reason": update.reason}))


def run_dra_plugin(given: dict) -> dict:
    node = _node(given["node"])
    name = given.get("name") or node["metadata"]["name"]
    action = dra_plugin.decide(name, node, given.get("slice"), given.get("knobs") or {})
    return _without_empty({"action": action.verb, "slice": action.body})


def run_nvidia_driver(given: dict) -> dict:
    nodes = [{"metadata": {"name": name, "labels": dict({"nvidia.com/gpu.present": "true"}, **(labels or {}))}}
             for name, labels in (given.get("nodes") or {}).items()]
    drivers = [{"metadata": {"name": d["name"]}, "spec": d.get("spec") or {}} for d in given.get("drivers") or []]
    out = nvidia_driver.step(given["crd_mode"], drivers, nodes, given.get("knobs") or {})
    return {"labels": out.labels, "statuses": out.statuses, "busy": out.busy}


RUNNERS = {"mig-manager": run_mig_manager, "device-plugin": run_device_plugin, "dra-plugin": run_dra_plugin,
           "nvidia-driver": run_nvidia_driver}


def _cases() -> list:
    found = []
    for path in sorted(CASES.glob("*/*.yaml")):
        for index, case in enumerate(yaml.safe_load(path.read_text())):
            name = f"{path.parent.name}/{path.stem}#{index + 1}"
            found.append(pytest.param(path.parent.name, case, id=name))
    return found


ALL = _cases()


def test_every_simulator_has_cases_and_every_folder_a_runner():
    folders = {p.name for p in CASES.iterdir() if p.is_dir()}
    assert folders == set(RUNNERS)
    assert {c.values[0] for c in ALL} == set(RUNNERS)


@pytest.mark.parametrize("simulator, case", ALL)
def test_case(simulator, case):
    assert set(case) == {"why", "input", "output"}, "a case has a one-line why, an input and an output"
    assert isinstance(case["why"], str) and "\n" not in case["why"].strip()
    assert RUNNERS[simulator](case["input"]) == case["output"], case["why"]


# ---------------------------------------------------------------------------------------------------------------
# The device-plugin cases against NVIDIA's own code (kubegpu_devcluster.device_plugin_checker: k8s-device-plugin
# v0.17.4's config API and the counting of its internal/rm): the simulator advertises what the plugin computes, and
# refuses (skips, or fails to start on) what the plugin refuses.
# ---------------------------------------------------------------------------------------------------------------

DEVICE_PLUGIN = [c for c in ALL if c.values[0] == "device-plugin"]


def _nonzero(resources: dict) -> dict:
    """What a plugin registers: a resource the kubelet keeps at 0 is served by no plugin."""
    return {name: int(n) for name, n in resources.items() if int(n)}


def _env(conf: device_plugin.PluginConfig, pods: device_plugin.Pods) -> dict:
    """The plugin container's MIG_STRATEGY as the simulator reads it. NVIDIA's plugin lets MIG_STRATEGY override
    the config's flags.migStrategy (api/config/v1 NewConfig: command line, then environment, then file), so the
    simulator's rule, the config's strategy first, holds where the operator sets no MIG_STRATEGY, i.e. with
    ClusterPolicy spec.mig.strategy unset (docs/local-cluster.md, "The device plugin and NVIDIA's code")."""
    return {} if conf.mig_strategy else {"MIG_STRATEGY": pods.strategy}


@pytest.mark.parametrize("simulator, case", DEVICE_PLUGIN)
def test_device_plugin_case_as_nvidia_computes(simulator, case):
    given = case["input"]
    node = _node(given["node"])
    labels, annotations = node["metadata"].get("labels") or {}, node["metadata"].get("annotations") or {}
    model = node_model(labels)
    if labels.get("nvidia.com/gpu.present") != "true" or model is None:
        pytest.skip("the plugin does not act on this node")
    pods_given = given.get("pods") or {}
    configs = pods_given.get("configmap")
    pods = device_plugin.Pods(configs, pods_given.get("default", ""), pods_given.get("mig_strategy", "single"))
    running = None
    if "running" in given:
        key = given["running"]
        running = device_plugin.Choice(key, device_plugin.parse_config(configs[key]) if key else
                                       device_plugin.PluginConfig())
    choice = device_plugin.choose_config(labels.get(device_plugin.CONFIG_LABEL), pods, running)
    count = physical_gpus(labels, annotations)
    gpus = applied_geometry(annotations, count) if hardware.gpu(model).mig_capable else [None] * count
    for key, why in choice.skipped:
        if why != "not in the ConfigMap":   # a config the simulator refuses, NVIDIA's code refuses too
            with pytest.raises(nvidia.Refused):
                nvidia.check(configs[key], model, gpus)
    text = configs[choice.key] if configs and choice.key else ""
    strategy = choice.conf.mig_strategy or pods.strategy
    try:
        resources, published = device_plugin.advertise(model, count, gpus, choice.conf, strategy)
    except device_plugin.PluginError:
        resources = None
    if resources is None or published.get("nvidia.com/gpu.product", "").endswith("-MIG-INVALID"):
        # The plugin does not start: MPS on MIG devices, or MIG single over mixed or half-enabled GPUs.
        with pytest.raises(nvidia.Refused):
            nvidia.check(text, model, gpus, _env(choice.conf, pods))
        return
    assert _as_v0_17_4(_nonzero(resources)) == nvidia.check(text, model, gpus, _env(choice.conf, pods)).resources, \
        case["why"]


def _as_v0_17_4(resources: dict) -> dict:
    """The simulator names +me MIG devices apart (nvidia.com/mig-1g.10gb.me), as plugins with anchored resource
    patterns do (k8s-device-plugin#1807); v0.17.4 counts them under the plain profile's resource (#1462)."""
    folded = {}
    for name, count in resources.items():
        base = name[:-len(".me")] if name.startswith("nvidia.com/mig-") and name.endswith(".me") else name
        folded[base] = folded.get(base, 0) + count
    return folded
