# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Helm release and values of the NVIDIA DRA driver (chart dra-driver-nvidia-gpu 0.4.1).

Facts (shared/reference/dra-kserve-openshift-ai.md, "NVIDIA DRA driver", checked against the
chart's values.yaml and the driver's pkg/featuregates at v0.4.1):
- From 0.4 the chart is dra-driver-nvidia-gpu (oci://registry.k8s.io/dra-driver-nvidia/charts),
  release and namespace dra-driver-nvidia-gpu; up to 25.12 it was nvidia/nvidia-dra-driver-gpu
  from NGC, release and namespace nvidia-dra-driver-gpu. An installed 25.x release is upgraded in
  place with nameOverride=nvidia-dra-driver-gpu (CRDs first); there is no way back to 25.x.
- GPU allocation is refused by the chart unless gpuResourcesEnabledOverride is true: the driver
  must not share a node with the device plugin, which is why DRA nodes form pools of their own
  (pools.py) and the kubelet plugin runs only on nodes labelled nvidia.com/dra-kubelet-plugin=true.
- nvidiaDriverRoot is /run/nvidia/driver when the GPU Operator installs the driver, / for a driver
  installed on the host.
- The driver refuses unknown feature gates and some combinations at start-up; here they are refused
  before anything is installed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.versions import parse_release
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    DEPLOY_PRE_INSTALLED,
    DEPLOY_TRUE,
    DRA_PLUGIN_LABEL,
    DRA_PLUGIN_LABEL_VALUE,
    DRIVER_DEPLOY_LABEL,
)

CHART_VERSION = "0.4.1"
NEW_NAME = "dra-driver-nvidia-gpu"
NEW_CHART = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
OLD_NAME = "nvidia-dra-driver-gpu"
OLD_CHART = "nvidia/nvidia-dra-driver-gpu"
OLD_REPOSITORY = "https://helm.ngc.nvidia.com/nvidia"

GPU_OPERATOR = "gpu-operator"
HOST = "host"
DRIVER_ROOTS = {GPU_OPERATOR: "/run/nvidia/driver", HOST: "/"}
# nvidia.com/gpu.deploy.driver on a node: the operator's driver, or one found on the host.
_DEPLOY_LABEL_OWNER = {DEPLOY_TRUE: GPU_OPERATOR, DEPLOY_PRE_INSTALLED: HOST}

# Calendar releases map onto the 0.x line the driver's gates are versioned in (25.3 -> 0.1,
# 25.8 -> 0.2, 25.12 -> 0.3); 0.4 is the first release under the new name.
_CALENDAR_LINE = {(25, 3): (0, 1), (25, 8): (0, 2), (25, 12): (0, 3)}
# Driver gate -> (first release line, default). Beta gates default to true.
DRIVER_GATES = {
    "TimeSlicingSettings": ((0, 2), False),
    "MPSSupport": ((0, 2), False),
    "IMEXDaemonsWithDNSNames": ((0, 2), True),
    "PassthroughSupport": ((0, 3), False),
    "DynamicMIG": ((0, 3), False),
    "NVMLDeviceHealthCheck": ((0, 3), False),
    "ComputeDomainCliques": ((0, 3), True),
    "CrashOnNVLinkFabricErrors": ((0, 3), True),
    "DeviceMetadata": ((0, 4), False),
}
# Kubernetes logging gates the driver registers as well (component-base).
LOGGING_GATES = {"ContextualLogging": True, "LoggingAlphaOptions": False, "LoggingBetaOptions": True}
EXCLUSIVE_GATES = (
    ("DynamicMIG", "MPSSupport"),
    ("DynamicMIG", "PassthroughSupport"),
    ("DynamicMIG", "NVMLDeviceHealthCheck"),
    ("PassthroughSupport", "NVMLDeviceHealthCheck"),
    ("MPSSupport", "NVMLDeviceHealthCheck"),
)
# gate -> the gate it cannot run without.
REQUIRED_GATES = (("ComputeDomainCliques", "IMEXDaemonsWithDNSNames"), ("DeviceMetadata", "PassthroughSupport"))
# DynamicMIG announces partitionable devices: Kubernetes' DRAPartitionableDevices gate is alpha (off) there.
PARTITIONABLE_ALPHA = ((1, 34), (1, 35))
KUBE_COMPONENTS = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubelet")

# Every values path driver_values can emit; a unit test checks each against the chart's values.yaml.
VALUE_PATHS = (
    "gpuResourcesEnabledOverride",
    "resources.gpus.enabled",
    "resources.computeDomains.enabled",
    "nvidiaDriverRoot",
    "kubeletPlugin.nodeSelector",
    "featureGates",
    "nameOverride",
    "logVerbosity",
)
_SETTINGS = ("chart_version", "driver_owner", "feature_gates", "compute_domains", "log_verbosity")


