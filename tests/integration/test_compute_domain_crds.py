"""One owner for the ComputeDomain CRDs, through the playbooks (docs/dra.md, "The ComputeDomain CRDs").

The Kubernetes fleet, with neither ComputeDomain CRD served at first (as on a new cluster), NVIDIA's real charts
(gpu-operator v26.7.0 and dra-driver-nvidia-gpu 0.4.1 from shared/charts) and the Go-built helm:
1. `site --tags gpu_operator`: Helm creates the operator chart's copy of computedomains, which refuses a
   ComputeDomain without spec.numNodes (valid for the DRA driver).
2. `site --tags gpu_operator,dra` in check mode: the DRA stage plans to serve the driver's schema, writes nothing.
3. `site --tags gpu_operator,dra`: the CRD served is the DRA driver chart's, applied once under the DRA stage's
   field manager; the ComputeDomain is accepted (numNodes defaulted to 0). The second run writes nothing.
4. An operator upgrade through the playbook: its pre-upgrade hook Job runs `manage-crds apply` (the simulator
   applies the files its args name) and the CRD served is still the driver's; a ComputeDomain is accepted.
5. The driver chart's CRD changes (as a driver upgrade brings it; helm leaves crds/ alone): the stage applies it.
Writes are counted in the audit log (the admin user's: the modules' and helm's own).
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError, UnprocessibleEntityError

from conftest import task_result, wait_for
from gpu_operator_playbook import INVENTORY, _failure, _reset, job_runner_missing
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.crds import (
    COMPUTE_DOMAIN_CRDS,
    chart_crds,
    desired,
    schema_differences,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DRA_FIELD_MANAGER
from kubegpu_devcluster import paths
from kubegpu_devcluster.cluster import simulator_user

CHARTS = paths.charts_dir()
DRA_CHART = CHARTS / "dra-driver-nvidia-gpu"
CDS, CLIQUES = COMPUTE_DOMAIN_CRDS
CRD_API = "apiextensions.k8s.io/v1"
CD_API = "resource.nvidia.com/v1beta1"
DRA_RELEASE = "dra-driver-nvidia-gpu"
DRA_NODE = "gpu-b200-000"
PLUGIN = "nvidia.com/dra-kubelet-plugin"
DEPLOY = "nvidia.com/gpu.deploy.device-plugin"
NAMESPACE = "default"

pytestmark = pytest.mark.skipif(not (DRA_CHART.is_dir() and (CHARTS / "gpu-operator").is_dir()),
                                reason=f"the gpu-operator and DRA driver charts are not in {CHARTS}")


def _chart_crds(chart: Path) -> dict:
    docs = []
    for path in sorted((chart / "crds").glob("*.yaml")):
        docs.extend(yaml.safe_load_all(path.read_text()))
    return chart_crds(docs)


def _crds(dc):
    return dc.admin.resources.get(api_version=CRD_API, kind="CustomResourceDefinition")


def _served(dc, name=CDS):
    return _crds(dc).get(name=name).to_dict()


def _delete_crds(dc):
    api = _crds(dc)
    for name in COMPUTE_DOMAIN_CRDS:
        try:
            api.delete(name=name)
        except NotFoundError:
            pass

    def gone():
        return not [c for c in api.get().items if c.metadata.name in COMPUTE_DOMAIN_CRDS]
    wait_for(gone, timeout=120, what="the ComputeDomain CRDs to be deleted")


def _uninstall_driver(dc, helm_bin):
    subprocess.run([str(helm_bin), "uninstall", DRA_RELEASE, "-n", DRA_RELEASE, "--kubeconfig", str(dc.kubeconfig)],
                   capture_output=True, check=False)
    ns_api = dc.admin.resources.get(api_version="v1", kind="Namespace")
    try:
        ns_api.delete(name=DRA_RELEASE)
    except NotFoundError:
        pass
    wait_for(lambda: DRA_RELEASE not in [n.metadata.name for n in ns_api.get().items], timeout=120,
             what="the DRA driver's namespace to be deleted")


@pytest.fixture(scope="module")
def cluster(devcluster_session, helm_bin):
    """The Kubernetes fleet without the GPU Operator, the DRA driver or the ComputeDomain CRDs; afterwards the
    CRDs as the local cluster loads them (shared/crds/nvidia-dra) and the node's labels as they were."""
    dc = devcluster_session
    dc.fleet("kubernetes")
    _reset(dc)
    _uninstall_driver(dc, helm_bin)
    _delete_crds(dc)
    nodes = dc.admin.resources.get(api_version="v1", kind="Node")
    before = nodes.get(name=DRA_NODE).metadata.labels
    original = {PLUGIN: before.get(PLUGIN), DEPLOY: before.get(DEPLOY)}
    yield dc
    _reset(dc)
    _uninstall_driver(dc, helm_bin)
    _delete_crds(dc)
    for name in COMPUTE_DOMAIN_CRDS:
        group, plural = name.split(".", 1)[1], name.split(".", 1)[0]
        _crds(dc).create(body=yaml.safe_load((paths.crds_dir() / "nvidia-dra" / f"{group}_{plural}.yaml").read_text()))
    nodes.patch(name=DRA_NODE, body={"metadata": {"labels": original}}, content_type="application/merge-patch+json")


