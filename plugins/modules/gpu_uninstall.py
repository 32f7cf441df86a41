#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_uninstall
short_description: Remove what one stage of the collection wrote, leaving what others made
version_added: 0.1.0
description:
  - Undoes one stage (O(stage)) of the collection. The C(uninstall) role calls it for every stage in the reverse order
    of C(site) (monitoring, serving, tenancy, dra, node_pools, gpu_operator); see docs/uninstall.md.
  - Finds what is the collection's by its marks, never by name alone - the label
    C(app.kubernetes.io/managed-by=kubegpu.platform) (with the stage's own label, such as C(kubegpu.io/serving-model))
    or one of the collection's field managers (C(kubegpu.platform), C(kubegpu.platform/<stage>)) holding fields of
    the object. Objects someone else made are left alone; where a stage only set fields of someone else's object
    (a MachineSet's template labels), those fields are given back instead.
  - Deletes in steps (models, then runtimes, then the serving platform, then its operators...), and waits (the
    collection's one waiter) until each step's objects are gone before the next, so that each controller still
    runs while the objects it finalizes go. An OLM install goes with its Subscription, the CSV it installed and its
    OperatorGroup; a Helm release of the stage's charts with C(helm uninstall), and the namespace Helm created for
    it; namespaces the collection created (labelled managed-by) go last, with the gpu_operator stage.
  - When the collection installed OpenShift AI (its C(rhods-operator) Subscription carries the collection's field
    manager), the serving stage also removes what the operator made by itself, in the order of Red Hat's uninstall
    - the DSCInitialization after the DataScienceCluster, then the operator (OLM deletes the webhooks it created from
    the CSV), then the operator's namespaces C(redhat-ods-applications) and C(redhat-ods-monitoring). OpenShift AI
    installed by someone else is left whole.
  - Node pool labels are not this module's - the C(uninstall) role hands the nodes back through C(dra_nodes) and
    C(gpu_node_pools) with no pools (their released nodes), which wait for mig-manager and the device plugin; the
    node_pools stage here then removes the collection's annotations from nodes in no pool and puts back the device
    plugin's deploy label the DRA stage took.
  - Check mode lists everything that would be removed and sends each delete as a server-side dry run; nothing is
    written. A second run finds nothing of the collection's and writes nothing.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  stage:
    description: The stage to undo.
    type: str
    required: true
    choices: [monitoring, serving, tenancy, dra, node_pools, gpu_operator]
  helm_binary:
    description:
      - The helm binary for the stage's Helm releases. Only run when the stage installs charts; when it cannot be
        run, the module fails only if the cluster holds a release of the stage's charts.
    type: str
    default: helm
  timeout:
    description: Seconds to wait for one stage's objects to be gone (the whole wait, across rounds).
    default: 600
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - kubegpu.platform.wait
attributes:
  check_mode:
    support: full
    description: Lists what would be removed, sends each delete as a server-side dry run and uninstalls no release.
  diff_mode:
    support: full
    description: Shows each removed object's metadata and spec before, and nothing after.
requirements:
  - kubernetes >= 24.2.0
  - kubernetes.core collection
  - helm (for stages whose charts were installed)
"""

EXAMPLES = r"""
- name: See what undoing the serving stage would remove
  kubegpu.platform.gpu_uninstall:
    stage: serving
  check_mode: true
  register: serving_removal

- name: Undo the DRA stage (claim templates, then the DRA driver release)
  kubegpu.platform.gpu_uninstall:
    stage: dra
    helm_binary: /usr/local/bin/helm
    wait_round: 30
    wait_started: "{{ started }}"
  register: dra_removal
  until: dra_removal is failed or dra_removal.ready
  retries: 21
  delay: 1
"""

RETURN = r"""
stage:
  description: The stage undone.
  returned: always
  type: str
steps:
  description:
    - The plan, in order, C(step) (what it removes) with the keys (C(kind/namespace/name) or C(kind/name)) it
      C(delete)s, C(release)s (fields given back) and the Helm releases (C(namespace/name)) it uninstalls. Read this
      round; earlier rounds' removals are in RV(changes).
  returned: always
  type: list
  elements: dict
ready:
  description: False when the round (O(wait_round)) ended before every step's objects were gone; call again.
  returned: always
  type: bool
progress:
  description: The waiter's progress of the last wait (what is still there, for how long).
  returned: when a step waited
  type: dict
changes:
  description:
    - Each object removed (or that would be, in check mode), in order, with C(key), C(kind), C(namespace), C(name),
      C(fields) (C((deleted)), C((uninstalled)) for a Helm release, or the fields given back) and C(before)
      (metadata and spec) and C(after) (null).
  returned: always
  type: list
  elements: dict
diff:
  description:
    - C(before) and C(after), each a mapping of object key (C(kind/name) or C(kind/namespace/name)) to the fields that
      differ; an object changed twice in a run shows its first before and its last after.
    - Only in diff mode (C(--diff)), built from RV(changes), which lists the same changes in every mode.
  returned: in diff mode
  type: dict
"""

import json
import os

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.apply import (
    Change,
    change_report,
    delete_object,
    patch_metadata,
    update_object,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import (
    ClusterError,
    DynamicApiError,
    NotFoundError,
    describe_api_error,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.converge import key
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import Target, gone
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.monitoring.objects import (
    console_plugins,
    set_console_plugins,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import MONITORING_FIELD_MANAGER
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.uninstall.plan import (
    CHARTS,
    ORDER,
    helm_namespace_removable,
    plan_stage,
    reads,
    summary,
)

HELM_SECRET_SELECTOR = "owner=helm"


def observe(cluster, stage):
    """Every object of the kinds the stage's rules name, {(api_version, kind): [object]}, each kind in the first of
    its versions the server serves (plan.reads)."""
    return dict(((api_version, kind), cluster.list(api_version, kind))
                for api_version, kind in reads(stage, lambda v, k: cluster.resource(v, k) is not None))


class Helm(object):
    """helm list / uninstall through the binary (the releases' state lives in Secrets only Helm reads well)."""

    def __init__(self, module, binary):
        self.module, self.binary = module, binary
        # The cluster as the module reaches it (its options, else the K8S_AUTH_* variables AWX injects), in helm's
        # own variables, as kubernetes.core.helm passes them.
        self.env = {}
        for option, variable, helm_variable in (("kubeconfig", "K8S_AUTH_KUBECONFIG", "KUBECONFIG"),
                                                ("context", "K8S_AUTH_CONTEXT", "HELM_KUBECONTEXT"),
                                                ("host", "K8S_AUTH_HOST", "HELM_KUBEAPISERVER"),
                                                ("api_key", "K8S_AUTH_API_KEY", "HELM_KUBETOKEN"),
                                                ("ca_cert", "K8S_AUTH_SSL_CA_CERT", "HELM_KUBECAFILE")):
            value = module.params.get(option) or os.environ.get(variable)
            if value and not isinstance(value, dict):
                self.env[helm_variable] = str(value)
        verify = module.params.get("validate_certs")
        self.flags = ["--kube-insecure-skip-tls-verify"] if verify is False or \
            os.environ.get("K8S_AUTH_VERIFY_SSL", "").lower() in ("false", "no", "0") else []

    def _path(self):
        if os.path.sep in self.binary:
            return self.binary if os.access(self.binary, os.X_OK) else None
        return self.module.get_bin_path(self.binary)

    def releases(self, cluster, stage):
        """The cluster's releases (helm list -A); without helm, [] unless a release of the stage's charts exists."""
        path = self._path()
        if path is None:
            secrets = cluster.list("v1", "Secret", label_selector=HELM_SECRET_SELECTOR)
            names = sorted(set(((s["metadata"].get("labels") or {}).get("name")) for s in secrets))
            found = [n for n in names if n in CHARTS.get(stage, {})]
            if found:
                self.module.fail_json(msg="stage %s: Helm release%s %s of the collection's charts found, but helm (%s) "
                                          "cannot be run: set helm_binary (uninstall_helm_binary)"
                                          % (stage, "s" if len(found) > 1 else "", ", ".join(found), self.binary))
            return []
        rc, out, err = self.module.run_command([path, "list", "--all-namespaces", "--all", "--output", "json"] + self.flags,
                                               environ_update=self.env)
        if rc != 0:
            self.module.fail_json(msg="helm list failed (rc %d): %s" % (rc, err.strip() or out.strip()))
        return json.loads(out or "[]") or []

    def uninstall(self, release):
        rc, out, err = self.module.run_command(
            [self._path(), "uninstall", release["name"], "--namespace", release["namespace"], "--wait"] + self.flags,
            environ_update=self.env)
        if rc != 0 and "not found" not in (err or ""):
            self.module.fail_json(msg="helm uninstall %s in %s failed (rc %d): %s"
                                      % (release["name"], release["namespace"], rc, err.strip() or out.strip()))


def release_fields(cluster, obj, manager, check):
    """Give back the fields `manager` holds: a server-side apply of nothing under it (the server removes the fields
    only it held, and keeps those others hold too). Returns the Change."""
    meta = obj["metadata"]
    owned = [e for e in meta.get("managedFields") or [] if e.get("manager") == manager]
    change = Change(obj["kind"], meta["name"], meta.get("namespace"), ["(fields of %s)" % manager],
                    before={"metadata": {"managedFields": owned}}, after=None)
    body = {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "metadata": dict((k, meta[k]) for k in ("name", "namespace") if meta.get(k))}
    resource = cluster.resource(obj["apiVersion"], obj["kind"])
    kwargs = {"dry_run": "All"} if check else {}
    try:
        cluster.write("give back the fields of %s on %s" % (manager, key(obj)),
                      lambda: cluster.dynamic.server_side_apply(resource, body=body, name=meta["name"],
                                                                namespace=meta.get("namespace"),
                                                                field_manager=manager, force_conflicts=True, **kwargs))
    except NotFoundError:
        pass
    except DynamicApiError as e:
        raise ClusterError(describe_api_error("give back fields of %s" % key(obj), e))
    return change


def _reader(objects):
    """A wait read: {key: the object as now, or None once gone}, one GET per object still there."""
    def read(cluster):
        out = {}
        for obj in objects:
            meta = obj["metadata"]
            out[key(obj)] = cluster.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        return out
    return read


def remove_console_plugin(cluster, console, check):
    """NVIDIA's plugin out of the Console's spec.plugins, read-modify-write (the list is shared with the user's
    plugins and atomic for apply); a conflict re-reads, so a plugin another writer added meanwhile stays."""
    meta = console["metadata"]
    before = {"spec": {"plugins": list((console.get("spec") or {}).get("plugins") or [])}}
    after = {"spec": {"plugins": console_plugins(console, enable=False)}}
    sent = update_object(cluster, console["apiVersion"], console["kind"], meta["name"],
                         lambda live: set_console_plugins(live, False),
                         field_manager=MONITORING_FIELD_MANAGER, check_mode=check)
    return Change(console["kind"], meta["name"], None, ["spec.plugins"] if sent or check else [], before, after)


def run(module):
    cluster, check, p = module.cluster, module.check_mode, module.params
    stage = p["stage"]
    helm = Helm(module, p["helm_binary"])
    releases = helm.releases(cluster, stage) if CHARTS.get(stage) else []
    steps = plan_stage(stage, observe(cluster, stage), releases)
    result = {"stage": stage, "steps": summary(steps), "ready": True}
    changes = []
    for step in steps:
        waited = []
        for obj in step["delete"]:
            if (obj["metadata"].get("deletionTimestamp")):
                waited.append(obj)   # an earlier round (or someone) deleted it: only wait
                continue
            changes.append(delete_object(cluster, obj, check))
            waited.append(obj)
        for node, reset in step["nodes"]:
            meta = node["metadata"]
            changes.append(patch_metadata(cluster, "v1", "Node", meta["name"], reset.get("labels") or {},
                                          reset.get("annotations") or {}, check, meta.get("labels") or {},
                                          meta.get("annotations") or {}))
        for obj, managers in step["release"]:
            changes.extend(release_fields(cluster, obj, manager, check) for manager in managers)
        for console in step["plugins"]:
            changes.append(remove_console_plugin(cluster, console, check))
        for release in step["helm"]:
            changes.append(Change("HelmRelease", release["name"], release["namespace"], ["(uninstalled)"],
                                  before={"metadata": {"name": release["name"], "namespace": release["namespace"]}}))
            if check:
                continue
            helm.uninstall(release)
            namespace = cluster.get("v1", "Namespace", release["namespace"])
            if helm_namespace_removable(namespace, helm.releases(cluster, stage)):
                namespace = dict(namespace, apiVersion="v1", kind="Namespace")
                changes.append(delete_object(cluster, namespace, False))
                waited.append(namespace)
        if check or not waited:
            continue
        target = Target.custom("%s: %s" % (stage, step["title"]), _reader(waited), names=[key(o) for o in waited])
        outcome = module.wait_for(target, gone(), result, interval=1.0)
        if not outcome.ready:
            break   # the round is over: the task's until calls again, which reads and plans afresh
    result.update(change_report(changes))
    return result


def main():
    module = KubegpuModule(
        argument_spec={
            "stage": {"type": "str", "required": True, "choices": list(ORDER)},
            "helm_binary": {"type": "str", "default": "helm"},
        },
        waits="always",  # no `wait` to leave out: a step removes what the one before it needed gone
        timeout=600,
        supports_check_mode=True,
    )
    module.run(run)


if __name__ == "__main__":
    main()
