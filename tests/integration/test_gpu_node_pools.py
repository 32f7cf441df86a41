"""gpu_node_pools against the mixed demo fleet: plan, converge, idempotence, failures, safety (issue: per-pool sharing)."""
from __future__ import annotations

import pytest

from conftest import gpu_allocatable, node_labels, wait_for
from demo_fleet import EXPECTED, POOLS
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import POOL_LABEL


def test_check_mode_shows_plan_and_writes_nothing(operator):
    dc = operator
    mark = dc.audit.mark()
    result = dc.module("gpu_node_pools", {"pools": POOLS}, check=True, diff=True)
    assert not result.get("failed"), result.get("msg")
    assert dc.audit.writes(mark) == []
    # --diff: the ConfigMaps, the ClusterPolicy pointers and each node's labels, before and after
    keys = list(result["diff"]["after"])
    assert any(t.startswith("ConfigMap/") and t.endswith("/kubegpu-mig-parted-config") for t in keys)
    assert any(t.startswith("ConfigMap/") and t.endswith("/kubegpu-device-plugin-config") for t in keys)
    assert any(t.startswith("ClusterPolicy/") for t in keys)
    node_diff = result["diff"]["after"]["Node/gpu-l40s-000"]["metadata"]["labels"]
    assert node_diff[POOL_LABEL] == "embed-l40s"
    # Without --diff the same changes are in `changes`, and no diff is carried (thousands of nodes make it MBs).
    plain = dc.module("gpu_node_pools", {"pools": POOLS}, check=True)
    assert "diff" not in plain and [c["key"] for c in plain["changes"]] == [c["key"] for c in result["changes"]]
    # The plan shows each node's change, not the roll-out's bookkeeping.
    assert set(plain["plan"]["pools"][0]["node_changes"]["gpu-h100-000"]) == {
        "labels", "before", "mig_change", "allocatable_before", "allocatable_after"}
    assert node_diff["nvidia.com/device-plugin.config"].startswith("kubegpu-embed-l40s-")
    pools = {p["name"]: p for p in result["plan"]["pools"]}
    assert pools["llm-h100"]["nodes"] == ["gpu-h100-000", "gpu-h100-001"]
    assert pools["batch-a100"]["nodes"] == ["gpu-a100-000"]
    assert pools["llm-h100"]["batches"] == [["gpu-h100-000"], ["gpu-h100-001"]]
    assert pools["embed-l40s"]["batches"] == [["gpu-l40s-000", "gpu-l40s-001"]]
    h100 = pools["llm-h100"]["node_changes"]["gpu-h100-000"]
    assert h100["mig_change"] is True
    assert h100["labels"]["nvidia.com/mig.config"] == pools["llm-h100"]["mig_config"]
    assert h100["allocatable_before"] == {"nvidia.com/gpu": 8}
    assert {k: v for k, v in h100["allocatable_after"].items() if v} == EXPECTED["gpu-h100-000"]


