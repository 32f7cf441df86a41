# -*- coding: utf-8 -*-
"""Structured selectors: the CEL text and the Python match come from the same terms; quantities."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from fractions import Fraction

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.quantity import mebibytes, parse_quantity
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.selectors import (
    Term,
    attribute,
    attribute_in,
    attribute_is,
    capacity,
    capacity_at_least,
    cel,
    driver_is,
    matches,
)

H100 = {"name": "gpu-0",
        "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100 80GB HBM3"},
                       "cudaComputeCapability": {"version": "9.0.0"},
                       "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"}},
        "capacity": {"memory": {"value": "81559Mi"}}}
MIG = {"name": "gpu-1-mig-3g40gb-0",
       "attributes": {"type": {"string": "mig"}, "profile": {"string": "3g.40gb"},
                      "productName": {"string": "NVIDIA H100 80GB HBM3"}},
       "capacity": {"memory": {"value": "40320Mi"}}}
# v1beta1 keeps the same fields under "basic", and may qualify names with the driver's domain.
BETA = {"name": "gpu-0", "basic": {"attributes": {"gpu.nvidia.com/type": {"string": "gpu"}},
                                   "capacity": {"gpu.nvidia.com/memory": {"value": "46068Mi"}}}}


@pytest.mark.parametrize("text, value", [
    ("40Gi", 40 * 2 ** 30), ("143771Mi", 143771 * 2 ** 20), ("80G", 80 * 10 ** 9), ("1.5Gi", 3 * 2 ** 29),
    ("1024", 1024), (512, 512), ("2Ti", 2 * 2 ** 40), ("500k", 500000),
])
def test_parse_quantity(text, value):
    assert parse_quantity(text) == Fraction(value)


@pytest.mark.parametrize("text", ["40GB", "-1Gi", "Gi", "", "1e3", "40 Gi", None, True, 4.5, "100m"])
def test_parse_quantity_refuses(text):
    assert parse_quantity(text) is None


def test_mebibytes():
    assert mebibytes(81559) == "81559Mi"


@pytest.mark.parametrize("terms, expression", [
    ((driver_is(),), "device.driver == 'gpu.nvidia.com'"),
    ((attribute_is("type", "gpu"),), "device.attributes['gpu.nvidia.com'].type == 'gpu'"),
    ((attribute_in("productName", ["NVIDIA L4", "Tesla T4"]),),
     "device.attributes['gpu.nvidia.com'].productName in ['NVIDIA L4', 'Tesla T4']"),
    ((capacity_at_least("memory", "40Gi"),),
     "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"),
    ((driver_is(), attribute_is("profile", "1g.10gb+me")),
     "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].profile == '1g.10gb+me'"),
    # Literals are escaped, whatever reaches them.
    ((attribute_is("productName", "it's"),), "device.attributes['gpu.nvidia.com'].productName == 'it\\'s'"),
])
def test_cel(terms, expression):
    assert cel(terms) == expression


@pytest.mark.parametrize("terms, device, driver, expected", [
    ((driver_is(), attribute_is("type", "gpu")), H100, "gpu.nvidia.com", True),
    ((driver_is(), attribute_is("type", "gpu")), H100, "other.example.com", False),
    ((attribute_is("type", "gpu"),), MIG, "gpu.nvidia.com", False),
    ((attribute_is("profile", "3g.40gb"),), MIG, "gpu.nvidia.com", True),
    ((attribute_is("profile", "3g.40gb"),), H100, "gpu.nvidia.com", False),   # absent attribute: no match
    ((attribute_in("productName", ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"]),), H100, "gpu.nvidia.com", True),
    ((attribute_in("productName", ["NVIDIA H200"]),), H100, "gpu.nvidia.com", False),
    ((capacity_at_least("memory", "40Gi"),), H100, "gpu.nvidia.com", True),
    ((capacity_at_least("memory", "80Gi"),), H100, "gpu.nvidia.com", False),   # 81559Mi < 81920Mi
    ((capacity_at_least("memory", "80G"),), H100, "gpu.nvidia.com", True),     # 85.5e9 bytes >= 80e9
    ((capacity_at_least("memory", "40Gi"),), MIG, "gpu.nvidia.com", False),   # 40320Mi < 40960Mi
    ((capacity_at_least("memory", "39Gi"),), MIG, "gpu.nvidia.com", True),
    ((capacity_at_least("multiprocessors", "1"),), MIG, "gpu.nvidia.com", False),
    ((attribute_is("type", "gpu"), capacity_at_least("memory", "44Gi")), BETA, "gpu.nvidia.com", True),
    # A name qualified with the domain counts in any driver's slice, as in CEL.
    ((attribute_is("type", "gpu"),), BETA, "other.example.com", True),
    ((), H100, "gpu.nvidia.com", True),
])
def test_matches(terms, device, driver, expected):
    assert matches(terms, device, driver) is expected


def test_attribute_and_capacity_lookup():
    assert attribute(H100, "gpu.nvidia.com", "resource.kubernetes.io", "pcieRoot") == "pci0000:00"
    assert attribute(H100, "gpu.nvidia.com", "gpu.nvidia.com", "cudaComputeCapability") == "9.0.0"
    # An unqualified name belongs to the slice's driver only.
    assert attribute(H100, "other.example.com", "gpu.nvidia.com", "type") is None
    assert capacity(BETA, "gpu.nvidia.com", "gpu.nvidia.com", "memory") == "46068Mi"


def test_unknown_term_is_a_programming_error():
    with pytest.raises(ValueError):
        cel((Term("regex", "productName", ".*"),))
    with pytest.raises(ValueError):
        matches((Term("regex", "productName", ".*"),), H100, "gpu.nvidia.com")
