# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The doctor's result as lines a person reads in a job's output."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


def _value(value):
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def doctor_lines(result):
    """Lines: the verdict, then per finding its severity, pattern, object, evidence, what it means and the fix."""
    summary, checked = result["summary"], result.get("checked") or {}
    lines = ["Verdict: %s (%d finding(s): %d failing, %d degraded; examined %s GPU node(s), %s GPU pod(s))" % (
        summary["verdict"], summary["findings"], summary["severities"]["failing"], summary["severities"]["degraded"],
        checked.get("gpu_nodes", "?"), checked.get("gpu_pods", "?"))]
    counted = ["%s %d" % (p, n) for p, n in sorted(summary["counts"].items()) if n]
    if counted:
        lines.append("Per pattern: " + ", ".join(counted))
    for f in result.get("findings") or []:
        lines.append("[%s] %s: %s %s = %s" % (f["severity"], f["pattern"], f["object"], f["field"], _value(f["value"])))
        lines.append("    " + f["message"])
        lines.append("    fix: " + f["fix"])
    for note in result.get("notes") or []:
        lines.append("[not measured] " + note["message"])
        lines.append("    " + note["fix"])
    return lines
