"""Benchmark: the collection side by side with the per-node loop users write today, on one local cluster.

Starts its own local cluster (.cache/bench-cluster), installs the GPU Operator through the simulated OLM, then:

1. For the demo fleet and for 1,000 nodes (tools/devcluster/fleets/large-1000.yaml), with the simulated hardware
   fast: the node_pools playbook (four pools, one per sharing strategy) - plan in check mode, first converge, a
   no-op, a time-slicing replicas change, the first converge's label writes alone (on a fresh copy of the fleet:
   gpu_node_pools with label_nodes: false writes the configuration, then with wait: false the labels, the simulated
   hardware at its published pace there) - and the same changes made by tests/bench/loop_baseline.yml (k8s_info per
   pool, one kubernetes.core.k8s task per node) on a fresh copy of the fleet. On 1,000 nodes the loop patches a
   sample of each pool and is scaled linearly (it is: one task per node), said in the output. Prints a table of
   ratios: wall time, API requests and writes (the admin user's, from the API server's audit log).
2. The node_pools playbook no-op next to an empty playbook (what ansible-playbook costs with nothing to do).
3. A MIG roll-out of 1,000 H100 nodes with the simulated hardware at its published pace (mig-manager 35 s per
   8-GPU reconfiguration, device plugin 10 s re-registration; docs/performance.md), next to its physical limit:
   ceil(nodes / max_unavailable) x (reconfiguration + re-registration). Once per max_unavailable of
   BENCH_ROLLOUT_MAX_UNAVAILABLE (comma-separated, default 100,250: a tenth and a quarter of the fleet at a time),
   each on a fresh copy of the fleet.
4. 5,000 nodes: plan in check mode, converge and no-op without waiting for the operands' roll-out; peak
   memory of the module and of the API server.

Not a test: it asserts nothing and exits 0 (tests/integration/test_request_counts.py guards the request counts).
BENCH_SAMPLE (nodes per pool the loop patches on 1,000 nodes, default 10), BENCH_SKIP (comma-separated of demo, loop,
1000, rollout, 5000) and BENCH_ROLLOUT_MAX_UNAVAILABLE (e.g. 250) shorten it. BENCH_KEEP=1 leaves the cluster (and its
audit log) up at the end, to look into a run.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "devcluster"))
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / ".cache" / "collections"))

from kubegpu_devcluster import __main__ as devcluster  # noqa: E402
from kubegpu_devcluster import cluster  # noqa: E402
from kubegpu_devcluster.audit import AuditLog  # noqa: E402
from kubegpu_devcluster.cluster import ADMIN  # noqa: E402

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (  # noqa: E402
    DEVICE_PLUGIN_CONFIG_LABEL,
    MIG_CONFIG_LABEL,
    POOL_LABEL,
)

FLEETS = REPO / "tools" / "devcluster" / "fleets"
BENCH = REPO / "tests" / "bench"
SAMPLE = int(os.environ.get("BENCH_SAMPLE", "10"))
SKIP = set(filter(None, os.environ.get("BENCH_SKIP", "").split(",")))
# Published hardware times (docs/performance.md, shared/reference/gpu-operator.md "Timing").
MIG_SECONDS, REREGISTER_SECONDS = 35.0, 10.0
FAST = {"mig-manager.seconds": "1", "device-plugin.seconds": "0.5"}
PUBLISHED = {"mig-manager.seconds": str(MIG_SECONDS), "device-plugin.seconds": str(REREGISTER_SECONDS)}
PRODUCTS = {"llm-h100": "NVIDIA-H100-80GB-HBM3", "embed-l40s": "NVIDIA-L40S", "batch-a100": "NVIDIA-A100-SXM4-80GB",
            "plain-h200": "NVIDIA-H200"}


def max_unavailable_values(value: str) -> list:
    """BENCH_ROLLOUT_MAX_UNAVAILABLE's node counts; anything else stops the bench before its cluster starts."""
    values = [v.strip() for v in value.split(",") if v.strip()]
    if not values or not all(v.isdigit() and int(v) > 0 for v in values):
        sys.exit(f"BENCH_ROLLOUT_MAX_UNAVAILABLE={value!r}: valid are node counts above 0, comma-separated (e.g. 100,250)")
    return [int(v) for v in values]


ROLLOUT_MAX_UNAVAILABLE = max_unavailable_values(os.environ.get("BENCH_ROLLOUT_MAX_UNAVAILABLE", "100,250"))


