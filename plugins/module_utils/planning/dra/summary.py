# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the DRA stage left in a cluster, for gpu_cluster_info and the report: nodes with devices, claim templates."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import CLAIM_TEMPLATE_LABEL
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.matching import node_devices
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DRA_DRIVER


def dra_summary(resource_slices, objects):
    """Return {"nodes": {node: NVIDIA devices published}, "claim_templates": [{name, device_class, claims}]}.

    objects: the DeviceClasses, ResourceClaimTemplates and ResourceClaims labelled kubegpu.io/claim-template,
    each with its kind. claims are "<Kind> <namespace>/<name>", sorted.
    """
    nodes = dict((node, len([d for driver, d in devices if driver == DRA_DRIVER]))
                 for node, devices in node_devices(resource_slices).items())
    templates = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        name = (meta.get("labels") or {}).get(CLAIM_TEMPLATE_LABEL)
        if not name:
            continue
        entry = templates.setdefault(name, {"name": name, "device_class": None, "claims": []})
        if obj.get("kind") == "DeviceClass":
            entry["device_class"] = meta.get("name")
        else:
            entry["claims"].append("%s %s/%s" % (obj.get("kind"), meta.get("namespace"), meta.get("name")))
    for entry in templates.values():
        entry["claims"].sort()
    return {"nodes": dict((n, c) for n, c in sorted(nodes.items()) if c),
            "claim_templates": [templates[n] for n in sorted(templates)]}
