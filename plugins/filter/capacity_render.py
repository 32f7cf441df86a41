# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: capacity_render
short_description: Render the GPU capacity report as text lines, an HTML page or a per-pool summary
version_added: 0.1.0
description:
  - Renders a document built by P(kubegpu.platform.capacity_report#filter).
  - V(text) - lines of a table, one row per pool and GPU resource, then the pending GPU pods and the changes since
    the previous report (for the terminal and AWX job output).
  - V(html) - one self-contained page with a bar chart per pool drawn by Chart.js, which must be given in
    O(library) (the report role ships it); nothing is fetched when the page is opened.
  - V(summary) - one line per pool, for C(ansible.builtin.set_stats) so that an AWX job shows it.
  - V(teams) - one line per team with its quota and use of each pool, for C(ansible.builtin.set_stats).
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  _input:
    description: The capacity report document.
    type: dict
    required: true
  format:
    description: What to render.
    type: str
    choices: [text, html, summary, teams]
    default: text
  library:
    description: The Chart.js UMD build, as text; required for V(html).
    type: str
    default: ""
  license:
    description: The license of O(library), inlined beside it.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Print the capacity table
  ansible.builtin.debug:
    msg: "{{ capacity | kubegpu.platform.capacity_render('text') }}"
"""

RETURN = r"""
_value:
  description: A list of lines (V(text)), a string (V(html)), or a dict of pool name to summary line (V(summary)) or
    of team name to summary line (V(teams)).
  type: raw
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.capacity import pool_summary, team_summary
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.capacity_html import capacity_html
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.capacity_text import capacity_lines


def capacity_render(document, format="text", library="", license=""):  # pylint: disable=redefined-builtin
    if format == "html" and not library:
        raise AnsibleFilterError("capacity_render('html') needs the Chart.js build in library= "
                                 "(the report role reads it from its files/chartjs)")
    renderers = {"text": capacity_lines, "summary": pool_summary, "teams": team_summary,
                 "html": lambda doc: capacity_html(doc, library, license)}
    if format not in renderers:
        raise AnsibleFilterError("capacity_render: format is {0!r}; expected one of {1}".format(
            format, ", ".join(sorted(renderers))))
    try:
        return renderers[format](document)
    except (KeyError, TypeError) as e:
        raise AnsibleFilterError("capacity_render expects a document of kubegpu.platform.capacity_report; "
                                 "missing {0}".format(e))


class FilterModule(object):
    def filters(self):
        return {"capacity_render": capacity_render}
