"""The DCGM exporter simulator serves dcgm-exporter's Prometheus text for every GPU of the fleet, scraped over HTTP
and read with the Prometheus client's own text parser: the real metric names and labels, a pod's GPUs labelled with
the pod, values steered by knobs; and the alert rules' promtool input series (tests/unit/.../monitoring) use the
same metric names and label names, so the rule tests and the simulator describe the same exporter.
"""
from __future__ import annotations

import ast
import json
import re
import sys
import urllib.request
import uuid

from prometheus_client.parser import text_string_to_metric_families

from conftest import REPO
from kubegpu_devcluster.simulators.dcgm_exporter import URL_FILE
from kubegpu_devcluster.testing import wait_for

FIELDS = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP",
          "DCGM_FI_DEV_XID_ERRORS"}
GPU_LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"}
POD_LABELS = {"namespace", "pod", "container"}
PROMTOOL_TEST = REPO / "tests" / "unit" / "plugins" / "module_utils" / "planning" / "monitoring" / \
    "test_alert_rules_promtool.py"


def scrape(dc) -> dict:
    """{metric name: [(labels, value)]} as a Prometheus scrape reads the endpoint."""
    # The simulators start beside the cluster: the endpoint's URL is there once the server listens.
    path = dc.state / URL_FILE
    url = wait_for(lambda: path.exists() and path.read_text().strip(), what=f"{path}")
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family.name
        out[family.name] = [(s.labels, s.value) for s in family.samples]
    return out


def by_gpu(metrics, field):
    return {(labels["Hostname"], labels["gpu"]): (labels, value) for labels, value in metrics[field]}


def test_every_gpu_of_the_fleet_with_the_exporters_names_and_labels(dc):
    fleet = dc.fleet("default")
    metrics = scrape(dc)
    assert set(metrics) == FIELDS
    gpus = sum(g["count"] * g.get("gpus_per_node", 0) for g in fleet["node_groups"])
    for field in FIELDS:
        assert len(metrics[field]) == gpus, field
    nodes = {n.metadata.name: n.metadata.labels for n in dc.admin.resources.get(api_version="v1", kind="Node").get().items}
    for (host, gpu), (labels, value) in by_gpu(metrics, "DCGM_FI_DEV_GPU_TEMP").items():
        assert set(labels) == GPU_LABELS, labels            # no pod holds a GPU yet
        assert labels["device"] == f"nvidia{gpu}" and labels["UUID"].startswith("GPU-")
        assert labels["modelName"].startswith(("NVIDIA ", "Tesla ")) and host in nodes
    # Memory: used + free is the GPU's memory as GFD labels it.
    used, free = by_gpu(metrics, "DCGM_FI_DEV_FB_USED"), by_gpu(metrics, "DCGM_FI_DEV_FB_FREE")
    for key, (labels, value) in used.items():
        assert value + free[key][1] == int(nodes[key[0]]["nvidia.com/gpu.memory"])


