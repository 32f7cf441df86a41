"""GPU Operator: ClusterPolicy status and the operand DaemonSets (shared/reference/gpu-operator.md).

The operator "runs" when a gpu-operator-certified CSV has Succeeded (OLM) or a Deployment labelled
app.kubernetes.io/component=gpu-operator exists (Helm); the operator namespace is that CSV's (preferred) or
that Deployment's namespace. Before that nobody writes ClusterPolicy status, as on a real cluster. A second
ClusterPolicy gets state `ignored`. Every spec change (new generation) passes through notReady
(OperandNotReady) again, as the operator rolls its operands. status.namespace is the operator namespace.

Operands: for the reconciled ClusterPolicy the operator keeps two apps/v1 DaemonSets in its namespace, owned by
the policy (ownerReferences) as upstream: `nvidia-device-plugin-daemonset` (unless spec.devicePlugin.enabled is
false), `nvidia-mig-manager` (unless spec.migManager.enabled is false) and `nvidia-dcgm-exporter` (unless
spec.dcgmExporter.enabled is false; nodes labelled nvidia.com/gpu.deploy.dcgm-exporter=true, so mig-manager's
pause takes its pods away as upstream), plus, with spec.dcgmExporter.serviceMonitor.enabled and the
ServiceMonitor CRD installed, ServiceMonitor `nvidia-dcgm-exporter` (removed when disabled). The DaemonSet
controller places their pods and KWOK runs them; the device-plugin and mig-manager simulators act for them. Their pod templates carry what the real
operator puts there: MIG_STRATEGY (spec.mig.strategy, default single), the device-plugin ConfigMap
(spec.devicePlugin.config.name, volume `config`) and DEFAULT_CONFIG (spec.devicePlugin.config.default), the
mig-parted ConfigMap (spec.migManager.config.name, volume `mig-parted-config`). Like the real operator, a
change of those rewrites the template (so the pods "restart"), tracked with the annotation
nvidia.com/last-applied-hash; template annotations such as kubectl.kubernetes.io/restartedAt (a rollout
restart) are left alone. Upstream the DaemonSets exist only while their ClusterPolicy does (they are its
operands); with no garbage collector here, this simulator deletes them once their owner is gone.

The Helm chart's pre-upgrade hook Job `gpu-operator-upgrade-crd` runs `manage-crds apply --filepath=...` in the
operator's image, which carries the chart's CRD files under /opt/gpu-operator. KWOK runs its pod to completion but
no image, so this simulator does what the command does: it applies (server-side, field manager `manage-crds`) the
files the Job's args name, read from the same chart (paths.charts_dir(): gpu-operator/crds and the NFD subchart's
crds), once per Job. In 26.7.0 the list names clusterpolicies, nvidiadrivers, gpuclusters and, with NFD, NFD's
CRDs: not the ComputeDomain CRDs its crds/ also holds (docs/dra.md, "The ComputeDomain CRDs").

Knobs (ConfigMap kubegpu-devcluster/simulator-knobs):
  gpu-operator.ready_seconds   time from a new generation to ready (default 1)
  gpu-operator.never_ready     a condition reason (e.g. DriverNotReady): the policy stays notReady with it
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import yaml
from kubernetes.dynamic.exceptions import NotFoundError

from .. import paths
from .framework import Simulator, now

CP = "nvidia.com/v1"
DEVICE_PLUGIN_DS = "nvidia-device-plugin-daemonset"
MIG_MANAGER_DS = "nvidia-mig-manager"
DCGM_EXPORTER_DS = "nvidia-dcgm-exporter"
MONITORING = "monitoring.coreos.com/v1"
HASH_ANNOTATION = "nvidia.com/last-applied-hash"
MANAGED_BY = "app.kubernetes.io/managed-by"
HOOK_JOB = "gpu-operator-upgrade-crd"
IMAGE_CRDS = "/opt/gpu-operator/"
# Where the chart keeps the files the operator's image carries under IMAGE_CRDS.
CHART_CRD_FOLDERS = ("gpu-operator/crds", "gpu-operator/charts/node-feature-discovery/crds")


def hook_crd_files(job: dict) -> list:
    """The CRD files the chart's pre-upgrade hook Job applies: the `--filepath` args of `manage-crds apply`, as
    names under the image's /opt/gpu-operator ([] for any other Job or command)."""
    if (job.get("metadata") or {}).get("name") != HOOK_JOB:
        return []
    files = []
    for c in ((job.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []:
        args = list(c.get("args") or [])
        if not (c.get("command") or [""])[-1].endswith("manage-crds") or args[:1] != ["apply"]:
            continue
        for arg in args[1:]:
            if arg.startswith("--filepath=" + IMAGE_CRDS):
                files.append(arg[len("--filepath=" + IMAGE_CRDS):])
    return files


def chart_crd_documents(files: list, charts: Path) -> list:
    """The CRDs in `files`, read from the chart's folders (a file the chart lacks is skipped, as manage-crds would
    fail on it and the Job retry: here the hook still completes)."""
    docs = []
    for name in files:
        for folder in CHART_CRD_FOLDERS:
            path = charts / folder / name
            if path.is_file():
                docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
                break
    return docs


def _conditions(ready: bool, reason: str, message: str) -> list:
    t = now()
    return [
        {"type": "Ready", "status": "True" if ready else "False", "reason": reason, "message": message,
         "lastTransitionTime": t},
        {"type": "Error", "status": "False" if ready else "True", "reason": reason,
         "message": "" if ready else message, "lastTransitionTime": t},
    ]


def _env(container: dict) -> dict:
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


def pod_env(ds: dict) -> dict:
    """All env values of a DaemonSet's pod template (every container), as the simulators read them."""
    env = {}
    for c in ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []:
        env.update(_env(c))
    return env


def pod_configmap(ds: dict, volume: str) -> str:
    """The ConfigMap mounted as `volume` in a DaemonSet's pod template, or ""."""
    for v in ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get("volumes") or []:
        if v.get("name") == volume and v.get("configMap"):
            return v["configMap"].get("name") or ""
    return ""


def _operand(name: str, deploy_label: str, containers: list, volumes: list) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "labels": {"app": name, MANAGED_BY: "gpu-operator"}},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"nodeSelector": {deploy_label: "true"}, "containers": containers,
                                  "volumes": volumes}},
        },
    }


