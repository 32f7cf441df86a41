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
from typing import Optional, Tuple

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    COMPUTE_MAJOR_LABEL,
    COMPUTE_MINOR_LABEL,
    COUNT_LABEL,
    FAMILY_LABEL,
    MEMORY_LABEL,
    MIG_CAPABLE_LABEL,
    MIG_PRODUCT_INFIX,
    PRODUCT_LABEL,
    SHARED_PRODUCT_SUFFIX,
)

_COMPUTE_LABELS = (COMPUTE_MAJOR_LABEL, COMPUTE_MINOR_LABEL)


class UnknownGpuError(ValueError):
    """A gpu.product label or model key this collection has no entry for."""


@dataclass(frozen=True)
class GpuModel:
    """One GPU model as the planners see it.

    key: the collection's name for the model, used in pool definitions ("H100-80GB").
    products: the nvidia.com/gpu.product values GFD writes for it; the first is the one
      used in messages.
    device_filter: PCI device ids in mig-parted device-filter form (0x<device><vendor>).
    memory_mib: nvidia.com/gpu.memory of the whole GPU, None when not known.
    family: nvidia.com/gpu.family.
    compute_capability: "<major>.<minor>" as in nvidia.com/gpu.compute.{major,minor}.
    mig_capable: nvidia.com/mig.capable.
    catalogued: False for a model read from a node's labels because this table has no entry
      for it (model_for_labels); such a model can be time-sliced, shared with MPS or left
      alone, but has no MIG catalog.
    """

    key: str
    products: Tuple[str, ...]
    device_filter: Tuple[str, ...]
    memory_mib: Optional[int]
    family: str
    compute_capability: str
    mig_capable: bool
    catalogued: bool = True

    @property
    def product(self):
        """The primary gpu.product value, the name users see on their nodes."""
        return self.products[0]


