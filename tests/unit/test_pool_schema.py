"""The node_pools role's pool schema is generated from the gpu_node_pools module's documentation
(tools/pool_schema.py): regenerated here, it must equal the role's argument spec, and a hand edit is caught."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import pool_schema  # noqa: E402  pylint: disable=wrong-import-position


def test_the_role_spec_is_what_the_generator_writes():
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "pool_schema.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_a_hand_edit_of_the_role_pool_schema_is_undone():
    text = pool_schema.ROLE_SPEC.read_text()
    edited = text.replace("choices: [none, mig, time-slicing, mps, dra]", "choices: [none, mig]")
    assert edited != text
    assert pool_schema.rendered(edited) == text


def test_the_generated_options_are_the_module_documentation():
    specs = yaml.safe_load(pool_schema.ROLE_SPEC.read_text())
    options = specs["argument_specs"]["main"]["options"]["node_pools_pools"]["options"]
    documented = pool_schema.module_pool_options()
    assert set(options) == set(documented)
    strategy = documented["sharing"]["suboptions"]["strategy"]
    assert options["sharing"]["options"]["strategy"]["choices"] == strategy["choices"]
    assert options["name"]["description"] == documented["name"]["description"]
