"""A serving cluster as the serving simulators' tests see it (test_serving_simulators, test_serving_openshift_ai): a
client with helm and the simulator knobs (Cluster), an object's conditions, an InferenceService body (isvc) and the
simulated load on it (requests)."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from kubernetes.dynamic.exceptions import NotFoundError

from kubegpu_devcluster import __main__ as devcluster
from kubegpu_devcluster import cluster, paths
from kubegpu_devcluster.simulators.framework import KNOBS_CONFIGMAP, KNOBS_NAMESPACE
from kubegpu_devcluster.simulators.serving import REQUESTS_ANNOTATION

ISVC = "serving.kserve.io/v1beta1"
NS = "models"


class Cluster:
    """A local cluster a serving test module started (its state folder): the admin client, helm and the knobs."""

    def __init__(self, state: Path):
        self.state = state
        self.kubeconfig = cluster.kubeconfig_path(state)
        self.admin = devcluster.dynamic_client(state)

    def api(self, api_version: str, kind: str):
        for attempt in range(20):   # a CRD a chart just created may not be served yet
            try:
                return self.admin.resources.get(api_version=api_version, kind=kind)
            except Exception:
                time.sleep(0.5)
                self.admin.resources.invalidate_cache()
        return self.admin.resources.get(api_version=api_version, kind=kind)

    def helm(self, *args: str) -> str:
        helm = paths.bin_dir() / "helm"
        proc = subprocess.run([str(helm), *args], env=dict(os.environ, KUBECONFIG=str(self.kubeconfig)),
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"helm {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    def knobs(self, values: dict) -> None:
        self.api("v1", "ConfigMap").server_side_apply(body={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": KNOBS_CONFIGMAP, "namespace": KNOBS_NAMESPACE},
            "data": values}, field_manager="tests", force_conflicts=True)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = NS) -> dict | None:
        try:
            return self.api(api_version, kind).get(name=name, namespace=namespace).to_dict()
        except NotFoundError:
            return None

    def pods(self, selector: str, namespace: str = NS) -> list:
        return [p.to_dict() for p in self.api("v1", "Pod").get(namespace=namespace, label_selector=selector).items
                if not p.metadata.deletionTimestamp]


def conditions(obj: dict | None) -> dict:
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def isvc(name: str, mode: str = "Standard", autoscaler: str | None = "keda", min_replicas: int = 0,
         gpus: int = 1, group: str = "gpu-a100", **predictor) -> dict:
    annotations = {"serving.kserve.io/deploymentMode": mode}
    if autoscaler:
        annotations["serving.kserve.io/autoscalerClass"] = autoscaler
    spec = {"minReplicas": min_replicas, "maxReplicas": 2,
            "model": {"modelFormat": {"name": "huggingface"}, "runtime": "kserve-huggingfaceserver",
                      "storageUri": "hf://meta-llama/Llama-3.1-8B-Instruct", "args": ["--backend=vllm"],
                      "resources": {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}},
            "nodeSelector": {"devcluster.kubegpu.io/node-group": group},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    if autoscaler == "keda":
        spec["autoScaling"] = {"metrics": [{"type": "External", "external": {
            "metric": {"backend": "prometheus", "serverAddress": "http://prometheus.monitoring:9090",
                       "query": "sum(vllm:num_requests_running)"},
            "target": {"type": "Value", "value": "4"}}}]}
    spec.update(predictor)
    return {"apiVersion": ISVC, "kind": "InferenceService",
            "metadata": {"name": name, "namespace": NS, "annotations": annotations}, "spec": {"predictor": spec}}


def requests(sc: Cluster, name: str, n: int) -> None:
    sc.api(ISVC, "InferenceService").patch(name=name, namespace=NS, content_type="application/merge-patch+json",
                                           body={"metadata": {"annotations": {REQUESTS_ANNOTATION: str(n)}}})
