# -*- coding: utf-8 -*-
"""The preflight's inventory-only check (cluster: false) runs on the controller, with the module's result.

Both sides run for real, without a cluster: the task through ansible (the action plugin), and the module as a
process given the same arguments. The action must start no module (no AnsiballZ payload is written)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
BIN = Path(sys.executable).parent

BAD = {"kubegpu_node_pools": [{"name": "llm", "selektor": {"matchLabels": {"a": "b"}},
                               "sharing": {"strategy": "mig", "mig": {"layout": "all-1g.10gb"}}}],
       "kubegpu_gpu_operator": {"timeout": "soon"}}
GOOD = {"kubegpu_node_pools": [{"name": "llm", "selector": {"matchLabels": {"a": "b"}},
                                "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}}]}


def env(tmp_path):
    return dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                ANSIBLE_KEEP_REMOTE_FILES="1", ANSIBLE_REMOTE_TMP=str(tmp_path / "remote"),
                ANSIBLE_LOCAL_TEMP=str(tmp_path / "local"), PATH=str(BIN) + os.pathsep + os.environ["PATH"],
                PYTHONPATH=str(REPO / ".cache" / "collections"))


def through_ansible(tmp_path, args):
    proc = subprocess.run(
        [str(BIN / "ansible"), "localhost", "-m", "kubegpu.platform.preflight", "-a", json.dumps(args),
         "-e", "ansible_python_interpreter=" + sys.executable],
        cwd=REPO, env=env(tmp_path), capture_output=True, text=True, check=False)
    result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return proc.returncode, result


def module_process(tmp_path, args):
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.kubegpu.platform.plugins.modules.preflight",
                           str(path)], cwd=REPO, env=env(tmp_path), capture_output=True, text=True, check=False)
    return json.loads(proc.stdout)


def payloads(tmp_path):
    return sorted(p.name for p in tmp_path.rglob("AnsiballZ_*"))


@pytest.mark.parametrize("variables, fails", [(BAD, True), (GOOD, False)], ids=["bad", "good"])
def test_inventory_only_check_runs_on_the_controller_with_the_modules_result(tmp_path, variables, fails):
    args = {"stages": ["node_pools", "gpu_operator"], "variables": variables, "cluster": False}
    rc, action = through_ansible(tmp_path, args)
    assert payloads(tmp_path) == []
    module = module_process(tmp_path, args)
    assert (rc != 0) is fails
    assert bool(action.get("failed")) is fails
    for key in ("changed", "errors", "checked", "platform", "requirements", "msg"):
        assert action.get(key) == module.get(key), key
    if fails:
        assert "unknown key 'selektor' (did you mean 'selector'?)" in action["msg"]
        assert "kubegpu_gpu_operator.timeout" in action["msg"]


def test_bad_options_are_refused_as_the_module_refuses_them(tmp_path):
    rc, action = through_ansible(tmp_path, {"stages": ["node_pool"], "cluster": False})
    assert rc != 0 and action["failed"]
    assert "node_pool" in action["msg"] and "node_pools" in action["msg"]
    assert payloads(tmp_path) == []


def test_reading_the_cluster_runs_the_module(tmp_path):
    """cluster: true is the module's: its payload is built (it then fails here, there being no cluster)."""
    through_ansible(tmp_path, {"stages": ["node_pools"], "variables": GOOD, "cluster": True,
                               "kubeconfig": str(tmp_path / "absent")})
    assert payloads(tmp_path) == ["AnsiballZ_preflight.py"]


def test_a_deprecated_operator_version_warns_as_the_module_warns(tmp_path):
    args = {"stages": ["gpu_operator"], "variables": {"kubegpu_gpu_operator": {"version": "v26.3.3"}}, "cluster": False}
    rc, action = through_ansible(tmp_path, args)
    module = module_process(tmp_path, args)
    assert rc == 0 and not action.get("failed")
    assert [w for w in action["warnings"] if "26.3.x is deprecated" in w]
    # The module process prints its warnings as ansible-core's structured events; the message is the same.
    assert action["warnings"] == [w["event"]["msg"] if isinstance(w, dict) else w for w in module["warnings"]]
