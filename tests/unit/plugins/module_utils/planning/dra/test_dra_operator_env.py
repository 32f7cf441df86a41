# -*- coding: utf-8 -*-
"""The DRA entry of the GPU Operator's driver manager env: set beside others' entries, taken out, left alone."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import yaml
from kubegpu_devcluster.paths import crds_dir  # pylint: disable=import-error

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.operator_env import (
    EVICTION_ENV,
    eviction_env,
    manager_env,
)

OURS = {"name": EVICTION_ENV, "value": "nvidia.com/dra-kubelet-plugin"}
OTHER = {"name": "ENABLE_GPU_POD_EVICTION", "value": "true"}


def test_added_after_the_entries_others_set():
    assert eviction_env([OTHER], True) == [OTHER, OURS]
    assert eviction_env([], True) == [OURS]


def test_in_place_means_no_write():
    assert eviction_env([OTHER, OURS], True) is None
    assert eviction_env([OTHER], False) is None
    assert eviction_env([], False) is None


def test_a_different_value_is_replaced_in_its_place_when_wanted_and_left_alone_otherwise():
    theirs = {"name": EVICTION_ENV, "value": "example.com/other"}
    assert eviction_env([theirs, OTHER], True) == [OURS, OTHER]
    assert eviction_env([theirs, OTHER], False) is None


def test_taken_out_when_no_longer_wanted():
    assert eviction_env([OTHER, OURS], False) == [OTHER]
    assert eviction_env([OURS], False) == []


def test_manager_env_of_a_policy_without_one():
    assert manager_env(None) == []
    assert manager_env({"spec": {"driver": {"manager": {}}}}) == []
    assert manager_env({"spec": {"driver": {"manager": {"env": [OTHER]}}}}) == [OTHER]


def test_the_crd_keeps_env_a_list_of_name_value():
    """The ClusterPolicy CRD the local cluster loads: env is a plain array (atomic for server-side apply), so the
    module merges it read-modify-write; if upstream makes it a map list this test says so."""
    with open(str(crds_dir() / "nvidia" / "nvidia.com_clusterpolicies.yaml")) as f:
        schema = yaml.safe_load(f)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    env = schema["properties"]["spec"]["properties"]["driver"]["properties"]["manager"]["properties"]["env"]
    assert env["type"] == "array" and "x-kubernetes-list-type" not in env
    assert set(env["items"]["properties"]) == {"name", "value"}
