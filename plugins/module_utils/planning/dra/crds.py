# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who owns the ComputeDomain CRDs (computedomains and computedomaincliques.resource.nvidia.com).

Two charts ship them: the NVIDIA DRA driver's and, since GPU Operator 26.7.0, the operator's, whose copy of
computedomains is an older snapshot (it still requires spec.numNodes; NVIDIA/aicr#2715). Helm creates a chart's
crds/ only when they are missing and never updates them, so whichever chart comes first wins, and `site` installs
the operator first. Upstream settled it by syncing the operator's copy with the DRA driver's schema
(NVIDIA/gpu-operator#2858, on release-26.7 as #2863, after 26.7.0): the DRA driver's schema is the one.

So: while the DRA stage installs the driver, the CRDs served are the driver chart's, applied under the DRA stage's
field manager when (and only when) the served schema differs. Without the DRA stage nothing here is written and the
operator's copy stays. The operator's pre-upgrade hook Job does not re-apply these two (its manage-crds list names
clusterpolicies, nvidiadrivers, gpuclusters and NFD's), so an operator upgrade keeps the owner; a driver upgrade
brings its own chart's CRDs through this same comparison. docs/dra.md, "The ComputeDomain CRDs".

Pure.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError

GROUP = "resource.nvidia.com"
CRD_API = "apiextensions.k8s.io/v1"
COMPUTE_DOMAIN_CRDS = ("computedomains." + GROUP, "computedomaincliques." + GROUP)
DRA_DRIVER = "dra-driver"
GPU_OPERATOR = "gpu-operator"
# The parts of a CRD's spec that make the schema it serves; the API server adds conversion {strategy: None}, which
# neither chart sets, and leaves these as written.
SCHEMA_KEYS = ("group", "names", "scope", "versions")


def owner(driver_installed):
    """Whose ComputeDomain CRDs are served: the DRA driver's while the DRA stage installs the driver, else the GPU
    Operator's (left as its chart made them)."""
    return DRA_DRIVER if driver_installed else GPU_OPERATOR


def chart_crds(documents):
    """{name: CRD} of the ComputeDomain CRDs among a chart's crds/ documents (`helm show crds`, parsed)."""
    found = {}
    for doc in documents or []:
        if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
            continue
        name = (doc.get("metadata") or {}).get("name")
        if name in COMPUTE_DOMAIN_CRDS:
            if doc.get("apiVersion") != CRD_API:
                raise DraError("the DRA driver chart's CustomResourceDefinition %s: apiVersion %r, expected %s "
                               "(is the chart the NVIDIA DRA driver's?). Nothing was written."
                               % (name, doc.get("apiVersion"), CRD_API))
            found[name] = doc
    return found


def desired(crd):
    """What is applied: the chart's CRD as the chart has it (name, annotations, labels, spec), nothing else."""
    meta = crd.get("metadata") or {}
    body = {"apiVersion": CRD_API, "kind": "CustomResourceDefinition",
            "metadata": dict((k, copy.deepcopy(meta[k])) for k in ("name", "annotations", "labels") if meta.get(k))}
    body["spec"] = copy.deepcopy(crd.get("spec") or {})
    return body


def _versions(spec):
    return dict((v.get("name"), v) for v in spec.get("versions") or [] if isinstance(v, dict))


def _walk(want, have, path, out, both):
    if isinstance(want, dict) and isinstance(have, dict):
        for key in sorted(set(want) | set(have) if both else set(want)):
            if key not in have:
                out.append((path + (key,), None, want[key]))
            elif key not in want:
                out.append((path + (key,), have[key], None))
            else:
                _walk(want[key], have[key], path + (key,), out, both)
    elif want != have:
        out.append((path, have, want))


def schema_differences(served, wanted):
    """Where the served CRD's schema differs from the wanted one, both ways: [(path, served value, wanted value)].

    Versions are compared by name (a path reads `versions.v1beta1.schema.openAPIV3Schema...`) and both ways:
    spec.versions is an atomic list, so an apply replaces it whole, and a field only the served one has is a
    difference. Of group, names and scope only what the chart sets counts (the API server fills in names it
    leaves out). A value absent on one side is None. Descriptions count: the CRD served is the chart's or not."""
    out = []
    served_spec, wanted_spec = (served or {}).get("spec") or {}, (wanted or {}).get("spec") or {}
    for key in SCHEMA_KEYS:
        if key == "versions":
            _walk(_versions(wanted_spec), _versions(served_spec), ("versions",), out, True)
        elif key in wanted_spec:
            _walk(wanted_spec[key], served_spec.get(key), (key,), out, False)
    return out


def _short(value):
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def describe(differences, limit=6):
    """The differences as short lines: `versions.v1beta1...required: ["channel", "numNodes"] -> ["channel"]`."""
    lines = ["%s: %s -> %s" % (".".join(str(p) for p in path), "absent" if before is None else _short(before),
                               "absent" if after is None else _short(after))
             for path, before, after in differences[:limit]]
    if len(differences) > limit:
        lines.append("and %d more" % (len(differences) - limit))
    return lines


def plan_crds(wanted, served, driver_installed=True):
    """What the DRA stage writes for the ComputeDomain CRDs.

    `wanted`: {name: CRD} from the driver chart (chart_crds); `served`: {name: CRD or None} as the cluster has them.
    Returns {"owner", "crds": {name: {"state", "differences"}}, "apply": [bodies to apply, in name order]}; state is
    `chart` (served as the chart has it), `replace` (served with another schema: applied), `missing` (the chart's
    install creates it) or `left` (not the DRA stage's: no driver installed). Raises DraError before anything is
    written when the chart's CRD would drop a version the cluster still stores objects in.
    """
    who = owner(driver_installed)
    result = {"owner": who, "crds": {}, "apply": []}
    for name in sorted(wanted):
        live = served.get(name)
        if who != DRA_DRIVER:
            result["crds"][name] = {"state": "left", "differences": []}
            continue
        if live is None:
            result["crds"][name] = {"state": "missing", "differences": []}
            continue
        body = desired(wanted[name])
        found = schema_differences(live, body)
        annotations = (body["metadata"].get("annotations") or {})
        live_annotations = (live.get("metadata") or {}).get("annotations") or {}
        drift = [k for k in sorted(annotations) if live_annotations.get(k) != annotations[k]]
        if not found and not drift:
            result["crds"][name] = {"state": "chart", "differences": []}
            continue
        kept = set(_versions(body["spec"]))
        stored = [v for v in ((live.get("status") or {}).get("storedVersions") or []) if v not in kept]
        if stored:
            raise DraError(
                "CustomResourceDefinition %s: status.storedVersions %s holds objects in version(s) the DRA driver "
                "chart's CRD no longer serves (valid: %s); migrate those objects to a served version and remove "
                "the version from status.storedVersions first, or install the chart version that serves it. "
                "Nothing was written." % (name, json.dumps(stored), ", ".join(sorted(kept)) or "none"))
        result["crds"][name] = {"state": "replace",
                                "differences": describe(found) + ["metadata.annotations." + k for k in drift]}
        result["apply"].append(body)
    return result
