"""MIG Manager: mig-parted's reconfigure on a node whose nvidia.com/mig.config label changes.

Follows shared/reference/gpu-operator.md ("MIG", "Pain points", "Timing") and gpu-node-labels.md ("Labels
during changes"); where they are silent, NVIDIA/mig-parted pkg/mig/reconfigure/reconfigure.go. Acts only
where a mig-manager pod would run: while DaemonSet `nvidia-mig-manager` exists (the gpu-operator simulator
keeps it for the reconciled ClusterPolicy) and on nodes labelled nvidia.com/mig.capable=true and
nvidia.com/gpu.deploy.mig-manager=true.

The configuration applied last is recorded on the node in the annotation devcluster.kubegpu.io/mig-applied
(its name) and devcluster.kubegpu.io/mig-geometry (per GPU index: null for MIG disabled, else
{profile: count}, JSON); a node without them has all-disabled applied, as the fleets start. When the label
differs from the applied name (and the label was not already tried and failed: mig-manager acts on a label
change, and once on each label when its pod starts, i.e. when the DaemonSet's pod template changes):

1. The mig-parted document is the ConfigMap named by the DaemonSet's `mig-parted-config` volume (the
   ClusterPolicy's spec.migManager.config.name; key config.yaml) in the DaemonSet's namespace. Without a
   name, the configs the operator generates per node since v26.3 from the hardware
   (kubegpu_devcluster.hardware): all-disabled, all-enabled, all-<profile> ('+' written '.', as
   mig-parted's builder does) and all-balanced. A named ConfigMap that does not exist: the mig-manager pod
   cannot start (its volume is missing), nothing happens until it exists. The ConfigMap's content is read at
   each reconfiguration, from the copy this simulator's ConfigMap watch keeps (as the node's kubelet keeps the
   mounted file current), and from the API server when that copy lacks the selected name. The name comes from
   the DaemonSet, so a label set right after a change of spec.migManager.config, before the operator has
   rewritten the DaemonSet, meets the old pods and the old configs (upstream has the same race): wait for the
   ClusterPolicy's new generation to be ready first. A label written after the new template reaches the new
   pods, even when this simulator's Node watch delivers it before its DaemonSet watch delivers the template (the
   DaemonSet is read again before such a label fails).
2. The selected name missing from the document (or a document that does not parse): state `failed` at once,
   before anything is paused (`assert --valid-config` runs first upstream).
3. The selected geometry equal to the applied one: `success` at once ("already applied").
4. Otherwise mig.config.state=pending and every nvidia.com/gpu.deploy.{device-plugin,gpu-feature-discovery,
   dcgm-exporter,dcgm,nvsm,client} that is "true" becomes paused-for-mig-change (client: mig-parted v0.15 /
   GPU Operator 26.7, per the reference; upstream also pauses labels that are absent, this simulator does
   not add labels). After `mig-manager.seconds` the geometry is applied: an unknown profile for the GPU
   model, a count above the profile's maximum, more memory slices than the GPU has (8; A30 4) or more
   compute slices (7; A30 4) -> `failed`, the paused labels back to "true", the applied annotations
   unchanged. So does a config none of whose entries applies to the node's GPU (device-filter not
   matching): that is this local cluster's choice, to make a wrong filter visible; real mig-parted skips
   such entries and reports success with the geometry unchanged. Entries apply to the GPUs selected by
   `devices` (all or indices); GPUs no entry selects keep their geometry, as upstream.
5. Success: the paused labels back to "true", the applied annotations written, and state `success` in the
   same request. As upstream (reference "Timing"), success comes BEFORE the device plugin has re-registered:
   allocatable catches up later (device-plugin simulator).

Not simulated: WITH_REBOOT (state rebooting), host GPU clients, pod evictions.

Knobs (ConfigMap kubegpu-devcluster/simulator-knobs):
  mig-manager.seconds      time a reconfiguration spends pending (default 1)
  mig-manager.fail_nodes   comma-separated node names whose reconfiguration ends in `failed`
  mig-manager.hang_nodes   comma-separated node names that stay pending with paused labels for as long as
                           they are listed (gpu-operator#2833: GPU-client shutdown timeout)

What it decides is in decisions/mig_manager.py, pure functions with their cases in
tools/devcluster/tests/cases/mig-manager/; this controller reads the objects, keeps the time a change takes and
writes what the decision returns.
"""
from __future__ import annotations

