# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AnsibleModule every kubegpu module uses: kubernetes.core's auth options, one way to report errors, the API
retries of the run (`api_retries`) in every result, success or failure, and `diff`, decided here for every module:
built from the result's `changes` and returned only under --diff (a module never sets or drops it itself)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json
import os
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.args import ROUNDS_ARG_SPEC, WAIT_ARG_SPEC
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.client import (
    CLIENT_IMPORT_ERROR,
    HAS_CLIENT,
    Cluster,
    ClusterError,
    DynamicApiError,
    describe_api_error,
    retrier_from_env,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.retry import FAULTS
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.wait import WaitError, wait_for
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.objects import diff_of

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
except ImportError:  # kubernetes.core missing: reported below with install advice
    AUTH_ARG_SPEC = {}


class Rounds(object):
    """What the earlier rounds of one wait (a task's `until` loop) saw and wrote, kept in a private file.

    The rounds of one wait are the calls with the same arguments (wait_started included), so the file is named by
    their digest. Each round's result is merged with the earlier ones: `changed` if any round changed something,
    `changes` and the progress `lines` of every round, and the waiter's memory (since when each item is as it is).
    The last round (ready, or failed) removes the file.
    """

    CARRIED = ("changes", "approved_plans")   # lists of what a round did, shown by the last round
    # {group: {item: state}} maps (a roll-out's nodes per pool): a later round's entry for an item replaces the
    # earlier one, and the items only an earlier round saw are kept.
    MERGED = ("rollout",)

    def __init__(self, params):
        # The cluster is part of the key: with one inventory host per cluster (docs/many-clusters.md) the same task
        # with the same arguments runs at once against several clusters, each reached through its K8S_AUTH_* env.
        cluster = sorted((k, v) for k, v in os.environ.items() if k.startswith("K8S_AUTH_") or k == "KUBECONFIG")
        key = json.dumps([params, cluster], sort_keys=True, default=str)
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]
        self.path = os.path.join(tempfile.gettempdir(), "kubegpu-wait-{0}.json".format(digest))
        self.state = {"changed": False, "carried": {}, "lines": [], "memory": {}}
        try:
            with open(self.path) as f:
                self.state.update(json.load(f))
        except (IOError, OSError, ValueError):
            pass
        self.memory = self.state["memory"]

    def merge(self, result, last):
        """Fold the earlier rounds into this round's result; keep the whole for the next round unless `last`."""
        carried = self.state["carried"]
        for key in self.CARRIED:
            if carried.get(key):
                result[key] = carried[key] + list(result.get(key) or [])
        for key in self.MERGED:
            if carried.get(key):
                merged = dict((group, dict(items)) for group, items in carried[key].items())
                for group, items in (result.get(key) or {}).items():
                    merged.setdefault(group, {}).update(items)
                result[key] = merged
        result["changed"] = bool(result.get("changed")) or self.state["changed"]
        if isinstance(result.get("progress"), dict):
            lines = self.state["lines"] + [x for x in result["progress"].get("lines", []) if x not in self.state["lines"]]
            result["progress"]["lines"] = lines
        if last:
            try:
                os.remove(self.path)
            except OSError:
                pass
            return
        state = {"changed": result["changed"], "memory": self.memory,
                 "carried": dict((k, result[k]) for k in self.CARRIED + self.MERGED if result.get(k)),
                 "lines": (result.get("progress") or {}).get("lines", [])}
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(state, f, default=str)


