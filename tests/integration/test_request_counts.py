"""What a run costs in API requests does not grow with the fleet: the guard behind docs/performance.md.

The same four pools on the demo fleet (6 GPU nodes) and on 200 nodes: the plan in check mode and a converged
run (module and playbook) send the same requests on both - list calls, never one per node - at most
2 x pools + 20, and the no-op writes nothing. Counts from the API server's audit log (the admin user).
"""
from __future__ import annotations

import json
import time

from conftest import wait_for
from demo_fleet import install_operator

POOLS = [
    {"name": "llm-h100", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
     "max_unavailable": "100%", "sharing": {"strategy": "mig", "mig": {"layout": "all-1g.10gb"}}},
    {"name": "embed-l40s", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-L40S"}},
     "max_unavailable": "100%", "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}},
    {"name": "batch-a100", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
     "max_unavailable": "100%", "sharing": {"strategy": "mps", "mps": {"replicas": 4}}},
    {"name": "plain-h200", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H200"}},
     "max_unavailable": "100%", "sharing": {"strategy": "none"}},
]
BOUND = 2 * len(POOLS) + 20


def _requests(dc, run):
    """(result, requests, writes) of one run, from the audit log. Discovery (GET /api, /apis, /version: no
    resource) is left out: the client re-reads it when its cache expires, whatever the fleet."""
    mark = dc.audit.mark()
    result = run()
    events = [e for e in dc.audit.events(mark) if e.resource]
    return result, [str(e) for e in events], [str(e) for e in events if e.is_write]


def _costs(dc, fleet):
    """Converge the pools on `fleet` (fresh), then measure the plan, the module's no-op and the playbook's no-op."""
    dc.fleet(fleet, fresh=True)
    wait_for(lambda: len(dc.admin.resources.get(api_version="v1", kind="Node").get().items) > 0, what="nodes")
    args = {"pools": POOLS, "timeout": 600}
    converged = dc.module("gpu_node_pools", args)
    assert not converged.get("failed"), converged.get("msg")
    assert converged["changed"]
    plan, plan_requests, plan_writes = _requests(dc, lambda: dc.module("gpu_node_pools", args, check=True))
    noop, noop_requests, noop_writes = _requests(dc, lambda: dc.module("gpu_node_pools", args))
    t0 = time.monotonic()
    proc, play_requests, play_writes = _requests(dc, lambda: dc.playbook(
        "playbooks/node_pools.yml", "-e", json.dumps({"kubegpu_node_pools": POOLS})))
    seconds = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    calls = [t for play in out["plays"] for t in play["tasks"]
             if t["hosts"].get("localhost", {}).get("action", "").endswith("gpu_node_pools")
             and not t["hosts"]["localhost"].get("skipped")]
    return {"plan": (plan, plan_requests, plan_writes), "noop": (noop, noop_requests, noop_writes),
            "playbook": (calls, play_requests, play_writes), "seconds": seconds}


def test_no_op_and_plan_requests_do_not_grow_with_the_fleet(devcluster_session):
    dc = install_operator(devcluster_session)
    small = _costs(dc, "default")
    large = _costs(dc, "medium-200")   # later tests load the fleet they need (install_operator: the demo fleet)
    for costs in (small, large):
        _plan, plan_requests, plan_writes = costs["plan"]
        noop, noop_requests, noop_writes = costs["noop"]
        calls, play_requests, play_writes = costs["playbook"]
        assert not noop["changed"] and noop_writes == [], noop_writes
        assert plan_writes == [], plan_writes
        assert len(noop_requests) <= BOUND, noop_requests
        # One module call that reads the fleet once and enters no wait round (no RETRYING): a converged run.
        assert len(calls) == 1, [t["task"]["name"] for t in calls]
        assert calls[0]["hosts"]["localhost"].get("attempts", 1) == 1
        assert play_writes == [], play_writes
        assert sum(1 for r in play_requests if r.startswith("list nodes")) <= 2, play_requests
    # Independent of the fleet: 6 GPU nodes and 200 cost the same requests.
    assert len(large["noop"][1]) == len(small["noop"][1]), (small["noop"][1], large["noop"][1])
    assert len(large["plan"][1]) == len(small["plan"][1]), (small["plan"][1], large["plan"][1])
    assert len(large["playbook"][1]) == len(small["playbook"][1]), (small["playbook"][1], large["playbook"][1])
