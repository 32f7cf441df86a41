"""Load upstream CRDs (shared/crds or KUBEGPU_CRDS_DIR) plus the local cluster's own test doubles."""
from __future__ import annotations

import hashlib
import logging
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from . import paths
from .paths import DEVCLUSTER_ROOT

# libyaml's loader: the KServe CRDs are several MB each and the pure-Python loader takes seconds per file.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
log = logging.getLogger(__name__)
OWN_CRDS = [DEVCLUSTER_ROOT / "catalog" / "packages.operators.coreos.com_packagemanifests.yaml"]


def _with_own(folder: Path, pattern: str) -> list:
    """The CRD files under `folder` matching `pattern`, plus those of paths.own_crds_dir() that it lacks."""
    files = sorted(folder.glob(pattern))
    have = {p.relative_to(folder) for p in files}
    own = paths.own_crds_dir()
    return files + sorted(p for p in own.glob(pattern) if p.relative_to(own) not in have)


def crd_files(folder: Path) -> list:
    files = sorted(folder.glob("*/*.yaml"))
    if not files:
        raise RuntimeError(f"no CRDs under {folder}: set KUBEGPU_CRDS_DIR or run tools/devcluster/fetch-crds.sh")
    return _with_own(folder, "*/*.yaml") + OWN_CRDS


def crd_name(path: Path) -> str:
    """CRD files are named <group>_<plural>.yaml (shared/crds/README.md); the CRD is <plural>.<group>."""
    group, plural = path.stem.split("_", 1)
    return f"{plural}.{group}"


def seed_dir(folder: Path, skip=()) -> Path:
    """Cache folder for an etcd data dir with these CRDs loaded (less the folders in `skip`), keyed by the CRDs and
    the binaries."""
    h = hashlib.sha256()
    left_out = set(group_files(folder, skip))
    for f in crd_files(folder):
        if f in left_out:
            continue
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


def group_files(folder: Path, groups) -> list:
    """The CRD files of some folders of the CRD tree (e.g. ["kserve", "keda"])."""
    return sorted(p for g in groups for p in _with_own(folder, f"{g}/*.yaml"))


def remove(dyn, folder: Path, groups, timeout: float = 120) -> int:
    """Delete the CRDs of those folders (and so their objects) and wait until they are gone: a fleet whose
    platform installs them itself (operators, charts) starts without them. Returns how many were deleted."""
    from kubernetes.dynamic.exceptions import NotFoundError

    api = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    present = {m.name for m in _metadata(dyn)}
    names = {crd_name(p) for p in group_files(folder, groups)} & present
    deleted = 0
    for name in sorted(names):
        try:
            api.delete(name=name)
            deleted += 1
        except NotFoundError:
            pass
    wait_gone(dyn, names, timeout)
    return deleted


def _metadata(dyn) -> list:
    """Every CRD's metadata only: the KServe CRDs are MBs each, their full listing takes seconds to parse."""
    listing = dyn.request("get", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", header_params={
        "Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"})
    return [item.metadata for item in listing.items]


CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
# A CRD that terminates longer than this has its cleanup finalizer looked at (see _release_if_empty).
STUCK_SECONDS = 30


def wait_gone(dyn, names, timeout: float = 120) -> None:
    """Wait until the CRDs named are gone. One that is back without a deletion timestamp (an operator simulator
    recreated it before it noticed its operator was removed) is deleted again. One still terminating after
    STUCK_SECONDS with no object left is released (_release_if_empty)."""
    from kubernetes.dynamic.exceptions import NotFoundError

    api = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    deadline = time.monotonic() + timeout
    names = set(names)
    terminating_since = {}  # uid -> monotonic time its deletion was first seen
    while True:
        present = [m for m in _metadata(dyn) if m.name in names]
        left = sorted(m.name for m in present)
        if not left:
            return
        now = time.monotonic()
        for m in present:
            if not m.deletionTimestamp:
                try:
                    api.delete(name=m.name)
                except NotFoundError:
                    pass
            elif now - terminating_since.setdefault(m.uid, now) > STUCK_SECONDS:
                terminating_since[m.uid] = now  # looked at again STUCK_SECONDS later if it is still there
                _release_if_empty(dyn, api, m.name)
        if now > deadline:
            why = "; ".join(f"{n}: {_terminating_condition(api, n)}" for n in left)
            raise RuntimeError(f"CRDs still present {timeout:.0f} s after deletion: {why}")
        time.sleep(0.3)


def _terminating_condition(api, name: str) -> str:
    """The CRD's Terminating condition (reason: message), which says what its finalizer is waiting for."""
    try:
        conditions = (api.get(name=name).to_dict().get("status") or {}).get("conditions") or []
    except Exception as e:  # gone meanwhile
        return f"not readable ({e.__class__.__name__})"
    for c in conditions:
        if c.get("type") == "Terminating":
            return f"{c.get('reason')}: {c.get('message')}"
    return "no Terminating condition yet (the API server's CRD finalizer has not looked at it)"