def release_line(chart_version):
    """Return the driver's (major, minor) release line on the 0.x scale for a chart version.

    "0.4.1" -> (0, 4); "25.12.0" -> (0, 3). Raises DraError for versions that were never released.
    """
    release = parse_release(chart_version, "DRA driver chart_version")
    if release[0] == 0 and release[1] >= 4:
        return release[:2]
    line = _CALENDAR_LINE.get(release[:2])
    if line is None:
        raise DraError(
            "DRA driver chart_version is %r; expected 0.4.x or later (dra-driver-nvidia-gpu), or 25.3.x, 25.8.x or "
            "25.12.x (nvidia-dra-driver-gpu)" % (chart_version,)
        )
    return line


def release_for(chart_version=CHART_VERSION, installed=None):
    """Return {name, namespace, chart, repository, chart_version, name_override} for installing the driver.

    installed is the release found in the cluster ({name, namespace, chart_version}) or None. An
    installed 25.x release is upgraded where it is, under its old name; a downgrade is refused.
    """
    line = release_line(chart_version)
    new = line >= (0, 4)
    release = {"name": NEW_NAME if new else OLD_NAME, "namespace": NEW_NAME if new else OLD_NAME,
               "chart": NEW_CHART if new else OLD_CHART, "repository": None if new else OLD_REPOSITORY,
               "chart_version": chart_version, "name_override": None}
    if installed:
        installed_line = release_line(installed.get("chart_version"))
        if installed_line > line:
            raise DraError(
                "DRA driver %s (release %s/%s) is installed; chart_version %s would downgrade it, which the driver "
                "does not support (keep chart_version %s or later)"
                % (installed.get("chart_version"), installed.get("namespace"), installed.get("name"), chart_version,
                   installed.get("chart_version"))
            )
        if new and installed_line < (0, 4):
            release.update(name=installed.get("name") or OLD_NAME, namespace=installed.get("namespace") or OLD_NAME,
                           name_override=OLD_NAME)
    return release


def installed_from_helm(status):
    """The release release_for takes as installed, from kubernetes.core.helm_info's `status`; None when absent.

    helm_info names the chart "<chart>-<version>" (nvidia-dra-driver-gpu-25.12.0). A release of another chart
    under the old name is refused: upgrading it in place would replace whatever it is.
    """
    if not status:
        return None
    if not isinstance(status, Mapping) or not status.get("name"):
        raise DraError("installed_release is %r; expected kubernetes.core.helm_info's status (name, namespace, "
                       "chart)" % (status,))
    chart = str(status.get("chart") or "")
    prefix = "%s-" % OLD_NAME
    if not chart.startswith(prefix):
        raise DraError(
            "Helm release %s/%s is chart %r, not %s: the DRA driver cannot be upgraded in place over it; uninstall it "
            "or rename it" % (status.get("namespace"), status["name"], chart, OLD_NAME))
    return {"name": status["name"], "namespace": status.get("namespace") or OLD_NAME,
            "chart_version": chart[len(prefix):]}


def driver_owner_from_nodes(nodes):
    """Return "gpu-operator" or "host" from the DRA nodes' nvidia.com/gpu.deploy.driver label, None if unknown.

    Raises DraError when the nodes disagree: one chart release has one nvidiaDriverRoot.
    """
    owners = {}
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        owner = _DEPLOY_LABEL_OWNER.get(labels.get(DRIVER_DEPLOY_LABEL))
        if owner is not None:
            owners.setdefault(owner, []).append(node["metadata"]["name"])
    if len(owners) > 1:
        raise DraError(
            "DRA nodes disagree on who installs the NVIDIA driver (%s): %s; the DRA driver has one nvidiaDriverRoot "
            "for every node: make the nodes alike, or set kubegpu_dra.driver.driver_owner"
            % (DRIVER_DEPLOY_LABEL, "; ".join("%s: %s" % (owner, ", ".join(sorted(names)))
                                              for owner, names in sorted(owners.items())))
        )
    return next(iter(owners), None)


