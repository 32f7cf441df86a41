# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The capacity report (planning/report/capacity.py's document) as plain-text lines for a terminal or AWX job output."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.cluster_text import table


def _counts(counter):
    return ", ".join("{0}={1}".format(k, v) for k, v in sorted(counter.items()) if v) or "-"


def _units(resources):
    return ", ".join("{0}={1}".format(k, v) for k, v in sorted(resources.items()))


def _signed(number):
    return "{0:+d}".format(number)


def capacity_rows(pool):
    """Table rows of one pool: a row per GPU resource (its first row names the pool), or one row when it has none."""
    resources = sorted(set(pool["allocatable"]) | set(pool["requested"])) or ["-"]
    rows = []
    for i, resource in enumerate(resources):
        pending = len([w for w in pool["pending"] if resource in w["resources"]])
        head = [pool["name"], pool["nodes"], ", ".join(pool["gpu_models"]), pool["physical_gpus"],
                _counts(pool["sharing"])] if i == 0 else ["", "", "", "", ""]
        if resource == "-":
            rows.append(head + ["-", "-", 0, 0, 0, len(pool["pending"])])
            continue
        rows.append(head + [resource, pool["layout"].get(resource, "-"), pool["allocatable"].get(resource, 0),
                            pool["requested"].get(resource, 0), pool["idle"].get(resource, 0), pending])
    return rows


def team_row(row):
    """A team's row of the quota table: team, pool, resource, quota, used, borrowed."""
    return [row["team"], row["pool"], row["resource"], row["quota"], row["used"], row["borrowed"]]


def change_line(change):
    """One change in words: 'llm-h100: idle nvidia.com/gpu 16 -> 14 (-2)'."""
    if change["field"] == "pool":
        return "{0}: pool {1}".format(change["pool"], change["after"])
    what = change["field"].replace("_", " ") + (" " + change["resource"] if change["resource"] else "")
    delta = ""
    if isinstance(change["before"], int) and isinstance(change["after"], int):
        delta = " ({0})".format(_signed(change["after"] - change["before"]))
    return "{0}: {1} {2} -> {3}{4}".format(change["pool"], what, change["before"], change["after"], delta)


def capacity_lines(document):
    """Lines of text: the per-pool capacity table, the pending GPU pods, and the changes since the previous report."""
    lines = ["GPU capacity per node pool at {0} (units: what the device plugin advertises; requested: pods bound to "
             "the pool's nodes that have not finished)".format(document["generated_at"]), ""]
    rows = [row for pool in document["pools"] for row in capacity_rows(pool)]
    lines.extend(table(["Node pool", "Nodes", "GPU model", "GPUs", "Sharing", "Resource", "Per GPU", "Allocatable",
                        "Requested", "Idle", "Pending"],
                       rows or [["(no GPU nodes)", 0, "-", 0, "-", "-", "-", 0, 0, 0, 0]]))
    waiting = [(pool["name"], w) for pool in document["pools"] for w in pool["pending"]]
    if waiting or document["unplaceable"]:
        lines.append("")
        lines.append("Pending GPU pods:")
        lines.extend("  {0}: {1} wants {2}".format(name, w["pod"], _units(w["resources"])) for name, w in waiting)
        lines.extend("  no pool offers it: {0} wants {1}".format(w["pod"], _units(w["resources"]))
                     for w in document["unplaceable"])
    if document.get("notes"):
        lines.append("")
        lines.append("Not measured:")
        lines.extend("  " + note["message"] for note in document["notes"])
    if document.get("teams"):
        lines.append("")
        lines.append("GPU quota per team (tenancy stage; used: as Kueue or the quota admission counts it):")
        lines.extend(table(["Team", "Node pool", "Resource", "Quota", "Used", "Borrowed"],
                           [team_row(r) for r in document["teams"]]))
    lines.append("")
    changes = document.get("changes")
    if changes is None:
        lines.append("Changes: none to show, there is no previous report to compare with (this one is kept for "
                     "the next run).")
    elif not changes:
        lines.append("Changes since {0}: none.".format(document["previous_generated_at"]))
    else:
        lines.append("Changes since {0}:".format(document["previous_generated_at"]))
        lines.extend("  " + change_line(c) for c in changes)
    return lines