import json
import time

from .decisions import mig_manager as decide
from .decisions.mig_manager import mig_configs
from .framework import KNOBS_CONFIGMAP, KNOBS_NAMESPACE, Simulator, log
from .gpu_operator import MIG_MANAGER_DS, pod_configmap


def _pods_of(ds: dict) -> str:
    """What the mig-manager pods run: the DaemonSet (its uid) and its pod template. A change restarts them."""
    return json.dumps([ds["metadata"]["uid"], ds["spec"].get("template")], sort_keys=True)


class MigManagerSimulator(Simulator):
    name = "mig-manager"
    # ConfigMaps are watched for the mig-parted document, as each node's kubelet watches the ConfigMap its
    # mig-manager pod mounts: a batch's hundreds of starts read the watched copy, not the API server each.
    watches = {"Node": "v1", "DaemonSet": "apps/v1", "ConfigMap": "v1"}
    # A batch starts hundreds of nodes at once: the knobs are read once per quarter second, not per node. Knobs are
    # read when a reconfiguration starts and when it is due (at least mig-manager.seconds later), and every second
    # while a node hangs, so a knob set before a run is always seen.
    knobs_ttl = 0.25
    workers = 16
    cached = frozenset({"Node", "ConfigMap"})
    status_blind = frozenset({"DaemonSet"})

    def __init__(self, kubeconfig: str):
        super().__init__(kubeconfig)
        self._jobs = {}     # node name -> {"uid", "config", "geometry" or "error", "due", "paused"}
        self._failed = {}   # node uid -> the label value that failed (retried after a label change or a restart)
        self._pods = None   # the DaemonSet's uid and pod template: a change restarts the mig-manager pods
        self._ds = {}       # namespace -> the mig-manager DaemonSet, as its last reconcile read it
        self._configs = {}  # (namespace, ConfigMap name) -> (resourceVersion, its mig-configs parsed)

    def _daemonset(self) -> dict | None:
        """The DaemonSet as its watch last delivered it (a batch's nodes start without a list call each)."""
        return self._ds[sorted(self._ds)[0]] if self._ds else None

    def _mig_configs(self, cm: dict) -> dict:
        """The ConfigMap's mig-configs, parsed once per resourceVersion (a batch's nodes share one config file)."""
        meta = cm["metadata"]
        key = (meta["namespace"], meta["name"])
        cached = self._configs.get(key)
        if cached and cached[0] == meta["resourceVersion"]:
            return cached[1]
        configs = mig_configs((cm.get("data") or {}).get("config.yaml") or "")
        self._configs[key] = (meta["resourceVersion"], configs)
        return configs

    def _document(self, namespace: str, name: str, wanted: str) -> dict | None:
        """The mig-parted ConfigMap as the watch last delivered it; read again when it lacks `wanted` or is not
        there (a ConfigMap written just before the label may not have been delivered yet). None: it does not
        exist."""
        cm = self.watched("ConfigMap", namespace, name)
        if cm is None or wanted not in self._mig_configs(cm):
            fresh = self.get("ConfigMap", namespace, name)
            if fresh is None:
                return None
            cm = fresh.to_dict()
            self.remember("ConfigMap", cm)
        return cm

    def _patch(self, name: str, labels: dict, annotations: dict | None = None) -> None:
        meta = {"labels": labels}
        if annotations:
            meta["annotations"] = annotations
        self.remember("Node", self.api("Node").patch(name=name, body={"metadata": meta},
                                                     content_type="application/merge-patch+json"))

    def reconcile(self, kind, key, obj):
        if kind == "ConfigMap":
            if (key[1], key[2]) == (KNOBS_NAMESPACE, KNOBS_CONFIGMAP):   # a knob set: seen by the next look
                self.knobs.invalidate()
            return
        if kind == "DaemonSet":
            if key[2] != MIG_MANAGER_DS:
                return
            raw = None if obj is None else obj.to_dict()
            if raw is None:
                self._ds.pop(key[1], None)
            else:
                self._ds[key[1]] = raw
            sig = None if raw is None else _pods_of(raw)
            if sig != self._pods:   # the pods (re)started: each looks at its node's label once, failed or not
                self._pods = sig
                self._failed.clear()
                for node in self.api("Node").get(label_selector="nvidia.com/mig.capable=true").items:
                    self.requeue("Node", None, node.metadata.name)
            return
        name = key[2]
        if obj is None:
            self._jobs.pop(name, None)
            return
        node = obj.to_dict()
        meta = node["metadata"]
        job = self._jobs.get(name)
        if job is not None and job["uid"] != meta["uid"]:   # the node was replaced (fleet reloaded)
            del self._jobs[name]
            job = None
        if job is not None:
            return self._progress(node, job)
        wanted = decide.acts_on(node, self._failed.get(meta["uid"]))
        if wanted is None:
            return
        ds = self._daemonset()
        if ds is None:   # no mig-manager pod runs: label changes wait for it
            return
        self._start(node, ds, wanted)

    def _pods_restarted(self, ds: dict, node: str) -> bool:
        """Whether the DaemonSet's pod template differs from the one of `ds`, the copy this reconcile used (its
        watch delivered it). The Node and DaemonSet watches deliver side by side, so a label written right after a
        new template (gpu_node_pools waits for it) can be reconciled before the template's own event, or while
        another worker takes it in. The simulated pods restart at the template change, so they must read such a
        label with the new template: read the DaemonSet again before failing (failures are rare; the roll-out's
        thousands of starts keep using the watched copy), take the new template in and look at the node again."""
        namespace = ds["metadata"]["namespace"]
        fresh = self.get("DaemonSet", namespace, MIG_MANAGER_DS)
        if fresh is None or _pods_of(fresh.to_dict()) == _pods_of(ds):
            return False
        self.reconcile("DaemonSet", ("DaemonSet", namespace, MIG_MANAGER_DS), fresh)
        self.requeue("Node", None, node)
        return True

    def _write(self, node: dict, config: str, step: decide.Step) -> None:
        """Write a step's patch and remember its outcome: a failed label is not tried again until it changes."""
        meta = node["metadata"]
        if step.outcome == "failed":
            log.info("mig-manager: %s: config %s failed: %s", meta["name"], config, step.reason)
            self._failed[meta["uid"]] = config
        elif step.outcome == "success":
            self._failed.pop(meta["uid"], None)
        self._patch(meta["name"], step.labels, step.annotations)

    def _start(self, node: dict, ds: dict, wanted: str) -> None:
        meta = node["metadata"]
        namespace = ds["metadata"]["namespace"]
        cm_name = pod_configmap(ds, "mig-parted-config")
        document = None
        if cm_name:
            cm = self._document(namespace, cm_name, wanted)
            document = decide.MISSING if cm is None else self._mig_configs(cm)
        step = decide.start(node, document, self._failed.get(meta["uid"]))
        if step.outcome == "none":
            return
        if step.outcome == "wait":
            log.info("mig-manager: ConfigMap %s/%s missing: the mig-manager pod cannot start", namespace, cm_name)
            return self.requeue("Node", None, meta["name"], after=2.0)
        if step.unknown_config and self._pods_restarted(ds, meta["name"]):
            return   # the new pods read the label: the node is looked at again
        if step.outcome != "pending":
            return self._write(node, wanted, step)
        # Counted from when the label change was reported: each node runs its own mig-manager, so a batch's nodes
        # all start at once however many this simulator has to get through.
        due = self.observed_at() + self.knobs.seconds("seconds", 1.0)
        self._patch(meta["name"], step.labels)
        self._jobs[meta["name"]] = dict(step.job, uid=meta["uid"], due=due)
        self.requeue("Node", None, meta["name"], after=due - time.monotonic())

    def _progress(self, node: dict, job: dict) -> None:
        name = node["metadata"]["name"]
        if time.monotonic() < job["due"]:
            return self.requeue("Node", None, name, after=job["due"] - time.monotonic())
        step = decide.finish(node, job, self.knobs)
        if step.outcome == "hang":
            return self.requeue("Node", None, name, after=1.0)
        del self._jobs[name]
        self._write(node, job["config"], step)
