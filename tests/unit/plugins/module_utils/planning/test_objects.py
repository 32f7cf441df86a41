# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.objects import differences, merged

LIVE = {"metadata": {"name": "p", "resourceVersion": "7", "labels": {"a": "1"}},
        "spec": {"cdi": {"enabled": True, "nriPluginEnabled": False}, "mig": {"strategy": "single"},
                 "validator": {"plugin": {"env": [{"name": "WITH_WORKLOAD", "value": "false"}]}}},
        "status": {"state": "ready"}}


@pytest.mark.parametrize("desired, expected", [
    ({"spec": {"cdi": {"enabled": True}}}, []),                       # a subset in place: nothing to do
    ({"spec": {"cdi": {"enabled": False}}}, ["spec.cdi.enabled"]),     # drift
    ({"spec": {"gfd": {"enabled": True}}}, ["spec.gfd"]),              # missing section
    ({"metadata": {"labels": {"a": "1", "b": "2"}}}, ["metadata.labels.b"]),
    ({"metadata": {"labels": {"gone": None}}}, []),                    # removing what is absent
    ({"spec": {"validator": {"plugin": {"env": [{"name": "WITH_WORKLOAD", "value": "true"}]}}}},
     ["spec.validator.plugin.env"]),                                   # lists compare whole
    ({"spec": {"mig": "single"}}, ["spec.mig"]),                       # a mapping replaced by a scalar
])
def test_differences(desired, expected):
    assert differences(desired, LIVE) == expected


def test_merged_overlays_and_removes():
    out = merged(LIVE, {"spec": {"cdi": {"enabled": False}, "mig": None}, "metadata": {"labels": {"b": "2"}}})
    assert out["spec"]["cdi"] == {"enabled": False, "nriPluginEnabled": False}
    assert "mig" not in out["spec"]
    assert out["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert LIVE["spec"]["cdi"]["enabled"] is True                    # input untouched