def pools(replicas: int = 4) -> list:
    everything = "100%"
    return [
        {"name": "llm-h100", "selector": {"matchLabels": {"nvidia.com/gpu.product": PRODUCTS["llm-h100"]}},
         "max_unavailable": everything, "sharing": {"strategy": "mig", "mig": {"layout": "all-balanced"}}},
        {"name": "embed-l40s", "selector": {"matchLabels": {"nvidia.com/gpu.product": PRODUCTS["embed-l40s"]}},
         "max_unavailable": everything, "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": replicas}}},
        {"name": "batch-a100", "selector": {"matchLabels": {"nvidia.com/gpu.product": PRODUCTS["batch-a100"]}},
         "max_unavailable": everything, "sharing": {"strategy": "mps", "mps": {"replicas": 4}}},
        {"name": "plain-h200", "selector": {"matchLabels": {"nvidia.com/gpu.product": PRODUCTS["plain-h200"]}},
         "max_unavailable": everything, "sharing": {"strategy": "none"}},
    ]


class Peak:
    """Peak resident memory (VmHWM) of the processes whose command line holds `needle`, polled while running."""

    def __init__(self, needle: str):
        self.needle, self.kib, self._stop = needle, 0, threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while not self._stop.is_set():
            self.kib = max([self.kib] + [hwm for _pid, hwm in processes(self.needle)])
            self._stop.wait(0.1)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def processes(needle: str) -> list:
    """(pid, VmHWM in KiB) of every process whose command line contains `needle`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "cmdline").read_bytes().decode(errors="replace"):
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    found.append((int(entry.name), int(line.split()[1])))
        except OSError:
            continue
    return found


class Bench:
    def __init__(self, state: Path):
        from conftest import Devcluster
        self.state = state
        self.audit = AuditLog(state / "audit.log")
        self.dc = Devcluster(state)
        self.dc.fleet_file = FLEETS / "default.yaml"
        self.tmp = Path(tempfile.mkdtemp(prefix="kubegpu-bench-"))
        self.rows = {}   # (fleet, scenario) -> {"loop": measure, "collection": measure}
        # How long a DaemonSet roll-out may stand still before settle() gives up on it (5,000 nodes: longer, the
        # DaemonSet controller works through 5,000 pods per DaemonSet in bursts).
        self.stalled = 30.0

    def env(self) -> dict:
        # JSON on one line: the output is parsed for the tasks' times, not read, and the callback's indented dump of a
        # large roll-out's results took a measurable part of the time measured (docs/performance.md).
        return dict(self.dc.env(), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_JSON_INDENT="0")

    def measure(self, label: str, cmd: list, peak: str | None = None) -> dict:
        self.settle()
        mark = self.audit.mark()
        t0, started = time.monotonic(), time.time()
        if peak:
            with Peak(peak) as memory:
                proc = subprocess.run(cmd, cwd=REPO, env=self.env(), capture_output=True, text=True, check=False)
        else:
            memory = None
            proc = subprocess.run(cmd, cwd=REPO, env=self.env(), capture_output=True, text=True, check=False)
        took = time.monotonic() - t0
        events = self.audit.events(mark)
        writes = [e for e in events if e.is_write]
        out = {"seconds": took, "requests": len(events), "writes": len(writes), "rc": proc.returncode,
               "peak_mib": memory.kib / 1024 if memory else None, "mark": mark, "started": started,
               "ended": started + took}
        failed = proc.returncode != 0
        out["tasks"] = task_seconds(proc.stdout)
        print(f"  {label:<58} {took:8.1f} s {len(events):6d} requests {len(writes):6d} writes"
              + (f"  peak {out['peak_mib']:.0f} MiB" if memory else "")
              + (f"  FAILED (rc {proc.returncode}): {failure(proc)}" if failed else ""), flush=True)
        return out

    def playbook(self, label: str, playbook: str, variables: dict, *args: str, peak: str | None = None) -> dict:
        path = self.tmp / "vars.json"
        path.write_text(json.dumps(variables))
        return self.measure(label, ["ansible-playbook", playbook, "-e", f"@{path}", *args], peak=peak)

    def module(self, label: str, args: dict, check: bool = False) -> dict:
        cmd = ["ansible", "localhost", "-m", "kubegpu.platform.gpu_node_pools", "-a", json.dumps(args)]
        return self.measure(label, cmd + (["--check"] if check else []), peak="AnsiballZ_gpu_node_pools")

    def settle(self, timeout: float = 600.0) -> None:
        """Wait until every DaemonSet has rolled out on every node (kube-controller-manager and kwok carry on with
        the operands after a run returns: on 1,000 nodes that took the two cores for minutes), so that the next
        run is timed on a quiet cluster. Gives up when the roll-out has not moved for `stalled` seconds (a
        DaemonSet that never completes) or after `timeout`. Said in the output when it took more than a moment."""
        t0 = time.monotonic()
        api = self.dc.admin.resources.get(api_version="apps/v1", kind="DaemonSet")

        def behind():
            out = {}
            for ds in api.get().to_dict()["items"]:
                status = ds.get("status") or {}
                want = status.get("desiredNumberScheduled") or 0
                missing = (max(0, want - (status.get("updatedNumberScheduled") or 0))
                           + max(0, want - (status.get("numberReady") or 0))
                           + (status.get("observedGeneration") != ds["metadata"].get("generation")))
                if missing:
                    out[ds["metadata"]["name"]] = missing
            return out
        left = behind()
        best, moved = sum(left.values()), time.monotonic()
        while left and time.monotonic() - t0 < timeout and time.monotonic() - moved < self.stalled:
            time.sleep(2.0)
            left = behind()
            if sum(left.values()) < best:
                best, moved = sum(left.values()), time.monotonic()
        if time.monotonic() - t0 > 3:
            print(f"  (waited {time.monotonic() - t0:.0f} s for the operands' DaemonSets to roll out"
                  f"{'; still behind: ' + ', '.join(sorted(left)) if left else ''})", flush=True)

    def knobs(self, values: dict) -> None:
        self.dc.knobs(values)

    def fresh_fleet(self, fleet: Path) -> int:
        t0 = time.monotonic()
        self.dc.fleet(str(fleet), fresh=True)
        nodes = len(self.dc.admin.resources.get(api_version="v1", kind="Node").get().items)
        print(f"fleet {fleet.name}: {nodes} nodes loaded in {time.monotonic() - t0:.1f} s", flush=True)
        return nodes

    def pool_sizes(self) -> dict:
        nodes = self.dc.admin.resources.get(api_version="v1", kind="Node").get().items
        labels = [n.to_dict()["metadata"].get("labels") or {} for n in nodes]
        return dict((pool, sum(1 for n in labels if n.get("nvidia.com/gpu.product") == product))
                    for pool, product in PRODUCTS.items())

    def pool_labels(self) -> dict:
        """Per pool, the labels the collection set on its nodes (what the loop sets too)."""
        nodes = self.dc.admin.resources.get(api_version="v1", kind="Node").get(label_selector=POOL_LABEL).items
        found = {}
        for node in nodes:
            labels = node.to_dict()["metadata"].get("labels") or {}
            found.setdefault(labels[POOL_LABEL], dict(
                (k, labels[k]) for k in (POOL_LABEL, MIG_CONFIG_LABEL, DEVICE_PLUGIN_CONFIG_LABEL) if k in labels))
        return found


def task_seconds(stdout: str) -> list:
    """(seconds, task name) of each task of a playbook's JSON output, longest first ([] for other output)."""
    try:
        plays = json.loads(stdout)["plays"]
    except (ValueError, KeyError):
        return []
    found = []
    for play in plays:
        for task in play["tasks"]:
            duration = task["task"].get("duration") or {}
            if duration.get("start") and duration.get("end"):
                start, end = (time.mktime(time.strptime(duration[k][:19], "%Y-%m-%dT%H:%M:%S")) +
                              float("0" + duration[k][19:].rstrip("Z")) for k in ("start", "end"))
                found.append((end - start, task["task"]["name"]))
    return sorted(found, reverse=True)


