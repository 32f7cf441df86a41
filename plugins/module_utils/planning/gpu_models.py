# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU models the collection knows, and how node labels map to them.

Facts come from the project's reference notes gpu-node-labels.md (per-model table) and
gpu-operator.md (MIG table). Every other planning module asks this one which model a node
carries.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from dataclasses import dataclass
from typing import Tuple

# GFD rewrites gpu.product under MIG strategy single ("<product>-MIG-1g.10gb", or
# "-MIG-INVALID" for mixed geometry) and under time-slicing/MPS ("<product>-SHARED"),
# so a node's label names the same card in several spellings.
_SHARED_SUFFIX = "-SHARED"
_MIG_INFIX = "-MIG-"


class UnknownGpuError(ValueError):
    """A gpu.product label or model key this collection has no entry for."""


@dataclass(frozen=True)
class GpuModel:
    """One GPU model as the planners see it.

    key: the collection's name for the model, used in pool definitions ("H100-80GB").
    products: the nvidia.com/gpu.product values GFD writes for it; the first is the one
      used in messages.
    device_filter: PCI device ids in mig-parted device-filter form (0x<device><vendor>).
    memory_mib: nvidia.com/gpu.memory of the whole GPU.
    family: nvidia.com/gpu.family.
    compute_capability: "<major>.<minor>" as in nvidia.com/gpu.compute.{major,minor}.
    mig_capable: nvidia.com/mig.capable.
    """

    key: str
    products: Tuple[str, ...]
    device_filter: Tuple[str, ...]
    memory_mib: int
    family: str
    compute_capability: str
    mig_capable: bool

    @property
    def product(self):
        """The primary gpu.product value, the name users see on their nodes."""
        return self.products[0]


# Values marked (d) are derived from nvidia-smi output with GFD's naming rule (NVML name,
# spaces -> '-'), not seen as a label; the reference marks them the same way.
MODELS = (
    GpuModel(
        key="A30-24GB",
        products=("NVIDIA-A30",),
        device_filter=("0x20B710DE",),
        memory_mib=24576,
        family="ampere",
        compute_capability="8.0",
        mig_capable=True,
    ),
    GpuModel(
        key="A100-40GB",
        # Drivers before the "NVIDIA " name prefix report the bare name.
        products=("NVIDIA-A100-SXM4-40GB", "A100-SXM4-40GB"),
        device_filter=("0x20B010DE",),
        # 40536 on 450/470 drivers.
        memory_mib=40960,
        family="ampere",
        compute_capability="8.0",
        mig_capable=True,
    ),
    GpuModel(
        key="A100-80GB",
        # Both product labels and the memory are (d).
        products=("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe"),
        device_filter=("0x20B210DE", "0x20B510DE"),
        memory_mib=81920,
        family="ampere",
        compute_capability="8.0",
        mig_capable=True,
    ),
    GpuModel(
        key="H100-80GB",
        products=("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe"),
        device_filter=("0x233010DE", "0x233110DE"),
        memory_mib=81559,
        family="hopper",
        compute_capability="9.0",
        mig_capable=True,
    ),
    GpuModel(
        key="H100-94GB",
        products=("NVIDIA-H100-NVL",),
        device_filter=("0x232110DE",),
        memory_mib=95830,
        family="hopper",
        compute_capability="9.0",
        mig_capable=True,
    ),
    GpuModel(
        # The GPU of a GH200 superchip; the MIG table calls it H100-96GB. Label and memory (d).
        key="H100-96GB",
        products=("NVIDIA-GH200-480GB",),
        device_filter=("0x234210DE",),
        memory_mib=97871,
        family="hopper",
        compute_capability="9.0",
        mig_capable=True,
    ),
    GpuModel(
        # Label and memory (d).
        key="H200-141GB",
        products=("NVIDIA-H200",),
        device_filter=("0x233510DE",),
        memory_mib=143771,
        family="hopper",
        compute_capability="9.0",
        mig_capable=True,
    ),
    GpuModel(
        # The reference gives only the PCI id and MIG profiles. Label (d) from the NVML name
        # "NVIDIA GH200 144G HBM3e"; memory (d) from nvidia-smi output seen in public code.
        key="GH200-144GB",
        products=("NVIDIA-GH200-144G-HBM3e",),
        device_filter=("0x234810DE",),
        memory_mib=146831,
        family="hopper",
        compute_capability="9.0",
        mig_capable=True,
    ),
    GpuModel(
        # Label and memory (d).
        key="B200-180GB",
        products=("NVIDIA-B200",),
        device_filter=("0x290110DE",),
        memory_mib=183359,
        family="blackwell",
        compute_capability="10.0",
        mig_capable=True,
    ),
    GpuModel(
        # The reference gives only the PCI id and MIG profiles. Label (d) from the NVML name
        # "NVIDIA GB200"; memory (d) from nvidia-smi output seen in public code.
        key="GB200-186GB",
        products=("NVIDIA-GB200",),
        device_filter=("0x294110DE",),
        memory_mib=189471,
        family="blackwell",
        compute_capability="10.0",
        mig_capable=True,
    ),
    GpuModel(
        key="L40S",
        products=("NVIDIA-L40S",),
        device_filter=("0x26B910DE",),
        memory_mib=46068,
        family="ada-lovelace",
        compute_capability="8.9",
        mig_capable=False,
    ),
    GpuModel(
        key="L4",
        products=("NVIDIA-L4",),
        device_filter=("0x27B810DE",),
        memory_mib=23034,
        family="ada-lovelace",
        compute_capability="8.9",
        mig_capable=False,
    ),
    GpuModel(
        key="A10G",
        products=("NVIDIA-A10G",),
        device_filter=("0x223710DE",),
        memory_mib=23028,
        family="ampere",
        compute_capability="8.6",
        mig_capable=False,
    ),
    GpuModel(
        key="T4",
        products=("Tesla-T4",),
        device_filter=("0x1EB810DE",),
        memory_mib=15360,
        family="turing",
        compute_capability="7.5",
        mig_capable=False,
    ),
)

