# -*- coding: utf-8 -*-
"""gpu_node_pools over several rounds of one wait: a node that finished between two rounds is reported done."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.result import settle_between_rounds

EARLIER = {"llm": {"gpu-0": {"state": "done", "detail": "ready", "seconds": 3.0},
                   "gpu-1": {"state": "waiting", "detail": "device plugin config set", "seconds": 4.0},
                   "gpu-2": {"state": "failed", "detail": "mig.config.state failed", "seconds": 2.0},
                   "gpu-3": {"state": "waiting", "detail": "started", "seconds": 1.0}}}


def test_a_node_in_flight_that_the_last_round_did_not_roll_finished_between_rounds():
    rollout = {"llm": {"gpu-3": {"state": "done", "detail": "ready", "seconds": 9.0}}}
    settle_between_rounds(EARLIER, rollout, {"gpu-0", "gpu-1", "gpu-2", "gpu-3"})
    assert rollout == {"llm": {
        "gpu-1": {"state": "done", "detail": "done between two rounds", "seconds": 4.0},
        "gpu-3": {"state": "done", "detail": "ready", "seconds": 9.0}}}


def test_a_node_gone_from_the_cluster_is_not_called_done():
    rollout = {}
    settle_between_rounds(EARLIER, rollout, {"gpu-0", "gpu-2", "gpu-3"})
    assert rollout == {"llm": {"gpu-3": {"state": "done", "detail": "done between two rounds", "seconds": 1.0}}}


def test_a_first_round_has_nothing_to_settle():
    rollout = {"llm": {"gpu-0": {"state": "done", "detail": "ready", "seconds": 1.0}}}
    settle_between_rounds(None, rollout, {"gpu-0"})
    assert rollout == {"llm": {"gpu-0": {"state": "done", "detail": "ready", "seconds": 1.0}}}
