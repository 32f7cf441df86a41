"""The DCGM exporter's metrics for every simulated GPU: what the nvidia-dcgm-exporter pods would serve on :9400/metrics.

The GPU Operator simulator keeps the nvidia-dcgm-exporter DaemonSet and ServiceMonitor; KWOK "runs" its pods, which
serve nothing. This simulator serves, for the whole fleet, the Prometheus text that those pods would (one endpoint,
http://127.0.0.1:<port>/metrics; the URL is written to <state dir>/dcgm-exporter.url), rendered at every scrape from
the nodes and pods the API server has, following NVIDIA/dcgm-exporter (etc/default-counters.csv and
internal/pkg/rendermetrics, releases up to 4.5.x):

- The five default counters the collection's alerts and dashboard read (planning/monitoring/rules.py, dashboard.py),
  with the HELP text and TYPE of default-counters.csv: DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED,
  DCGM_FI_DEV_FB_FREE, DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_XID_ERRORS.
- One series per GPU of each node that has GPUs (GFD's labels, as the device-plugin and DRA plugin simulators read them), labelled as
  the exporter renders them: gpu (index), UUID (the same GPU-<uuid> the DRA plugin simulator publishes),
  pci_bus_id, device (nvidia<index>), modelName (the NVML name), Hostname (the node: the exporter's NODE_NAME under
  the GPU Operator). While a pod holds the GPU (the exporter's pod mapping, through the kubelet's pod-resources API,
  which the GPU Operator turns on): also namespace, pod and container. Held: the whole GPUs (nvidia.com/gpu limits)
  of the node's Running pods, handed out in the order the pods were created, container by container; requests
  beyond the node's GPUs (time-slicing replicas) share GPUs round-robin. MIG instances (GPU_I_PROFILE, GPU_I_ID) are
  not rendered.
- Values: a free GPU 0% busy, 0 MiB used, 34 C; a held one 85% busy, 70% of its memory used (GFD's gpu.memory is the
  total: FB_USED + FB_FREE), 62 C. XID 0.

Knobs (ConfigMap kubegpu-devcluster/simulator-knobs), read at each scrape:
  dcgm-exporter.util                 utilisation % of every held GPU
  dcgm-exporter.memory_used_percent  memory used % of every held GPU
  dcgm-exporter.temperature          temperature (C) of every GPU
  dcgm-exporter.xid                  last XID error code of every GPU
  dcgm-exporter.<node>.<gpu>.<knob>  any of the four for one GPU (e.g. dcgm-exporter.gpu-h100-0.3.util: "5")
"""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kubernetes.dynamic.exceptions import NotFoundError

from .. import hardware
from .decisions.dra_plugin import device_uuid
from .decisions.gpus import node_model, physical_gpus
from .framework import KNOBS_CONFIGMAP, KNOBS_NAMESPACE, Simulator, log

GPU_RESOURCE = "nvidia.com/gpu"
# Field, TYPE and HELP as dcgm-exporter's etc/default-counters.csv has them.
COUNTERS = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
)
KNOBS = ("util", "memory_used_percent", "temperature", "xid")
FREE = {"util": 0, "memory_used_percent": 0, "temperature": 34, "xid": 0}
HELD = {"util": 85, "memory_used_percent": 70, "temperature": 62, "xid": 0}
URL_FILE = "dcgm-exporter.url"


def _gpu_requests(pod: dict) -> list:
    """(container, whole GPUs) of a pod's containers, in order."""
    out = []
    for c in (pod.get("spec") or {}).get("containers") or []:
        limits = (c.get("resources") or {}).get("limits") or {}
        n = int(limits.get(GPU_RESOURCE) or 0)
        if n:
            out.append((c["name"], n))
    return out


def holders(pods: list, node: str, count: int) -> dict:
    """{gpu index: (namespace, pod, container)} of the node's Running pods holding whole GPUs."""
    held, k = {}, 0
    mine = [p for p in pods if (p.get("spec") or {}).get("nodeName") == node
            and (p.get("status") or {}).get("phase") == "Running"]
    mine.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["namespace"],
                             p["metadata"]["name"]))
    for pod in mine:
        for container, n in _gpu_requests(pod):
            for dummy in range(n):
                if count:
                    held.setdefault(k % count, (pod["metadata"]["namespace"], pod["metadata"]["name"], container))
                k += 1
    return held


