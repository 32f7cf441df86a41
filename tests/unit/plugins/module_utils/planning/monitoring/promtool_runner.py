"""Run promtool (built by tools/devcluster/build.sh from the Prometheus Go module, content-keyed in the cache) on
rule sets rendered by the monitoring planning code, as Prometheus users test their rules."""

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
