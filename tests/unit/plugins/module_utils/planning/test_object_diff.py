# -*- coding: utf-8 -*-
"""The one diff engine's result shape: keys, the differing part of an object, one diff per key."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.objects import (
    diff_of,
    difference_paths,
    object_key,
    subset,
)


def test_object_keys():
    assert object_key("ClusterPolicy", "cp") == "ClusterPolicy/cp"
    assert object_key("ConfigMap", "c", "ns") == "ConfigMap/ns/c"


def test_paths_keep_keys_with_dots_and_subset_nests_them():
    live = {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g", "x": "1"}}, "spec": {"a": [1]}}
    want = {"metadata": {"labels": {"nvidia.com/mig.config": "all-3g"}}, "spec": {"a": [2]}}
    paths = difference_paths(want, live)
    assert paths == [("metadata", "labels", "nvidia.com/mig.config"), ("spec", "a")]
    assert subset(live, paths) == {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g"}}, "spec": {"a": [1]}}


def test_diff_of_keys_by_object_and_merges_two_changes_of_one_object():
    changes = [
        {"key": "Node/a", "before": {"metadata": {"labels": {"m": "old"}}}, "after": {"metadata": {"labels": {"m": "new"}}}},
        {"key": "ConfigMap/ns/c", "before": None, "after": {"data": {"k": "v"}}},
        {"key": "Node/a", "before": {"metadata": {"labels": {"p": None}}}, "after": {"metadata": {"labels": {"p": "x"}}}},
    ]
    assert diff_of(changes) == {
        "before": {"Node/a": {"metadata": {"labels": {"m": "old", "p": None}}}, "ConfigMap/ns/c": None},
        "after": {"Node/a": {"metadata": {"labels": {"m": "new", "p": "x"}}}, "ConfigMap/ns/c": {"data": {"k": "v"}}},
    }
