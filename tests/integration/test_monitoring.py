"""The monitoring stage (playbook monitoring, module gpu_monitoring) against the local cluster, on the OpenShift
fleet (default) and the Kubernetes fleet: check mode writes nothing, it converges, the real API server accepts every
object against the upstream CRDs (PrometheusRule and ClusterPolicy with strict field validation, ConsolePlugin, the
console operator's Console), a second run changes nothing and writes nothing; on OpenShift also NVIDIA's console
plugin (Deployment, Service with the service-CA annotation, ConsolePlugin) is installed and added to the Console's
spec.plugins next to a plugin the user has there, a threshold the user changes reaches the PrometheusRule, and the
dashboard and the console plugin turned off are pruned (the user's plugin stays listed). Bad input is in
bad_input_cases.py's table.

The stage needs what the gpu_operator stage leaves (the operator's namespace and a ClusterPolicy): a fixture creates
them as the admin when the session's cluster lacks them (the chart's ClusterPolicy, planning/gpu_operator/cluster_policy.py), and
removes what it created, so the test times the monitoring stage alone.
"""
from __future__ import annotations

import json
import os
import tempfile
import time

import pytest
from kubernetes.dynamic.exceptions import NotFoundError

from conftest import REPO

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.cluster_policy import chart_spec

INVENTORY = REPO / "examples" / "demo" / "inventory.yml"
PLAYBOOK = "playbooks/monitoring.yml"
RULE, DASHBOARD, PLUGIN = "kubegpu-gpu-alerts", "kubegpu-gpu-dashboard", "console-plugin-nvidia-gpu"
CONSOLE = "operator.openshift.io/v1"
USER_PLUGIN = "acme-console-plugin"      # a plugin the user enabled before: the stage keeps it
# fleet -> (platform, operator namespace, dashboard namespace, dashboard label)
PROMETHEUS = "monitoring.coreos.com/v1"
FLEETS = {
    "default": ("openshift", "nvidia-gpu-operator", "openshift-config-managed", ("console.openshift.io/dashboard", "true")),
    "kubernetes": ("kubernetes", "gpu-operator", "gpu-operator", ("grafana_dashboard", "1")),
}


def run(dc, variables=None, *args):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(variables or {}, f)
    try:
        proc = dc.playbook(PLAYBOOK, "-i", str(INVENTORY), "-e", f"@{f.name}", *args)
    finally:
        os.unlink(f.name)
    out = json.loads(proc.stdout)
    results = [t["hosts"]["localhost"] for p in out["plays"] for t in p["tasks"]
               if t["task"]["name"].endswith("publish the GPU alert rules and the GPU dashboard")]
    failed = [t["hosts"]["localhost"].get("msg") for p in out["plays"] for t in p["tasks"]
              if t["hosts"].get("localhost", {}).get("failed")]
    return out, (results[0] if results else None), failed


def get(dc, api_version, kind, name, namespace=None):
    try:
        return dc.admin.resources.get(api_version=api_version, kind=kind).get(name=name, namespace=namespace).to_dict()
    except NotFoundError:
        return None


