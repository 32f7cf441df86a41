"""Run promtool (built by tools/devcluster/build.sh from the Prometheus Go module, content-keyed in the cache) on
rule sets rendered by the monitoring planning code, as Prometheus users test their rules. series and
promtool_test write and run a `promtool test rules` file (test_alert_rules_promtool and the dcgm-exporter
simulator's test use them)."""

import os
import re
import subprocess

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 6))
CACHE = os.environ.get("KUBEGPU_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kubegpu")


def promtool():
    """The promtool binary; build.sh builds it (and the local cluster's binaries) when the cache lacks it."""
    path = os.path.join(CACHE, "bin", "promtool")
    if not os.access(path, os.X_OK):
        subprocess.run([os.path.join(ROOT, "tools", "devcluster", "build.sh")], check=True, stdout=subprocess.DEVNULL)
    return path


def run(*args, cwd):
    done = subprocess.run([promtool()] + list(args), cwd=cwd, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout + done.stderr


def write_rules(folder, groups):
    path = os.path.join(str(folder), "rules.yml")
    with open(path, "w") as f:
        yaml.safe_dump({"groups": groups}, f, sort_keys=False)
    return path


_LABEL = re.compile(r"\{\{ \$labels\.([A-Za-z_][A-Za-z0-9_]*) \}\}")
_VALUE = '{{ printf "%.0f" $value }}'


def render(template, labels, value):
    """An annotation as Prometheus renders it: rules.py uses only {{ $labels.x }} and {{ printf "%.0f" $value }}
    (a missing label renders empty, as Prometheus' missingkey=zero does)."""
    text = template.replace(_VALUE, "%.0f" % value)
    return _LABEL.sub(lambda m: labels.get(m.group(1), ""), text)


def series(name, labels, values):
    """One input series of a promtool test: name{labels} and its values in promtool's notation ("5x30")."""
    return {"series": "%s{%s}" % (name, ",".join('%s="%s"' % kv for kv in sorted(labels.items()))), "values": values}


def _rules_by_alert(groups):
    out = {}
    for rule in groups[0]["rules"]:
        out.setdefault(rule["alert"], []).append(rule)
    return out


def _expected(rules, alert_labels, value):
    """The alert Prometheus sends for labels: the rule whose own labels it carries (GPUPodsPending has one per resource)."""
    rule = next(r for r in rules if all(alert_labels.get(k, v) == v for k, v in r["labels"].items()
                                        if k != "severity"))
    labels = dict(alert_labels, **rule["labels"])
    return {"exp_labels": labels,
            "exp_annotations": dict((k, render(v, labels, value)) for k, v in rule["annotations"].items())}


def _test_file(groups, cases):
    by_alert = _rules_by_alert(groups)
    tests = []
    for alert, kind, case in cases:
        tests.append({
            "name": "%s %s" % (alert, kind),
            "interval": "1m",
            "input_series": case["input"],
            "alert_rule_test": [{"eval_time": case["at"], "alertname": alert,
                                 "exp_alerts": [_expected(by_alert[alert], labels, value)
                                                for labels, value in case.get("alerts", [])]}],
        })
    return {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests}


def promtool_test(tmp_path, groups, cases):
    """promtool test rules on `groups` with `cases` ((alert, kind, {input, at, alerts})): (exit code, output)."""
    write_rules(tmp_path, groups)
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(_test_file(groups, cases), sort_keys=False))
    return run("test", "rules", "tests.yml", cwd=str(tmp_path))
