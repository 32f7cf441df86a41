"""The capacity report (playbook report, role report) against GPU pods placed by the real kube-scheduler.

Three pools converged through gpu_node_pools on the default fleet: MIG (llm-h100), time-slicing (embed-l40s) and
whole GPUs (whole-h200); the A100 node stays in no pool. Pods ask for a MIG profile, time-sliced units and whole
GPUs; one asks for more 3g.40gb slices than any node has and stays Pending. The report's figures are checked
against what the test reads from the API itself, then its changes after a pod goes, a run with nothing changed
(no task changed, files left as they are), its ConfigMap store, and its HTML page in a real headless browser
(Debian's chromium: make browser).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import unescape as html_unescape

import pytest

from conftest import task_result, wait_for
from demo_fleet import install_operator
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import POOL_LABEL

NS = "report-test"
MIG3 = "nvidia.com/mig-3g.40gb"
GPU = "nvidia.com/gpu"
POOLS = [
    {"name": "llm-h100", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
     "sharing": {"strategy": "mig", "mig": {"layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}}},
    {"name": "embed-l40s", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-L40S"}},
     "max_unavailable": "100%", "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}},
    {"name": "whole-h200", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-H200"}},
     "sharing": {"strategy": "none"}},
]
# name: (resources, pool the pod asks for through its nodeSelector, or None)
PODS = {
    "llama-a": ({MIG3: 1}, None),
    "llama-b": ({MIG3: 1, "nvidia.com/mig-1g.10gb": 2}, None),
    "embed": ({GPU: 3}, "embed-l40s"),
    "train": ({GPU: 2}, "whole-h200"),
    "too-big": ({MIG3: 9}, None),           # each H100 node has 8 x 3g.40gb: never fits
}


def _pod(name, resources, pool):
    spec = {"terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "vllm/vllm-openai",
                            "resources": {"limits": dict((k, str(v)) for k, v in resources.items())}}]}
    if pool:
        spec["nodeSelector"] = {POOL_LABEL: pool}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def _unschedulable(pod):
    return any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in (pod.status.conditions or []))


@pytest.fixture(scope="module")
def placed(devcluster_session, tmp_path_factory):
    """The pools converged, the pods created and placed (or refused) by kube-scheduler."""
    dc = devcluster_session
    dc.fleet("default", fresh=True)
    install_operator(dc)
    result = dc.module("gpu_node_pools", {"pools": POOLS})
    assert not result.get("failed"), result.get("msg")
    namespaces = dc.admin.resources.get(api_version="v1", kind="Namespace")
    if not namespaces.get(field_selector="metadata.name=" + NS).items:
        namespaces.create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    accounts = dc.admin.resources.get(api_version="v1", kind="ServiceAccount")
    wait_for(lambda: accounts.get(namespace=NS, field_selector="metadata.name=default").items, timeout=60,
             what="the namespace's default ServiceAccount")
    pods = dc.admin.resources.get(api_version="v1", kind="Pod")
    for name, (resources, pool) in PODS.items():
        pods.create(namespace=NS, body=_pod(name, resources, pool))

    def settled():
        found = {p.metadata.name: p for p in pods.get(namespace=NS).items}
        return all(found[n].spec.nodeName for n in PODS if n != "too-big") and _unschedulable(found["too-big"])

    wait_for(settled, timeout=120, what="the scheduler to place the GPU pods and refuse too-big")
    yield dc, tmp_path_factory.mktemp("report")
    namespaces.delete(name=NS)


def _expected(dc):
    """Per pool label, from the API: allocatable nvidia.com/* of its nodes, and requests of the pods bound there."""
    nodes = dc.admin.resources.get(api_version="v1", kind="Node").get().items
    pool_of, allocatable, requested = {}, {}, {}
    for node in nodes:
        pool = (node.metadata.labels or {}).get(POOL_LABEL)
        if not pool:
            continue
        pool_of[node.metadata.name] = pool
        for key, value in (node.status.allocatable or {}).items():
            if key.startswith("nvidia.com/") and int(value):
                allocatable.setdefault(pool, {})[key] = allocatable.get(pool, {}).get(key, 0) + int(value)
    for pod in dc.admin.resources.get(api_version="v1", kind="Pod").get().items:
        if pod.spec.nodeName not in pool_of or pod.status.phase in ("Succeeded", "Failed"):
            continue
        for container in pod.spec.containers:
            for key, value in ((container.resources or {}).get("limits") or {}).items():
                if key.startswith("nvidia.com/"):
                    pool = pool_of[pod.spec.nodeName]
                    requested.setdefault(pool, {})[key] = requested.get(pool, {}).get(key, 0) + int(value)
    return allocatable, requested


def _run(dc, folder, *extra):
    proc = dc.playbook("playbooks/report.yml", "-e", json.dumps({"report_dir": str(folder)}), *extra,
                       env={"ANSIBLE_SHOW_CUSTOM_STATS": "true"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_report_numbers_changes_and_stores(placed):
    dc, folder = placed
    mark = dc.audit.mark()
    out = _run(dc, folder)
    assert dc.audit.writes(mark) == []                     # the default store is a local file: read-only
    report = json.loads((folder / "capacity.json").read_text())
    pools = {p["name"]: p for p in report["pools"]}
    allocatable, requested = _expected(dc)
    assert sorted(p for p in pools if pools[p]["pooled"]) == ["embed-l40s", "llm-h100", "whole-h200"]
    for name in allocatable:
        assert pools[name]["allocatable"] == allocatable[name], name
        assert pools[name]["requested"] == requested.get(name, {}), name
        assert pools[name]["idle"] == {k: v - requested.get(name, {}).get(k, 0)
                                       for k, v in allocatable[name].items()}, name
    assert requested["llm-h100"] == {MIG3: 2, "nvidia.com/mig-1g.10gb": 2}   # the test's own pods, no one else's
    assert pools["whole-h200"]["physical_gpus"] == 8 and pools["whole-h200"]["sharing"] == {"none": 1}
    assert pools["embed-l40s"]["layout"] == {GPU: 4} and pools["embed-l40s"]["sharing"] == {"time-slicing": 2}
    assert pools["llm-h100"]["layout"][MIG3] == 1
    assert pools["llm-h100"]["pending"] == [{"pod": NS + "/too-big", "resources": {MIG3: 9}}]
    assert pools["(no pool)"]["gpu_models"] == ["NVIDIA-A100-SXM4-80GB"]
    assert report["changes"] is None

    lines = task_result(out, "Print the report")["msg"]
    assert lines[0].startswith("Platform:")
    assert "  llm-h100: report-test/too-big wants nvidia.com/mig-3g.40gb=9" in lines
    row = [line.split() for line in lines if line.startswith("whole-h200")][0]
    assert row[5:] == [GPU, "1", "8", "2", "6", "0"]
    stats = out["global_custom_stats"]["kubegpu_capacity"]
    assert stats["whole-h200"] == "gpu 6/8 idle; 0 pending"
    assert "HTML page " + str(folder / "capacity.html") in task_result(out, "Say where the report is")["msg"]

    # A pod goes: the next report says what changed since this one.
    dc.admin.resources.get(api_version="v1", kind="Pod").delete(name="train", namespace=NS)
    wait_for(lambda: not dc.admin.resources.get(api_version="v1", kind="Pod").get(
        namespace=NS, field_selector="metadata.name=train").items, timeout=60, what="pod train gone")
    again = json.loads(json.dumps(_run(dc, folder)))
    report2 = json.loads((folder / "capacity.json").read_text())
    assert report2["previous_generated_at"] == report["generated_at"]
    assert {"pool": "whole-h200", "field": "requested", "resource": GPU, "before": 2, "after": 0} in report2["changes"]
    assert "  whole-h200: idle nvidia.com/gpu 6 -> 8 (+2)" in task_result(again, "Print the report")["msg"]

    # Nothing changed since: the files are left as they are and no task reports a change (an AWX drift job).
    files = {name: (folder / name).read_bytes() for name in ("capacity.json", "capacity.html")}
    same = _run(dc, folder)
    assert same["stats"]["localhost"]["changed"] == 0, same["stats"]
    for task in ("Write the report as JSON", "Write the HTML page"):
        assert task_result(same, task)["changed"] is False, task
    assert {name: (folder / name).read_bytes() for name in files} == files
    assert "figures unchanged since the report of " + report2["generated_at"] in \
        task_result(same, "Say where the report is")["msg"]

    # AWX: the previous report in a ConfigMap. Check mode writes nothing; a run writes that ConfigMap only,
    # and the next run (a fresh folder, as a fresh AWX container would have) compares with it.
    store = {"report_previous_store": "configmap", "report_previous_configmap": {"namespace": NS}}
    mark = dc.audit.mark()
    _run(dc, folder / "check", "-e", json.dumps(store), "--check")
    assert dc.audit.writes(mark) == []
    _run(dc, folder / "awx-1", "-e", json.dumps(dict(store, report_html_path="")))   # no page asked for
    assert sorted(p.name for p in (folder / "awx-1").iterdir()) == ["capacity.json"]
    writes = dc.audit.writes(mark)
    assert writes and all((w.resource, w.namespace, w.name) == ("configmaps", NS, "kubegpu-capacity-report")
                          for w in writes), [str(w) for w in writes]
    mark = dc.audit.mark()
    _run(dc, folder / "awx-2", "-e", json.dumps(store))
    awx = json.loads((folder / "awx-2" / "capacity.json").read_text())
    assert awx["changes"] == [] and awx["previous_generated_at"]
    assert dc.audit.writes(mark) == []                     # the same figures: the ConfigMap is left as it is


CHROMIUM = shutil.which("chromium")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium: make browser installs it")
def test_html_page_draws_a_chart_per_pool(placed):
    from PIL import Image  # pylint: disable=import-outside-toplevel

    dc, folder = placed
    if not (folder / "capacity.html").exists():          # run alone: the other test has not written it
        _run(dc, folder)
    html = folder / "capacity.html"
    report = json.loads((folder / "capacity.json").read_text())
    size = "--window-size=1400,1600"
    browser = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
               "--disable-extensions", "--user-data-dir=" + str(folder / "chromium"), size]
    # Nothing to fetch: the page must draw with the network out of reach.
    offline = ["--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]
    dom = subprocess.run(browser + offline + ["--dump-dom", html.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert 'data-charts-drawn="{0}"'.format(len(report["pools"])) in dom
    shot = folder / "capacity.png"
    subprocess.run(browser + offline + ["--screenshot=" + str(shot), html.as_uri()], capture_output=True,
                   timeout=120, check=True)
    image = Image.open(shot).convert("RGB")
    areas = [json.loads(html_unescape(value)) for value in re.findall(r'data-chart-area="([^"]*)"', dom)]
    assert len(areas) == len(report["pools"])
    colours = {"allocatable": (0x00, 0x72, 0xB2), "requested": (0xD5, 0x5E, 0x00), "idle": (0x00, 0x9E, 0x73)}
    for pool, area in zip(report["pools"], areas):
        assert area["bottom"] <= image.height, (pool["name"], area, image.size)
        plot = image.crop((area["left"], area["top"], area["right"], area["bottom"]))
        counts = dict((series, 0) for series in colours)
        for pixel in plot.getdata():
            for series, rgb in colours.items():
                if all(abs(a - b) <= 6 for a, b in zip(pixel, rgb)):
                    counts[series] += 1
        for series in colours:
            if any(pool[series].values()):
                assert counts[series] > 20, (pool["name"], series, counts)
            else:
                assert counts[series] == 0, (pool["name"], series, counts)
