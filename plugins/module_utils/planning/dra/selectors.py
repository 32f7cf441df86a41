# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Device selectors kept as data: each renders to one CEL expression and to a Python match.

A selector is a tuple of Terms, all of which must hold. Only four forms exist, the ones claim
templates generate; the CEL string and the match function are both derived from the same Terms,
so what the evaluator reports is what the scheduler will select (for these forms, not CEL at large):

  driver              device.driver == 'gpu.nvidia.com'
  attribute equals    device.attributes['gpu.nvidia.com'].type == 'gpu'
  attribute in        device.attributes['gpu.nvidia.com'].productName in ['NVIDIA H200', ...]
  capacity at least   device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0

The terms of a selector are joined with && in one expression, driver first: CEL's && is false as
soon as one side is false, so devices of other drivers (which lack these attributes) are never
an evaluation error.

Devices are ResourceSlice devices as plain dicts: resource.k8s.io/v1 ({name, attributes,
capacity}) or v1beta1 (the same under "basic"). An attribute is {string|int|bool|version: value};
a name without a domain belongs to the slice's driver.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.quantity import parse_quantity
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import DRA_DRIVER

DRIVER_IS = "driver"
ATTRIBUTE_IS = "attribute-is"
ATTRIBUTE_IN = "attribute-in"
CAPACITY_AT_LEAST = "capacity-at-least"
_VALUE_KEYS = ("string", "int", "bool", "version")


@dataclass(frozen=True)
class Term:
    """One condition on a device.

    kind: driver, attribute-is, attribute-in or capacity-at-least.
    name: the attribute or capacity name, in the domain of DRA_DRIVER ("" for driver).
    value: the driver name, the attribute's value, a tuple of values, or a quantity text.
    """

    kind: str
    name: str = ""
    value: Any = None


def driver_is(driver=DRA_DRIVER):
    return Term(DRIVER_IS, "", driver)


def attribute_is(name, value):
    return Term(ATTRIBUTE_IS, name, value)


def attribute_in(name, values):
    return Term(ATTRIBUTE_IN, name, tuple(values))


def capacity_at_least(name, quantity):
    return Term(CAPACITY_AT_LEAST, name, quantity)


def cel(terms):
    """Return the CEL expression of a selector (terms joined with &&)."""
    return " && ".join(_cel_term(term) for term in terms)


def _literal(value):
    return "'%s'" % str(value).replace("\\", "\\\\").replace("'", "\\'")


def _cel_term(term):
    if term.kind == DRIVER_IS:
        return "device.driver == %s" % _literal(term.value)
    if term.kind == ATTRIBUTE_IS:
        return "device.attributes[%s].%s == %s" % (_literal(DRA_DRIVER), term.name, _literal(term.value))
    if term.kind == ATTRIBUTE_IN:
        return "device.attributes[%s].%s in [%s]" % (
            _literal(DRA_DRIVER), term.name, ", ".join(_literal(value) for value in term.value))
    if term.kind == CAPACITY_AT_LEAST:
        return "device.capacity[%s].%s.compareTo(quantity(%s)) >= 0" % (
            _literal(DRA_DRIVER), term.name, _literal(term.value))
    raise ValueError("unknown selector term %r" % (term,))


def matches(terms, device, driver):
    """True when every term holds for a device that the slice of driver publishes."""
    return all(_matches(term, device, driver) for term in terms)


def _matches(term, device, driver):
    if term.kind == DRIVER_IS:
        return driver == term.value
    if term.kind == ATTRIBUTE_IS:
        return attribute(device, driver, DRA_DRIVER, term.name) == term.value
    if term.kind == ATTRIBUTE_IN:
        return attribute(device, driver, DRA_DRIVER, term.name) in term.value
    if term.kind == CAPACITY_AT_LEAST:
        have = parse_quantity(capacity(device, driver, DRA_DRIVER, term.name))
        return have is not None and have >= parse_quantity(term.value)
    raise ValueError("unknown selector term %r" % (term,))


def _fields(device):
    return device.get("basic") or device


def attribute(device, driver, domain, name):
    """Return the value of attribute domain/name of a device of driver's slice, None when absent."""
    attributes = _fields(device).get("attributes") or {}
    found = attributes.get("%s/%s" % (domain, name))
    if found is None and domain == driver:
        found = attributes.get(name)
    if not isinstance(found, dict):
        return None
    for key in _VALUE_KEYS:
        if key in found:
            return found[key]
    return None


def capacity(device, driver, domain, name):
    """Return the quantity text of capacity domain/name of a device, None when absent."""
    capacities = _fields(device).get("capacity") or {}
    found = capacities.get("%s/%s" % (domain, name))
    if found is None and domain == driver:
        found = capacities.get(name)
    if isinstance(found, dict):
        return found.get("value")
    return found