def _release_if_empty(dyn, api, name: str) -> None:
    """Remove the cleanup finalizer of a terminating CRD that has no object left.

    The API server's CRD finalizer deletes a CRD's objects, then drops this finalizer. A CRD deleted just after it
    was (re)created (an operator simulator recreating it during a fleet switch) fails that finalizer with "storage
    is (re)initializing" until its watch cache is up (apiserver.log, crd_finalizer.go), and each failure doubles
    the wait before the next try (the work queue's per-name backoff, up to 1,000 s). On a loaded machine that
    left inferencegraphs.serving.kserve.io terminating for over 120 s with nothing to delete. With no object left,
    the finalizer has nothing to do but drop itself, which is what this does (the documented way out,
    kubernetes/kubernetes#60538). A CRD with an object left is never released."""
    try:
        crd = api.get(name=name).to_dict()
    except Exception:  # gone meanwhile
        return
    if CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or []):
        return
    spec = crd["spec"]
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    try:
        listing = dyn.request("get", f"/apis/{spec['group']}/{storage}/{spec['names']['plural']}",
                              query_params=[("limit", 1)], header_params={
                                  "Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"})
        if listing.items:
            return
    except Exception as e:
        # No longer served: its objects can no longer be listed to be sure there are none; wait for the finalizer.
        log.warning("CRD %s terminating %d s, its objects not listable (%s): left to the API server",
                    name, STUCK_SECONDS, e.__class__.__name__)
        return
    log.warning("CRD %s terminating over %d s with no object left (%s): removing its cleanup finalizer",
                name, STUCK_SECONDS, _terminating_condition(api, name))
    finalizers = [f for f in crd["metadata"]["finalizers"] if f != CLEANUP_FINALIZER]
    try:
        api.patch(name=name, content_type="application/json-patch+json", body=[
            {"op": "test", "path": "/metadata/resourceVersion", "value": crd["metadata"]["resourceVersion"]},
            {"op": "replace", "path": "/metadata/finalizers", "value": finalizers}])
    except Exception as e:  # changed meanwhile (the finalizer ran after all): looked at again later
        log.info("CRD %s: finalizer not removed (%s)", name, e.__class__.__name__)


def terminating(dyn) -> list:
    return [m.name for m in _metadata(dyn) if m.deletionTimestamp]


def missing(dyn, folder: Path, skip=()) -> list:
    """Names of the CRDs of the tree (less the folders in `skip`) that the API server does not have: a metadata
    listing, cheap, unlike load's full one."""
    left_out = set(group_files(folder, skip))
    present = {m.name for m in _metadata(dyn)}
    return sorted(crd_name(p) for p in crd_files(folder) if p not in left_out and crd_name(p) not in present)


def load(dyn, folder: Path, timeout: float = 60, skip=()) -> int:
    """Create every CRD (create, not apply: the largest exceed the last-applied annotation limit), wait Established.
    `skip`: folders of the tree to leave out."""
    api = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    left_out = set(group_files(folder, skip))
    files = [p for p in crd_files(folder) if p not in left_out]
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


def ensure(dyn, files, transform=None, timeout: float = 120) -> list:
    """Create the CRDs of `files` that do not exist (as OLM installs a CSV's owned CRDs, or an operator its
    components'), `transform(doc)` applied to each first; wait until each is served. Returns the names created."""
    api = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    present = {m.name for m in _metadata(dyn)}
    todo = [p for p in files if crd_name(p) not in present]
    created = []
    for path in todo:
        doc = yaml.load(path.read_text(), Loader=_Loader)
        if transform:
            doc = transform(doc)
        try:
            api.create(body=doc)
            created.append(doc["metadata"]["name"])
        except Exception as e:  # another simulator created it meanwhile
            if getattr(e, "status", None) != 409:
                raise
    deadline = time.monotonic() + timeout
    for path in todo:
        plural, group = crd_name(path).split(".", 1)
        while not _served(dyn, group, plural):
            if time.monotonic() > deadline:
                raise RuntimeError(f"CRD {plural}.{group} not served after {timeout:.0f} s")
            time.sleep(0.3)
    return created


def _served(dyn, group: str, plural: str) -> bool:
    try:
        versions = [v["version"] for v in dyn.request("get", f"/apis/{group}").to_dict().get("versions") or []]
        for v in versions:
            resources = dyn.request("get", f"/apis/{group}/{v}").to_dict().get("resources") or []
            if any(r["name"] == plural for r in resources):
                return True
    except Exception:  # the group is not served yet
        return False
    return False