def failure(proc) -> str:
    try:
        out = json.loads(proc.stdout)
        for play in out["plays"]:
            for task in play["tasks"]:
                result = task["hosts"].get("localhost", {})
                if result.get("failed"):
                    # The end of the message says why (its start lists the batch's nodes).
                    return f"{task['task']['name'][:80]}: ...{str(result.get('msg'))[-400:]}"
    except (ValueError, KeyError):
        pass
    return (proc.stdout[-300:] + proc.stderr[-300:]).replace("\n", " ")


def loop_run(bench: Bench, fleet: str, scenario: str, baseline_pools: list, sizes: dict, sample: int | None) -> dict:
    """The loop playbook on every node (sample None) or on `sample` nodes per pool, scaled to every node: the
    lists alone measured once (the fixed cost), then per node (sampled run - lists) / nodes patched."""
    variables = {"baseline_pools": baseline_pools}
    playbook = str(BENCH / "loop_baseline.yml")
    if sample is None:
        return bench.playbook(f"loop: {scenario}", playbook, variables)
    total = sum(sizes[p["labels"][POOL_LABEL]] for p in baseline_pools)
    patched = sum(min(sample, sizes[p["labels"][POOL_LABEL]]) for p in baseline_pools)
    fixed = bench.playbook(f"loop: {scenario}, lists only", playbook, dict(variables, baseline_sample=0))
    part = bench.playbook(f"loop: {scenario}, {patched} of {total} nodes", playbook,
                          dict(variables, baseline_sample=sample))
    scaled = dict(part)
    for key in ("seconds", "requests", "writes"):
        per_node = max(0.0, part[key] - fixed[key]) / patched
        scaled[key] = fixed[key] + per_node * total
    scaled["sampled"] = f"{patched} of {total} nodes, scaled linearly"
    print(f"  loop: {scenario}, scaled to {total} nodes {'':<19} {scaled['seconds']:8.1f} s "
          f"{scaled['requests']:6.0f} requests {scaled['writes']:6.0f} writes", flush=True)
    return scaled