_BY_PRODUCT = dict((product, model) for model in MODELS for product in model.products)
_BY_KEY = dict((model.key, model) for model in MODELS)


def base_product(product_label):
    """Return the gpu.product value with GFD's sharing and MIG suffixes removed.

    "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED" -> "NVIDIA-H100-80GB-HBM3". A value without
    suffixes comes back unchanged.
    """
    product = product_label
    if product.endswith(_SHARED_SUFFIX):
        product = product[:-len(_SHARED_SUFFIX)]
    return product.split(_MIG_INFIX, 1)[0]


def model_for_product(product_label):
    """Return the GpuModel a node's nvidia.com/gpu.product label names.

    Accepts the label as GFD writes it, with -SHARED, -MIG-<profile> or -MIG-INVALID.
    Raises UnknownGpuError naming the label and every known product.
    """
    if not isinstance(product_label, str) or not product_label:
        raise UnknownGpuError(
            "nvidia.com/gpu.product is %r, expected a GFD product label such as %s"
            % (product_label, MODELS[0].product)
        )
    model = _BY_PRODUCT.get(base_product(product_label))
    if model is None:
        raise UnknownGpuError(
            "unknown GPU product '%s' (nvidia.com/gpu.product); known products: %s; "
            "add the model to plugins/module_utils/planning/gpu_models.py"
            % (product_label, ", ".join(sorted(_BY_PRODUCT)))
        )
    return model


def model_for_key(key):
    """Return the GpuModel with this collection key ("H100-80GB").

    Raises UnknownGpuError naming the key and every known key.
    """
    model = _BY_KEY.get(key)
    if model is None:
        raise UnknownGpuError(
            "unknown GPU model %r; known models: %s" % (key, ", ".join(_BY_KEY))
        )
    return model


# The name NVML reports (nvidia-smi's "name"), from which GFD derives gpu.product (spaces -> '-').
# The DRA driver publishes this name unchanged as the productName attribute, so a claim that
# selects by product compares against it. Names of (d) products above are (d) too; "NVIDIA H200"
# is the captured nvidia-smi output in tests/fixtures/hardware/nvidia-h200.
NVML_NAMES = {
    "NVIDIA-A30": "NVIDIA A30",
    "NVIDIA-A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
    "A100-SXM4-40GB": "A100-SXM4-40GB",
    "NVIDIA-A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA-A100-80GB-PCIe": "NVIDIA A100 80GB PCIe",
    "NVIDIA-H100-80GB-HBM3": "NVIDIA H100 80GB HBM3",
    "NVIDIA-H100-PCIe": "NVIDIA H100 PCIe",
    "NVIDIA-H100-NVL": "NVIDIA H100 NVL",
    "NVIDIA-GH200-480GB": "NVIDIA GH200 480GB",
    "NVIDIA-H200": "NVIDIA H200",
    "NVIDIA-GH200-144G-HBM3e": "NVIDIA GH200 144G HBM3e",
    "NVIDIA-B200": "NVIDIA B200",
    "NVIDIA-GB200": "NVIDIA GB200",
    "NVIDIA-L40S": "NVIDIA L40S",
    "NVIDIA-L4": "NVIDIA L4",
    "NVIDIA-A10G": "NVIDIA A10G",
    "Tesla-T4": "Tesla T4",
}


def nvml_names(model):
    """Return the NVML names of a GpuModel's products, in the order of model.products."""
    return tuple(NVML_NAMES[product] for product in model.products)


def model_for_nvml_name(name):
    """Return the GpuModel whose product NVML calls name ("NVIDIA H100 80GB HBM3"), None if unknown."""
    for product, nvml_name in NVML_NAMES.items():
        if nvml_name == name:
            return _BY_PRODUCT[product]
    return None