class KubegpuModule(AnsibleModule):
    """AnsibleModule with the cluster auth options merged in and `cluster` connected on first use.

    shared: the option sets of cluster/args.py the module takes (POOLS_ARG_SPEC, PLATFORM_ARG_SPEC, ...).
    waits=True adds the waiting options (cluster/args.py, doc fragments kubegpu.platform.wait and
    kubegpu.platform.wait.optional: wait, timeout, wait_round, wait_started); waits="always" all but `wait`, for a
    module that cannot leave its wait out. `timeout` is then the module's default for the option (seconds).
    `wait_for` runs every wait of the module through the one waiter with the module's timeout and round.
    The module's own argument_spec comes last: it adds its options, and may restate a shared one, not change it
    (tests/unit/plugins/modules/test_option_vocabulary.py compares them).
    """

    def __init__(self, argument_spec=None, needs_cluster=True, waits=False, timeout=None, shared=(), **kwargs):
        spec = {}
        for options in shared:
            spec.update(copy.deepcopy(options))
        if needs_cluster:
            spec.update(AUTH_ARG_SPEC)
        if waits:
            spec.update(copy.deepcopy(ROUNDS_ARG_SPEC))
            if timeout is not None:
                spec["timeout"]["default"] = timeout
            if waits != "always":
                spec.update(copy.deepcopy(WAIT_ARG_SPEC))
        spec.update(argument_spec or {})
        self._call_start = time.time()
        self._rounds = None
        super(KubegpuModule, self).__init__(argument_spec=spec, **kwargs)
        self._cluster = None
        if waits and self.params.get("wait_round") and self.params.get("wait_started") is not None:
            self._rounds = Rounds(self.params)
        if needs_cluster and (not HAS_CLIENT or not AUTH_ARG_SPEC):
            self.fail_json(msg=missing_required_lib("kubernetes and the kubernetes.core collection"),
                           exception=str(CLIENT_IMPORT_ERROR))

    @property
    def cluster(self):
        if self._cluster is None:
            try:
                self._retrier = retrier_from_env()
                self._cluster = Cluster.connect(dict((k, self.params.get(k)) for k in AUTH_ARG_SPEC), self._retrier)
            except DynamicApiError as e:  # discovery already talks to the server: 401, 403, ...
                self.fail_json(msg=describe_api_error("connecting to the API server", e))
            except Exception as e:  # kubernetes.core raises CoreException for a bad kubeconfig or auth options
                self.fail_json(msg="Could not connect to the cluster: {0}".format(e))
        return self._cluster

    @property
    def api_retries(self):
        """Retries per fault so far: {"429": n, "5xx": n, "connection": n, "conflict": n}."""
        retrier = getattr(self, "_retrier", None)  # absent when AnsibleModule fails on its arguments
        return dict(retrier.counts) if retrier else dict((k, 0) for k in FAULTS)

    def exit_json(self, **kwargs):
        kwargs.setdefault("api_retries", self.api_retries)
        if self._rounds is not None:
            self._rounds.merge(kwargs, last=kwargs.get("ready") is not False)
        self._decide_diff(kwargs)
        super(KubegpuModule, self).exit_json(**kwargs)

    def fail_json(self, msg, **kwargs):
        kwargs.setdefault("api_retries", self.api_retries)
        if getattr(self, "_rounds", None) is not None:
            self._rounds.merge(kwargs, last=True)
        self._decide_diff(kwargs)
        super(KubegpuModule, self).fail_json(msg, **kwargs)

    def _decide_diff(self, result):
        """`diff` only under --diff, built from `changes` (every round's, once Rounds merged them in).

        Built here, not by each module: `changes` already lists every change whatever the mode, and on thousands of
        nodes the diff would double what Ansible carries for a result nobody asked to see as a diff.
        """
        result.pop("diff", None)
        # getattr: AnsibleModule fails on bad arguments before it has read _ansible_diff.
        if getattr(self, "_diff", False) and isinstance(result.get("changes"), list):
            result["diff"] = diff_of(result["changes"])

    def run(self, func):
        """Call func(self) and exit with its result; API failures become one clear message."""
        try:
            result = func(self)
        except ClusterError as e:
            self.fail_json(msg=str(e))
        self.exit_json(**result)

    def earlier_rounds(self, key):
        """What the earlier rounds of this call's wait reported under `key` (Rounds.CARRIED or MERGED); None on a
        first round or a call without rounds."""
        if getattr(self, "_rounds", None) is None:
            return None
        return self._rounds.state["carried"].get(key)

    def wait_policy(self):
        """{budget, started} for wait_for: what is left of this call's round, and when the whole wait began."""
        p = self.params
        budget = None
        if p.get("wait_round"):
            budget = max(0.001, p["wait_round"] - (time.time() - self._call_start))
        policy = {"budget": budget, "started": p.get("wait_started")}
        if self._rounds is not None:
            policy["memory"] = self._rounds.memory
        return policy

    def wait_for(self, target, predicate, result, interval=2.0, timeout=None, raise_on_failure=True, observe=None,
                 fail=None):
        """Wait through the one waiter (cluster/wait.py) with this call's round and the whole wait's start.

        Sets result["ready"] (False only when the round ran out before the wait ended: the task's `until` calls
        again) and result["progress"]; on a timeout or a failed state fails the module with the waiter's message,
        the progress and `result`. Several waits in one call share the round. Returns the Outcome.
        observe(last read) is called at the end in every case, to put what was read into `result`; on an error
        what it returns (a hint: what to check) is added to the message. fail(msg), when given, fails the module
        instead (with a result of its own, built after `result` got ready and progress).
        """
        try:
            outcome = wait_for(self.cluster, target, predicate,
                               timeout if timeout is not None else self.params["timeout"], interval=interval,
                               raise_on_failure=raise_on_failure, **self.wait_policy())
        except WaitError as e:
            result.update(ready=False, progress=e.progress)
            hint = observe(e.observed) if observe else None
            msg = str(e) + (". " + hint if hint else "")
            if fail is not None:
                fail(msg)
            self.fail_json(msg=msg, **result)
        result.update(ready=outcome.ready, progress=outcome.progress)
        if observe:
            observe(outcome.observed)
        return outcome