def driver_values(settings=None, kubernetes_version=None, needed_gates=None, installed=None):
    """Return {release, values, warnings, requirements} for the DRA driver chart.

    settings: kubegpu_dra.driver ({chart_version, driver_owner, feature_gates, compute_domains,
    log_verbosity}); driver_owner is "gpu-operator" or "host" (driver_owner_from_nodes can tell).
    kubernetes_version: the API server's version, for gates that need Kubernetes gates.
    needed_gates: {gate: claim template name} the claim templates need (claim_templates.needed_gates).
    installed: the release found in the cluster, see release_for.
    requirements lists what the control plane must have, which the collection cannot check.
    Raises DraError naming the field, the value and what is valid.
    """
    settings = {} if settings is None else settings
    if not isinstance(settings, Mapping):
        raise DraError("kubegpu_dra.driver is %r; expected a mapping with keys %s" % (settings, ", ".join(_SETTINGS)))
    unknown = sorted(str(key) for key in settings if key not in _SETTINGS)
    if unknown:
        raise DraError("kubegpu_dra.driver: unknown key%s %s (valid: %s)"
                       % ("s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(_SETTINGS)))
    chart_version = settings.get("chart_version") or CHART_VERSION
    release = release_for(chart_version, installed)
    line = release_line(chart_version)
    owner = settings.get("driver_owner")
    if owner not in DRIVER_ROOTS:
        raise DraError(
            "kubegpu_dra.driver.driver_owner is %r; expected %s (the GPU Operator installs the driver: "
            "nvidiaDriverRoot %s) or %s (a driver installed on the host: nvidiaDriverRoot %s)"
            % (owner, GPU_OPERATOR, DRIVER_ROOTS[GPU_OPERATOR], HOST, DRIVER_ROOTS[HOST])
        )
    known = _known_gates(line)
    gates = _user_gates(settings.get("feature_gates"), line, known)
    gates = _add_needed(gates, needed_gates or {}, line, known)
    _check_combinations(gates, known)
    compute_domains = settings.get("compute_domains", False)
    if not isinstance(compute_domains, bool):
        raise DraError("kubegpu_dra.driver.compute_domains is %r; expected true or false" % (compute_domains,))
    values = {
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": compute_domains}},
        "nvidiaDriverRoot": DRIVER_ROOTS[owner],
        "kubeletPlugin": {"nodeSelector": {DRA_PLUGIN_LABEL: DRA_PLUGIN_LABEL_VALUE}},
        "featureGates": gates,
    }
    if release["name_override"]:
        values["nameOverride"] = release["name_override"]
    verbosity = settings.get("log_verbosity")
    if verbosity is not None:
        if isinstance(verbosity, bool) or not isinstance(verbosity, int) or verbosity < 0:
            raise DraError("kubegpu_dra.driver.log_verbosity is %r; expected a whole number >= 0" % (verbosity,))
        values["logVerbosity"] = str(verbosity)   # the chart's default is the string "4"
    warnings, requirements = [], []
    if release["name_override"]:
        warnings.append(
            "DRA driver %s/%s (25.x) is upgraded to %s in place with nameOverride %s; apply the new chart's CRDs "
            "first, and note that there is no way back to 25.x" % (release["namespace"], release["name"],
                                                                   chart_version, OLD_NAME))
    if _effective(gates, known, "DynamicMIG") and kubernetes_version:
        kube = parse_release(kubernetes_version, "Kubernetes version")[:2]
        if PARTITIONABLE_ALPHA[0] <= kube <= PARTITIONABLE_ALPHA[1]:
            requirements.append(
                "driver gate DynamicMIG needs the Kubernetes feature gate DRAPartitionableDevices=true on %s "
                "(alpha, off by default, in Kubernetes 1.34-1.35)" % ", ".join(KUBE_COMPONENTS))
    return {"release": release, "values": values, "warnings": warnings, "requirements": requirements}


def _user_gates(raw, line, known):
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise DraError("kubegpu_dra.driver.feature_gates is %r; expected a mapping {gate: true|false}" % (raw,))
    gates = {}
    for name, value in raw.items():
        if name not in known:
            later = DRIVER_GATES.get(name)
            hint = (" (%s arrived with driver %d.%d)" % (name, later[0][0], later[0][1])) if later else ""
            raise DraError(
                "kubegpu_dra.driver.feature_gates: unknown gate %r for driver %d.%d%s (valid: %s)"
                % (name, line[0], line[1], hint, ", ".join(sorted(known)))
            )
        if not isinstance(value, bool):
            raise DraError("kubegpu_dra.driver.feature_gates.%s is %r; expected true or false" % (name, value))
        gates[name] = value
    return gates


def _known_gates(line):
    known = dict((name, default) for name, (since, default) in DRIVER_GATES.items() if since <= line)
    known.update(LOGGING_GATES)
    return known


def _add_needed(gates, needed, line, known):
    """Turn on the gates claim templates need; refuse one the user turned off or the driver lacks."""
    gates = dict(gates)
    for gate, template in sorted(needed.items()):
        if gate not in known:
            raise DraError(
                "claim template '%s' needs the driver gate %s, which driver %d.%d does not have; use chart_version "
                "%s or later" % (template, gate, line[0], line[1], CHART_VERSION)
            )
        if gates.get(gate) is False:
            raise DraError(
                "kubegpu_dra.driver.feature_gates.%s is false, but claim template '%s' needs it (its sharing block "
                "is refused by the driver without it): remove the setting, or the template's sharing" % (gate, template)
            )
        gates[gate] = True
    return dict(sorted(gates.items()))


def _effective(gates, known, name):
    """Whether a gate will be on: the value set, else the driver's default; a gate the driver lacks is off."""
    return gates.get(name, known.get(name, False))


def _check_combinations(gates, known):
    for first, second in EXCLUSIVE_GATES:
        if _effective(gates, known, first) and _effective(gates, known, second):
            raise DraError(
                "kubegpu_dra.driver.feature_gates: %s and %s cannot both be enabled (the driver refuses to start); "
                "turn one of them off" % (first, second)
            )
    for gate, required in REQUIRED_GATES:
        if _effective(gates, known, gate) and not _effective(gates, known, required):
            raise DraError(
                "kubegpu_dra.driver.feature_gates: %s needs %s, which is off; enable %s or turn %s off"
                % (gate, required, required, gate)
            )
