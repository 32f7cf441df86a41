# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waits that read many nodes with one list call per poll, so waiting costs requests per second, not per node."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.rollout import DONE, FAILED, node_progress


class WaitTimeout(Exception):
    """The wait ran out of time; `states` holds each node's last (state, detail)."""

    def __init__(self, message, states):
        super(WaitTimeout, self).__init__(message)
        self.states = states


def wait_for_nodes(cluster, changes, label_selector, timeout, interval=1.0, clock=time.monotonic, sleep=time.sleep):
    """Poll nodes (one list per poll) until every node of `changes` is done or failed.

    A node that failed does not end the wait for the others: they are midway through their change, and
    the caller must not leave them (or their cordon) behind. Returns ({node: (state, detail, seconds)},
    [failed nodes, sorted]). Raises WaitTimeout after `timeout`, naming each node not done and why.
    """
    start = clock()
    finished = {}
    while True:
        nodes = dict((n["metadata"]["name"], n) for n in cluster.list("v1", "Node", label_selector=label_selector))
        states = {}
        for name, change in changes.items():
            node = nodes.get(name)
            state, detail = node_progress(node, change) if node else (FAILED, "node is gone")
            if state in (DONE, FAILED) and name not in finished:
                finished[name] = clock() - start
            states[name] = (state, detail, finished.get(name, clock() - start))
        if all(s[0] in (DONE, FAILED) for s in states.values()):
            return states, sorted(n for n, s in states.items() if s[0] == FAILED)
        if clock() - start > timeout:
            pending = ["{0} ({1})".format(n, s[1]) for n, s in sorted(states.items()) if s[0] != DONE]
            raise WaitTimeout("timed out after {0:.0f} s; not done: {1}".format(timeout, "; ".join(pending)), states)
        sleep(interval)


def mounted_configmap(daemonset, volume):
    """The ConfigMap a DaemonSet's pod template mounts as `volume`, or None."""
    for v in (((daemonset or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("volumes") or []:
        if v.get("name") == volume and v.get("configMap"):
            return v["configMap"].get("name")
    return None


def wait_for_operand_configs(cluster, namespace, wanted, timeout, interval=1.0, clock=time.monotonic, sleep=time.sleep):
    """Wait until each operand DaemonSet {name: (volume, configmap)} mounts its ConfigMap.

    The operator rewrites its DaemonSets after a ClusterPolicy change; a node label set before that meets
    the old pods and the old configs. DaemonSets that do not exist (no node runs that operand) are skipped.
    """
    start = clock()
    while True:
        lagging = []
        for name, (volume, configmap) in sorted(wanted.items()):
            ds = cluster.get("apps/v1", "DaemonSet", name, namespace)
            if ds is not None and mounted_configmap(ds, volume) != configmap:
                lagging.append("{0} mounts {1}, not {2}".format(name, mounted_configmap(ds, volume), configmap))
        if not lagging:
            return
        if clock() - start > timeout:
            raise WaitTimeout("the GPU Operator did not roll the new configuration into its operands within "
                              "{0:.0f} s: {1}".format(timeout, "; ".join(lagging)), {})
        sleep(interval)