def _number(value, default):
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _label_value(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def gpus(nodes: list, pods: list, knobs: dict) -> list:
    """Every GPU of the fleet: (labels in the exporter's order, {field: value})."""
    out = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        meta = node["metadata"]
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        model = node_model(labels)
        if model is None:
            continue
        count = physical_gpus(labels, annotations)
        gpu = hardware.gpu(model)
        total = int(labels.get("nvidia.com/gpu.memory") or gpu.memory_mib)
        held = holders(pods, meta["name"], count)
        for index in range(count):
            series = [("gpu", str(index)), ("UUID", device_uuid("GPU", meta["name"], index)),
                      ("pci_bus_id", "00000000:%02X:00.0" % (0x18 + index * 0x10)), ("device", "nvidia%d" % index),
                      ("modelName", hardware.NVML_NAMES.get(model, gpu.product.replace("-", " "))),
                      ("Hostname", meta["name"])]
            base = HELD if index in held else FREE
            knob = {}
            for name in KNOBS:
                value = base[name]
                if index in held or name in ("temperature", "xid"):
                    value = _number(knobs.get("dcgm-exporter.%s" % name), value)
                knob[name] = _number(knobs.get("dcgm-exporter.%s.%d.%s" % (meta["name"], index, name)), value)
            if index in held:
                namespace, pod, container = held[index]
                series += [("container", container), ("namespace", namespace), ("pod", pod)]
            used = int(round(total * knob["memory_used_percent"] / 100.0))
            values = {"DCGM_FI_DEV_GPU_UTIL": knob["util"], "DCGM_FI_DEV_FB_USED": used,
                      "DCGM_FI_DEV_FB_FREE": total - used, "DCGM_FI_DEV_GPU_TEMP": knob["temperature"],
                      "DCGM_FI_DEV_XID_ERRORS": knob["xid"]}
            out.append((series, values))
    return out


def render(nodes: list, pods: list, knobs: dict) -> str:
    """The exporter's /metrics text: each counter's HELP and TYPE, then its series, one per GPU."""
    found = gpus(nodes, pods, knobs)
    lines = []
    for field, kind, help_text in COUNTERS:
        lines.append("# HELP %s %s" % (field, help_text))
        lines.append("# TYPE %s %s" % (field, kind))
        for labels, values in found:
            text = ",".join('%s="%s"' % (k, _label_value(v)) for k, v in labels)
            lines.append("%s{%s} %s" % (field, text, _format(values[field])))
    return "\n".join(lines) + "\n"


class DcgmExporterSimulator(Simulator):
    """No controller: an HTTP server that renders the metrics from the API server at each scrape."""

    name = "dcgm-exporter"
    watches: dict = {}
    extra_kinds = {"Node": "v1", "Pod": "v1", "ConfigMap": "v1"}

    def __init__(self, kubeconfig: str):
        super().__init__(kubeconfig)
        self._url_file = Path(kubeconfig).parent / URL_FILE
        self._server = None

    def reconcile(self, kind, key, obj):  # pragma: no cover - nothing is watched
        return None

    def scrape(self) -> str:
        try:
            cm = self.api("ConfigMap").get(name=KNOBS_CONFIGMAP, namespace=KNOBS_NAMESPACE).to_dict()
            knobs = cm.get("data") or {}
        except NotFoundError:
            knobs = {}
        nodes = [n.to_dict() for n in self.api("Node").get().items]
        pods = [p.to_dict() for p in self.api("Pod").get(field_selector="status.phase=Running").items]
        return render(nodes, pods, knobs)

    def start(self) -> list:
        simulator = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the http.server interface
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                try:
                    body = simulator.scrape().encode()
                except Exception as e:  # the API server is away: the scrape fails, as a real one would time out
                    self.send_error(503, str(e))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        url = "http://127.0.0.1:%d/metrics" % self._server.server_address[1]
        self._url_file.write_text(url + "\n")
        log.info("dcgm-exporter: serving %s", url)
        thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="dcgm-exporter-http")
        thread.start()
        return [thread]

    def stop(self) -> None:
        super().stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        try:
            self._url_file.unlink()
        except FileNotFoundError:
            pass
