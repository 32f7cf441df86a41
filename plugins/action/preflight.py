# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight's inventory-only check runs on the controller; anything that reads the cluster runs the module.

With cluster: false there is nothing to read: the check is the pure planning code (planning/preflight/inventory.py), so it
runs here, with the same code and result as the module, without starting a module process. That process (building
the module's payload with every module_util it imports, then importing the kubernetes client) was 2.4 s of a 7 s
no-op node_pools run on 1,000 nodes; the check itself takes milliseconds.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.preflight.checks import (
    ARGUMENT_SPEC,
    check_inventory_of,
    failure_message,
    inventory_warnings,
)

try:  # the auth options the module also accepts (unused without a cluster, but not refused)
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
except ImportError:
    AUTH_ARG_SPEC = {}


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # not used
        if boolean(self._task.args.get("cluster", True), strict=False):
            result.update(self._execute_module(module_name=self._task.resolved_action or self._task.action,
                                               module_args=self._task.args, task_vars=task_vars))
            return result
        spec = dict(AUTH_ARG_SPEC)
        spec.update(ARGUMENT_SPEC)
        dummy, args = self.validate_argument_spec(argument_spec=spec)
        # Plain JSON values, as the module receives them: the checks compare types (an integer, a string).
        variables = json.loads(json.dumps(args["variables"] or {}, default=str))
        stages, dummy, errors, checked, dummy = check_inventory_of(variables, args["stages"])
        result.update(changed=False, errors=errors, checked=checked, platform="", requirements=[])
        warnings = inventory_warnings(variables, stages)
        if warnings:
            result["warnings"] = result.get("warnings", []) + warnings
        if errors:
            result.update(failed=True, msg=failure_message(errors, stages))
        return result
