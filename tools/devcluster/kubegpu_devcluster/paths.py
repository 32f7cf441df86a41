"""Where the local cluster keeps its state, binaries and upstream CRDs (each overridable by environment)."""
from __future__ import annotations

import os
from pathlib import Path

DEVCLUSTER_ROOT = Path(__file__).resolve().parent.parent          # tools/devcluster
REPO_ROOT = DEVCLUSTER_ROOT.parent.parent


def state_dir() -> Path:
    """Folder for certificates, kubeconfigs, etcd data, logs and the audit log (git-ignored)."""
    return Path(os.environ.get("DEVCLUSTER_DIR", REPO_ROOT / ".devcluster")).resolve()


def crds_dir() -> Path:
    """Upstream CRDs: ../shared/crds beside the repository, or KUBEGPU_CRDS_DIR (see fetch-crds.sh)."""
    return Path(os.environ.get("KUBEGPU_CRDS_DIR", REPO_ROOT.parent / "shared" / "crds")).resolve()


def own_crds_dir() -> Path:
    """Upstream CRDs that the workspace's shared/crds lacks (the console operator's Console, the Red Hat build of
    Kueue's operand), copied byte for byte at pinned commits (crd-sources.tsv, SOURCES.md beside them). A file of
    the same folder and name under crds_dir() wins."""
    return DEVCLUSTER_ROOT / "crds"


def charts_dir() -> Path:
    """Upstream Helm charts: ../shared/charts beside the repository, or KUBEGPU_CHARTS_DIR (see fetch-charts.sh)."""
    return Path(os.environ.get("KUBEGPU_CHARTS_DIR", REPO_ROOT.parent / "shared" / "charts")).resolve()


def bin_dir() -> Path:
    cache = os.environ.get("KUBEGPU_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kubegpu")
    return Path(cache) / "bin"