def test_a_pods_gpus_carry_the_pod_and_follow_the_knobs(dc, tmp_path):
    dc.fleet("default")
    node = sorted(n.metadata.name for n in dc.admin.resources.get(api_version="v1", kind="Node").get().items
                  if (n.metadata.labels or {}).get("nvidia.com/gpu.count") == "8")[0]
    name = f"llm-{uuid.uuid4().hex[:6]}"
    pods = dc.admin.resources.get(api_version="v1", kind="Pod")
    pods.create(namespace="default", body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [
            {"name": "kserve-container", "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}})
    try:
        held = wait_for(lambda: [labels for labels, value in scrape(dc)["DCGM_FI_DEV_GPU_UTIL"]
                                 if labels.get("pod") == name] or None, what="the pod's GPUs in the metrics")
        assert sorted(h["gpu"] for h in held) == ["0", "1"] and all(h["Hostname"] == node for h in held)
        assert all(set(h) == GPU_LABELS | POD_LABELS and h["namespace"] == "default"
                   and h["container"] == "kserve-container" for h in held)
        util = by_gpu(scrape(dc), "DCGM_FI_DEV_GPU_UTIL")
        assert util[(node, "0")][1] == 85 and util[(node, "2")][1] == 0   # held busy, free idle

        # Knobs: an idle held GPU, a hot one with an XID error, memory almost full on every held GPU.
        dc.knobs({"dcgm-exporter.util": "5", f"dcgm-exporter.{node}.1.util": "60",
                  f"dcgm-exporter.{node}.1.temperature": "91", f"dcgm-exporter.{node}.1.xid": "79",
                  "dcgm-exporter.memory_used_percent": "95"})
        metrics = scrape(dc)
        util, temp = by_gpu(metrics, "DCGM_FI_DEV_GPU_UTIL"), by_gpu(metrics, "DCGM_FI_DEV_GPU_TEMP")
        xid, used = by_gpu(metrics, "DCGM_FI_DEV_XID_ERRORS"), by_gpu(metrics, "DCGM_FI_DEV_FB_USED")
        free = by_gpu(metrics, "DCGM_FI_DEV_FB_FREE")
        assert util[(node, "0")][1] == 5 and util[(node, "1")][1] == 60 and util[(node, "2")][1] == 0
        assert temp[(node, "1")][1] == 91 and xid[(node, "1")][1] == 79 and xid[(node, "0")][1] == 0
        memory = used[(node, "0")][1] + free[(node, "0")][1]
        assert used[(node, "0")][1] / memory > 0.9 and used[(node, "2")][1] == 0

        # The collection's alert rules on what was scraped, with promtool as in the rule tests: exactly the alerts
        # the knobs call for, on exactly the GPUs they were set on, with the labels the exporter serves.
        memory_used = 100.0 * used[(node, "0")][1] / memory
        expected = {"GPUAllocatedButIdle": [(util[(node, "0")][0], 5)],
                    "GPUXidError": [(xid[(node, "1")][0], 79)],
                    "GPUTemperatureHigh": [(temp[(node, "1")][0], 91)],
                    "GPUMemoryAlmostFull": [(used[(node, g)][0], memory_used) for g in ("0", "1")]}
        promtool_check(tmp_path, metrics, node, expected)
    finally:
        pods.delete(name=name, namespace="default", grace_period_seconds=0)
    wait_for(lambda: not [1 for labels, value in scrape(dc)["DCGM_FI_DEV_GPU_UTIL"] if labels.get("pod") == name],
             what="the pod's labels gone with it")


def promtool_check(folder, metrics, node, expected):
    """promtool test rules on the scraped series of one node (each held for 30 minutes), the collection's default
    rule set, and for each DCGM alert the alerts expected (labels, value); none other may fire."""
    sys.path[:0] = [str(REPO / ".cache" / "collections"), str(PROMTOOL_TEST.parent)]
    import promtool_runner
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.rules import rule_groups
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.settings import parse_settings

    series = [promtool_runner.series(field, labels, "%sx30" % (int(value) if float(value).is_integer() else value))
              for field, samples in sorted(metrics.items()) for labels, value in samples
              if labels["Hostname"] == node]
    for labels, value in (pair for pairs in expected.values() for pair in pairs):
        labels.pop("__name__", None)
    cases = [(alert, "on the simulator's series", {"input": series, "at": "20m", "alerts": expected.get(alert, [])})
             for alert in ("GPUMemoryAlmostFull", "GPUAllocatedButIdle", "GPUXidError", "GPUTemperatureHigh")]
    code, output = promtool_runner.promtool_test(folder, rule_groups(parse_settings({}), ()), cases)
    assert code == 0, output


def _promtool_gpu_labels() -> dict:
    """GPU and IDLE_GPU, the labels of the promtool test's DCGM input series, read from its source (no import: it
    needs the collection's import path)."""
    tree = ast.parse(PROMTOOL_TEST.read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "GPU":
            found["GPU"] = ast.literal_eval(node.value)
    return found


def test_the_alert_rules_are_tested_with_the_series_the_exporter_serves():
    """The promtool cases feed DCGM series with the exporter's metric names and labels: each metric name they use is
    one the simulator serves, and their labels are those of a GPU a pod holds, less pci_bus_id (not used)."""
    text = PROMTOOL_TEST.read_text()
    used = {field for field in FIELDS if f'"{field}"' in text}
    assert used == FIELDS
    labels = set(_promtool_gpu_labels()["GPU"])
    assert labels == (GPU_LABELS | POD_LABELS) - {"pci_bus_id"}, labels
    # The rule set and the dashboard name only DCGM metrics and labels the simulator serves.
    sys.path.insert(0, str(REPO / ".cache" / "collections"))
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.dashboard import dashboard_model
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.rules import rule_groups
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.settings import parse_settings

    settings = parse_settings({})
    # What Prometheus evaluates: the rules' expressions, the panels' queries and the node variable's query (the
    # runbook text may name other metrics for people to look at).
    dashboard = dashboard_model(settings)
    queries = [r["expr"] for g in rule_groups(settings, ()) for r in g["rules"]]
    queries += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [v["definition"] for v in dashboard["templating"]["list"] if v.get("definition")]
    assert set(re.findall(r"DCGM_FI_[A-Z_]+", " ".join(queries))) == FIELDS
    selected = set(re.findall(r"\b([A-Za-z_]+)(?:=~|!=|=)\"", " ".join(q for q in queries if "DCGM_FI_" in q)))
    assert "Hostname" in selected and selected <= GPU_LABELS | POD_LABELS, selected
    dcgm_rules = [r for g in rule_groups(settings, ()) for r in g["rules"] if "DCGM_FI_" in r["expr"]]
    shown = set(re.findall(r"\$labels\.([A-Za-z_]+)", json.dumps(dcgm_rules)))
    assert shown and shown <= GPU_LABELS | POD_LABELS, shown
