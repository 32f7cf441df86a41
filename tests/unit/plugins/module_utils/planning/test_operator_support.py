# -*- coding: utf-8 -*-
"""The GPU Operator's support windows: the one table, what each version is, and what the collection does with it."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

import pytest

from ansible_collections.kubegpu.platform.plugins.filter.operator_support import FilterModule
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator import support
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.olm import version_key
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.preflight.checks import inventory_warnings
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.preflight.inventory import check_inventory

operator_support = FilterModule().filters()["operator_support"]


def test_the_table_is_newest_first_and_each_line_has_a_state_a_date_and_a_source():
    lines = [entry.line for entry in support.SUPPORT]
    assert lines == sorted(lines, key=version_key, reverse=True)
    for entry in support.SUPPORT:
        assert entry.state in (support.SUPPORTED, support.DEPRECATED, support.END_OF_SUPPORT)
        assert re.match(r"^\d{4}-\d{2}-\d{2}$", entry.since), entry
        assert "https://" in entry.source, entry
        assert not entry.dra_driver or "https://" in entry.dra_source, entry


def test_the_table_says_what_nvidia_publishes():
    """shared/reference/upstream-changes-2026.md: 26.7 supported, 26.3 deprecated, 25.10 and older end of support;
    DRA driver 0.5.0 goes with 26.7.0 and 0.4.1 with 26.3.3."""
    table = dict((e.line, (e.state, e.dra_driver)) for e in support.SUPPORT)
    assert table["26.7"] == (support.SUPPORTED, ("0.5.0",))
    assert table["26.3"] == (support.DEPRECATED, ("0.4.1",))
    assert table["25.10"][0] == support.END_OF_SUPPORT


@pytest.mark.parametrize("version, line, state, listed", [
    ("v26.7.0", "26.7", support.SUPPORTED, True),
    ("26.7.1", "26.7", support.SUPPORTED, True),
    ("v26.7", "26.7", support.SUPPORTED, True),             # an OLM channel
    ("v26.3.3", "26.3", support.DEPRECATED, True),
    ("v25.10.1", "25.10", support.END_OF_SUPPORT, True),
    ("v25.3.4", "25.3", support.END_OF_SUPPORT, False),      # older than the oldest listed line
    ("v24.9.2", "24.9", support.END_OF_SUPPORT, False),
    ("v26.10.0", "26.10", support.SUPPORTED, False),         # newer than the table
    ("v26.5.0", "26.5", support.DEPRECATED, False),          # never released: judged with the older neighbour
])
def test_support_of_a_version(version, line, state, listed):
    found = support.support_of(version)
    assert (found.line, found.state, found.listed) == (line, state, listed)
    assert found.since and "platform-support" in found.source


@pytest.mark.parametrize("version", ["", None, "stable", "latest", "v26"])
def test_what_names_no_line_is_not_judged(version):
    assert support.support_of(version) is None
    assert support.judge(version) == (None, None)


def test_a_supported_version_passes_silently():
    assert support.judge("v26.7.0") == (None, None)


def test_a_deprecated_version_warns():
    refusal, warning = support.judge("v26.3.3")
    assert refusal is None
    assert "v26.3.3" in warning and "26.3.x is deprecated since 2026-08-21" in warning
    assert "platform-support.html" in warning and "26.7.x" in warning


@pytest.mark.parametrize("version", ["v25.10.1", "v25.3.4"])
def test_an_end_of_support_version_is_refused_without_the_acknowledgement(version):
    refusal, warning = support.judge(version)
    assert warning is None
    assert refusal.startswith("kubegpu_gpu_operator.version: %s: " % version)
    assert "end of support since 2026-08-21" in refusal and "platform-support.html" in refusal
    assert "kubegpu_gpu_operator.allow_end_of_support: true" in refusal
    assert "26.7.x (supported), 26.3.x (deprecated)" in refusal
    assert refusal.endswith("Nothing was written.")


def test_a_line_older_than_the_table_names_whose_date_it_is():
    refusal = support.judge("v25.3.4")[0]
    assert "line 25.3.x is end of support (older than 25.10.x, end of support since 2026-08-21: https://" in refusal
    assert "line 25.10.x is end of support since 2026-08-21 (source: https://" in support.judge("v25.10.1")[0]


def test_an_acknowledged_end_of_support_version_passes_with_a_warning():
    refusal, warning = support.judge("v25.3.4", allow_end_of_support=True)
    assert refusal is None
    assert "end of support" in warning and "allow_end_of_support" in warning


def test_the_channel_is_named_when_it_carries_the_line():
    refusal = support.judge("v25.3", where="kubegpu_gpu_operator.channel")[0]
    assert refusal.startswith("kubegpu_gpu_operator.channel: v25.3: ")


@pytest.mark.parametrize("operator, dra, warned", [
    ("v26.7.0", "0.5.0", False),
    ("v26.7.0", "0.4.1", True),
    ("v26.3.3", "0.4.1", False),
    ("v25.10.1", "0.4.1", False),     # no pairing published for the line: nothing to say
    ("v26.7.0", "", False),
])
def test_the_dra_driver_paired_with_the_operator_line(operator, dra, warned):
    note = support.dra_driver_note(operator, dra)
    assert (note is not None) is warned
    if warned:
        assert "0.5.0" in note and "26.7" in note and "https://" in note


# -- through the inventory (the preflight) and the role's filter


def test_the_inventory_refuses_an_end_of_support_version_and_takes_the_acknowledgement():
    errors = check_inventory({"kubegpu_gpu_operator": {"version": "v25.3.4"}}, ["gpu_operator"])
    [message] = errors["kubegpu_gpu_operator"]
    assert "v25.3.4" in message and "end of support" in message and "allow_end_of_support" in message
    accepted = {"kubegpu_gpu_operator": {"version": "v25.3.4", "allow_end_of_support": True}}
    assert check_inventory(accepted, ["gpu_operator"]) == {}
    assert any("end of support" in w for w in inventory_warnings(accepted, ["gpu_operator"]))


def test_the_inventory_judges_the_channel_when_the_version_is_empty():
    errors = check_inventory({"kubegpu_gpu_operator": {"version": "", "channel": "v25.3"}}, ["gpu_operator"])
    assert errors["kubegpu_gpu_operator"][0].startswith("kubegpu_gpu_operator.channel: v25.3: ")
    assert check_inventory({"kubegpu_gpu_operator": {"version": "", "channel": "stable"}}, ["gpu_operator"]) == {}


def test_the_acknowledgement_takes_ansible_booleans():
    variables = {"kubegpu_gpu_operator": {"version": "v25.3.4", "allow_end_of_support": "yes"}}
    assert check_inventory(variables, ["gpu_operator"]) == {}
    bad = {"kubegpu_gpu_operator": {"version": "v25.3.4", "allow_end_of_support": "perhaps"}}
    assert "kubegpu_gpu_operator.allow_end_of_support" in " ".join(check_inventory(bad, ["gpu_operator"])[
        "kubegpu_gpu_operator"])


def test_inventory_warnings():
    assert inventory_warnings({}, ["gpu_operator"]) == []       # the default, v26.7.0
    deprecated = {"kubegpu_gpu_operator": {"version": "v26.3.3"}}
    [warning] = inventory_warnings(deprecated, ["gpu_operator"])
    assert "deprecated" in warning
    assert inventory_warnings(deprecated, ["node_pools"]) == []
    # A DRA driver chart version the user chose that NVIDIA does not pair with the operator's line.
    mixed = {"kubegpu_dra": {"driver": {"chart_version": "0.4.1"}}}
    [note] = inventory_warnings(mixed, ["dra"])
    assert note.startswith("kubegpu_dra.driver.chart_version: ") and "0.5.0" in note
    assert inventory_warnings({"kubegpu_dra": {"driver": {}}}, ["dra"]) == []


def test_the_role_filter():
    refused = operator_support("v25.3.4")
    assert (refused["line"], refused["state"]) == ("25.3", support.END_OF_SUPPORT) and refused["refusal"]
    accepted = operator_support("v25.3.4", "true")
    assert accepted["refusal"] is None and accepted["warning"]
    current = operator_support("v26.7.0")
    assert (current["state"], current["dra_driver"], current["refusal"]) == (support.SUPPORTED, ["0.5.0"], None)
    assert operator_support("")["line"] is None