def side_by_side(bench: Bench, fleet_file: Path, sample: int | None) -> None:
    fleet = fleet_file.stem
    nodes = bench.fresh_fleet(fleet_file)
    bench.knobs(FAST)
    sizes = bench.pool_sizes()
    node_pools = "playbooks/node_pools.yml"
    print(f"the node_pools playbook, {nodes} nodes, simulated hardware fast ({FAST}):", flush=True)

    def row(scenario):
        return bench.rows.setdefault((fleet, scenario), {})

    bench.playbook("collection: plan (--check)", node_pools, {"kubegpu_node_pools": pools()}, "--check")
    row("first converge")["collection"] = bench.playbook("collection: first converge", node_pools,
                                                         {"kubegpu_node_pools": pools(), "node_pools_timeout": 900})
    row("no-op")["collection"] = bench.playbook("collection: no-op", node_pools, {"kubegpu_node_pools": pools()})
    row("no-op")["empty"] = bench.playbook("empty playbook", str(BENCH / "empty.yml"), {})
    labels = bench.pool_labels()
    row("time-slicing replicas 4 -> 8")["collection"] = bench.playbook(
        "collection: time-slicing replicas 4 -> 8", node_pools,
        {"kubegpu_node_pools": pools(replicas=8), "node_pools_timeout": 900})
    # The labels alone, as the loop writes them, on a fresh copy of the fleet: as the role does, a first call writes
    # the configuration (ConfigMaps, device plugin restart, ClusterPolicy; label_nodes: false) and the simulated
    # operator rolls it out (settle), then gpu_node_pools with wait: false sends every node's label patch (a MIG
    # node's two steps in one) and does not wait for the simulated hardware - the playbook's first converge above
    # does, the loop never does. The loop writes no configuration either (its ConfigMap edit is left out).
    # The simulated hardware keeps its published pace here, as GPUs do: with the fast knobs, mig-manager's and the
    # device plugin's own 1,600 to 2,000 node writes (since they react from a watch) fell within the same seconds as
    # the 1,000 label patches, on the two cores the API server shares with them and their Python
    # (docs/performance.md, "Where the figures behind the code live").
    bench.fresh_fleet(fleet_file)
    bench.knobs(PUBLISHED)
    row("first converge, labels only")["configuration"] = bench.module(
        "gpu_node_pools: first converge, configuration only (label_nodes: false)",
        {"pools": pools(), "timeout": 900, "wait": False, "label_nodes": False})
    row("first converge, labels only")["collection"] = bench.module(
        "gpu_node_pools: first converge, the labels (wait: false, hardware 35 s + 10 s)",
        {"pools": pools(), "timeout": 900, "wait": False})
    bench.knobs(FAST)
    if "loop" in SKIP:
        return
    baseline = [{"selector": f"nvidia.com/gpu.product={PRODUCTS[p]}", "labels": labels[p]} for p in PRODUCTS
                if p in labels]
    print("the loop (tests/bench/loop_baseline.yml) on a fresh copy of the fleet"
          + (f", {sample} nodes per pool, scaled linearly to the pool:" if sample else ", every node:"), flush=True)
    bench.fresh_fleet(fleet_file)
    row("first converge")["loop"] = loop_run(bench, fleet, "first converge", baseline, sizes, sample)
    row("first converge, labels only")["loop"] = row("first converge")["loop"]
    # Once labelled, the loop finds a pool's nodes by the pool label (GFD rewrites gpu.product under MIG single
    # and time-slicing: NVIDIA-H100-80GB-HBM3-MIG-..., NVIDIA-L40S-SHARED).
    baseline = [dict(b, selector=f"{POOL_LABEL}={b['labels'][POOL_LABEL]}") for b in baseline]
    row("no-op")["loop"] = loop_run(bench, fleet, "no-op", baseline, sizes, sample)
    # The device-plugin ConfigMap edit the loop's users make too is left out (one task): only the node loop.
    row("time-slicing replicas 4 -> 8")["loop"] = loop_run(
        bench, fleet, "time-slicing replicas 4 -> 8",
        [b for b in baseline if b["labels"][POOL_LABEL] == "embed-l40s"], sizes, sample)


