# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The capacity report as one self-contained HTML page: the figures as text, and a Chart.js bar chart per pool
(allocatable, requested and idle units per resource). The charting library is passed in and inlined, so the page
needs no network: it opens from a file, an AWX artifact or a mail attachment the same way."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

try:
    from html import escape
except ImportError:  # Python 2 (sanity's compile test only)
    from cgi import escape

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.report.capacity_text import change_line, team_row

# Colours that read apart for common colour-vision deficiencies (Okabe-Ito): allocatable, requested, idle.
SERIES = (("allocatable", "Allocatable", "#0072B2"), ("requested", "Requested", "#D55E00"),
          ("idle", "Idle", "#009E73"))

STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px;color:#1d2329;background:#fff}
h1{font-size:1.4em;margin:0 0 4px}.meta{color:#5b6670;margin-bottom:16px}
.pools{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:16px}
.pool{border:1px solid #d5dbe1;border-radius:6px;padding:12px 16px}
.pool h2{font-size:1.1em;margin:0 0 4px}.facts{color:#3c4650;font-size:.9em;margin-bottom:8px}
.chart{position:relative;height:260px}
table{border-collapse:collapse;font-size:.85em;margin-top:8px}td,th{padding:2px 10px 2px 0;text-align:left}
th{color:#5b6670;font-weight:600}td.n{text-align:right}
.pending{font-size:.85em;color:#8a3b00}.changes li,.pending li{margin:2px 0}
"""

# Draws one chart per pool from the embedded data, then says how many it drew (data-charts-drawn on <body>) and
# where each plot is (data-chart-area on its canvas), so a test or a monitor can tell a page whose charts failed
# from one that drew them.
SCRIPT = """
(function () {
  var report = JSON.parse(document.getElementById('kubegpu-report-data').textContent);
  var series = JSON.parse(document.getElementById('kubegpu-report-series').textContent);
  var drawn = 0;
  report.pools.forEach(function (pool, i) {
    var canvas = document.getElementById('chart-' + i);
    var resources = Object.keys(pool.allocatable).concat(
      Object.keys(pool.requested).filter(function (r) { return !(r in pool.allocatable); }));
    if (!canvas || !resources.length || typeof Chart === 'undefined') { return; }
    var chart = new Chart(canvas, {
      type: 'bar',
      data: {
        labels: resources.map(function (r) { return r.replace('nvidia.com/', ''); }),
        datasets: series.map(function (s) {
          return {label: s[1], backgroundColor: s[2],
                  data: resources.map(function (r) { return pool[s[0]][r] || 0; })};
        })
      },
      options: {animation: false, responsive: true, maintainAspectRatio: false,
                plugins: {title: {display: true, text: pool.name + ': GPU units per resource'}},
                scales: {y: {beginAtZero: true, ticks: {precision: 0}}}}
    });
    // Where the plot is on the page (CSS pixels), for a check that looks at the rendered page.
    var box = canvas.getBoundingClientRect(), area = chart.chartArea;
    canvas.setAttribute('data-chart-area', JSON.stringify({
      left: Math.round(box.left + window.scrollX + area.left), top: Math.round(box.top + window.scrollY + area.top),
      right: Math.round(box.left + window.scrollX + area.right),
      bottom: Math.round(box.top + window.scrollY + area.bottom)}));
    drawn += 1;
  });
  document.body.setAttribute('data-charts-drawn', String(drawn));
})();
"""


# A DRA pool's devices are not extended resources: the DRA lines of the cluster summary show them.
NO_UNITS = ("<p>No GPU units advertised as extended resources (a DRA pool hands its GPUs out through "
            "ResourceClaims: see the DRA lines of the report).</p>")


def _e(value):
    return escape(str(value), quote=True)


def _script_safe(text):
    """Text that cannot end the <script> element it is inlined in (inside a JavaScript string, as Chart.js would
    hold it, <\\/script reads the same)."""
    return re.sub(r"</(script)", "<\\\\/\\1", text, flags=re.IGNORECASE)


def _json(value):
    return json.dumps(value, sort_keys=True).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _pool_section(i, pool):
    facts = "{0} node(s), {1}, {2} physical GPU(s); sharing {3}".format(
        pool["nodes"], ", ".join(pool["gpu_models"]) or "unknown model", pool["physical_gpus"],
        ", ".join("{0}={1}".format(k, v) for k, v in sorted(pool["sharing"].items())) or "-")
    if pool["layout"]:
        per_gpu = ["{0} x{1}".format(r.split("/", 1)[-1], n) for r, n in sorted(pool["layout"].items())]
        facts += "; per GPU " + ", ".join(per_gpu)
    resources = sorted(set(pool["allocatable"]) | set(pool["requested"]))
    rows = "".join("<tr><td>{0}</td><td class=n>{1}</td><td class=n>{2}</td><td class=n>{3}</td></tr>".format(
        _e(r), pool["allocatable"].get(r, 0), pool["requested"].get(r, 0), pool["idle"].get(r, 0)) for r in resources)
    pending = ""
    if pool["pending"]:
        pending = "<ul class=pending>{0}</ul>".format("".join(
            "<li>pending: {0} wants {1}</li>".format(
                _e(w["pod"]), _e(", ".join("{0}={1}".format(k, v) for k, v in sorted(w["resources"].items()))))
            for w in pool["pending"]))
    chart = ("<div class=chart><canvas id=chart-{0} role=img aria-label=\"{1}: allocatable, requested and idle GPU "
             "units\"></canvas></div>".format(i, _e(pool["name"])) if resources else NO_UNITS)
    numbers = ("<table><tr><th>Resource</th><th>Allocatable</th><th>Requested</th><th>Idle</th></tr>{0}</table>"
               .format(rows) if rows else "")
    return ("<section class=pool data-pool=\"{0}\"><h2>{0}</h2><div class=facts>{1}</div>{2}{3}{4}"
            "</section>").format(_e(pool["name"]), _e(facts), chart, numbers, pending)


def _teams_section(teams):
    """The teams' quota table (tenancy stage), or nothing when no team has a quota."""
    if not teams:
        return ""
    rows = "".join("<tr><td>{0}</td><td>{1}</td><td>{2}</td><td class=n>{3}</td><td class=n>{4}</td>"
                   "<td class=n>{5}</td></tr>".format(*[_e(v) for v in team_row(r)]) for r in teams)
    return ("<section class=teams><h2>GPU quota per team</h2><div class=facts>used: as Kueue or the API server's quota "
            "admission counts it; borrowed: used beyond the team's quota, lent by others in its cohort</div><table>"
            "<tr><th>Team</th><th>Node pool</th><th>Resource</th><th>Quota</th><th>Used</th><th>Borrowed</th></tr>"
            "{0}</table></section>").format(rows)


def capacity_html(document, chart_js, chart_js_license=""):
    """The whole page as one string: the report's figures, the charting library inlined, no external resource."""
    cluster = document.get("cluster") or {}
    where = " ".join(str(cluster.get(k)) for k in ("name", "version") if cluster.get(k))
    changes = document.get("changes")
    if changes is None:
        changed = "<p>No previous report to compare with.</p>"
    elif not changes:
        changed = "<p>No change since {0}.</p>".format(_e(document.get("previous_generated_at")))
    else:
        items = "".join("<li>{0}</li>".format(_e(change_line(c))) for c in changes)
        changed = "<p>Since {0}:</p><ul class=changes>{1}</ul>".format(_e(document.get("previous_generated_at")), items)
    unplaceable = ""
    if document.get("unplaceable"):
        unplaceable = "<h2>Pending GPU pods no pool can take</h2><ul class=pending>{0}</ul>".format("".join(
            "<li>{0} wants {1}</li>".format(_e(w["pod"]), _e(", ".join(
                "{0}={1}".format(k, v) for k, v in sorted(w["resources"].items())))) for w in document["unplaceable"]))
    return "".join([
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        "<meta name=viewport content=\"width=device-width, initial-scale=1\">",
        "<title>GPU capacity report {0}</title><style>{1}</style></head><body>".format(
            _e(document["generated_at"]), STYLE),
        "<h1>GPU capacity per node pool</h1><div class=meta>{0}{1}; requested: pods bound to the pool's nodes that "
        "have not finished; idle = allocatable - requested</div>".format(
            _e(document["generated_at"]), " &middot; " + _e(where) if where else ""),
        "<div class=pools>", "".join(_pool_section(i, p) for i, p in enumerate(document["pools"])), "</div>",
        unplaceable, _teams_section(document.get("teams")), "<h2>Changes</h2>", changed,
        "<script type=application/json id=kubegpu-report-data>", _json(document), "</script>",
        "<script type=application/json id=kubegpu-report-series>", _json([list(s) for s in SERIES]), "</script>",
        # The library's license travels with its code, as its MIT license asks.
        "<script>/*\n", _script_safe(chart_js_license.replace("*/", "* /")), "\n*/\n", _script_safe(chart_js),
        "</script><script>", SCRIPT, "</script></body></html>\n",
    ])