@pytest.fixture(params=sorted(FLEETS), scope="module")
def stage(request, devcluster_session):
    """The fleet loaded, with the operator's namespace and a ClusterPolicy as the gpu_operator stage leaves them."""
    dc = devcluster_session
    dc.clear_knobs()
    dc.fleet(request.param)
    platform, namespace, dash_ns, label = FLEETS[request.param]
    created = []
    policies = dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    live = policies.get().items
    if not live:
        policies.create(body={"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                              "metadata": {"name": "cluster-policy"}, "spec": chart_spec()})
        created.insert(0, ("nvidia.com/v1", "ClusterPolicy", "cluster-policy"))
    else:
        # A ClusterPolicy an earlier test file left on this cluster reports where its operator runs (an OLM install
        # of the OpenShift fleet, kept across the fleet switch): the stage writes there (operator_namespace's rule),
        # and dash_ns follows it where the fleet put the dashboard beside the operator.
        reported = (live[0].to_dict().get("status") or {}).get("namespace")
        if reported and reported != namespace:
            dash_ns = reported if dash_ns == namespace else dash_ns
            namespace = reported
    if get(dc, "v1", "Namespace", namespace) is None:
        dc.admin.resources.get(api_version="v1", kind="Namespace").create(
            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        created.insert(0, ("v1", "Namespace", namespace))
    console = get(dc, CONSOLE, "Console", "cluster") if platform == "openshift" else None
    if console is not None:
        dc.admin.resources.get(api_version=CONSOLE, kind="Console").patch(
            name="cluster", body={"spec": {"plugins": [USER_PLUGIN]}}, content_type="application/merge-patch+json")
    yield dc, platform, namespace, dash_ns, label
    if console is not None:
        dc.admin.resources.get(api_version=CONSOLE, kind="Console").patch(
            name="cluster", body={"spec": {"plugins": console["spec"].get("plugins")}},
            content_type="application/merge-patch+json")
    for api_version, kind, name, ns in ((PROMETHEUS, "PrometheusRule", RULE, namespace),
                                        ("v1", "ConfigMap", DASHBOARD, dash_ns),
                                        ("console.openshift.io/v1", "ConsolePlugin", PLUGIN, None),
                                        ("apps/v1", "Deployment", PLUGIN, namespace),
                                        ("v1", "Service", PLUGIN, namespace)):
        try:
            dc.admin.resources.get(api_version=api_version, kind=kind).delete(name=name, namespace=ns)
        except NotFoundError:
            pass
    for api_version, kind, name in reversed(created):
        dc.admin.resources.get(api_version=api_version, kind=kind).delete(name=name)


def test_monitoring_converges_idempotent_and_check_mode_writes_nothing(stage):
    dc, platform, namespace, dash_ns, (label, value) = stage
    t0 = time.monotonic()

    if platform == "openshift":
        # Check mode before the gpu_operator stage has created the operator's namespace (a check run of site on a
        # fresh cluster): the plan, no failure, nothing written.
        mark = dc.audit.mark()
        result = dc.module("gpu_monitoring", {"operator_namespace": "not-installed-yet", "platform": platform}, check=True)
        assert not result.get("failed"), result.get("msg")
        assert "Namespace/not-installed-yet" in [c["key"] for c in result["changes"]]
        dc.audit.settle()
        assert dc.audit.writes(mark) == []

    # Check mode on a cluster without the stage's objects: the plan, every object dry-run, nothing written.
    mark = dc.audit.mark()
    out, result, failed = run(dc, {}, "--check")
    assert not failed, failed
    assert result["changed"] and RULE in " ".join(c["key"] for c in result["changes"])
    dc.audit.settle()
    assert dc.audit.writes(mark) == []
    # The dry runs reached the API server (so its schema validated every object) and stored nothing.
    assert get(dc, PROMETHEUS, "PrometheusRule", RULE, namespace) is None

    out, result, failed = run(dc)
    assert not failed, failed
    assert out["stats"]["localhost"]["failures"] == 0
    assert result["platform"] == platform
    rule = get(dc, PROMETHEUS, "PrometheusRule", RULE, namespace)
    alerts = [r["alert"] for r in rule["spec"]["groups"][0]["rules"]]
    assert {"GPUMemoryAlmostFull", "GPUAllocatedButIdle", "GPUXidError", "GPUTemperatureHigh", "GPUMigConfigFailed",
            "GPUClusterPolicyNotReady", "GPUPodsPending"} == set(alerts)
    # The demo inventory's threshold (95) reached the rule; the ones it leaves keep their defaults.
    exprs = dict((r["alert"], r["expr"]) for r in rule["spec"]["groups"][0]["rules"])
    assert exprs["GPUMemoryAlmostFull"].endswith("> 95") and exprs["GPUTemperatureHigh"] == "DCGM_FI_DEV_GPU_TEMP > 83"
    dashboard = get(dc, "v1", "ConfigMap", DASHBOARD, dash_ns)
    assert dashboard["metadata"]["labels"][label] == value
    assert json.loads(dashboard["data"]["kubegpu-gpu.json"])["panels"]
    policy = dc.admin.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy").get().items[0].to_dict()
    monitor = policy["spec"]["dcgmExporter"]["serviceMonitor"]
    assert monitor["enabled"] is True and monitor["interval"] == "30s" and monitor["honorLabels"] is False
    managers = [m["manager"] for m in policy["metadata"]["managedFields"]]
    assert "kubegpu.platform/monitoring" in managers
    if platform == "openshift":
        ns = get(dc, "v1", "Namespace", namespace)
        assert ns["metadata"]["labels"]["openshift.io/cluster-monitoring"] == "true"
        # NVIDIA's console plugin as its chart installs it, accepted by the API server, and enabled in the console
        # after the plugin the user had there.
        plugin = get(dc, "console.openshift.io/v1", "ConsolePlugin", PLUGIN)
        assert plugin["spec"]["backend"]["service"] == {"name": PLUGIN, "namespace": namespace, "port": 9443,
                                                        "basePath": "/"}
        service = get(dc, "v1", "Service", PLUGIN, namespace)
        secret = service["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"]
        assert service["spec"]["ports"][0]["port"] == 9443
        deployment = get(dc, "apps/v1", "Deployment", PLUGIN, namespace)
        pod = deployment["spec"]["template"]["spec"]
        assert pod["volumes"][0]["secret"]["secretName"] == secret
        assert pod["containers"][0]["image"].startswith("quay.io/edge-infrastructure/console-plugin-nvidia-gpu:")
        assert all(deployment["spec"]["template"]["metadata"]["labels"].get(k) == v
                   for k, v in service["spec"]["selector"].items())
        assert get(dc, CONSOLE, "Console", "cluster")["spec"]["plugins"] == [USER_PLUGIN, PLUGIN]
        assert "Console/cluster" in [c["key"] for c in result["changes"]]
    else:
        for api_version, kind, ns in (("console.openshift.io/v1", "ConsolePlugin", None),
                                      ("apps/v1", "Deployment", namespace), ("v1", "Service", namespace)):
            assert get(dc, api_version, kind, PLUGIN, ns) is None

    # Second run: nothing differs, nothing is written.
    mark = dc.audit.mark()
    out, result, failed = run(dc)
    assert not failed and out["stats"]["localhost"]["changed"] == 0 and result["changes"] == [], json.dumps(result["changes"])[:3000]
    dc.audit.settle()
    assert dc.audit.writes(mark) == []

    if platform != "openshift":
        # The Kubernetes fleet differs in the dashboard's label and namespace and has no OpenShift objects: converge
        # and idempotence prove it; the change below is the same code on both.
        print(f"\nmonitoring on {platform}: check, converge, idempotence in {time.monotonic() - t0:.1f} s")
        return

    # The user tightens a threshold and turns the dashboard and the console plugin off: the rule's field changes,
    # the dashboard and the plugin's objects are pruned, and the plugin leaves the console's list (the user's stays).
    mark = dc.audit.mark()
    variables = {"kubegpu_monitoring": {"service_monitor": {"interval": "30s"},
                                        "alerts": {"gpu_memory_used_percent": 80, "gpu_temperature_celsius": 83},
                                        "dashboard": {"enabled": False},
                                        "openshift": {"console_plugin": False}}}
    out, result, failed = run(dc, variables, "--check")
    assert not failed, failed
    planned = sorted(c["key"] for c in result["changes"])
    dc.audit.settle()
    assert dc.audit.writes(mark) == []
    out, result, failed = run(dc, variables)
    assert not failed, failed
    keys = sorted(c["key"] for c in result["changes"])
    assert keys == planned == sorted(["PrometheusRule/%s/%s" % (namespace, RULE), "ConfigMap/%s/%s" % (dash_ns, DASHBOARD),
                                      "ConsolePlugin/" + PLUGIN, "Deployment/%s/%s" % (namespace, PLUGIN),
                                      "Service/%s/%s" % (namespace, PLUGIN), "Console/cluster"]), keys
    rule = get(dc, PROMETHEUS, "PrometheusRule", RULE, namespace)
    assert [r["expr"] for r in rule["spec"]["groups"][0]["rules"] if r["alert"] == "GPUMemoryAlmostFull"][0].endswith("> 80")
    assert get(dc, "v1", "ConfigMap", DASHBOARD, dash_ns) is None
    assert get(dc, "apps/v1", "Deployment", PLUGIN, namespace) is None
    assert get(dc, "console.openshift.io/v1", "ConsolePlugin", PLUGIN) is None
    assert get(dc, CONSOLE, "Console", "cluster")["spec"]["plugins"] == [USER_PLUGIN]
    dc.audit.settle()
    assert len(dc.audit.writes(mark)) == len(keys)
    print(f"\nmonitoring on {platform}: check, converge, idempotence, change in {time.monotonic() - t0:.1f} s")
