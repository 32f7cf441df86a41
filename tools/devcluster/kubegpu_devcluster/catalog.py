"""The simulated OLM catalog: tools/devcluster/catalog/packages.yaml as PackageManifest objects.

The PackageManifests are what OLM's package server shows (each channel's head CSV, with its description); the
OLM simulator reads each CSV's own content (its alm-examples) from the catalog data here, as OLM reads a bundle
from the catalog source.
"""
from __future__ import annotations

import copy
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


def merge(base, patch):
    """patch deep-merged over base (mappings key by key; lists and other values replace); neither is changed."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(base)
    for key, value in patch.items():
        out[key] = merge(out[key], value) if key in out else copy.deepcopy(value)
    return out


def package_of(packages: list, csv_name: str) -> dict | None:
    """The package whose channels list csv_name, or None."""
    return next((p for p in packages if any(csv_name in csvs for csvs in p["channels"].values())), None)


def csv_examples(pkg: dict, csv_name: str) -> list:
    """The alm-examples of one CSV: the package's `examples`, with that CSV's `examples_overrides` (per kind)."""
    overrides = (pkg.get("examples_overrides") or {}).get(csv_name) or {}
    unknown = set(overrides) - {e["kind"] for e in pkg.get("examples", [])}
    if unknown:
        raise ValueError(f"catalog: examples_overrides of {csv_name} name kinds without an example: {sorted(unknown)}")
    return [merge(e, overrides[e["kind"]]) if e["kind"] in overrides else copy.deepcopy(e)
            for e in pkg.get("examples", [])]


def package_manifest(pkg: dict) -> dict:
    """A PackageManifest as OLM's package server returns it (status carries the catalog content)."""
    stray = set(pkg.get("examples_overrides") or {}) - {c for csvs in pkg["channels"].values() for c in csvs}
    if stray:
        raise ValueError(f"catalog: examples_overrides of package {pkg['name']} name CSVs no channel lists: {sorted(stray)}")
    channels = []
    for name, csvs in pkg["channels"].items():
        head = csvs[-1]
        channels.append({
            "name": name,
            "currentCSV": head,
            "currentCSVDesc": {"displayName": pkg["name"], "version": csv_version(head),
                               "provider": {"name": pkg["provider"]},
                               "annotations": {"alm-examples": json.dumps(csv_examples(pkg, head))}},
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
