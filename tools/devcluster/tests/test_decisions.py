"""The simulators' decisions against their input/output cases: no cluster, no clock (as kwok tests its stages).

Each file tools/devcluster/tests/cases/<simulator>/*.yaml is a list of cases: `why` (one line), `input` and
`output`. The output is compared whole: a case says everything the decision writes, and nothing else may come
out. The live tests beside this file check that the simulators read, time and write what the decisions say.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubegpu_devcluster.simulators.decisions import device_plugin, dra_plugin, mig_manager, nvidia_driver

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
