"""The RBAC rules the automation account needs for the Helm charts the stages install, derived from the charts.

Each chart a stage installs on Kubernetes is rendered with `helm template` and the values the stage passes (the
stages' own planning code and role variables compute them here as they do in a run), once per setting a user can
choose that changes what the chart makes (a DRA driver with ComputeDomains, on OpenShift...). From the manifests:

- the kinds the chart makes, with Helm's verbs (get, list, create, patch, update, delete; list and watch of the hook
  Jobs helm waits for): what `helm install`, `upgrade` and `rollback` send;
- every rule of every Role and ClusterRole the chart makes, merged: the API server lets an account create a role
  only with rights it holds itself;
- `bind`, by name, of the roles the chart binds: those it does not make, and its own (helm creates hooks of one
  weight in name order, so a binding may come before its role, which only `bind` allows);
- ClusterRoles with an aggregationRule, which the API server lets only an account holding every right (or
  `escalate`) create;
- for `helm uninstall`: get, list and delete of every kind, and what the chart's delete hooks make.

The result is written to plugins/module_utils/planning/access/chart_rules.py (pure data), which planning/access/rules.py adds to
the stages' rules. Kinds are mapped to their resources by the charts' own CRDs and the table below; an unknown kind
stops the generator, naming it.

    python tools/awx/chart_rules.py            # write the module
    python tools/awx/chart_rules.py --check    # fail when it differs from what the charts give (make docs)

helm: --helm, else the local cluster's (~/.cache/kubegpu/bin/helm), else `helm` on PATH. Charts: --charts, else
KUBEGPU_CHARTS_DIR, else ../shared/charts beside the repository (tools/devcluster/fetch-charts.sh fetches them).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "plugins" / "module_utils" / "planning" / "access" / "chart_rules.py"
sys.path.insert(0, str(REPO / ".cache" / "collections"))
sys.path.insert(0, str(REPO / "tools" / "devcluster"))
# pylint: disable=wrong-import-position
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.access.rbac_rules import (  # noqa: E402
    HELM,
    merge,
    missing,
)
from kubegpu_devcluster import paths  # noqa: E402

# The Kubernetes version the charts are rendered for (the charts refuse to render without one; DESIGN: 1.34 or newer).
KUBE_VERSION = "1.34.0"
# What a chart sees on OpenShift (the DRA driver's chart binds OpenShift's SCC roles there).
OPENSHIFT_API = "security.openshift.io/v1/SecurityContextConstraints"
# helm watches hook Jobs and Pods until they finish (pkg/kube WatchUntilReady: a list, then a watch).
HOOK_WAIT = ("list", "watch")
UNINSTALL = ("get", "list", "delete")
DELETE_HOOKS = ("pre-delete", "post-delete")
RBAC = "rbac.authorization.k8s.io"

# (group, kind) -> (resource, namespaced) of the built-in kinds the charts make, and of CRDs that no chart here
# ships (cert-manager's, which the KServe chart and the DRA driver's webhook ask for certificates).
KINDS = {
    ("", "ConfigMap"): ("configmaps", True),
    ("", "Namespace"): ("namespaces", False),
    ("", "Pod"): ("pods", True),
    ("", "Secret"): ("secrets", True),
    ("", "Service"): ("services", True),
    ("", "ServiceAccount"): ("serviceaccounts", True),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"): ("mutatingadmissionpolicies", False),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"): ("mutatingadmissionpolicybindings", False),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): ("mutatingwebhookconfigurations", False),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): ("validatingadmissionpolicies", False),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): ("validatingadmissionpolicybindings", False),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): ("validatingwebhookconfigurations", False),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): ("customresourcedefinitions", False),
    ("apiregistration.k8s.io", "APIService"): ("apiservices", False),
    ("apps", "DaemonSet"): ("daemonsets", True),
    ("apps", "Deployment"): ("deployments", True),
    ("apps", "StatefulSet"): ("statefulsets", True),
    ("autoscaling", "HorizontalPodAutoscaler"): ("horizontalpodautoscalers", True),
    ("batch", "Job"): ("jobs", True),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"): ("flowschemas", False),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): ("prioritylevelconfigurations", False),
    ("networking.k8s.io", "NetworkPolicy"): ("networkpolicies", True),
    ("node.k8s.io", "RuntimeClass"): ("runtimeclasses", False),
    ("policy", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    (RBAC, "ClusterRole"): ("clusterroles", False),
    (RBAC, "ClusterRoleBinding"): ("clusterrolebindings", False),
    (RBAC, "Role"): ("roles", True),
    (RBAC, "RoleBinding"): ("rolebindings", True),
    ("resource.k8s.io", "DeviceClass"): ("deviceclasses", False),
    ("scheduling.k8s.io", "PriorityClass"): ("priorityclasses", False),
    ("cert-manager.io", "Certificate"): ("certificates", True),
    ("cert-manager.io", "ClusterIssuer"): ("clusterissuers", False),
    ("cert-manager.io", "Issuer"): ("issuers", True),
    ("monitoring.coreos.com", "PrometheusRule"): ("prometheusrules", True),
    ("monitoring.coreos.com", "ServiceMonitor"): ("servicemonitors", True),
}
HEADER = '''# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Generated by tools/awx/chart_rules.py from the charts the stages install (helm template): do not edit.
# Regenerate with `python tools/awx/chart_rules.py` after a chart, its version or the values a stage passes change.
"""The RBAC rules of each Helm chart the stages install, derived from the rendered chart (tools/awx/chart_rules.py).

