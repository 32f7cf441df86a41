# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller side of the collection's waits: print each round's progress while a task waits.

A module cannot print while it runs; its action plugin runs on the controller between the rounds of the task's
`until` loop, so it prints the round's progress summary (one line, at default verbosity), just before Ansible's
RETRYING line for that round, on stderr so that a machine-readable stdout callback stays parseable. A terminal and
AWX show both live.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()


def progress_line(host, result):
    """The line printed for a round that ended with the wait not over, or None."""
    progress = result.get("progress")
    if result.get("failed") or result.get("ready") is not False:
        return None
    if not isinstance(progress, dict) or not progress.get("summary"):
        return None
    return "[{0}] waiting {1:.0f} s for {2}: {3}".format(
        host, progress.get("waited_s") or 0, progress.get("expected") or "it", progress["summary"])


class WaitProgressAction(ActionBase):
    """Runs the module of the same name and prints its round's progress."""

    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super(WaitProgressAction, self).run(tmp, task_vars)
        del tmp  # not used
        result.update(self._execute_module(module_name=self._task.resolved_action or self._task.action,
                                           module_args=self._task.args, task_vars=task_vars))
        line = progress_line(task_vars.get("inventory_hostname", "localhost") if task_vars else "localhost", result)
        if line:
            # stderr: a machine-readable stdout callback (json) stays parseable; a terminal and AWX show both.
            display.display(line, stderr=True)
        return result
