# -*- coding: utf-8 -*-
"""One option vocabulary: every module's options as AnsibleModule receives them (each module's main() run until
AnsibleModule would parse its arguments), compared with the shared specs of cluster/args.py and with the doc
fragments its DOCUMENTATION names."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import importlib
import os

import pytest
import yaml

from ansible.module_utils import basic
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster import args
from ansible_collections.kubegpu.platform.plugins.doc_fragments.inputs import ModuleDocFragment as Inputs
from ansible_collections.kubegpu.platform.plugins.doc_fragments.wait import ModuleDocFragment as Wait

MODULES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "modules")
NAMES = sorted(f[:-3] for f in os.listdir(MODULES) if f.endswith(".py") and not f.startswith("_"))

# option -> (its shared spec, the doc fragment documenting it, the keys a module's own docs may not restate)
SHARED = {
    "wait": (args.WAIT_ARG_SPEC, "kubegpu.platform.wait.optional", ("type", "default")),
    "timeout": (args.ROUNDS_ARG_SPEC, "kubegpu.platform.wait", ("type",)),
    "wait_round": (args.ROUNDS_ARG_SPEC, "kubegpu.platform.wait", ("type", "default")),
    "wait_started": (args.ROUNDS_ARG_SPEC, "kubegpu.platform.wait", ("type", "default")),
    "pools": (args.POOLS_ARG_SPEC, "kubegpu.platform.inputs.pools", ("type", "elements", "default")),
    "claim_templates": (args.CLAIM_TEMPLATES_ARG_SPEC, "kubegpu.platform.inputs.claim_templates",
                        ("type", "elements", "default")),
    "platform": (args.PLATFORM_ARG_SPEC, "kubegpu.platform.inputs.platform", ("type", "choices", "default")),
    "operator_namespace": (args.OPERATOR_NAMESPACE_ARG_SPEC, "kubegpu.platform.inputs.operator_namespace",
                           ("type", "default")),
}
# Its options are rewritten on another branch in parallel (issue 42), which adopts the shared specs and fragments
# there: until then only its docs are let off, its values are compared like every module's.
DOCS_NOT_YET_SHARED = ()
# Names other modules once gave "plan only" (or that would give it again): `apply` is the one.
PLAN_ONLY_NAMES = ("enable", "plan_only", "dry_run", "plan")


class _Spec(Exception):
    pass


def _capture(self, argument_spec=None, **kwargs):
    raise _Spec(argument_spec)


def effective_spec(name):
    """The argument_spec the module hands AnsibleModule (KubegpuModule's merges included)."""
    module = importlib.import_module("ansible_collections.kubegpu.platform.plugins.modules." + name)
    original = basic.AnsibleModule.__init__
    basic.AnsibleModule.__init__ = _capture
    try:
        module.main()
    except _Spec as e:
        return e.args[0]
    finally:
        basic.AnsibleModule.__init__ = original
    raise AssertionError("%s: main() built no AnsibleModule" % name)


def documentation(name):
    module = importlib.import_module("ansible_collections.kubegpu.platform.plugins.modules." + name)
    return yaml.safe_load(module.DOCUMENTATION)


SPECS = dict((name, effective_spec(name)) for name in NAMES)


def test_every_module_is_read():
    assert "serving_platform" in SPECS and len(SPECS) >= 16


@pytest.mark.parametrize("name", NAMES)
def test_wait_is_one_bool_defaulting_to_true(name):
    spec = SPECS[name]
    if "wait" in spec:
        assert spec["wait"] == {"type": "bool", "default": True}, name


@pytest.mark.parametrize("name", NAMES)
def test_timeout_is_seconds_of_a_waiting_module(name):
    spec = SPECS[name]
    if "timeout" in spec:
        assert spec["timeout"]["type"] == "int", name
        assert "wait_round" in spec and "wait_started" in spec, name   # it waits through the one waiter
    if "wait" in spec:
        assert "timeout" in spec, name


@pytest.mark.parametrize("option", ["claim_templates", "platform", "operator_namespace"])
def test_a_shared_input_is_the_same_in_every_module(option):
    shared = SHARED[option][0][option]
    takers = [name for name in NAMES if option in SPECS[name]]
    assert takers, option
    for name in takers:
        assert SPECS[name][option] == shared, (name, option)


def test_pools_are_the_shared_list_or_gpu_node_pools_checked_shape():
    """gpu_node_pools validates each pool (options from pool_spec); every other module takes the list as it is."""
    for name in NAMES:
        spec = SPECS[name].get("pools")
        if spec is not None and "options" not in spec:
            assert spec == args.POOLS_ARG_SPEC["pools"], name


def test_operator_namespace_has_no_default():
    """Unset means the ClusterPolicy's status.namespace, in every module that takes it."""
    assert args.OPERATOR_NAMESPACE_ARG_SPEC["operator_namespace"].get("default") is None
    assert "operator_namespace" in SPECS["gpu_monitoring"]


@pytest.mark.parametrize("params, policy, expected", [
    ({"operator_namespace": "gpu"}, {"status": {"namespace": "other"}}, "gpu"),
    ({"operator_namespace": ""}, {"status": {"namespace": "nvidia-gpu-operator"}}, "nvidia-gpu-operator"),
    ({"operator_namespace": None}, {"status": {"namespace": "gpu-operator"}}, "gpu-operator"),
    ({"operator_namespace": None}, {"status": {}}, None),
    ({}, None, None),
])
def test_operator_namespace_rule(params, policy, expected):
    assert args.operator_namespace(params, policy) == expected


@pytest.mark.parametrize("name", NAMES)
def test_plan_only_has_one_name(name):
    spec = SPECS[name]
    for option in PLAN_ONLY_NAMES:
        assert option not in spec, (name, option)
    if "apply" in spec:
        own = dict((k, v) for k, v in spec["apply"].items() if k not in ("aliases", "deprecated_aliases"))
        assert own == args.APPLY_ARG_SPEC["apply"], name
        for alias in spec["apply"].get("aliases", []):
            # an old name is kept for users' playbooks, deprecated, never as a name of its own
            assert alias in [d["name"] for d in spec["apply"]["deprecated_aliases"]], (name, alias)


def test_the_modules_that_plan_only_take_apply():
    assert [name for name in NAMES if "apply" in SPECS[name]] == ["serving_platform", "tenancy_quotas"]


def _validated(spec, params):
    """What AnsibleModule would make of params (without its global warnings, which depend on other tests)."""
    return ArgumentSpecValidator(copy.deepcopy(spec)).validate(params)


def test_serving_platforms_old_enable_still_works_and_is_deprecated():
    result = _validated(SPECS["serving_platform"], {"enable": True})
    assert result.error_messages == [] and result.validated_parameters["apply"] is True
    assert [(d["version"], d["collection_name"]) for d in result._deprecations if "'enable'" in d["msg"]] == [
        ("2.0.0", "kubegpu.platform")]


def test_plan_only_is_the_default():
    for name in ("serving_platform", "tenancy_quotas"):
        assert _validated(SPECS[name], {}).validated_parameters["apply"] is False, name


@pytest.mark.parametrize("name", NAMES)
def test_docs_name_the_fragment_of_each_shared_option(name):
    doc = documentation(name)
    fragments = doc.get("extends_documentation_fragment") or []
    options = doc.get("options") or {}
    spec = SPECS[name]
    for option, (shared, fragment, restated) in SHARED.items():
        if option not in spec or spec[option] != shared[option] and option != "timeout":
            continue   # not taken, or not the shared one (gpu_node_pools' pools)
        if name in DOCS_NOT_YET_SHARED:
            continue
        assert fragment in fragments, (name, option)
        own = options.get(option) or {}
        assert [k for k in restated if k in own] == [], (name, option)
    if "timeout" in spec:   # a per-module default, documented in the module
        assert (options.get("timeout") or {}).get("default") == spec["timeout"].get("default"), name


def _fragment_options(text):
    return yaml.safe_load(text)["options"] or {}


def test_fragments_document_the_shared_specs():
    documented = {}
    for text in (Wait.DOCUMENTATION, Wait.OPTIONAL, Inputs.POOLS, Inputs.CLAIM_TEMPLATES, Inputs.PLATFORM,
                 Inputs.OPERATOR_NAMESPACE):
        documented.update(_fragment_options(text))
    for option, (shared, dummy, dummy2) in SHARED.items():
        doc, spec = documented[option], shared[option]
        assert doc["type"] == spec["type"], option
        assert doc.get("default") == spec.get("default"), option
        assert doc.get("choices") == spec.get("choices"), option
        assert doc.get("elements") == spec.get("elements"), option