CHARTS: one entry per chart, in install order: stage, chart, version, release, namespace, the values variants it was
rendered with; `install` (helm install, upgrade, rollback: its kinds with Helm's verbs, what its roles grant, `bind`
of the roles it binds, by name), `uninstall` (helm uninstall: get, list, delete of its kinds and what its
delete hooks make), and `aggregated_roles` (ClusterRoles the API server lets only an account holding every right
create). Each rule says why. planning/access/rules.py decides which of them the automation account gets.

Pure data.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

'''


# Parsing the rendered charts (pure).

def group_of(api_version):
    return api_version.split("/")[0] if "/" in api_version else ""


def kinds_of(manifests):
    """KINDS and the kinds of every CRD among `manifests`: (group, kind) -> (resource, namespaced)."""
    out = dict(KINDS)
    for m in manifests:
        if m.get("kind") == "CustomResourceDefinition":
            spec = m["spec"]
            out[(spec["group"], spec["names"]["kind"])] = (spec["names"]["plural"], spec.get("scope") == "Namespaced")
    return out


def hooks(manifest):
    """The Helm hooks a manifest belongs to (pre-install, post-delete...); () for an ordinary object."""
    text = ((manifest.get("metadata") or {}).get("annotations") or {}).get("helm.sh/hook") or ""
    return tuple(h.strip() for h in text.split(",") if h.strip())


def resource_of(manifest, kinds, chart):
    """(group, resource, namespaced) of a manifest; ValueError naming the kind when the table does not know it."""
    key = (group_of(manifest["apiVersion"]), manifest["kind"])
    if key not in kinds:
        raise ValueError("chart %s makes %s %s (%s), a kind tools/awx/chart_rules.py cannot map to its resource: "
                         "add it to KINDS" % (chart, manifest["kind"], manifest["metadata"].get("name"),
                                              manifest["apiVersion"]))
    resource, namespaced = kinds[key]
    return key[0], resource, namespaced


def _rule(groups, resources, verbs, names=None):
    out = {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)}
    if names:
        out["resourceNames"] = list(names)
    return out


def _roles_made(manifests):
    """{(kind, namespace, name)} of the Roles and ClusterRoles among manifests."""
    out = set()
    for m in manifests:
        if m["kind"] in ("Role", "ClusterRole") and group_of(m["apiVersion"]) == RBAC:
            out.add((m["kind"], m["metadata"].get("namespace", "") if m["kind"] == "Role" else "", m["metadata"]["name"]))
    return out


def needs(manifests, kinds, chart, namespace):
    """What an account needs to make `manifests` with Helm: {"objects", "roles", "binds", "binds_own"} (rules each:
    bind by name of the roles the manifests bind without making them, and of those they make) and "aggregated"
    (names of the ClusterRoles with an aggregationRule)."""
    objects, role_rules, binds, own, aggregated = [], [], set(), set(), []
    made = _roles_made(manifests)
    for m in manifests:
        group, resource, _namespaced = resource_of(m, kinds, chart)
        objects.append(_rule([group], [resource], HELM))
        if m["kind"] in ("Job", "Pod") and hooks(m):
            objects.append(_rule([group], [resource], HOOK_WAIT))
        if group != RBAC:
            continue
        if m["kind"] in ("Role", "ClusterRole"):
            role_rules += m.get("rules") or []
            if m.get("aggregationRule"):
                aggregated.append(m["metadata"]["name"])
        elif m["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            ref = m["roleRef"]
            where = (m["metadata"].get("namespace") or namespace) if ref["kind"] == "Role" else ""
            ((own if (ref["kind"], where, ref["name"]) in made else binds)).add((ref["kind"], ref["name"]))
    objects = merge(objects)

    def bind(refs):
        return merge(_rule([RBAC], [kinds[(RBAC, kind)][0]], ["bind"], [name]) for kind, name in sorted(refs))

    return {"objects": objects, "roles": missing(objects, role_rules), "binds": bind(binds), "binds_own": bind(own),
            "aggregated": sorted(set(aggregated))}


def _wide(rule):
    return any(x == "*" or x.startswith("*/") for x in rule.get("apiGroups", []) + rule.get("resources", []))


def _reasons(*pairs):
    """[{"why", "rules"}] of the (why, rules) pairs that have rules."""
    return [{"why": why, "rules": rules} for why, rules in pairs if rules]


def chart_rules(chart, manifests, kinds, namespace):
    """The rules of one chart from its rendered `manifests` (every values variant together): {"kinds" (namespaced
    and cluster-wide), "install", "uninstall" (each [{"why", "rules"}]), "aggregated_roles"}."""
    made = needs(manifests, kinds, chart, namespace)
    scoped = {"namespaced": set(), "cluster": set()}
    for m in manifests:
        scoped["namespaced" if resource_of(m, kinds, chart)[2] else "cluster"].add(m["kind"])
    install = _reasons(
        ("what helm installs, upgrades and rolls back of chart %s" % chart, made["objects"]),
        ("held to create chart %s's roles (an account grants only rights it holds)" % chart,
         [r for r in made["roles"] if not _wide(r)]),
        ("held to create chart %s's roles; wide: the chart's role grants it on every resource" % chart,
         [r for r in made["roles"] if _wide(r)]),
        ("chart %s binds these roles without creating them" % chart, made["binds"]),
        # Holding a role's rights lets an account bind it, but only once the role exists: helm creates hooks of one
        # weight in name order (gpu-operator's ...-hook-binding before ...-hook-role), which only bind allows. The
        # account holds these roles' rights anyway, so binding them by name adds none.
        ("chart %s binds its own roles, at times before helm creates them (hooks go in name order)" % chart,
         made["binds_own"]))
    gone = merge(_rule([resource_of(m, kinds, chart)[0]], [resource_of(m, kinds, chart)[1]], UNINSTALL)
                 for m in manifests)
    pairs = [("what helm uninstall deletes of chart %s" % chart, gone)]
    delete_hooks = [m for m in manifests if set(hooks(m)) & set(DELETE_HOOKS)]
    if delete_hooks:
        hook = needs(delete_hooks, kinds, chart, namespace)
        pairs += [("what chart %s's delete hooks make (helm uninstall runs them)" % chart,
                   missing(gone, hook["objects"])),
                  ("held to create the roles of chart %s's delete hooks" % chart,
                   missing(gone + hook["objects"], hook["roles"])),
                  ("chart %s's delete hooks bind these roles without creating them" % chart, hook["binds"]),
                  ("chart %s's delete hooks bind their own roles, at times before creating them" % chart,
                   hook["binds_own"])]
    return {"kinds": {k: sorted(v) for k, v in scoped.items()}, "install": install, "uninstall": _reasons(*pairs),
            "aggregated_roles": made["aggregated"]}


# What the stages install, with the values they pass (their planning code and role variables).

def _trusted(value):
    """Role variables as templates Ansible may evaluate (ansible-core 2.19 trusts only marked strings)."""
    from ansible.template import trust_as_template  # pylint: disable=import-outside-toplevel
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    return value


def role_value(role, expression, inventory=None):
    """`expression` evaluated with a role's defaults and vars and the inventory variables `inventory`, as Ansible
    evaluates it in a run (the gpu_operator role computes its chart values this way)."""
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
    from ansible.template import Templar, trust_as_template  # pylint: disable=import-outside-toplevel
    variables = {}
    for part in ("defaults", "vars"):
        path = REPO / "roles" / role / part / "main.yml"
        if path.exists():
            variables.update(_trusted(yaml.safe_load(path.read_text()) or {}))
    # Variables that call the collection's lookups (names) are left out: outside a run the collection's plugins are
    # not loaded, and no chart value depends on them (one that did would fail here as undefined, not pass unseen).
    variables = {k: v for k, v in variables.items() if "lookup(" not in json.dumps(v)}
    variables.update(inventory or {})
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


def _gpu_operator(charts):
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (  # noqa: E501 pylint: disable=import-outside-toplevel
        GPU_OPERATOR_NAMESPACE_KUBERNETES,
    )
    values = "{{ __gpu_operator_chart_values }}"
    return {"stage": "gpu_operator", "chart": "gpu-operator", "release": "gpu-operator",
            "namespace": GPU_OPERATOR_NAMESPACE_KUBERNETES, "path": charts / "gpu-operator",
            "version": role_value("gpu_operator", "{{ __gpu_operator_version }}"),
            "variants": {"defaults": role_value("gpu_operator", values),
                         "one driver per node pool": role_value("gpu_operator", values, {
                             "kubegpu_gpu_operator": {"driver": {"per_node_pool": True}}})}}


def _dra(charts):
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra import (  # noqa: E501 pylint: disable=import-outside-toplevel
        driver_values as dra,
    )

    def values(driver=None, inventory=None):
        # The role merges the user's helm.values (its default turns the webhook off) over the planned values.
        planned = dra.driver_values(dict({"driver_owner": dra.GPU_OPERATOR}, **(driver or {})))["values"]
        return role_value("dra", "{{ __dra_values }}", dict({"__dra_platform": {"driver": {"values": planned}}},
                                                            **(inventory or {})))

    release = dra.release_for()
    return {"stage": "dra", "chart": dra.NEW_NAME, "release": release["name"], "namespace": release["namespace"],
            "path": charts / dra.NEW_NAME, "version": dra.CHART_VERSION,
            "variants": {"defaults": values(),
                         "ComputeDomains": values({"compute_domains": True}),
                         # docs/dra.md: the admission webhook, with cert-manager installed, as a user turns it on.
                         "admission webhook": values(inventory={"kubegpu_dra": {"helm": {"values": {
                             "webhook": {"enabled": True}}}}}),
                         "OpenShift": dict(values(), _api_versions=[OPENSHIFT_API])}}


def _serving(charts):
    # pylint: disable=import-outside-toplevel
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.serving import install, platform, spec
    out = {}
    for mode, facts in (("standard", {}), ("knative", {"knative_serving": True})):
        settings = spec.parse_settings({"mode": mode, "helm": {"charts_dir": str(charts)}})
        plan = platform.detect_platform(facts, settings)
        for release in install.chart_releases(plan, settings, facts):
            entry = out.setdefault(release["chart"], {
                "stage": "serving", "chart": release["chart"], "release": release["name"],
                "namespace": release["namespace"], "path": Path(release["chart_ref"]),
                "version": install.PUBLISHED[release["chart"]]["version"], "variants": {}})
            # Variants that pass the same values render the same chart: the first one's name stands for them.
            if release["values"] not in entry["variants"].values():
                entry["variants"]["%s mode" % mode] = release["values"]
    return list(out.values())


def _tenancy(charts):
    # pylint: disable=import-outside-toplevel
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.tenancy import install, spec
    settings = spec.parse_settings({"helm": {"charts_dir": str(charts)}})
    release = install.install_plan(settings, "kubernetes", False)["charts"][0]
    return {"stage": "tenancy", "chart": release["chart"], "release": release["name"],
            "namespace": release["namespace"], "path": Path(release["chart_ref"]),
            "version": install.KUEUE_CHART["version"], "variants": {"defaults": release["values"]}}


def releases(charts):
    """Every chart the stages install on Kubernetes, in site's order, with its values variants."""
    return [_gpu_operator(charts), _dra(charts), *_serving(charts), _tenancy(charts)]


# Rendering (helm) and writing.

def find_helm(given=None):
    for candidate in (given, paths.bin_dir() / "helm", shutil.which("helm")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


def _plain_version(text):
    return str(text).lstrip("v")


def render(helm, release, values, api_versions=()):
    """The manifests of `helm template` for a release (CRDs and hooks included)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(values, f)
        f.flush()
        cmd = [helm, "template", release["release"], str(release["path"]), "--namespace", release["namespace"],
               "--kube-version", KUBE_VERSION, "--include-crds", "--values", f.name]
        for api in api_versions:
            cmd += ["--api-versions", api]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError("helm template %s failed: %s" % (release["chart"], proc.stderr.strip()))
    return [m for m in yaml.safe_load_all(proc.stdout) if m]


def derive(helm, charts):
    """[chart entry] for the generated module."""
    found = releases(charts)
    rendered = {}
    for release in found:
        declared = yaml.safe_load((release["path"] / "Chart.yaml").read_text())["version"]
        if _plain_version(declared) != _plain_version(release["version"]):
            raise RuntimeError("chart %s at %s is version %s; the stage installs %s: point --charts at that version"
                               % (release["chart"], release["path"], declared, release["version"]))
        manifests, seen = [], set()
        for values in release["variants"].values():
            values = dict(values)
            for m in render(helm, release, values, values.pop("_api_versions", ())):
                key = json.dumps(m, sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    manifests.append(m)
        rendered[release["chart"]] = manifests
    # A chart may make objects of a CRD another chart of the stage brings (kserve-resources, kserve-crd's).
    kinds = kinds_of([m for ms in rendered.values() for m in ms])
    out = []
    for release in found:
        entry = {k: release[k] for k in ("stage", "chart", "release", "namespace")}
        entry["version"] = _plain_version(release["version"])
        entry["variants"] = sorted(release["variants"])
        entry.update(chart_rules(release["chart"], rendered[release["chart"]], kinds, release["namespace"]))
        out.append(entry)
    return out


def _literal(value, indent, lead=0):
    """`value` as a Python literal, each rule on one line where it fits in 140 columns (`lead`: what precedes it on
    its line after the indent)."""
    pad = " " * indent
    text = json.dumps(value, ensure_ascii=False)
    if indent + lead + len(text) + 1 <= 140 or not isinstance(value, (list, dict)):
        return text
    if isinstance(value, list):
        return "[\n" + "".join(pad + "    " + _literal(v, indent + 4) + ",\n" for v in value) + pad + "]"
    return "{\n" + "".join(pad + "    " + json.dumps(k) + ": " + _literal(v, indent + 4, len(json.dumps(k)) + 2) + ",\n"
                           for k, v in value.items()) + pad + "}"


def module_text(entries):
    return HEADER + "CHARTS = " + _literal(entries, 0) + "\n"


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="fail when the module differs; write nothing")
    parser.add_argument("--helm", help="the helm binary")
    parser.add_argument("--charts", type=Path, default=paths.charts_dir(), help="the charts, laid out as shared/charts")
    args = parser.parse_args(argv)
    helm = find_helm(args.helm)
    if not helm:
        print("no helm binary (make binaries builds one, or give --helm)", file=sys.stderr)
        return 2
    if not args.charts.is_dir():
        print(f"no charts at {args.charts} (tools/devcluster/fetch-charts.sh, or give --charts)", file=sys.stderr)
        return 2
    text = module_text(derive(helm, args.charts))
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} out of date: run python tools/awx/chart_rules.py", file=sys.stderr)
            return 1
        print(f"{OUT}: up to date with the charts")
        return 0
    OUT.write_text(text)
    print(f"{OUT}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
