# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the doctor reports: findings (pattern, severity, evidence, fix) and the verdict they add up to.

A finding is a plain dict so that it reads the same in the module result, AWX stats and the playbook output:
{pattern, severity, object ("Kind/namespace/name" or "Kind/name"), field, value, message, fix}.

Verdict: `failing` when any finding is failing (GPU work cannot run, or runs on broken hardware), else
`degraded` when any finding is degraded (work runs, but at risk or unobserved), else `healthy`.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

FAILING = "failing"
DEGRADED = "degraded"
HEALTHY = "healthy"

# Every pattern the doctor knows, with the severity of its findings (pending_for_gpu is failing only when no
# pool offers what the pod asks for: then it can never run).
PATTERNS = {
    "cuda_mismatch": FAILING,
    "oom_killed": DEGRADED,
    "pending_for_gpu": DEGRADED,
    "mig_failed": FAILING,
    "mig_pending_too_long": FAILING,
    "operands_paused": DEGRADED,
    "device_plugin_not_advertising": FAILING,
    "dcgm_exporter_missing": DEGRADED,
    "dcgm_not_scraped": DEGRADED,
    "time_slicing_oversubscribed": DEGRADED,
    "gpu_lost": FAILING,
}

SEVERITY_ORDER = (HEALTHY, DEGRADED, FAILING)


def obj_ref(obj, kind=None):
    """"Kind/namespace/name" (or "Kind/name" for a cluster-scoped object) of an API object."""
    meta = obj.get("metadata") or {}
    kind = kind or obj.get("kind") or "Object"
    if meta.get("namespace"):
        return "%s/%s/%s" % (kind, meta["namespace"], meta.get("name"))
    return "%s/%s" % (kind, meta.get("name"))


def finding(pattern, obj, field, value, message, fix, severity=None):
    """One finding; severity defaults to the pattern's."""
    return {"pattern": pattern, "severity": severity or PATTERNS[pattern], "object": obj, "field": field,
            "value": value, "message": message, "fix": fix}


def verdict(findings):
    """healthy, degraded or failing: the worst severity among the findings."""
    worst = HEALTHY
    for f in findings:
        if SEVERITY_ORDER.index(f["severity"]) > SEVERITY_ORDER.index(worst):
            worst = f["severity"]
    return worst


def summary(findings):
    """{verdict, findings (count), counts: {pattern: n} for every pattern, severities: {severity: n}}."""
    counts = dict((p, 0) for p in PATTERNS)
    severities = {FAILING: 0, DEGRADED: 0}
    for f in findings:
        counts[f["pattern"]] += 1
        severities[f["severity"]] += 1
    return {"verdict": verdict(findings), "findings": len(findings), "counts": counts, "severities": severities}


FAIL_ON = ("failing", "degraded", "never")


def should_fail(verdict_, fail_on):
    """Whether a run with this verdict fails under doctor_fail_on (failing | degraded | never)."""
    if fail_on == "never":
        return False
    if fail_on == "degraded":
        return verdict_ in (DEGRADED, FAILING)
    return verdict_ == FAILING
