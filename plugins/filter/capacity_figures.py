# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: capacity_figures
short_description: The figures of a GPU capacity report document, without the time it was made
version_added: 0.1.0
description:
  - Returns a document built by P(kubegpu.platform.capacity_report#filter) without C(generated_at),
    C(previous_generated_at) and C(changes), that is what two reports of an unchanged cluster have in common.
  - The report role rewrites its files only when these differ from the report on disk, so a run against a cluster
    whose figures did not change reports no change.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  _input:
    description: A capacity report document, or an empty dict when there is none.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Write the report only when its figures changed
  ansible.builtin.copy:
    content: "{{ capacity | to_nice_json }}"
    dest: /srv/gpu-report/capacity.json
    force: "{{ (capacity | kubegpu.platform.capacity_figures) != (on_disk | kubegpu.platform.capacity_figures) }}"
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The document's other fields (C(schema), C(cluster), C(pools), C(unplaceable), C(teams)).
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

# Fields that differ between two reports of the same cluster: when each was made, and what changed since the report
# before, which a report made from an unchanged one has as none.
MOMENT = ("generated_at", "previous_generated_at", "changes")


def capacity_figures(document):
    if not isinstance(document, Mapping):
        raise AnsibleFilterError("capacity_figures expects a capacity report document (a dict), got %r" % (document,))
    return dict((key, value) for key, value in document.items() if key not in MOMENT)


class FilterModule(object):
    def filters(self):
        return {"capacity_figures": capacity_figures}