def rollout_times(audit: AuditLog, since: int, prefix: str = "gpu-h100-") -> dict:
    """A roll-out's times from the audit log, per node: the collection's label patches (its MIG step, then its
    device-plugin step), the simulated mig-manager's (`pending`, then `success` or `failed`) and the simulated device
    plugin's last allocatable write; the window from the first patch to the last allocatable write."""
    patches, mig, allocatable = {}, {}, {}
    for e in audit.events(since, user=None):
        if e.resource != "nodes" or not e.name.startswith(prefix) or e.verb != "patch":
            continue
        if e.user == ADMIN[0]:
            patches.setdefault(e.name, []).append(e.at)
        elif e.user.endswith(":mig-manager"):
            mig.setdefault(e.name, []).append(e.at)
        elif e.user.endswith(":device-plugin") and e.subresource == "status":
            allocatable[e.name] = e.at
    nodes = sorted((n for n in patches if n in allocatable), key=lambda n: patches[n][0])
    if not nodes:
        return {}
    per_node = sorted(allocatable[n] - patches[n][0] for n in nodes)
    return {"first": patches[nodes[0]][0], "last": max(allocatable[n] for n in nodes), "per_node": per_node,
            "nodes": [{"start": patches[n][0], "step": patches[n][1] if len(patches[n]) > 1 else None,
                       "verdict": mig[n][-1] if len(mig.get(n, [])) > 1 else None, "allocatable": allocatable[n]}
                      for n in nodes]}


def waves(nodes: list, window: int, mig_seconds: float, reregister_seconds: float) -> list:
    """Where a sliding-window roll-out loses time, per wave of `window` nodes in the order they started (nodes: the
    per-node times of rollout_times). Each line: the wave's first and last start and its end (last allocatable),
    seconds after the roll-out's first patch, and what its end is over the hardware's (wave + 1) x (MIG +
    re-registration); then the largest lags over the wave's nodes: mig-manager's verdict after the node's MIG step +
    mig_seconds, the collection's device-plugin step after the verdict, allocatable after the step +
    reregister_seconds; and the median refill (a node's start after the allocatable of the node whose place it took:
    the n-th node to finish makes room for the (window + n)-th to start)."""
    t0 = nodes[0]["start"]
    done = sorted(n["allocatable"] for n in nodes)
    lines = []
    for w in range(0, len(nodes), window):
        wave = nodes[w:w + window]
        lags = {"mig": [n["verdict"] - n["start"] - mig_seconds for n in wave if n["verdict"]],
                "step": [n["step"] - n["verdict"] for n in wave if n["step"] and n["verdict"]],
                "allocatable": [n["allocatable"] - n["step"] - reregister_seconds for n in wave if n["step"]]}
        refill = sorted(n["start"] - done[i - window] for i, n in enumerate(wave, w) if i >= window)
        end = max(n["allocatable"] for n in wave) - t0
        line = (f"wave {w // window}: starts {wave[0]['start'] - t0:.1f} .. {wave[-1]['start'] - t0:.1f} s, ends "
                f"{end:.1f} s (+{end - (w // window + 1) * (mig_seconds + reregister_seconds):.1f} s); largest lags: "
                + ", ".join(f"{k} {max(v):.2f} s" for k, v in lags.items() if v))
        if refill:
            line += f"; refill median {refill[len(refill) // 2]:.2f} s"
        lines.append(line)
    return lines


