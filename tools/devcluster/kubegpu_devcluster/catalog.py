"""The simulated OLM catalog: tools/devcluster/catalog/packages.yaml as PackageManifest objects."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from .paths import DEVCLUSTER_ROOT

CATALOG_FILE = DEVCLUSTER_ROOT / "catalog" / "packages.yaml"
MARKETPLACE_NS = "openshift-marketplace"


def load_packages(path: Path = CATALOG_FILE) -> list:
    return yaml.safe_load(Path(path).read_text())["packages"]


def csv_version(csv_name: str) -> str:
    """`gpu-operator-certified.v26.7.0` -> `26.7.0`; `nfd.4.20.0-2025...` -> `4.20.0-2025...`."""
    tail = csv_name.split(".", 1)[1]
    return tail[1:] if tail.startswith("v") else tail


def package_manifest(pkg: dict) -> dict:
    """A PackageManifest as OLM's package server returns it (status carries the catalog content)."""
    alm_examples = json.dumps(pkg.get("examples", []))
    channels = []
    for name, csvs in pkg["channels"].items():
        head = csvs[-1]
        channels.append({
            "name": name,
            "currentCSV": head,
            "currentCSVDesc": {"displayName": pkg["name"], "version": csv_version(head),
                               "provider": {"name": pkg["provider"]},
                               "annotations": {"alm-examples": alm_examples}},
            # newest first, as the package server lists them
            "entries": [{"name": c, "version": csv_version(c)} for c in reversed(csvs)],
        })
    return {
        "apiVersion": "packages.operators.coreos.com/v1", "kind": "PackageManifest",
        "metadata": {"name": pkg["name"], "namespace": MARKETPLACE_NS,
                     "labels": {"catalog": pkg["catalog"], "catalog-namespace": MARKETPLACE_NS}},
        "spec": {},
        "status": {"catalogSource": pkg["catalog"], "catalogSourceNamespace": MARKETPLACE_NS,
                   "packageName": pkg["name"], "defaultChannel": pkg["defaultChannel"],
                   "provider": {"name": pkg["provider"]}, "channels": channels},
    }


def apply(dyn) -> int:
    api = dyn.resources.get(api_version="packages.operators.coreos.com/v1", kind="PackageManifest")
    packages = load_packages()
    for pkg in packages:
        api.create(body=package_manifest(pkg), namespace=MARKETPLACE_NS)
    return len(packages)
