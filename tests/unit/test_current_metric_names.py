# -*- coding: utf-8 -*-
"""Metric names that upstream renamed: the collection reads only the current ones.

vLLM removed `vllm:gpu_cache_usage_perc`; the KV-cache metric is `vllm:kv_cache_usage_perc` (vllm-project/vllm
PRs #18354, #29330; docs/monitoring.md, Metric names). A query on the old name returns nothing on current vLLM, so an
alert or a scaler built on it would never fire. Nothing reads the KV cache yet: this keeps the old name out of the
rules, dashboards, queries and docs the next stage writes. A line that names both documents the rename and passes.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# removed name -> its replacement
RENAMED = {"gpu_cache_usage_perc": "kv_cache_usage_perc"}
WHERE = ("plugins", "roles", "docs", "playbooks", "examples")
TEXT = (".py", ".yml", ".yaml", ".md", ".json", ".j2", ".txt")


def offending_lines(root, removed, replacement):
    """(path under root, line number, line) of every line under root naming `removed` without `replacement`."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in TEXT):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if removed in line and replacement not in line:
                found.append((str(path.relative_to(root)), number, line.strip()))
    return found


@pytest.mark.parametrize("removed, replacement", sorted(RENAMED.items()))
def test_no_removed_metric_name_is_read(removed, replacement):
    found = [(where + "/" + path, number, line) for where in WHERE if (REPO / where).is_dir()
             for path, number, line in offending_lines(REPO / where, removed, replacement)]
    assert found == [], "use %s (%s was removed upstream): %s" % (replacement, removed, found)


def test_the_check_finds_the_removed_name(tmp_path):
    (tmp_path / "rules.yml").write_text("expr: avg(vllm:gpu_cache_usage_perc) > 0.8\n"
                                        "# vllm:gpu_cache_usage_perc is now vllm:kv_cache_usage_perc\n")
    assert offending_lines(tmp_path, "gpu_cache_usage_perc", "kv_cache_usage_perc") == [
        ("rules.yml", 1, "expr: avg(vllm:gpu_cache_usage_perc) > 0.8")]