def rollout(bench: Bench, max_unavailable: int) -> None:
    fleet_file = BENCH / "fleets" / "rollout-1000.yaml"
    nodes = bench.fresh_fleet(fleet_file)
    # A round longer than a batch (35 s + 10 s): one module call per batch, a RETRYING line per batch.
    wait_round = 120
    bench.knobs(PUBLISHED)
    batches = math.ceil(nodes / max_unavailable)
    limit = batches * (MIG_SECONDS + REREGISTER_SECONDS)
    print(f"MIG roll-out (all-balanced) of {nodes} H100 nodes, max_unavailable {max_unavailable}, hardware at "
          f"{MIG_SECONDS:.0f} s reconfiguration + {REREGISTER_SECONDS:.0f} s re-registration, "
          f"node_pools_wait_round {wait_round}:", flush=True)
    pool = {"name": "llm-h100", "selector": {"matchLabels": {"nvidia.com/gpu.product": PRODUCTS["llm-h100"]}},
            "max_unavailable": max_unavailable, "sharing": {"strategy": "mig", "mig": {"layout": "all-balanced"}}}
    took = bench.playbook("collection: roll-out", "playbooks/node_pools.yml",
                          {"kubegpu_node_pools": [pool], "node_pools_timeout": 900, "node_pools_wait_round": wait_round})
    bench.rows[("rollout", max_unavailable)] = {"collection": took, "limit": limit, "batches": batches, "nodes": nodes,
                                                "max_unavailable": max_unavailable}
    for seconds, name in took["tasks"][:6]:
        print(f"    {seconds:7.1f} s  {name[:100]}", flush=True)
    print(f"  physical limit: ceil({nodes} / {max_unavailable}) x ({MIG_SECONDS:.0f} s + {REREGISTER_SECONDS:.0f} s) = "
          f"{limit:.0f} s; the roll-out took {took['seconds']:.1f} s = {took['seconds'] / limit:.3f} x the limit",
          flush=True)
    times = rollout_times(bench.audit, took["mark"])
    if times:
        per_node = times["per_node"]
        print(f"  from the audit log: the plan and the first module call until the first label patch "
              f"{times['first'] - took['started']:.1f} s; the roll-out's window, first patch to last allocatable, "
              f"{times['last'] - times['first']:.1f} s; the finish after it {took['ended'] - times['last']:.1f} s. "
              f"Per node, its first patch to its allocatable: min {per_node[0]:.1f}, median "
              f"{per_node[len(per_node) // 2]:.1f}, max {per_node[-1]:.1f} s ({MIG_SECONDS + REREGISTER_SECONDS:.0f} s of "
              f"simulated hardware; the rest is the device-plugin step's lag and the simulators' own)", flush=True)
        for line in waves(times["nodes"], max_unavailable, MIG_SECONDS, REREGISTER_SECONDS):
            print(f"    {line}", flush=True)
    bench.knobs(FAST)


def scale(bench: Bench) -> None:
    fleet_file = BENCH / "fleets" / "large-5000.yaml"
    nodes = bench.fresh_fleet(fleet_file)
    bench.knobs(FAST)
    bench.stalled = 120.0
    print(f"{nodes} nodes, simulated hardware fast:", flush=True)
    args = {"pools": pools(), "timeout": 1800}
    bench.rows[("5000", "plan")] = {"collection": bench.module("gpu_node_pools: plan (check mode)", args, check=True)}
    # wait: false - the labels and the configuration are written, the operands' roll-out is not waited for: the
    # device plugin's restart over 5,000 simulated pods is kube-controller-manager's and kwok's work on 2 cores
    # (minutes: docs/performance.md), not the collection's. The 1,000-node part and the roll-out measure waits.
    quick = dict(args, wait=False)
    bench.rows[("5000", "converge")] = {"collection": bench.module("gpu_node_pools: converge (wait: false)", quick)}
    bench.rows[("5000", "no-op")] = {"collection": bench.module("gpu_node_pools: no-op (wait: false)", quick)}
    print("  (no playbook no-op on 5,000 nodes: its module call waits for the operands' roll-out, see above)",
          flush=True)
    apiserver = [kib for pid, kib in processes(str(bench.state)) if program(pid) == "kube-apiserver"]
    etcd = [kib for pid, kib in processes(str(bench.state)) if program(pid) == "etcd"]
    bench.rows[("5000", "memory")] = {"apiserver_mib": max(apiserver or [0]) / 1024, "etcd_mib": max(etcd or [0]) / 1024}
    print(f"  peak memory (VmHWM) since the cluster started: kube-apiserver {max(apiserver or [0]) / 1024:.0f} MiB, "
          f"etcd {max(etcd or [0]) / 1024:.0f} MiB", flush=True)


