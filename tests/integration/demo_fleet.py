"""The default (demo) fleet as the node-pool tests use it: its pools (POOLS), what the device plugin advertises once
they are in place (EXPECTED), and the GPU Operator installed on it through OLM (install_operator). Shared by the
test modules and the benchmark; the module-scoped fixture `operator` (conftest.py) starts from it."""
from __future__ import annotations

from kubegpu_devcluster.testing import approve_plan, csv_phase, install_plans, olm_subscribe, wait_for

V1A1 = "operators.coreos.com/v1alpha1"
MIXED = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
POOLS = [
    {"name": "llm-h100", "selector": {"matchLabels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
     "sharing": {"strategy": "mig", "mig": {"layout": MIXED}}},
    {"name": "embed-l40s", "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-L40S"}},
     "max_unavailable": "100%", "sharing": {"strategy": "time-slicing", "time_slicing": {"replicas": 4}}},
    {"name": "batch-a100", "machinesets": ["demo-gpu-a100-us-east-1a"],
     "sharing": {"strategy": "mps", "mps": {"replicas": 4}}},
]
# What the device plugin advertises once the pools are in place, written out from the reference tables:
# 8 x H100 with 3g.40gb + 2g.20gb + 2 x 1g.10gb each (mixed strategy); 4 x L40S x 4 replicas; 8 x A100 x 4.
EXPECTED = {
    "gpu-h100-000": {"nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-1g.10gb": 16},
    "gpu-h100-001": {"nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-1g.10gb": 16},
    "gpu-l40s-000": {"nvidia.com/gpu": 16},
    "gpu-l40s-001": {"nvidia.com/gpu": 16},
    "gpu-a100-000": {"nvidia.com/gpu": 32},
    "gpu-h200-000": {"nvidia.com/gpu": 8},     # in no pool: untouched
}


def install_operator(dc):
    """Load the default fleet and install the GPU Operator through OLM unless it is there; return dc."""
    dc.fleet("default")
    csvs = dc.admin.resources.get(api_version=V1A1, kind="ClusterServiceVersion").get().items
    # A CSV in a namespace an earlier test deleted goes with it: that operator does not count.
    live = set(n.metadata.name for n in dc.admin.resources.get(api_version="v1", kind="Namespace").get().items
               if not n.metadata.deletionTimestamp)
    if not any(c.metadata.name.startswith("gpu-operator-certified") and (c.status or {}).get("phase") == "Succeeded"
               and c.metadata.namespace in live for c in csvs):
        ns = olm_subscribe(dc, "v26.7")
        approve_plan(dc, ns, wait_for(lambda: install_plans(dc, ns), what="InstallPlan")[0])
        wait_for(lambda: csv_phase(dc, ns, "gpu-operator-certified.v26.7.0") == "Succeeded", what="CSV")
    policies = dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    if not policies.get().items:
        policies.create(body={"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                              "metadata": {"name": "gpu-cluster-policy"},
                              "spec": {"operator": {}, "daemonsets": {}, "driver": {}, "toolkit": {},
                                       "devicePlugin": {}, "dcgm": {}, "dcgmExporter": {}, "gfd": {},
                                       "nodeStatusExporter": {}, "mig": {"strategy": "single"}}})
    wait_for(lambda: (policies.get().items[0].status or {}).get("state") == "ready", what="ClusterPolicy ready")
    return dc