def _vars(helm_bin, dra_chart=DRA_CHART, **operator_changes):
    """The gpu_operator test inventory's settings (with `operator_changes`), a dra pool on the B200 node and the
    DRA stage with the local chart, as one JSON extra-vars argument."""
    settings = yaml.safe_load(INVENTORY.read_text())["all"]["vars"]["kubegpu_gpu_operator"]
    return ["-e", json.dumps({
        "kubegpu_gpu_operator": dict(settings, **operator_changes),
        "kubegpu_node_pools": [{"name": "dra-b200", "selector": {"matchLabels": {"kubernetes.io/hostname": DRA_NODE}},
                                "sharing": {"strategy": "dra"}}],
        "kubegpu_dra": {"driver": {"driver_owner": "gpu-operator"}, "timeout": 120,
                        "helm": {"chart": str(dra_chart), "binary": str(helm_bin)}},
    })]


def _site(dc, helm_bin, tags, *args, dra_chart=DRA_CHART, **operator_changes):
    proc = dc.playbook("playbooks/site.yml", "-i", str(INVENTORY), "--tags", tags,
                       *_vars(helm_bin, dra_chart, **operator_changes), *args,
                       env={"KUBEGPU_TEST_HELM": str(helm_bin), "KUBEGPU_TEST_CHARTS": str(CHARTS)})
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"ansible-playbook printed no JSON (rc {proc.returncode}): "
                    f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    stats = out["stats"]["localhost"]
    assert stats["failures"] == 0, _failure(out)
    return out, stats


def _compute_domain(name, **spec):
    return {"apiVersion": CD_API, "kind": "ComputeDomain", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": dict({"channel": {"resourceClaimTemplate": {"name": f"{name}-channel"}}}, **spec)}


def _create(dc, body, dry_run=False):
    api = dc.admin.resources.get(api_version=CD_API, kind="ComputeDomain")
    return api.create(body=body, namespace=NAMESPACE, **({"dry_run": "All"} if dry_run else {}))


def _accepted(dc, name):
    """Create a ComputeDomain without numNodes (valid for the DRA driver). The API server takes a moment to serve a
    CRD's new schema after the CRD changed, so a refusal is tried again for a few seconds."""
    created = {}

    def once():
        try:
            created["cd"] = _create(dc, _compute_domain(name)).to_dict()
            return True
        except UnprocessibleEntityError:
            return False
    wait_for(once, timeout=30, what=f"ComputeDomain {name} without numNodes to be accepted")
    return created["cd"]


def _crd_writes(dc, mark):
    """The CRD writes that took effect. Helm's install of a chart tries to create each CRD of its crds/ and takes
    the API server's 409 (it exists) as "leave it": those change nothing and are not counted."""
    return [str(e) for e in dc.audit.writes(mark) if e.resource == "customresourcedefinitions" and e.code < 400]


def test_the_operators_copy_served_first_refuses_a_compute_domain_without_num_nodes(cluster, helm_bin):
    dc = cluster
    _site(dc, helm_bin, "gpu_operator")
    served = _served(dc)
    assert "numNodes" in served["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"]
    assert schema_differences(served, desired(_chart_crds(CHARTS / "gpu-operator")[CDS])) == []
    with pytest.raises(UnprocessibleEntityError) as e:
        _create(dc, _compute_domain("refused"), dry_run=True)
    assert "numNodes" in str(e.value.body), e.value.body
    print(f"\nunder the operator's copy: {json.loads(e.value.body)['message']}")


def test_check_mode_plans_the_drivers_schema_and_writes_nothing(cluster, helm_bin):
    dc = cluster
    mark = dc.audit.mark()
    out, _stats = _site(dc, helm_bin, "gpu_operator,dra", "--check")
    result = task_result(out, "Serve the DRA driver chart's ComputeDomain CRDs")
    assert result["changed"] is True and result["owner"] == "dra-driver"
    assert result["crds"][CDS]["state"] == "replace" and result["crds"][CLIQUES]["state"] == "chart"
    assert any("numNodes" in line for line in result["crds"][CDS]["differences"]), result["crds"][CDS]
    assert dc.audit.writes(mark) == []
    assert "numNodes" in _served(dc)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "required"]


