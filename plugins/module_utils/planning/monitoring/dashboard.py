# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU dashboard as data: a Grafana dashboard JSON model (schemaVersion 39) of timeseries and stat panels over
the DCGM exporter's and kube-state-metrics' series, with the alert thresholds drawn as threshold lines.

The same model serves Grafana's dashboard sidecar (Kubernetes) and the OpenShift console's Observe > Dashboards,
which reads Grafana JSON from ConfigMaps and draws its timeseries/graph and stat panels. Serialised with sorted
keys so equal settings give the same text (a second run writes nothing). Pure.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.rules import metric_label, pool_resources
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import COLLECTION, MIG_STATE_LABEL

UID = "kubegpu-gpu"
TITLE = "GPUs (%s)" % COLLECTION
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
HOST = 'Hostname=~"$hostname"'


def _panel(panel_id, title, exprs, x, y, unit="none", kind="timeseries", threshold=None, w=12, h=8,
           legend="{{Hostname}} GPU {{gpu}}"):
    panel = {
        "id": panel_id, "type": kind, "title": title, "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend, "datasource": DATASOURCE}
                    for i, expr in enumerate(exprs)],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
    }
    if threshold is not None:
        panel["fieldConfig"]["defaults"]["thresholds"] = {
            "mode": "absolute", "steps": [{"color": "green", "value": None}, {"color": "red", "value": threshold}]}
        if kind == "timeseries":
            panel["fieldConfig"]["defaults"]["custom"] = {"thresholdsStyle": {"mode": "line"}}
    return panel


def dashboard_model(settings, pools=()):
    """The dashboard JSON model (a dict) for kubegpu_monitoring (parse_settings' result) and the pools."""
    a = settings["alerts"]
    resources = "|".join(sorted(metric_label(r) for r in pool_resources(pools)))
    state = "label_" + metric_label(MIG_STATE_LABEL)
    panels = [
        _panel(1, "GPU utilisation", ["DCGM_FI_DEV_GPU_UTIL{%s}" % HOST], 0, 0, "percent", threshold=None),
        _panel(2, "GPU memory used", ["100 * DCGM_FI_DEV_FB_USED{%s} / (DCGM_FI_DEV_FB_USED{%s} + DCGM_FI_DEV_FB_FREE{%s})"
                                      % (HOST, HOST, HOST)], 12, 0, "percent", threshold=a["gpu_memory_used_percent"]),
        _panel(3, "GPU temperature", ["DCGM_FI_DEV_GPU_TEMP{%s}" % HOST], 0, 8, "celsius",
               threshold=a["gpu_temperature_celsius"]),
        _panel(4, "GPUs held by pods below %d%% utilisation" % a["gpu_idle_percent"],
               ['DCGM_FI_DEV_GPU_UTIL{pod!="",%s} < %d' % (HOST, a["gpu_idle_percent"])], 12, 8, "percent",
               legend="{{namespace}}/{{pod}} on {{Hostname}} GPU {{gpu}}"),
        _panel(5, "XID errors (last code)", ["DCGM_FI_DEV_XID_ERRORS{%s}" % HOST], 0, 16, "none", threshold=1),
        _panel(6, "Pending pods asking for GPUs", [
            'count by (resource) ((sum by (namespace, pod, resource) (kube_pod_container_resource_requests'
            '{resource=~"%s"}) > 0) and on (namespace, pod) (kube_pod_status_phase{phase="Pending"} == 1))'
            % resources], 12, 16, "none", legend="{{resource}}"),
        _panel(7, "Nodes whose MIG configuration failed", ['count(kube_node_labels{%s="failed"}) or vector(0)' % state],
               0, 24, "none", kind="stat", threshold=1, w=6, h=4, legend="failed"),
        _panel(8, "GPU Operator reconciliation (1 = ready)", ["min(gpu_operator_reconciliation_status)"],
               6, 24, "none", kind="stat", w=6, h=4, legend="status"),
    ]
    return {
        "uid": UID, "title": TITLE, "tags": ["gpu", "nvidia", "dcgm", "kubegpu"], "editable": True,
        "schemaVersion": 39, "time": {"from": "now-6h", "to": "now"}, "refresh": "30s", "timezone": "",
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
            {"name": "hostname", "type": "query", "label": "Node", "datasource": DATASOURCE, "includeAll": True,
             "multi": True, "allValue": ".*", "refresh": 2,
             "query": {"query": "label_values(DCGM_FI_DEV_GPU_TEMP, Hostname)", "refId": "hostname"},
             "definition": "label_values(DCGM_FI_DEV_GPU_TEMP, Hostname)"},
        ]},
        "panels": panels,
    }


def dashboard_json(settings, pools=()):
    """The model as the text a ConfigMap carries (sorted keys, stable)."""
    return json.dumps(dashboard_model(settings, pools), sort_keys=True, indent=1)