def operand_daemonsets(spec: dict) -> dict:
    """The DaemonSets the operator wants for a ClusterPolicy spec: {name: body} (no namespace or owner yet)."""
    wanted = {}
    strategy = (spec.get("mig") or {}).get("strategy") or "single"
    plugin = spec.get("devicePlugin") or {}
    if plugin.get("enabled", True) is not False:
        config = plugin.get("config") or {}
        env = [{"name": "MIG_STRATEGY", "value": strategy}]
        volumes = []
        if config.get("name"):
            env += [{"name": "CONFIG_FILE", "value": "/config/config.yaml"},
                    {"name": "DEFAULT_CONFIG", "value": config.get("default") or ""}]
            volumes.append({"name": "config", "configMap": {"name": config["name"]}})
        wanted[DEVICE_PLUGIN_DS] = _operand(DEVICE_PLUGIN_DS, "nvidia.com/gpu.deploy.device-plugin", [
            {"name": "nvidia-device-plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:simulated", "env": env}],
            volumes)
    manager = spec.get("migManager") or {}
    if manager.get("enabled", True) is not False:
        config = manager.get("config") or {}
        env = [{"name": "DEFAULT_MIG_CONFIG", "value": config.get("default") or "all-disabled"}]
        volumes = []
        if config.get("name"):
            env.append({"name": "CONFIG_FILE", "value": "/mig-parted-config/config.yaml"})
            volumes.append({"name": "mig-parted-config", "configMap": {"name": config["name"]}})
        wanted[MIG_MANAGER_DS] = _operand(MIG_MANAGER_DS, "nvidia.com/gpu.deploy.mig-manager", [
            {"name": "nvidia-mig-manager", "image": "nvcr.io/nvidia/cloud-native/k8s-mig-manager:simulated",
             "env": env}], volumes)
    exporter = spec.get("dcgmExporter") or {}
    if exporter.get("enabled", True) is not False:
        wanted[DCGM_EXPORTER_DS] = _operand(DCGM_EXPORTER_DS, "nvidia.com/gpu.deploy.dcgm-exporter", [
            {"name": "nvidia-dcgm-exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:simulated",
             "ports": [{"name": "metrics", "containerPort": 9400}]}], [])
    return wanted


