# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which nodes can satisfy each claim template, read from the ResourceSlices the cluster has.

The match of every device is the template's own selector (selectors.py), so the report says what
the scheduler will find for the forms the collection generates. A node satisfies a template when it
publishes count matching devices; with same_pcie_root, count of them under one PCIe root. Devices
already allocated to other claims are not looked at: this is capacity, not free capacity.

Slices are plain dicts (resource.k8s.io/v1 or v1beta1). Only the newest generation of each pool
counts: older slices are leftovers the scheduler ignores too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import PCIE_ROOT
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.selectors import attribute, matches

_ROOT_DOMAIN, _ROOT_NAME = PCIE_ROOT.split("/", 1)


def _pool(item):
    """Return ((driver, pool name), generation) of a slice."""
    spec = item.get("spec") or {}
    pool = spec.get("pool") or {}
    return (spec.get("driver"), pool.get("name")), pool.get("generation") or 0


def _current_slices(resource_slices):
    """Return the slices of the newest generation of each (driver, pool)."""
    newest = {}
    for item in resource_slices:
        key, generation = _pool(item)
        newest[key] = max(newest.get(key, 0), generation)
    return [item for item in resource_slices if _pool(item)[1] == newest[_pool(item)[0]]]


def node_devices(resource_slices):
    """Return {node name: [(driver, device dict)]} of node-local slices, nodes and devices in slice order."""
    found = {}
    for item in _current_slices(resource_slices):
        spec = item.get("spec") or {}
        node = spec.get("nodeName")
        if not node:
            continue
        found.setdefault(node, []).extend((spec.get("driver"), device) for device in spec.get("devices") or [])
    return found


def _satisfied(template, devices):
    """Whether the matching (driver, device) pairs of one node can fill one claim of the template."""
    if not template.same_pcie_root:
        return len(devices) >= template.count
    roots = {}
    for driver, device in devices:
        root = attribute(device, driver, _ROOT_DOMAIN, _ROOT_NAME)
        if root is not None:
            roots[root] = roots.get(root, 0) + 1
    return any(count >= template.count for count in roots.values())


def match_templates(templates, resource_slices):
    """Return {template name: {"devices": {node: [device names]}, "nodes": [...], "exact": bool}}.

    devices lists every node with at least one matching device; nodes those where a whole claim
    (count devices, under one PCIe root when asked) fits. Both sorted by node name. exact is False
    for a template with a cel condition of the user's: that one is not evaluated here, so the
    nodes listed are those that satisfy the rest (the scheduler may find fewer).
    """
    per_node = node_devices(resource_slices)
    report = {}
    for template in templates:
        terms = template.terms()
        devices, nodes = {}, []
        for node in sorted(per_node):
            matching = [(driver, device) for driver, device in per_node[node] if matches(terms, device, driver)]
            if not matching:
                continue
            devices[node] = [device.get("name") for dummy, device in matching]
            if _satisfied(template, matching):
                nodes.append(node)
        report[template.name] = {"devices": devices, "nodes": nodes, "exact": not template.cel}
    return report
