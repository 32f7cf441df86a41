# -*- coding: utf-8 -*-
"""Node pools as the user writes them: parse_pools accepts valid pools and names what is wrong in the rest."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import (
    MigSharing,
    Pool,
    PoolError,
    Sharing,
    parse_pools,
)

from pool_builders import L40S, by_label, raw_pool  # noqa: E402  pylint: disable=wrong-import-order


# ---------------------------------------------------------------------------------------------
# parse_pools: valid input
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    (raw_pool("llm-h100", by_label("node.kubernetes.io/instance-type", "p5.48xlarge"),
              {"strategy": "mig", "mig": {"layout": {"3g.40gb": 2}}}),
     Pool(name="llm-h100", strategy="mig",
          selector={"matchLabels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}, "matchExpressions": []},
          mig=MigSharing({"3g.40gb": 2}, None))),
    ({"name": "embed-l40s", "max_unavailable": "25%",
      "selector": {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": [L40S]}]},
      "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 8, "rename_by_default": True}}},
     Pool(name="embed-l40s", strategy="time-slicing", max_unavailable="25%",
          selector={"matchLabels": {},
                    "matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": [L40S]}]},
          time_slicing=Sharing(8, rename_by_default=True))),
    ({"name": "batch-a100", "machinesets": ["demo-gpu-a100-us-east-1a"], "max_unavailable": 2,
      "sharing": {"strategy": "mps", "mps": {"replicas": 4}}},
     Pool(name="batch-a100", strategy="mps", machinesets=("demo-gpu-a100-us-east-1a",), max_unavailable=2,
          mps=Sharing(4))),
    # MPS: fail_requests_greater_than_one left out keeps the device plugin's MPS default (true); false relaxes it.
    (raw_pool("mps-relaxed", sharing={"strategy": "mps", "mps": {"replicas": 4, "fail_requests_greater_than_one": False}}),
     Pool(name="mps-relaxed", strategy="mps", selector={"matchLabels": {"pool": "mps-relaxed"}, "matchExpressions": []},
          mps=Sharing(4, fail_requests_greater_than_one=False))),
    (raw_pool("mps-strict", sharing={"strategy": "mps", "mps": {"replicas": 4, "fail_requests_greater_than_one": True}}),
     Pool(name="mps-strict", strategy="mps", selector={"matchLabels": {"pool": "mps-strict"}, "matchExpressions": []},
          mps=Sharing(4, fail_requests_greater_than_one=True))),
    (raw_pool("mig-ts", sharing={"strategy": "mig", "mig": {"layout": "all-1g.10gb", "strategy": "single"},
                                 "time_slicing": {"replicas": 2, "fail_requests_greater_than_one": True}}),
     Pool(name="mig-ts", strategy="mig", selector={"matchLabels": {"pool": "mig-ts"}, "matchExpressions": []},
          mig=MigSharing("all-1g.10gb", "single"), time_slicing=Sharing(2, fail_requests_greater_than_one=True))),
    # A templated number arrives as text.
    (raw_pool("d", sharing={"strategy": "dra"}, max_unavailable="3"),
     Pool(name="d", strategy="dra", selector={"matchLabels": {"pool": "d"}, "matchExpressions": []}, max_unavailable=3)),
    (raw_pool("x" * 40, selector={"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}),
     Pool(name="x" * 40, strategy="none",
          selector={"matchLabels": {}, "matchExpressions": [{"key": "gpu", "operator": "Exists", "values": []}]})),
])
def test_parse_valid(raw, expected):
    assert parse_pools([raw]) == [expected]


def test_parse_none_is_no_pools():
    assert parse_pools(None) == []


def test_config_name():
    assert parse_pools([raw_pool("llm-h100")])[0].config_name == "kubegpu-llm-h100"


def test_parse_copies_the_layout():
    layout = [{"devices": [0], "profiles": {"7g.80gb": 1}}]
    pool = parse_pools([raw_pool(sharing={"strategy": "mig", "mig": {"layout": layout}})])[0]
    layout[0]["profiles"]["7g.80gb"] = 2
    assert pool.mig.layout == [{"devices": [0], "profiles": {"7g.80gb": 1}}]


# ---------------------------------------------------------------------------------------------
# parse_pools: invalid input; each message names pool, field and value
# ---------------------------------------------------------------------------------------------

TS = {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}

INVALID = [
    ("not-a-list", "node pools are 'not-a-list'; expected a list"),
    (["llm"], "pools[0] is 'llm'; expected a mapping with keys name, selector"),
    ([{"selector": by_label("a", "b"), "sharing": TS}], "pools[0] has no name; every pool needs one"),
    ([raw_pool("LLM_H100")], "pools[0]: name is 'LLM_H100'; expected lowercase letters"),
    ([raw_pool("x" * 41)], "pools[0]: name is '%s'; expected" % ("x" * 41)),
    ([raw_pool("-a")], "pools[0]: name is '-a'"),
    ([raw_pool("a"), raw_pool("b"), raw_pool("a")], "pool 'a' (pools[2]): name 'a' is already used by pools[0]"),
    ([raw_pool("a", nodes=3)],
     "pool 'a': unknown key nodes (valid: name, selector, machinesets, max_unavailable, sharing, driver)"),
    ([{"name": "a", "sharing": TS}], "pool 'a': selects nothing: it has neither selector nor machinesets"),
    ([raw_pool("a", selector={"matchLabels": {}})], "pool 'a': selector is empty; an empty selector takes every node"),
    ([raw_pool("a", selector={"matchLabel": {"x": "y"}})],
     "pool 'a': unknown key matchLabel in selector (valid: matchLabels, matchExpressions)"),
    ([raw_pool("a", selector="gpu=true")], "pool 'a': selector is 'gpu=true'; expected a LabelSelector mapping"),
    ([raw_pool("a", selector=by_label("nvidia.com/gpu.present", True))],
     "pool 'a': selector.matchLabels['nvidia.com/gpu.present'] is True; expected a label value: a string (quote true"),
    ([raw_pool("a", selector=by_label("bad key", "x"))], "pool 'a': selector.matchLabels['bad key']: label key 'bad key'"),
    ([raw_pool("a", selector={"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1"]}]})],
     "pool 'a': selector.matchExpressions[0].operator is 'Gt'; expected one of In, NotIn, Exists, DoesNotExist"),
    ([raw_pool("a", selector={"matchExpressions": [{"key": "k", "operator": "In"}]})],
     "pool 'a': selector.matchExpressions[0].values is None; operator In needs a non-empty list"),
    ([raw_pool("a", selector={"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["x"]}]})],
     "pool 'a': selector.matchExpressions[0].values is ['x']; operator Exists takes no values"),
    ([raw_pool("a", selector={"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["x y"]}]})],
     "pool 'a': selector.matchExpressions[0].values[0] is 'x y'; expected a label value"),
    ([raw_pool("a", selector={"matchExpressions": [{"key": "k", "op": "In"}]})],
     "pool 'a': unknown key op in selector.matchExpressions[0] (valid: key, operator, values)"),
    ([raw_pool("a", machinesets="ms-1")], "pool 'a': machinesets is 'ms-1'; expected a list of distinct MachineSet names"),
    ([raw_pool("a", machinesets=["ms", "ms"])], "pool 'a': machinesets is ['ms', 'ms']"),
    ([raw_pool("a", max_unavailable=0)], "pool 'a': max_unavailable is 0; expected a whole number >= 1 or a percentage"),
    ([raw_pool("a", max_unavailable="0%")], "pool 'a': max_unavailable is '0%'"),
    ([raw_pool("a", max_unavailable="150%")], "pool 'a': max_unavailable is '150%'"),
    ([raw_pool("a", max_unavailable=True)], "pool 'a': max_unavailable is True"),
    ([raw_pool("a", max_unavailable="half")], "pool 'a': max_unavailable is 'half'"),
    ([{"name": "a", "selector": by_label("a", "b")}], "pool 'a': sharing is missing; give sharing.strategy: one of none"),
    ([raw_pool("a", sharing={"strategy": "vgpu"})],
     "pool 'a': sharing.strategy is 'vgpu'; expected one of none, mig, time-slicing, mps, dra"),
    ([raw_pool("a", sharing={"strategy": "time-slicing", "timeslicing": {"replicas": 4}})],
     "pool 'a': unknown key timeslicing in sharing (valid: strategy, mig, time_slicing, mps)"),
    ([raw_pool("a", sharing={"strategy": "time-slicing", "mig": {"layout": "all-balanced"}, "time_slicing": {"replicas": 2}})],
     "pool 'a': sharing.mig is set but sharing.strategy is time-slicing; a MIG layout needs strategy mig"),
    ([raw_pool("a", sharing={"strategy": "mig", "mig": {"layout": "all-balanced"}, "mps": {"replicas": 2}})],
     "pool 'a': sharing.mps is set with strategy mig; MPS cannot share MIG devices"),
    ([raw_pool("a", sharing={"strategy": "mps", "mps": {"replicas": 2}, "time_slicing": {"replicas": 2}})],
     "pool 'a': sharing has both time_slicing and mps"),
    ([raw_pool("a", sharing={"strategy": "none", "time_slicing": {"replicas": 2}})],
     "pool 'a': sharing.time_slicing is set but sharing.strategy is none"),
    ([raw_pool("a", sharing={"strategy": "dra", "mps": {"replicas": 2}})],
     "pool 'a': sharing.mps is set but sharing.strategy is dra"),
    ([raw_pool("a", sharing={"strategy": "mig"})], "pool 'a': sharing.mig is missing; strategy mig needs it"),
    ([raw_pool("a", sharing={"strategy": "time-slicing"})],
     "pool 'a': sharing.time_slicing is missing; strategy time-slicing needs it"),
    ([raw_pool("a", sharing={"strategy": "mps"})], "pool 'a': sharing.mps is missing; strategy mps needs it"),
    ([raw_pool("a", sharing={"strategy": "mig", "mig": {"strategy": "mixed"}})],
     "pool 'a': sharing.mig.layout is missing"),
    ([raw_pool("a", sharing={"strategy": "mig", "mig": {"layout": 7}})], "pool 'a': sharing.mig.layout is 7; expected"),
    ([raw_pool("a", sharing={"strategy": "mig", "mig": {"layout": "all-balanced", "strategy": "none"}})],
     "pool 'a': sharing.mig.strategy is 'none'; expected mixed or single"),
    ([raw_pool("a", sharing={"strategy": "mig", "mig": {"layout": "all-balanced", "profile": "x"}})],
     "pool 'a': unknown key profile in sharing.mig (valid: layout, strategy)"),
    ([raw_pool("embed-l40s", sharing={"strategy": "time-slicing", "time_slicing": {"replicas": 1}})],
     "pool 'embed-l40s': sharing.time_slicing.replicas is 1; time-slicing needs replicas >= 2 "
     "(use strategy none for unshared GPUs)"),
    ([raw_pool("a", sharing={"strategy": "mps", "mps": {"replicas": 0}})],
     "pool 'a': sharing.mps.replicas is 0; MPS needs replicas >= 2 (use strategy none for unshared GPUs)"),
    ([raw_pool("a", sharing={"strategy": "mig", "mig": {"layout": "all-balanced"}, "time_slicing": {"replicas": 1}})],
     "pool 'a': sharing.time_slicing.replicas is 1; time-slicing needs replicas >= 2 "
     "(leave sharing.time_slicing out for unshared MIG devices)"),
    ([raw_pool("a", sharing={"strategy": "time-slicing", "time_slicing": {"replicas": "4"}})],
     "pool 'a': sharing.time_slicing.replicas is '4'; time-slicing needs a whole number of replicas >= 2"),
    ([raw_pool("a", sharing={"strategy": "time-slicing", "time_slicing": {"replicas": True}})],
     "pool 'a': sharing.time_slicing.replicas is True"),
    ([raw_pool("a", sharing={"strategy": "time-slicing", "time_slicing": {}})],
     "pool 'a': sharing.time_slicing.replicas is None"),
    ([raw_pool("a", sharing={"strategy": "time-slicing", "time_slicing": {"replicas": 2, "rename_by_default": "yes"}})],
     "pool 'a': sharing.time_slicing.rename_by_default is 'yes'; expected true or false"),
    ([raw_pool("a", sharing={"strategy": "mps", "mps": {"replicas": 2, "fail_requests_greater_than_one": "no"}})],
     "pool 'a': sharing.mps.fail_requests_greater_than_one is 'no'; expected true or false"),
    ([raw_pool("a", sharing={"strategy": "mps", "mps": {"replicas": 2, "share": True}})],
     "pool 'a': unknown key share in sharing.mps (valid: replicas, rename_by_default, fail_requests_greater_than_one)"),
    ([raw_pool("a", sharing="mig")], "pool 'a': sharing is 'mig'; expected a mapping"),
]


@pytest.mark.parametrize("raw, message", INVALID)
def test_parse_invalid(raw, message):
    with pytest.raises(PoolError) as err:
        parse_pools(raw)
    assert message in str(err.value)
