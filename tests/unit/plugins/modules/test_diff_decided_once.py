# -*- coding: utf-8 -*-
"""`diff` is decided once, in KubegpuModule: built from `changes`, returned only under --diff, in every module.

The first tests run the module base itself (exit_json / fail_json, with and without _ansible_diff, across the rounds
of one wait); the others read every file of plugins/modules/ (AST and RETURN docs), so that a module that builds its
AnsibleModule by itself, or sets or drops `diff` by hand, fails here.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import json
import os

import pytest
import yaml

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule

MODULES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "modules")
MODULE_FILES = sorted(f for f in os.listdir(MODULES) if f.endswith(".py") and not f.startswith("_"))
RETURNED = "in diff mode"

CHANGE = {"key": "ConfigMap/ns/a", "kind": "ConfigMap", "namespace": "ns", "name": "a", "fields": ["data.x"],
          "before": {"data": {"x": "1"}}, "after": {"data": {"x": "2"}}}
DIFF = {"before": {"ConfigMap/ns/a": {"data": {"x": "1"}}}, "after": {"ConfigMap/ns/a": {"data": {"x": "2"}}}}


def _module(monkeypatch, diff, **params):
    args = dict(params, _ansible_diff=diff)
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    return KubegpuModule(argument_spec={"name": {"type": "str"}}, needs_cluster=False, waits=True,
                         supports_check_mode=True)


def _exit(capsys, call, **result):
    with pytest.raises(SystemExit):
        call(**result)
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("diff", [True, False])
def test_exit_json_returns_diff_only_under_diff(monkeypatch, capsys, diff):
    out = _exit(capsys, _module(monkeypatch, diff).exit_json, changed=True, changes=[CHANGE])
    assert out["changes"] == [CHANGE]
    if diff:
        assert out["diff"] == DIFF
    else:
        assert "diff" not in out


@pytest.mark.parametrize("diff", [True, False])
def test_a_diff_the_module_set_itself_is_replaced_or_dropped(monkeypatch, capsys, diff):
    stale = {"before": {"Node/x": {}}, "after": {"Node/x": {"metadata": {}}}}
    out = _exit(capsys, _module(monkeypatch, diff).exit_json, changed=True, changes=[CHANGE], diff=stale)
    assert out.get("diff") == (DIFF if diff else None)


@pytest.mark.parametrize("diff", [True, False])
def test_fail_json_returns_diff_only_under_diff(monkeypatch, capsys, diff):
    module = _module(monkeypatch, diff)
    out = _exit(capsys, lambda **kw: module.fail_json("pool 'a': refused", **kw), changes=[CHANGE])
    assert out["failed"] is True and out["msg"] == "pool 'a': refused"
    assert out.get("diff") == (DIFF if diff else None)


def test_no_changes_no_diff_even_under_diff(monkeypatch, capsys):
    """A read-only module (no `changes`) has nothing to show as a diff."""
    out = _exit(capsys, _module(monkeypatch, True).exit_json, changed=False, report=[])
    assert "diff" not in out


def test_an_empty_diff_under_diff_when_nothing_changed(monkeypatch, capsys):
    out = _exit(capsys, _module(monkeypatch, True).exit_json, changed=False, changes=[])
    assert out["diff"] == {"before": {}, "after": {}}


@pytest.mark.parametrize("diff", [True, False])
def test_the_last_round_shows_every_rounds_changes_as_its_diff(tmp_path, monkeypatch, capsys, diff):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    params = {"name": "cp", "wait_round": 5, "wait_started": 1000.0}
    first = _exit(capsys, _module(monkeypatch, diff, **params).exit_json, changed=True, changes=[CHANGE], ready=False)
    assert first.get("diff") == (DIFF if diff else None)
    later = dict(CHANGE, key="ConfigMap/ns/b", name="b")
    last = _exit(capsys, _module(monkeypatch, diff, **params).exit_json, changed=True, changes=[later], ready=True)
    assert [c["key"] for c in last["changes"]] == ["ConfigMap/ns/a", "ConfigMap/ns/b"]
    if diff:
        assert sorted(last["diff"]["after"]) == ["ConfigMap/ns/a", "ConfigMap/ns/b"]
    else:
        assert "diff" not in last


def test_the_base_takes_no_diff_when_asked_parameter():
    """One behaviour for every module: the switch a module could pass is gone."""
    with pytest.raises(TypeError):
        KubegpuModule(argument_spec={}, needs_cluster=False, diff_when_asked=True)


# --- every module file -------------------------------------------------------------------------------------------

def _tree(name):
    with open(os.path.join(MODULES, name)) as f:
        return ast.parse(f.read(), name)


def _constant(node):
    if isinstance(node, ast.Constant):
        return node.value
    return None


def diff_handling(tree):
    """Every place a module sets, drops or decides `diff` itself, as (line, what)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("pop", "setdefault", "__setitem__", "__delitem__") and node.args and \
                    _constant(node.args[0]) == "diff":
                found.append((node.lineno, node.func.attr + '("diff")'))
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                # diff=module._diff only spares building what the base would drop; any other value decides.
                if kw.arg == "diff" and not (isinstance(kw.value, ast.Attribute) and kw.value.attr == "_diff"):
                    found.append((node.lineno, "diff=" + ast.dump(kw.value)))
                if kw.arg in ("diff_when_asked",):
                    found.append((node.lineno, kw.arg))
        if isinstance(node, ast.Subscript) and _constant(node.slice) == "diff" and \
                isinstance(node.ctx, (ast.Store, ast.Del)):
            found.append((node.lineno, '["diff"] ' + type(node.ctx).__name__.lower()))
        if isinstance(node, ast.Dict) and any(_constant(k) == "diff" for k in node.keys if k is not None):
            found.append((node.lineno, '{"diff": ...}'))
        if isinstance(node, ast.Attribute) and node.attr in ("_diff_when_asked", "diff_when_asked"):
            found.append((node.lineno, node.attr))
    return found


