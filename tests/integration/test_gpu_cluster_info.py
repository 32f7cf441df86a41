"""gpu_cluster_info against simulated OpenShift and Kubernetes fleets: right counts, no writes, flat cost."""
from __future__ import annotations

import json
import time

import pytest

from conftest import REPO, task_result
from kubegpu_devcluster.cluster import ADMIN

# Expected figures written out by hand from the fleet files and the GFD product names in
# shared/reference/gpu-node-labels.md: (nodes, physical GPUs, GPU memory MiB, MIG capable).
EXPECTED = {
    "default": {
        "platform": ("openshift", "4.20.3"),
        "nodes": 9,
        "models": {"NVIDIA-H100-80GB-HBM3": (2, 16, 81559, True), "NVIDIA-L40S": (2, 8, 46068, False),
                   "NVIDIA-A100-SXM4-80GB": (1, 8, 81920, True), "NVIDIA-H200": (1, 8, 143771, True)},
    },
    "kubernetes": {
        "platform": ("kubernetes", "v1.34.4"),
        "nodes": 12,
        "models": {"NVIDIA-A100-SXM4-40GB": (2, 16, 40960, True), "NVIDIA-A10G": (3, 3, 23028, False),
                   "Tesla-T4": (4, 16, 15360, False), "NVIDIA-B200": (1, 8, 183359, True)},
    },
}


def _models(result):
    return {m["product"]: (m["nodes"], m["gpus"], m["memory_mib"], m["mig_capable"])
            for m in result["gpu_nodes"]["models"]}


@pytest.mark.parametrize("fleet", ["default", "kubernetes"])
def test_counts_per_gpu_model(dc, fleet):
    dc.fleet(fleet, fresh=True)  # the fleet file's figures, not what an earlier test's pools or DRA left
    mark = dc.audit.mark()
    result = dc.module("gpu_cluster_info")
    assert not result.get("failed"), result.get("msg")
    expected = EXPECTED[fleet]
    assert (result["platform"]["name"], result["platform"]["version"]) == expected["platform"]
    assert result["platform"]["kubernetes_version"] == "v1.34.4"
    assert result["gpu_nodes"]["nodes"] == expected["nodes"]
    assert _models(result) == expected["models"]
    for model in result["gpu_nodes"]["models"]:
        assert model["allocatable"] == {"nvidia.com/gpu": model["gpus"]}
        assert model["sharing"] == {"none": model["nodes"]}
    assert result["dra"]["served_versions"][0] == "v1"
    assert result["changed"] is False
    assert dc.audit.writes(mark) == []


def test_operator_state_is_reported(dc):
    """After an OLM install of the GPU Operator and a ClusterPolicy, the module reports both."""
    dc.fleet("default")
    result = dc.module("gpu_cluster_info")
    op = result["gpu_operator"]
    if not op["installed"]:  # the simulator tests may not have run first: install through OLM here
        from kubegpu_devcluster.testing import approve_plan, csv_phase, install_plans, olm_subscribe, wait_for
        ns = olm_subscribe(dc, "v26.7")
        plan = wait_for(lambda: install_plans(dc, ns), what="an InstallPlan")[0]
        approve_plan(dc, ns, plan)
        wait_for(lambda: csv_phase(dc, ns, "gpu-operator-certified.v26.7.0") == "Succeeded", what="CSV")
        op = dc.module("gpu_cluster_info")["gpu_operator"]
    assert op["installed"] is True and op["method"] == "olm" and op["phase"] == "Succeeded"


def test_request_count_does_not_grow_with_nodes(dc):
    """The same number of requests for 9 nodes and for 1,000: lists, never a GET per node."""
    counts = {}
    for fleet in ("default", "large-1000"):
        t0 = time.monotonic()
        dc.fleet(fleet)
        load = time.monotonic() - t0
        mark = dc.audit.mark()
        t0 = time.monotonic()
        result = dc.module("gpu_cluster_info")
        took = time.monotonic() - t0
        events = dc.audit.events(mark, user=ADMIN[0])
        counts[fleet] = len(events)
        print(f"{fleet}: {result['gpu_nodes']['nodes']} nodes loaded in {load:.1f} s; gpu_cluster_info "
              f"{took:.1f} s, {len(events)} requests")
    assert result["gpu_nodes"]["gpu_nodes"] == 1000
    assert _models(result)["NVIDIA-H100-80GB-HBM3"] == (400, 3200, 81559, True)
    assert counts["large-1000"] == counts["default"]
    dc.fleet("default")


def test_report_playbook_prints_table(dc):
    dc.fleet("default")
    proc = dc.playbook("playbooks/report.yml")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    lines = task_result(out, "Print the report")["msg"]
    assert lines[0].startswith("Platform:     openshift 4.20.3")
    header = [line for line in lines if line.startswith("GPU model")][0]
    assert header.split()[:4] == ["GPU", "model", "Nodes", "GPUs"]
    h100 = [line for line in lines if line.startswith("NVIDIA-H100-80GB-HBM3")][0]
    assert h100.split()[1:3] == ["2", "16"]


def test_bad_credentials_fail_clearly(dc):
    """A user without rights gets one message that names the request, the status and what to do."""
    from kubegpu_devcluster.cluster import kubeconfig_path
    result = dc.module("gpu_cluster_info", env={"K8S_AUTH_KUBECONFIG": str(kubeconfig_path(dc.state, "nobody"))})
    assert result["failed"] is True
    assert "HTTP 403" in result["msg"] and "RBAC" in result["msg"]


def test_token_never_appears_in_output(dc):
    """An API token given as an option (or by AWX as K8S_AUTH_API_KEY) is never echoed, even when it fails."""
    import subprocess
    import yaml as pyyaml

    server = pyyaml.safe_load(dc.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    secret = "kubegpu-test-token-5e1f0c2a9b"
    args = '{"host": "%s", "api_key": "%s", "validate_certs": false}' % (server, secret)
    env = dict(dc.env())
    env.pop("K8S_AUTH_KUBECONFIG")
    proc = subprocess.run(["ansible", "localhost", "-m", "kubegpu.platform.gpu_cluster_info", "-a", args, "-vvv"],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode != 0                      # the token is not valid: 401
    assert "HTTP 401" in proc.stdout
    assert secret not in proc.stdout and secret not in proc.stderr
