"""Load upstream CRDs (shared/crds or KUBEGPU_CRDS_DIR) plus the local cluster's own test doubles."""
from __future__ import annotations

import hashlib
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from . import paths
from .paths import DEVCLUSTER_ROOT

# libyaml's loader: the KServe CRDs are several MB each and the pure-Python loader takes seconds per file.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
OWN_CRDS = [DEVCLUSTER_ROOT / "catalog" / "packages.operators.coreos.com_packagemanifests.yaml"]


def crd_files(folder: Path) -> list:
    files = sorted(p for p in folder.glob("*/*.yaml"))
    if not files:
        raise RuntimeError(f"no CRDs under {folder}: set KUBEGPU_CRDS_DIR or run tools/devcluster/fetch-crds.sh")
    return files + OWN_CRDS


def crd_name(path: Path) -> str:
    """CRD files are named <group>_<plural>.yaml (shared/crds/README.md); the CRD is <plural>.<group>."""
    group, plural = path.stem.split("_", 1)
    return f"{plural}.{group}"


def seed_dir(folder: Path) -> Path:
    """Cache folder for an etcd data dir with these CRDs loaded, keyed by the CRDs and the binaries."""
    h = hashlib.sha256()
    for f in crd_files(folder):
        h.update(f.name.encode() + f.read_bytes())
    for b in ("etcd", "kube-apiserver"):
        h.update(str((paths.bin_dir() / b).resolve()).encode())
    return paths.bin_dir().parent / "seed" / h.hexdigest()[:16]


def save_seed(etcd_data: Path, seed: Path) -> None:
    tmp = seed.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(etcd_data, tmp)
    shutil.rmtree(seed, ignore_errors=True)
    tmp.rename(seed)


def load(dyn, folder: Path, timeout: float = 60) -> int:
    """Create every CRD (create, not apply: the largest exceed the last-applied annotation limit), wait Established."""
    api = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    files = crd_files(folder)
    # The listing is tens of MB (the KServe CRDs): with a seeded etcd nothing is missing, and that one listing
    # also says whether they are all Established.
    listing = api.get().items
    existing = {c.metadata.name for c in listing}
    todo = [p for p in files if crd_name(p) not in existing]  # parse only what is missing: seconds per MB
    docs = [yaml.load(p.read_text(), Loader=_Loader) for p in todo]
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda d: api.create(body=d), docs))
    names = {crd_name(p) for p in files}
    deadline = time.monotonic() + timeout
    stale = bool(todo)  # the first listing predates the creates
    while True:
        if stale:
            listing = api.get().items
        pending = [c.metadata.name for c in listing
                   if c.metadata.name in names and not any(
                       cond.type == "Established" and cond.status == "True"
                       for cond in (c.status.conditions or []))]
        if not pending:
            return len(files)
        if time.monotonic() > deadline:
            raise RuntimeError(f"CRDs not Established after {timeout:.0f} s: {', '.join(pending)}")
        stale = True
        time.sleep(0.2)