# Values marked (d) are derived from nvidia-smi output with GFD's naming rule (NVML name,
# spaces -> '-'), not seen as a label; the reference marks them the same way. memory_mib None:
# no verified figure (GFD's nvidia.com/gpu.memory on the node is the truth; nothing plans on it).
# PCI ids of the models added for issue 9 come from the device-filter lists of NVIDIA/mig-parted
# deployments/systemd/config-default.yaml (the GPU Operator's default-mig-parted-config), whose
# comments name the GPUs each list is for; where a list names two GPUs, the split follows the
# PCI ID database and is marked (pci.ids).
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
        # Drivers before the "NVIDIA " name prefix report the bare name. The PCIe card is
        # NVIDIA-A100-PCIE-40GB (seen as a label); it has two PCI ids (pci.ids).
        products=("NVIDIA-A100-SXM4-40GB", "A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"),
        device_filter=("0x20B010DE", "0x20B110DE", "0x20F110DE"),
        # 40536 on 450/470 drivers.
        memory_mib=40960,
        family="ampere",
        compute_capability="8.0",
        mig_capable=True,
    ),
    GpuModel(
        # The A100-40GB MIG geometry (operator config: "A100-40GB, A800-40GB"). Label (d) from
        # the NVML name "NVIDIA A800 40GB Active" seen in nvidia-smi output; PCI id (pci.ids).
        key="A800-40GB",
        products=("NVIDIA-A800-40GB-Active",),
        device_filter=("0x20F610DE",),
        memory_mib=None,
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
        # The 80GB MIG geometry (operator config: "H100-80GB, H800-80GB, A100-80GB, A800-80GB").
        # NVIDIA-A800-SXM4-80GB seen as a label, with 81920 MiB in nvidia-smi output; the PCIe
        # label (d); PCI ids (pci.ids).
        key="A800-80GB",
        products=("NVIDIA-A800-SXM4-80GB", "NVIDIA-A800-80GB-PCIe"),
        device_filter=("0x20F310DE", "0x20F510DE"),
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
        # The 80GB MIG geometry. NVIDIA-H800 (SXM) seen as a label; the PCIe label (d); PCI ids
        # (pci.ids).
        key="H800-80GB",
        products=("NVIDIA-H800", "NVIDIA-H800-PCIe"),
        device_filter=("0x232410DE", "0x232210DE"),
        memory_mib=None,
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
        # The H100-94GB MIG geometry (operator config: "H100 NVL, H800 NVL"). Label (d).
        key="H800-94GB",
        products=("NVIDIA-H800-NVL",),
        device_filter=("0x233A10DE",),
        memory_mib=None,
        family="hopper",
        compute_capability="9.0",
        mig_capable=True,
    ),
    GpuModel(
        # The GPU of a GH200 superchip; the MIG table calls it H100-96GB. Label and memory (d).
        # The operator config lists 0x233D ("H100-96GB") with it; its label (d).
        key="H100-96GB",
        products=("NVIDIA-GH200-480GB", "NVIDIA-H100-96GB-HBM3"),
        device_filter=("0x234210DE", "0x233D10DE"),
        memory_mib=97871,
        family="hopper",
        compute_capability="9.0",
        mig_capable=True,
    ),
    GpuModel(
        # 96GB Hopper; the MIG User Guide lists H20 (96GB, 7 instances, R535+); the operator
        # config gives it the H100-96GB geometry. NVIDIA-H20 seen as a label.
        key="H20-96GB",
        products=("NVIDIA-H20",),
        device_filter=("0x232910DE",),
        memory_mib=None,
        family="hopper",
        compute_capability="9.0",
        mig_capable=True,
    ),
    GpuModel(
        # Label and memory (d). H200 NVL (MIG User Guide: 141GB, 7 instances) has the same
        # geometry in the operator config ("H200 141GB, H200 NVL"); NVIDIA-H200-NVL seen as a label.
        # That config's all-1g.35gb entry filters 0x2335 only: 1g.35gb on H200 NVL is not confirmed.
        key="H200-141GB",
        products=("NVIDIA-H200", "NVIDIA-H200-NVL"),
        device_filter=("0x233510DE", "0x233B10DE"),
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
        # Blackwell Ultra (MIG User Guide: B300, R580+). NVIDIA-B300-SXM6-AC seen as a label (and
        # in NVIDIA's NIM release notes); compute capability 10.3 (SM103, NVIDIA CUTLASS docs).
        key="B300-288GB",
        products=("NVIDIA-B300-SXM6-AC",),
        device_filter=("0x318210DE",),
        memory_mib=None,
        family="blackwell",
        compute_capability="10.3",
        mig_capable=True,
    ),
    GpuModel(
        # MIG User Guide: GB300 (DGX Station, R595+). Label (d) from the NVML name "NVIDIA GB300";
        # compute capability taken to be B300's (Blackwell Ultra), not seen for GB300 itself.
        key="GB300-288GB",
        products=("NVIDIA-GB300",),
        device_filter=("0x31C210DE",),
        memory_mib=None,
        family="blackwell",
        compute_capability="10.3",
        mig_capable=True,
    ),
    GpuModel(
        # MIG User Guide: the three RTX PRO 6000 Blackwell editions, GB202, compute capability
        # 12.0, 96GB, at most 4 instances (R575+). The Max-Q label is seen; the other two (d).
        # The operator config's device filter names one id ("RTX PRO 6000 Blackwell").
        key="RTX-PRO-6000-96GB",
        products=(
            "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
            "NVIDIA-RTX-PRO-6000-Blackwell-Workstation-Edition",
            "NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition",
        ),
        device_filter=("0x2BB510DE",),
        memory_mib=None,
        family="blackwell",
        compute_capability="12.0",
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
        # Not MIG-capable (MIG User Guide, "Supported GPUs", lists GA100 and later data-centre
        # parts only). NVIDIA-A40 seen as a label; PCI id (pci.ids).
        key="A40",
        products=("NVIDIA-A40",),
        device_filter=("0x223510DE",),
        memory_mib=None,
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
    GpuModel(
        # Volta: no MIG (compute capability below 8.0). Label seen; PCI id (pci.ids).
        key="V100-32GB",
        products=("Tesla-V100-SXM2-32GB",),
        device_filter=("0x1DB510DE",),
        memory_mib=None,
        family="volta",
        compute_capability="7.0",
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
    if product.endswith(SHARED_PRODUCT_SUFFIX):
        product = product[:-len(SHARED_PRODUCT_SUFFIX)]
    return product.split(MIG_PRODUCT_INFIX, 1)[0]


def model_for_product(product_label):
    """Return the GpuModel a node's nvidia.com/gpu.product label names.

    Accepts the label as GFD writes it, with -SHARED, -MIG-<profile> or -MIG-INVALID.
    Raises UnknownGpuError naming the label and every known product.
    """
    if not isinstance(product_label, str) or not product_label:
        raise UnknownGpuError(
            "%s is %r, expected a GFD product label such as %s"
            % (PRODUCT_LABEL, product_label, MODELS[0].product)
        )
    model = _BY_PRODUCT.get(base_product(product_label))
    if model is None:
        raise UnknownGpuError(
            "unknown GPU product '%s' (%s); known products: %s; "
            "add the model to plugins/module_utils/planning/gpu_models.py"
            % (product_label, PRODUCT_LABEL, ", ".join(sorted(_BY_PRODUCT)))
        )
    return model


def known_products():
    """Return every gpu.product value of the table, sorted."""
    return sorted(_BY_PRODUCT)


def model_for_labels(labels):
    """Return the GpuModel of a node from its GFD labels; any NVIDIA GPU has one.

    A gpu.product of the table gives its catalogued model (GFD's -SHARED / -MIG- suffixes
    accepted). Any other product gives an uncatalogued GpuModel (catalogued False) read from
    the node's own labels: key and product the base gpu.product, memory from gpu.memory,
    family from gpu.family, compute capability from gpu.compute.{major,minor}, mig_capable
    from mig.capable; such a model serves time-slicing, MPS and none, and mig_catalog
    refuses MIG on it by name. Raises UnknownGpuError only when gpu.product is missing or
    empty, naming the label.
    """
    labels = labels or {}
    product = labels.get(PRODUCT_LABEL)
    if not isinstance(product, str) or not product:
        raise UnknownGpuError(
            "%s is %r, expected the GPU product GPU Feature Discovery publishes (e.g. %s); the node's "
            "GPU is unknown without it (install the GPU Operator, or check GPU Feature Discovery on the node)"
            % (PRODUCT_LABEL, product, MODELS[0].product)
        )
    model = _BY_PRODUCT.get(base_product(product))
    if model is not None:
        return model
    base = base_product(product)
    memory = str(labels.get(MEMORY_LABEL, ""))
    major, minor = (str(labels.get(name, "")) for name in _COMPUTE_LABELS)
    return GpuModel(
        key=base,
        products=(base,),
        device_filter=(),
        memory_mib=int(memory) if memory.isdigit() else None,
        family=str(labels.get(FAMILY_LABEL, "")),
        compute_capability="%s.%s" % (major, minor) if major.isdigit() and minor.isdigit() else "",
        mig_capable=labels.get(MIG_CAPABLE_LABEL) == "true",
        catalogued=False,
    )


def gfd_gpu_count_problem(labels):
    """Return why a node's gpu.count label cannot give its GPU count, None when it can or is absent.

    The text names the labels GFD published, so a message points at the node's labels, not at an
    option the user never set. A plain product needs a count of 1 or more. Under MIG strategy
    single (product <model>-MIG-<profile>) GFD counts MIG devices, not GPUs: any count there,
    0 included (GFD's -MIG-INVALID, which a roll-out stopped halfway leaves behind), is left to
    the node-pool planner, which reads the GPU count it recorded on the node before the change.
    """
    labels = labels or {}
    product = labels.get(PRODUCT_LABEL)
    if COUNT_LABEL not in labels or not isinstance(product, str) or not product or MIG_PRODUCT_INFIX in product:
        return None
    count = str(labels.get(COUNT_LABEL))
    if count.isdigit() and int(count) >= 1:
        return None
    return "GPU Feature Discovery labels %s=%r, %s=%r: expected a GPU count of 1 or more" % (
        COUNT_LABEL, labels.get(COUNT_LABEL), PRODUCT_LABEL, product)


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
# selects by product compares against it. Most names turn back by '-' -> ' ' ("NVIDIA H200" is
# the captured nvidia-smi output in tests/fixtures/hardware/nvidia-h200); these keep a hyphen of
# their own in NVML's name, so the rule cannot recover them.
_NVML_HYPHENATED = {
    "NVIDIA-A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
    "A100-SXM4-40GB": "A100-SXM4-40GB",
    "NVIDIA-A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA-A100-PCIE-40GB": "NVIDIA A100-PCIE-40GB",
    "NVIDIA-A800-SXM4-80GB": "NVIDIA A800-SXM4-80GB",
    "Tesla-V100-SXM2-32GB": "Tesla V100-SXM2-32GB",
}


def nvml_name(product):
    """Return the NVML name of a gpu.product value ("NVIDIA-H100-80GB-HBM3" -> "NVIDIA H100 80GB HBM3")."""
    return _NVML_HYPHENATED.get(product, product.replace("-", " "))


def nvml_names(model):
    """Return the NVML names of a GpuModel's products, in the order of model.products."""
    return tuple(nvml_name(product) for product in model.products)


def model_for_nvml_name(name):
    """Return the GpuModel whose product NVML calls name ("NVIDIA H100 80GB HBM3"), None if unknown."""
    for product, model in _BY_PRODUCT.items():
        if nvml_name(product) == name:
            return model
    return None
