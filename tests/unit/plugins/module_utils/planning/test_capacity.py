# -*- coding: utf-8 -*-
"""The capacity report's planning: figures per pool from one list of nodes and one of pods, what changed since the
previous report, and its renderings (text table, JSON, summary, HTML page)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.kubegpu.platform.plugins.filter.capacity_figures import FilterModule as FigureFilters
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.capacity import (
    NO_POOL,
    capacity_changes,
    pool_capacity,
    pool_summary,
    report_document,
    team_summary,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.capacity_html import capacity_html
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.capacity_text import capacity_lines

from pool_builders import H100, L40S, node

capacity_figures = FigureFilters().filters()["capacity_figures"]

POOL = "kubegpu.io/node-pool"
GPU = "nvidia.com/gpu"
MIG3 = "nvidia.com/mig-3g.40gb"
MIG1 = "nvidia.com/mig-1g.10gb"
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 5))


def pool_node(name, pool, product=H100, count=8, allocatable=None, labels=None):
    extra = dict({POOL: pool} if pool else {}, **(labels or {}))
    return node(name, product=product, count=count, labels=extra, allocatable=allocatable)


def gpu_pod(name, units, node_name=None, phase="Running", selector=None, namespace="llm"):
    spec = {"containers": [{"name": "c", "resources": {"limits": dict((k, str(v)) for k, v in units.items())}}]}
    if node_name:
        spec["nodeName"] = node_name
    if selector:
        spec["nodeSelector"] = selector
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec,
            "status": {"phase": phase if node_name else "Pending"}}


MIG_LABELS = {"nvidia.com/mig.config": "kubegpu-llm", "nvidia.com/mig.config.state": "success"}
NODES = [
    pool_node("h1", "llm", allocatable={MIG3: "8", MIG1: "16", GPU: "0", "cpu": "96"}, labels=MIG_LABELS),
    pool_node("h2", "llm", allocatable={MIG3: "8", MIG1: "16"}, labels=MIG_LABELS),
    pool_node("l1", "embed", product=L40S, count=4, allocatable={GPU: "16"},
              labels={"nvidia.com/gpu.sharing-strategy": "time-slicing"}),
    pool_node("w1", None, count=8),                             # a GPU node in no pool
    node("cpu-1", product=None),                                # not a GPU node: not reported
]
PODS = [
    gpu_pod("llama", {MIG3: 1}, "h1"),
    gpu_pod("llama-2", {MIG3: 1, MIG1: 2}, "h2"),
    gpu_pod("done", {MIG3: 4}, "h2", phase="Succeeded"),       # finished: holds nothing
    gpu_pod("embed", {GPU: 3}, "l1"),
    gpu_pod("whole", {GPU: 2}, "w1"),
    gpu_pod("cpu-only", {}, "cpu-1"),
    gpu_pod("big", {MIG3: 20}),                                 # pending: only the llm pool offers 3g.40gb
    gpu_pod("any-gpu", {GPU: 64}),                              # pending: embed and the unpooled node offer it
    gpu_pod("pinned", {GPU: 64}, selector={POOL: "embed"}),     # pending, and only embed matches its selector
    gpu_pod("b200", {"nvidia.com/mig-1g.23gb": 1}),            # pending: nobody offers it
]


def by_name(capacity):
    return dict((p["name"], p) for p in capacity["pools"])


def test_figures_per_pool():
    capacity = pool_capacity(NODES, PODS)
    assert [p["name"] for p in capacity["pools"]] == ["embed", "llm", NO_POOL]
    pools = by_name(capacity)
    llm = pools["llm"]
    assert (llm["nodes"], llm["gpu_models"], llm["physical_gpus"], llm["pooled"]) == (2, [H100], 16, True)
    assert llm["sharing"] == {"mig": 2} and llm["mig_states"] == {"kubegpu-llm=success": 2}
    assert llm["layout"] == {MIG1: 2, MIG3: 1}
    assert llm["allocatable"] == {MIG1: 32, MIG3: 16}
    assert llm["requested"] == {MIG1: 2, MIG3: 2}
    assert llm["idle"] == {MIG1: 30, MIG3: 14}
    assert llm["pending"] == [{"pod": "llm/big", "resources": {MIG3: 20}}]
    embed = pools["embed"]
    assert (embed["physical_gpus"], embed["sharing"], embed["layout"]) == (4, {"time-slicing": 1}, {GPU: 4})
    assert (embed["allocatable"], embed["requested"], embed["idle"]) == ({GPU: 16}, {GPU: 3}, {GPU: 13})
    assert [w["pod"] for w in embed["pending"]] == ["llm/any-gpu", "llm/pinned"]
    unpooled = pools[NO_POOL]
    assert unpooled["pooled"] is False
    assert (unpooled["allocatable"], unpooled["requested"], unpooled["idle"]) == ({GPU: 8}, {GPU: 2}, {GPU: 6})
    assert [w["pod"] for w in unpooled["pending"]] == ["llm/any-gpu"]
    assert capacity["unplaceable"] == [{"pod": "llm/b200", "resources": {"nvidia.com/mig-1g.23gb": 1}}]


def test_units_held_beyond_what_is_advertised_show_as_negative_idle():
    capacity = pool_capacity([pool_node("h1", "llm", allocatable={MIG3: "1"})],
                             [gpu_pod("a", {MIG3: 2, GPU: 1}, "h1")])
    assert capacity["pools"][0]["idle"] == {GPU: -1, MIG3: -1}


def test_empty_cluster():
    assert pool_capacity([], []) == {"pools": [], "unplaceable": []}


def test_pool_list_is_independent_of_input_order():
    assert pool_capacity(list(reversed(NODES)), list(reversed(PODS))) == pool_capacity(NODES, PODS)


# -- changes since the previous report

def document(nodes=None, pods=None, at="2026-11-30T10:00:00Z", previous=None):
    return report_document(pool_capacity(NODES if nodes is None else nodes, PODS if pods is None else pods), at,
                           cluster={"name": "openshift", "version": "4.20.3"}, previous=previous)


def test_first_report_has_nothing_to_compare():
    doc = document()
    assert doc["changes"] is None and doc["previous_generated_at"] is None
    assert capacity_changes({"schema": 0, "pools": []}, doc["pools"]) is None   # another schema: not compared


def test_same_cluster_twice_changes_nothing():
    first = json.loads(json.dumps(document()))            # as read back from the JSON file
    second = document(at="2026-11-30T11:00:00Z", previous=first)
    assert second["changes"] == [] and second["previous_generated_at"] == "2026-11-30T10:00:00Z"


def test_figures_leave_out_when_a_report_was_made_and_what_changed_before_it():
    first = json.loads(json.dumps(document(previous=json.loads(json.dumps(document(pods=PODS[:2]))))))
    second = document(at="2026-11-30T11:00:00Z", previous=first)
    assert first["changes"] and second["changes"] == []
    assert capacity_figures(second) == capacity_figures(first)
    assert set(capacity_figures(second)) == {"schema", "cluster", "pools", "unplaceable", "teams"}
    assert capacity_figures(document(pods=PODS[:3])) != capacity_figures(first)   # a pod fewer: a figure changed
    assert capacity_figures({}) != capacity_figures(first)                        # no report on disk yet
    with pytest.raises(AnsibleFilterError, match="expects a capacity report document"):
        capacity_figures("{}")


def test_changes_name_pool_field_resource_and_both_values():
    first = json.loads(json.dumps(document()))
    nodes = NODES[:3] + [pool_node("w1", "whole")]            # the unpooled node joins a new pool
    pods = PODS + [gpu_pod("llama-3", {MIG3: 2}, "h1")]
    changes = document(nodes=nodes, pods=pods, previous=first)["changes"]
    assert {"pool": "llm", "field": "requested", "resource": MIG3, "before": 2, "after": 4} in changes
    assert {"pool": "llm", "field": "idle", "resource": MIG3, "before": 14, "after": 12} in changes
    assert {"pool": "whole", "field": "pool", "resource": None, "before": None, "after": "added"} in changes
    assert {"pool": NO_POOL, "field": "pool", "resource": None, "before": "present", "after": "removed"} in changes
    assert not [c for c in changes if c["pool"] == "embed"]
    # A resource that appears counts from 0 before.
    grown = copy.deepcopy(first)
    del grown["pools"][1]["allocatable"][MIG1]
    del grown["pools"][1]["idle"][MIG1]
    again = document(previous=grown)["changes"]
    assert {"pool": "llm", "field": "allocatable", "resource": MIG1, "before": 0, "after": 32} in again


# -- renderings

def test_text_table_rows_per_pool_and_resource():
    lines = capacity_lines(document())
    header = [line for line in lines if line.startswith("Node pool")][0]
    assert header.split()[:4] == ["Node", "pool", "Nodes", "GPU"]
    start = lines.index(header) + 2
    rows = [line.split() for line in lines[start:start + 5]]
    assert rows[0] == ["embed", "1", L40S, "4", "time-slicing=1", GPU, "4", "16", "3", "13", "2"]
    assert rows[1] == ["llm", "2", H100, "16", "mig=2", MIG1, "2", "32", "2", "30", "0"]
    assert rows[2] == [MIG3, "1", "16", "2", "14", "1"]                 # the pool's columns left blank
    assert rows[3][:2] == ["(no", "pool)"]
    # Columns line up: every value of a column starts where its header does.
    column = header.index("Idle")
    assert lines[start][column:].split()[0] == "13"
    assert "  llm: llm/big wants nvidia.com/mig-3g.40gb=20" in lines
    assert "  no pool offers it: llm/b200 wants nvidia.com/mig-1g.23gb=1" in lines
    assert lines[-1].startswith("Changes: none to show")


def test_text_lists_changes():
    first = json.loads(json.dumps(document()))
    lines = capacity_lines(document(pods=PODS + [gpu_pod("x", {GPU: 1}, "l1")], previous=first))
    assert "Changes since 2026-11-30T10:00:00Z:" in lines
    assert "  embed: requested nvidia.com/gpu 3 -> 4 (+1)" in lines
    assert "  embed: idle nvidia.com/gpu 13 -> 12 (-1)" in lines
    assert capacity_lines(document(previous=first))[-1] == "Changes since 2026-11-30T10:00:00Z: none."


def test_no_gpu_nodes_still_renders():
    lines = capacity_lines(document(nodes=[], pods=[]))
    assert any(line.startswith("(no GPU nodes)") for line in lines)


def test_json_document_round_trips():
    doc = document()
    assert json.loads(json.dumps(doc)) == doc
    assert sorted(doc) == ["changes", "cluster", "generated_at", "pools", "previous_generated_at", "schema",
                           "teams", "unplaceable"]


def test_summary_one_line_per_pool():
    assert pool_summary(document()) == {
        "embed": "gpu 13/16 idle; 2 pending",
        "llm": "mig-1g.10gb 30/32 idle, mig-3g.40gb 14/16 idle; 1 pending",
        NO_POOL: "gpu 6/8 idle; 1 pending",
    }


TEAMS = [{"team": "research", "pool": "llm", "resource": MIG3, "quota": 8, "used": 2, "borrowed": 0},
         {"team": "chat", "pool": "embed", "resource": GPU, "quota": 4, "used": 6, "borrowed": 2}]


def test_teams_quota_use_and_borrowing_in_every_rendering():
    doc = report_document(pool_capacity(NODES, PODS), "2026-11-30T10:00:00Z", teams=TEAMS)
    assert doc["teams"] == TEAMS
    lines = capacity_lines(doc)
    header = lines.index([line for line in lines if line.startswith("Team ")][0])
    assert lines[header].split() == ["Team", "Node", "pool", "Resource", "Quota", "Used", "Borrowed"]
    assert [line.split() for line in lines[header + 2:header + 4]] == [
        ["research", "llm", MIG3, "8", "2", "0"], ["chat", "embed", GPU, "4", "6", "2"]]
    assert team_summary(doc) == {"research": "llm mig-3g.40gb 2/8 used", "chat": "embed gpu 6/4 used (borrowed 2)"}
    page = capacity_html(doc, "/* chart */")
    section = page[page.index("<section class=teams>"):]
    assert "<td>chat</td><td>embed</td><td>nvidia.com/gpu</td><td class=n>4</td><td class=n>6</td><td class=n>2</td>" \
        in section
    # No team: no section, no table.
    plain = document()
    assert "<section class=teams>" not in capacity_html(plain, "/* chart */")
    assert not [line for line in capacity_lines(plain) if line.startswith("Team ")] and team_summary(plain) == {}


def test_team_changes_since_the_previous_report():
    first = json.loads(json.dumps(report_document(pool_capacity(NODES, PODS), "2026-11-30T10:00:00Z", teams=TEAMS)))
    ops = {"team": "ops", "pool": "llm", "resource": MIG1, "quota": 4, "used": 0, "borrowed": 0}
    now = [dict(TEAMS[0], used=3), TEAMS[1], ops]
    changes = report_document(pool_capacity(NODES, PODS), "2026-11-30T11:00:00Z", previous=first, teams=now)["changes"]
    assert changes == [{"pool": "llm", "field": "team ops quota", "resource": MIG1, "before": 0, "after": 4},
                       {"pool": "llm", "field": "team research used", "resource": MIG3, "before": 2, "after": 3}]
    assert "  llm: team research used nvidia.com/mig-3g.40gb 2 -> 3 (+1)" in capacity_lines(
        report_document(pool_capacity(NODES, PODS), "2026-11-30T11:00:00Z", previous=first, teams=now))
    # A previous report without the team section (older collection): the teams are not all "new".
    older = dict(first)
    del older["teams"]
    assert report_document(pool_capacity(NODES, PODS), "t", previous=older, teams=now)["changes"] == []


def test_html_page_is_self_contained_and_escaped():
    doc = document()
    doc["pools"][0]["pending"].append({"pod": "ns/<script>alert(1)</script>", "resources": {GPU: 1}})
    page = capacity_html(doc, "/* chart */ var Chart = function () {}; var s = '</script>';", "MIT license")
    assert page.startswith("<!DOCTYPE html>")
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    assert "'<\\/script>'" in page                               # the library cannot end its own element
    assert page.count("<canvas") == 3 and 'id=chart-0' in page
    assert "http://" not in page and "https://" not in page      # nothing to fetch
    data = page.split("<script type=application/json id=kubegpu-report-data>", 1)[1].split("</script>", 1)[0]
    assert json.loads(data)["pools"][0]["pending"][-1]["pod"] == "ns/<script>alert(1)</script>"


# -- the Chart.js build the role ships is the one tools/refresh-chartjs.sh fetched and checked

@pytest.mark.parametrize("name", ["chart.umd.min.js", "LICENSE.md"])
def test_shipped_chartjs_matches_its_recorded_checksum(name):
    folder = os.path.join(REPO, "roles", "report", "files", "chartjs")
    recorded = dict(line.split()[::-1] for line in open(os.path.join(folder, "SHA256SUMS")).read().splitlines())
    with open(os.path.join(folder, name), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == recorded[name]
    version = open(os.path.join(folder, "VERSION")).read().strip()
    script = open(os.path.join(REPO, "tools", "refresh-chartjs.sh")).read()
    assert "VERSION=" + version in script