def test_converge_then_second_run_writes_nothing(operator):
    dc = operator
    result = dc.module("gpu_node_pools", {"pools": POOLS})
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    for name, expected in EXPECTED.items():
        assert gpu_allocatable(dc)[name] == expected, name
    assert node_labels(dc, "gpu-h100-000")["nvidia.com/mig.config.state"] == "success"
    assert node_labels(dc, "gpu-l40s-000")["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert node_labels(dc, "gpu-a100-000")["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert POOL_LABEL not in node_labels(dc, "gpu-h200-000")
    ms = dc.admin.resources.get(api_version="machine.openshift.io/v1beta1", kind="MachineSet").get(
        name="demo-gpu-a100-us-east-1a", namespace="openshift-machine-api")
    assert ms.spec.template.spec.metadata.labels[POOL_LABEL] == "batch-a100"
    mark = dc.audit.mark()
    again = dc.module("gpu_node_pools", {"pools": POOLS})
    assert again["changed"] is False
    assert dc.audit.writes(mark) == []


@pytest.mark.parametrize("pools, expected", [
    ([POOLS[0], dict(POOLS[0], name="other-h100")], ["both select", "llm-h100", "other-h100", "gpu-h100-000"]),
    ([dict(POOLS[0], sharing={"strategy": "mig", "mig": {"layout": {"3g.40gb": 2, "1g.10gb": 1}}})],
     ["llm-h100", "3g.40gb", "1g.10gb"]),
    ([dict(POOLS[0], sharing={"strategy": "mig", "mig": {"layout": {"1g.5gb": 7}}})],
     ["llm-h100", "1g.5gb", "1g.10gb"]),
    ([dict(POOLS[1], sharing={"strategy": "time-slicing", "time_slicing": {"replicas": 1}})],
     ["embed-l40s", "replicas", "1"]),
    ([dict(POOLS[2], sharing={"strategy": "mps", "mps": {"replicas": 4}, "mig": {"layout": "all-1g.10gb"}})],
     ["batch-a100", "mig"]),
])
def test_bad_input_fails_before_any_write(operator, pools, expected):
    dc = operator
    mark = dc.audit.mark()
    result = dc.module("gpu_node_pools", {"pools": pools})
    assert result.get("failed") is True
    for word in expected:
        assert word in result["msg"], (word, result["msg"])
    assert dc.audit.writes(mark) == []


def test_time_slicing_replicas_change_restarts_device_plugin(operator):
    dc = operator
    dc.module("gpu_node_pools", {"pools": POOLS})
    more = [POOLS[0], dict(POOLS[1], sharing={"strategy": "time-slicing", "time_slicing": {"replicas": 8}}), POOLS[2]]
    mark = dc.audit.mark()
    result = dc.module("gpu_node_pools", {"pools": more})
    assert not result.get("failed"), result.get("msg")
    restarts = [e for e in dc.audit.writes(mark) if e.resource == "daemonsets"]
    assert [e.name for e in restarts] == ["nvidia-device-plugin-daemonset"]
    wait_for(lambda: gpu_allocatable(dc)["gpu-l40s-000"] == {"nvidia.com/gpu": 32}, what="32 time-sliced GPUs")
    dc.module("gpu_node_pools", {"pools": POOLS})       # back to 4 replicas for the next tests
    wait_for(lambda: gpu_allocatable(dc)["gpu-l40s-000"] == {"nvidia.com/gpu": 16}, what="16 time-sliced GPUs")


def test_failing_node_halts_its_pool(operator):
    dc = operator
    dc.module("gpu_node_pools", {"pools": POOLS})
    dc.knobs({"mig-manager.fail_nodes": "gpu-h100-000"})
    changed = [dict(POOLS[0], sharing={"strategy": "mig", "mig": {"layout": "all-1g.10gb"}}), POOLS[1], POOLS[2]]
    result = dc.module("gpu_node_pools", {"pools": changed, "timeout": 60})
    assert result.get("failed") is True
    assert "gpu-h100-000" in result["msg"] and "failed" in result["msg"]
    assert "gpu-h100-001" in result["msg"]             # named as left untouched
    before = node_labels(dc, "gpu-h100-001")
    assert before["nvidia.com/mig.config"] != "all-1g.10gb"
    assert before["nvidia.com/mig.config"] == result["plan"]["pools"][0]["node_changes"]["gpu-h100-001"]["before"][
        "nvidia.com/mig.config"]
    dc.clear_knobs()
    result = dc.module("gpu_node_pools", {"pools": POOLS})      # the failed node recovers with a good layout
    assert not result.get("failed"), result.get("msg")


def test_mig_change_with_gpu_pods_is_refused_then_drained(operator):
    dc = operator
    dc.module("gpu_node_pools", {"pools": POOLS})
    pods = dc.admin.resources.get(api_version="v1", kind="Pod")
    pods.create(namespace="default", body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vllm-small"},
        "spec": {"nodeName": "gpu-h100-000", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "vllm", "image": "vllm/vllm-openai",
                                 "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}}]}})
    changed = [dict(POOLS[0], sharing={"strategy": "mig", "mig": {"layout": {"3g.40gb": 2}}}), POOLS[1], POOLS[2]]
    mark = dc.audit.mark()
    refused = dc.module("gpu_node_pools", {"pools": changed})
    assert refused.get("failed") is True
    assert "default/vllm-small" in refused["msg"] and "gpu-h100-000" in refused["msg"]
    assert dc.audit.writes(mark) == []
    drained = dc.module("gpu_node_pools", {"pools": changed, "drain_gpu_pods": True})
    assert not drained.get("failed"), drained.get("msg")
    assert pods.get(namespace="default", field_selector="metadata.name=vllm-small").items == []
    node = dc.admin.resources.get(api_version="v1", kind="Node").get(name="gpu-h100-000")
    assert not node.spec.unschedulable
    dc.module("gpu_node_pools", {"pools": POOLS})
