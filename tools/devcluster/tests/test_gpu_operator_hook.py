"""The GPU Operator chart's pre-upgrade hook Job as the simulator plays it: the CRD files its `manage-crds apply` args
name, read from the real chart (v26.7.0) rendered by helm. No cluster."""
from __future__ import annotations

import subprocess

import pytest
import yaml

from kubegpu_devcluster import paths
from kubegpu_devcluster.simulators.gpu_operator import HOOK_JOB, chart_crd_documents, hook_crd_files

CHART = paths.charts_dir() / "gpu-operator"
HELM = paths.bin_dir() / "helm"


def _hook_job(*sets):
    if not CHART.is_dir() or not HELM.exists():
        pytest.skip(f"needs the gpu-operator chart ({CHART}) and the Go-built helm ({HELM})")
    args = [str(HELM), "template", "gpu-operator", str(CHART), "-n", "gpu-operator",
            "--show-only", "templates/upgrade_crd.yaml"]
    for value in sets:
        args += ["--set", value]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    [job] = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Job"]
    return job


def test_the_hook_applies_the_operators_own_crds_and_nfds_not_the_compute_domain_ones():
    files = hook_crd_files(_hook_job())
    assert files == ["nvidia.com_clusterpolicies.yaml", "nvidia.com_nvidiadrivers.yaml",
                     "nvidia.com_gpuclusters.yaml", "nfd-api-crds.yaml"]
    names = {d["metadata"]["name"] for d in chart_crd_documents(files, paths.charts_dir())}
    assert {"clusterpolicies.nvidia.com", "nvidiadrivers.nvidia.com", "gpuclusters.nvidia.com",
            "nodefeatures.nfd.k8s-sigs.io"} <= names
    assert not {n for n in names if n.endswith(".resource.nvidia.com")}
    # The chart's crds/ does hold them: Helm creates them on install when missing, the hook never applies them.
    assert (CHART / "crds" / "resource.nvidia.com_computedomains.yaml").is_file()


def test_without_nfd_the_hook_leaves_nfds_crds_out():
    assert "nfd-api-crds.yaml" not in hook_crd_files(_hook_job("nfd.enabled=false"))


def test_other_jobs_are_not_the_hook():
    job = _hook_job()
    job["metadata"]["name"] = "something-else"
    assert hook_crd_files(job) == []
    assert HOOK_JOB == "gpu-operator-upgrade-crd"