def exporter_service_monitor(spec: dict) -> dict | None:
    """The ServiceMonitor the operator creates for the DCGM exporter (spec.dcgmExporter.serviceMonitor.enabled)."""
    exporter = spec.get("dcgmExporter") or {}
    if exporter.get("enabled", True) is False or not (exporter.get("serviceMonitor") or {}).get("enabled"):
        return None
    return {"apiVersion": MONITORING, "kind": "ServiceMonitor",
            "metadata": {"name": DCGM_EXPORTER_DS, "labels": {"app": DCGM_EXPORTER_DS, MANAGED_BY: "gpu-operator"}},
            "spec": {"selector": {"matchLabels": {"app": DCGM_EXPORTER_DS}},
                     "endpoints": [{"port": "gpu-metrics", "path": "/metrics"}]}}


class GpuOperatorSimulator(Simulator):
    name = "gpu-operator"
    watches = {"ClusterPolicy": CP, "ClusterServiceVersion": "operators.coreos.com/v1alpha1",
               "Deployment": "apps/v1", "DaemonSet": "apps/v1", "Job": "batch/v1"}
    extra_kinds = {"Node": "v1", "CustomResourceDefinition": "apiextensions.k8s.io/v1"}
    # Only whether they exist and their spec matter here, not their rollout status.
    status_blind = frozenset({"Deployment", "DaemonSet", "Job"})

    def __init__(self, kubeconfig: str):
        super().__init__(kubeconfig)
        self._rollouts = {}   # uid -> (generation, monotonic time at which it is ready)
        self._hooks_run = set()   # uids of the hook Jobs whose CRDs were applied

    def _operator_namespace(self) -> str | None:
        csvs = sorted(self.api("ClusterServiceVersion").get().items,
                      key=lambda c: (c.metadata.namespace, c.metadata.name))
        for c in csvs:
            if c.metadata.name.startswith("gpu-operator-certified.") and (c.status or {}).get("phase") == "Succeeded":
                return c.metadata.namespace
        deployments = self.api("Deployment").get(label_selector="app.kubernetes.io/component=gpu-operator").items
        return sorted(d.metadata.namespace for d in deployments)[0] if deployments else None

    def reconcile(self, kind, key, obj):
        if kind == "Job":
            return self._run_crd_hook(obj.to_dict() if obj is not None else None)
        if kind != "ClusterPolicy":
            policies = self.api("ClusterPolicy").get().items
            for cp in policies:
                self.requeue("ClusterPolicy", None, cp.metadata.name)
            if kind == "DaemonSet" and not policies:
                self._collect_garbage()
            return
        if obj is None:
            return self._collect_garbage()
        namespace = self._operator_namespace()
        if namespace is None:
            return
        cp = obj.to_dict()
        meta = cp["metadata"]
        policies = sorted(self.api("ClusterPolicy").get().items,
                          key=lambda p: (p.metadata.creationTimestamp, p.metadata.name))
        if policies and policies[0].metadata.name != meta["name"]:
            return self._write(cp, "ignored", _conditions(False, "ReconcileFailed",
                                                          "duplicate ClusterPolicy: only one is reconciled"), namespace)
        self._ensure_operands(cp, namespace)
        never = self.knobs.get("never_ready")
        if never:
            return self._write(cp, "notReady", _conditions(False, never, f"{never}: simulated failure"), namespace)
        # Whether there is a GPU node at all: one is enough (this runs on every operand DaemonSet event, and a
        # roll-out of a thousand nodes makes many; a full list each time kept the simulators busy).
        gpu_nodes = self.api("Node").get(label_selector="feature.node.kubernetes.io/pci-10de.present=true",
                                         limit=1).items
        if not gpu_nodes:
            return self._write(cp, "notReady", _conditions(False, "NoGPUNodes", "no GPU nodes in the cluster"),
                               namespace)
        generation = meta.get("generation", 1)
        rollout = self._rollouts.get(meta["uid"])
        if rollout is None or rollout[0] != generation:
            rollout = (generation, time.monotonic() + self.knobs.seconds("ready_seconds", 1.0))
            self._rollouts[meta["uid"]] = rollout
            self._write(cp, "notReady", _conditions(False, "OperandNotReady", "operands are rolling out"), namespace)
        if time.monotonic() < rollout[1]:
            return self.requeue("ClusterPolicy", None, meta["name"], after=rollout[1] - time.monotonic())
        self._write(cp, "ready", _conditions(True, "Reconciled", "ClusterPolicy is ready"), namespace)

    def _run_crd_hook(self, job: dict | None) -> None:
        files = hook_crd_files(job or {})
        if not files or job["metadata"]["uid"] in self._hooks_run:
            return
        api = self.api("CustomResourceDefinition")
        for doc in chart_crd_documents(files, paths.charts_dir()):
            api.server_side_apply(body=doc, name=doc["metadata"]["name"], field_manager="manage-crds",
                                  force_conflicts=True)
        self._hooks_run.add(job["metadata"]["uid"])

    def _write(self, cp: dict, state: str, conditions: list, namespace: str) -> None:
        old = cp.get("status") or {}
        if old.get("state") == state and old.get("namespace") == namespace and \
                [c.get("reason") for c in old.get("conditions", [])] == [c["reason"] for c in conditions]:
            return
        cp["status"] = dict(old, state=state, conditions=conditions, namespace=namespace)
        self.api("ClusterPolicy").status.replace(body=cp)

    # -- operands
    def _ensure_operands(self, cp: dict, namespace: str) -> None:
        meta = cp["metadata"]
        owner = [{"apiVersion": CP, "kind": "ClusterPolicy", "name": meta["name"], "uid": meta["uid"],
                  "controller": True, "blockOwnerDeletion": True}]
        wanted = operand_daemonsets(cp.get("spec") or {})
        api = self.api("DaemonSet")
        for name in (DEVICE_PLUGIN_DS, MIG_MANAGER_DS, DCGM_EXPORTER_DS):
            current = self.get("DaemonSet", namespace, name)
            body = wanted.get(name)
            if body is None:
                if current is not None:
                    api.delete(name=name, namespace=namespace)
                continue
            digest = hashlib.sha256(json.dumps(body["spec"], sort_keys=True).encode()).hexdigest()[:16]
            if current is None:
                body["metadata"].update(namespace=namespace, ownerReferences=owner,
                                        annotations={HASH_ANNOTATION: digest})
                api.create(body=body, namespace=namespace)
            elif (current.metadata.annotations or {}).get(HASH_ANNOTATION) != digest:
                # Only the operator's own fields: template annotations (a rollout restart) stay as they are.
                patch = {"metadata": {"annotations": {HASH_ANNOTATION: digest}, "ownerReferences": owner},
                         "spec": {"template": {"spec": body["spec"]["template"]["spec"]}}}
                api.patch(name=name, namespace=namespace, body=patch, content_type="application/merge-patch+json")
        self._ensure_service_monitor(cp, namespace, owner)

    def _ensure_service_monitor(self, cp: dict, namespace: str, owner: list) -> None:
        try:
            api = self.dyn.resources.get(api_version=MONITORING, kind="ServiceMonitor")
        except Exception:   # the Prometheus Operator's CRDs are not installed: the operator skips it too
            return
        body = exporter_service_monitor(cp.get("spec") or {})
        try:
            current = api.get(name=DCGM_EXPORTER_DS, namespace=namespace)
        except NotFoundError:
            current = None
        if body is None:
            if current is not None:
                api.delete(name=DCGM_EXPORTER_DS, namespace=namespace)
        elif current is None:
            body["metadata"].update(namespace=namespace, ownerReferences=owner)
            api.create(body=body, namespace=namespace)

    def _collect_garbage(self) -> None:
        """What the garbage collector does upstream: operands whose ClusterPolicy is gone are deleted."""
        owners = {cp.metadata.uid for cp in self.api("ClusterPolicy").get().items}
        api = self.api("DaemonSet")
        for ds in api.get(label_selector=f"{MANAGED_BY}=gpu-operator").items:
            refs = [r for r in (ds.metadata.ownerReferences or []) if r.kind == "ClusterPolicy"]
            if refs and not any(r.uid in owners for r in refs):
                try:
                    api.delete(name=ds.metadata.name, namespace=ds.metadata.namespace)
                except NotFoundError:
                    pass
        try:
            monitors = self.dyn.resources.get(api_version=MONITORING, kind="ServiceMonitor")
        except Exception:   # CRD not installed
            return
        for sm in monitors.get(label_selector=f"{MANAGED_BY}=gpu-operator").items:
            refs = [r for r in (sm.metadata.ownerReferences or []) if r.kind == "ClusterPolicy"]
            if refs and not any(r.uid in owners for r in refs):
                try:
                    monitors.delete(name=sm.metadata.name, namespace=sm.metadata.namespace)
                except NotFoundError:
                    pass
