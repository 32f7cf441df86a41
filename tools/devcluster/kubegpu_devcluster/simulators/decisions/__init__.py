"""What the simulators that stand for GPU software decide, as pure functions: no client, no clock, no cluster.

One module per simulator (mig_manager, device_plugin, dra_plugin), plus gpus (what a node says about its GPUs,
which all three read). Each simulator reads the objects, calls its decision and writes what it returns; the
timing (a change takes seconds), the watches and the caches stay in the simulator. The decisions are tested
with input/output YAML cases in tools/devcluster/tests/cases/<simulator>/, as kwok tests its stages; the live
tests in tools/devcluster/tests/ check the wiring.

Knobs reach a decision as a mapping of the knob's name (without the simulator's prefix) to its raw value, read
with .get(name, default): a dict in the cases, the simulator's framework.Knobs (which reads the ConfigMap
lazily) at run time.
"""
from __future__ import annotations


def node_names(value: str) -> set:
    """A knob listing node names, comma-separated: "a, b," -> {"a", "b"}."""
    return {n.strip() for n in (value or "").split(",") if n.strip()}