def program(pid: int) -> str:
    """The name of the program a process runs (its argv[0] without the folder)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace").rsplit("/", 1)[-1]
    except OSError:
        return ""


def ratio(loop: float, ours: float) -> str:
    return f"{loop / ours:8.1f}x" if ours else "     n/a"


def table(bench: Bench) -> None:
    print("\nSide by side (loop / collection; the loop's figures on 1,000 nodes scaled from a sample):")
    print(f"  {'fleet':<11} {'scenario':<30} {'loop s':>8} {'ours s':>7} {'ratio':>9} {'loop req':>9} {'ours req':>8} "
          f"{'loop wr':>8} {'ours wr':>7}")
    for (fleet, scenario), row in bench.rows.items():
        if "loop" not in row or "collection" not in row:
            continue
        loop, ours = row["loop"], row["collection"]
        print(f"  {fleet:<11} {scenario:<30} {loop['seconds']:8.1f} {ours['seconds']:7.1f} "
              f"{ratio(loop['seconds'], ours['seconds'])} {loop['requests']:9.0f} {ours['requests']:8d} "
              f"{loop['writes']:8.0f} {ours['writes']:7d}")
    for (fleet, scenario), row in bench.rows.items():
        if "empty" in row:
            print(f"  {fleet}: node_pools playbook no-op {row['collection']['seconds']:.1f} s, empty playbook "
                  f"{row['empty']['seconds']:.1f} s: {row['collection']['seconds'] - row['empty']['seconds']:+.1f} s")
    for (fleet, max_unavailable), r in bench.rows.items():
        if fleet == "rollout":
            print(f"  roll-out of {r['nodes']} nodes, max_unavailable {max_unavailable}, in {r['batches']} batches: "
                  f"{r['collection']['seconds']:.1f} s, physical limit {r['limit']:.0f} s "
                  f"({(r['collection']['seconds'] / r['limit'] - 1) * 100:+.1f} %)")
    for scenario in ("plan", "converge", "no-op"):
        if ("5000", scenario) in bench.rows:
            m = bench.rows[("5000", scenario)]["collection"]
            print(f"  5,000 nodes, gpu_node_pools {scenario}: {m['seconds']:.1f} s, {m['requests']} requests, "
                  f"{m['writes']} writes, module peak {m['peak_mib']:.0f} MiB")


def main() -> None:
    state = REPO / ".cache" / "bench-cluster"
    os.environ["DEVCLUSTER_DIR"] = str(state)
    subprocess.run([str(REPO / "tools" / "devcluster" / "build.sh")], check=True, stdout=subprocess.DEVNULL)
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the start",
          flush=True)
    t0 = time.monotonic()
    devcluster.up(state, FLEETS / "default.yaml")
    print(f"cluster ready in {time.monotonic() - t0:.1f} s", flush=True)
    bench = Bench(state)
    from demo_fleet import install_operator
    try:
        install_operator(bench.dc)
        if "demo" not in SKIP:
            side_by_side(bench, FLEETS / "default.yaml", None)
        if "1000" not in SKIP:
            side_by_side(bench, FLEETS / "large-1000.yaml", SAMPLE)
        if "rollout" not in SKIP:
            for max_unavailable in ROLLOUT_MAX_UNAVAILABLE:
                rollout(bench, max_unavailable)
        if "5000" not in SKIP:
            scale(bench)
    finally:
        # What was measured, even when a part failed or the run was interrupted (Ctrl-C).
        table(bench)
        load = os.getloadavg()
        print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; total {time.monotonic() - t0:.0f} s")
        if os.environ.get("BENCH_KEEP") == "1":
            print(f"cluster left up (BENCH_KEEP=1): export KUBECONFIG={state / 'kubeconfig'}; audit log "
                  f"{state / 'audit.log'}; stop it with DEVCLUSTER_DIR={state} make cluster-down")
        else:
            cluster.down(state)


if __name__ == "__main__":
    main()
