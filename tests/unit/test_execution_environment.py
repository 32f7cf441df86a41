"""The execution environment (extensions/ee/execution-environment.yml, ansible-builder v3): the build context that
`ansible-builder create` writes holds only what a run needs, every version pinned."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
EE = REPO / "extensions" / "ee" / "execution-environment.yml"
# The development and test packages (requirements/dev.txt less runtime.txt): none belongs in the image.
DEV_ONLY = {"pytest", "molecule", "ansible-lint", "antsibull-changelog", "cryptography", "ansible", "ansible-builder"}


def _requirements(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-r"):
            name = re.split(r"[=<>!~ \[]", line, 1)[0].lower()
            out[name] = line
    return out


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    out = tmp_path_factory.mktemp("ee")
    builder = Path(sys.executable).parent / "ansible-builder"
    proc = subprocess.run([str(builder), "create", "-f", str(EE), "-c", str(out)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_python_requirements_are_the_runtime_ones_pinned(context):
    wanted = _requirements(REPO / "requirements" / "runtime.txt")
    got = _requirements(context / "_build" / "requirements.txt")
    assert got == wanted
    assert all("==" in line for line in got.values()), got
    assert not DEV_ONLY & set(got), DEV_ONLY & set(got)


def test_ansible_core_and_runner_pinned_and_nothing_for_tests(context):
    containerfile = next(p for p in (context / "Dockerfile", context / "Containerfile") if p.exists()).read_text()
    pinned = re.search(r'ANSIBLE_INSTALL_REFS="([^"]*)"', containerfile).group(1).split()
    dev = _requirements(REPO / "requirements" / "dev.txt")
    assert pinned == [dev["ansible-core"], "ansible-runner==2.4.3"]
    for name in DEV_ONLY - {"ansible"}:
        assert name not in containerfile, name


def test_collections_and_system_packages_pinned_and_runtime_only(context):
    collections = yaml.safe_load((context / "_build" / "requirements.yml").read_text())["collections"]
    assert {c["name"] for c in collections} == {"kubegpu.platform", "kubernetes.core"}
    assert all(str(c["version"]).startswith("==") for c in collections), collections
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert {"name": "kubegpu.platform", "version": "==" + galaxy["version"]} in collections
    bindep = [line for line in (context / "_build" / "bindep.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert bindep == ["helm [platform:rpm]"]
    shipped = {p.relative_to(context).parts[0] for p in context.rglob("*") if p.is_file()}
    assert shipped <= {"_build", "Dockerfile", "Containerfile"}, shipped