def module_class_calls(tree):
    """The names of the module classes a file calls: KubegpuModule, AnsibleModule, ..."""
    calls = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name and name.endswith("Module"):
                calls.add(name)
    return calls


def test_every_module_file_is_found():
    assert "gpu_node_pools.py" in MODULE_FILES and len(MODULE_FILES) >= 16


@pytest.mark.parametrize("name", MODULE_FILES)
def test_module_is_built_through_kubegpu_module(name):
    assert module_class_calls(_tree(name)) == {"KubegpuModule"}, name


@pytest.mark.parametrize("name", MODULE_FILES)
def test_module_never_sets_or_drops_diff_itself(name):
    assert diff_handling(_tree(name)) == [], name


@pytest.mark.parametrize("source, what", [
    ('result.pop("diff", None)', 'pop("diff")'),
    ('result["diff"] = {}', '["diff"] store'),
    ('del result["diff"]', '["diff"] del'),
    ('result = {"changes": [], "diff": {}}', '{"diff": ...}'),
    ('result.update(change_report(changes, diff=True))', "diff=Constant(value=True)"),
    ('KubegpuModule(argument_spec={}, diff_when_asked=True)', "diff_when_asked"),
])
def test_the_check_sees_each_way_of_setting_diff(source, what):
    assert [w for dummy, w in diff_handling(ast.parse(source))] == [what]


def test_the_check_lets_a_module_spare_a_diff_the_base_would_drop():
    assert diff_handling(ast.parse("result.update(change_report(changes, diff=module._diff))")) == []


def _return_doc(name):
    module = _tree(name)
    for node in module.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["RETURN"]:
            return yaml.safe_load(_constant(node.value)) or {}
    return {}


@pytest.mark.parametrize("name", MODULE_FILES)
def test_return_docs_say_diff_comes_only_in_diff_mode(name):
    doc = _return_doc(name)
    if "changes" in doc:  # every module that reports changes has a diff under --diff
        assert "diff" in doc, name
    if "diff" in doc:
        assert doc["diff"]["returned"] == RETURNED, name
        assert doc["diff"]["type"] == "dict"
