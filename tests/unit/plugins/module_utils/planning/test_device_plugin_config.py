# -*- coding: utf-8 -*-
"""The device plugin config of a pool: flags, sharing sections, renameByDefault placement, shared resources."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
import yaml

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.device_plugin_config import (
    device_plugin_document,
    render_device_plugin_config,
    shared_resources,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import (
    MigSharing,
    Pool,
    Sharing,
)

SELECTOR = {"matchLabels": {"pool": "x"}, "matchExpressions": []}


def pool(strategy, **fields):
    return Pool(name="p", strategy=strategy, selector=SELECTOR, **fields)


@pytest.mark.parametrize("the_pool, kwargs, expected", [
    (pool("none"), {}, "version: v1\nflags:\n  migStrategy: none\n"),
    (pool("time-slicing", time_slicing=Sharing(8)), {},
     "version: v1\n"
     "flags:\n"
     "  migStrategy: none\n"
     "sharing:\n"
     "  timeSlicing:\n"
     "    renameByDefault: false\n"
     "    failRequestsGreaterThanOne: false\n"
     "    resources:\n"
     "    - name: nvidia.com/gpu\n"
     "      replicas: 8\n"),
    (pool("time-slicing", time_slicing=Sharing(4, rename_by_default=True, fail_requests_greater_than_one=True)), {},
     "version: v1\n"
     "flags:\n"
     "  migStrategy: none\n"
     "sharing:\n"
     "  timeSlicing:\n"
     "    renameByDefault: true\n"
     "    failRequestsGreaterThanOne: true\n"
     "    resources:\n"
     "    - name: nvidia.com/gpu\n"
     "      replicas: 4\n"),
    (pool("mps", mps=Sharing(20, rename_by_default=True)), {},
     "version: v1\n"
     "flags:\n"
     "  migStrategy: none\n"
     "sharing:\n"
     "  mps:\n"
     "    renameByDefault: true\n"
     "    resources:\n"
     "    - name: nvidia.com/gpu\n"
     "      replicas: 20\n"),
    # MPS refuses requests for more than one replica by default (k8s-device-plugin api/config/v1/config.go);
    # only an explicit false is written, so true and unset render the text they always did.
    (pool("mps", mps=Sharing(4, fail_requests_greater_than_one=True)), {},
     "version: v1\nflags:\n  migStrategy: none\nsharing:\n  mps:\n    renameByDefault: false\n    resources:\n"
     "    - name: nvidia.com/gpu\n      replicas: 4\n"),
    (pool("mps", mps=Sharing(4)), {},
     "version: v1\nflags:\n  migStrategy: none\nsharing:\n  mps:\n    renameByDefault: false\n    resources:\n"
     "    - name: nvidia.com/gpu\n      replicas: 4\n"),
    (pool("mps", mps=Sharing(4, fail_requests_greater_than_one=False)), {},
     "version: v1\nflags:\n  migStrategy: none\nsharing:\n  mps:\n    renameByDefault: false\n"
     "    failRequestsGreaterThanOne: false\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"),
    # Time-slicing always writes the field; unset is the plugin's time-slicing default, false.
    (pool("time-slicing", time_slicing=Sharing(3, fail_requests_greater_than_one=None)), {},
     "version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n    renameByDefault: false\n"
     "    failRequestsGreaterThanOne: false\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 3\n"),
    (pool("mig", mig=MigSharing("all-balanced")), {"mig_strategy": "mixed"},
     "version: v1\nflags:\n  migStrategy: mixed\n"),
    # The pool's own strategy serves when none is passed.
    (pool("mig", mig=MigSharing("all-1g.10gb", "single")), {}, "version: v1\nflags:\n  migStrategy: single\n"),
    (pool("mig", mig=MigSharing("all-balanced"), time_slicing=Sharing(2)),
     {"mig_strategy": "mixed",
      "mig_resources": ["nvidia.com/mig-3g.40gb", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb"]},
     "version: v1\n"
     "flags:\n"
     "  migStrategy: mixed\n"
     "sharing:\n"
     "  timeSlicing:\n"
     "    renameByDefault: false\n"
     "    failRequestsGreaterThanOne: false\n"
     "    resources:\n"
     "    - name: nvidia.com/mig-1g.10gb\n"
     "      replicas: 2\n"
     "    - name: nvidia.com/mig-2g.20gb\n"
     "      replicas: 2\n"
     "    - name: nvidia.com/mig-3g.40gb\n"
     "      replicas: 2\n"),
    (pool("mig", mig=MigSharing("all-1g.10gb"), time_slicing=Sharing(3, rename_by_default=True)),
     {"mig_strategy": "single", "mig_resources": ["nvidia.com/gpu"]},
     "version: v1\n"
     "flags:\n"
     "  migStrategy: single\n"
     "sharing:\n"
     "  timeSlicing:\n"
     "    renameByDefault: true\n"
     "    failRequestsGreaterThanOne: false\n"
     "    resources:\n"
     "    - name: nvidia.com/gpu\n"
     "      replicas: 3\n"),
])
def test_render(the_pool, kwargs, expected):
    assert render_device_plugin_config(the_pool, **kwargs) == expected


@pytest.mark.parametrize("the_pool, section", [
    (pool("time-slicing", time_slicing=Sharing(4, rename_by_default=True)), "timeSlicing"),
    (pool("mps", mps=Sharing(4, rename_by_default=True)), "mps"),
    (pool("mig", mig=MigSharing("all-1g.10gb", "mixed"), time_slicing=Sharing(4, rename_by_default=True)), "timeSlicing"),
])
def test_rename_by_default_sits_under_sharing_never_flags(the_pool, section):
    # k8s-device-plugin#1433: under flags the plugin ignores it without a word.
    document = yaml.safe_load(render_device_plugin_config(the_pool, mig_resources=["nvidia.com/mig-1g.10gb"]))
    assert "renameByDefault" not in document["flags"]
    assert document["sharing"][section]["renameByDefault"] is True
    assert list(document["sharing"]) == [section]


@pytest.mark.parametrize("the_pool, kwargs, message", [
    (pool("dra"), {}, "pool 'p' has strategy dra"),
    (pool("mig", mig=MigSharing("all-balanced")), {}, "pool 'p': its MIG strategy follows from its layout"),
    (pool("mig", mig=MigSharing("all-balanced"), time_slicing=Sharing(2)), {"mig_strategy": "mixed"},
     "pool 'p' time-slices MIG devices: pass the MIG resource names"),
])
def test_caller_mistakes(the_pool, kwargs, message):
    with pytest.raises(ValueError) as err:
        device_plugin_document(the_pool, **kwargs)
    assert message in str(err.value)


@pytest.mark.parametrize("resources, sharing, expected", [
    ({"nvidia.com/gpu": 4}, None, {"nvidia.com/gpu": 4}),
    # Reference: 4 x T4 with replicas 4 -> capacity 16; renameByDefault -> gpu 0 and gpu.shared 16.
    ({"nvidia.com/gpu": 4}, Sharing(4), {"nvidia.com/gpu": 16}),
    ({"nvidia.com/gpu": 4}, Sharing(4, rename_by_default=True), {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 16}),
    ({"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-3g.40gb": 8}, Sharing(2),
     {"nvidia.com/mig-1g.10gb": 32, "nvidia.com/mig-3g.40gb": 16}),
    ({"nvidia.com/mig-1g.10gb": 7}, Sharing(3, rename_by_default=True),
     {"nvidia.com/mig-1g.10gb": 0, "nvidia.com/mig-1g.10gb.shared": 21}),
])
def test_shared_resources(resources, sharing, expected):
    assert shared_resources(resources, sharing) == expected