def test_site_serves_the_drivers_schema_and_accepts_a_compute_domain_valid_for_it(cluster, helm_bin):
    dc = cluster
    mark = dc.audit.mark()
    out, _stats = _site(dc, helm_bin, "gpu_operator,dra")
    assert task_result(out, "Serve the DRA driver chart's ComputeDomain CRDs")["changed"] is True
    driver = _chart_crds(DRA_CHART)
    for name in COMPUTE_DOMAIN_CRDS:
        assert schema_differences(_served(dc, name), desired(driver[name])) == [], name
    # One apply of computedomains, under the DRA stage's field manager; the cliques CRD was the same in both charts.
    writes = _crd_writes(dc, mark)
    assert len(writes) == 1 and writes[0].startswith(f"patch customresourcedefinitions/{CDS} "), writes
    managers = {f["manager"] for f in _served(dc)["metadata"]["managedFields"]}
    assert DRA_FIELD_MANAGER in managers, managers
    cd = _accepted(dc, "imex-site")
    assert cd["spec"]["numNodes"] == 0        # the driver's schema defaults it


def test_second_run_writes_nothing(cluster, helm_bin):
    dc = cluster
    mark = dc.audit.mark()
    out, _stats = _site(dc, helm_bin, "gpu_operator,dra")
    assert task_result(out, "Serve the DRA driver chart's ComputeDomain CRDs")["changed"] is False
    assert [str(e) for e in dc.audit.writes(mark)] == []


def test_an_operator_upgrade_keeps_the_drivers_schema(cluster, helm_bin):
    dc = cluster
    reason = job_runner_missing(dc)
    if reason:
        pytest.skip(reason)
    mark = dc.audit.mark()
    out, _stats = _site(dc, helm_bin, "gpu_operator,dra", cdi={"nri_plugin": True})
    assert task_result(out, "Install or upgrade the gpu-operator release")["changed"] is True
    # The hook Job ran manage-crds apply on its list: the simulator's applies of those CRDs are in the audit log.
    hook = simulator_user("gpu-operator")

    def hook_applied():
        return {e.name for e in dc.audit.writes(mark, user=hook) if e.resource == "customresourcedefinitions"}
    wait_for(lambda: "clusterpolicies.nvidia.com" in hook_applied(), timeout=60,
             what="the pre-upgrade hook Job's manage-crds apply")
    assert not hook_applied() & set(COMPUTE_DOMAIN_CRDS), hook_applied()
    driver = _chart_crds(DRA_CHART)
    for name in COMPUTE_DOMAIN_CRDS:
        assert schema_differences(_served(dc, name), desired(driver[name])) == [], name
    assert task_result(out, "Serve the DRA driver chart's ComputeDomain CRDs")["changed"] is False
    assert _crd_writes(dc, mark) == []
    _accepted(dc, "imex-after-upgrade")


def test_a_driver_charts_changed_crd_is_applied(cluster, helm_bin, tmp_path):
    """helm upgrade never touches crds/: the stage brings the chart's CRD (here a field added to the copy) itself."""
    dc = cluster
    chart = tmp_path / "dra-driver-nvidia-gpu"
    shutil.copytree(DRA_CHART, chart)
    path = chart / "crds" / "resource.nvidia.com_computedomains.yaml"
    crd = yaml.safe_load(path.read_text())
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["kubegpuTest"] = {
        "type": "string", "description": "a field a newer chart brings"}
    path.write_text(yaml.safe_dump(crd))
    mark = dc.audit.mark()
    out, _stats = _site(dc, helm_bin, "dra", dra_chart=chart)
    result = task_result(out, "Serve the DRA driver chart's ComputeDomain CRDs")
    assert result["changed"] is True and any("kubegpuTest" in line for line in result["crds"][CDS]["differences"])
    assert len(_crd_writes(dc, mark)) == 1, _crd_writes(dc, mark)
    assert schema_differences(_served(dc), desired(_chart_crds(chart)[CDS])) == []
    created = _create(dc, _compute_domain("imex-new-field", kubegpuTest="kept")).to_dict()
    assert created["spec"]["kubegpuTest"] == "kept"     # not pruned: the new schema is served
