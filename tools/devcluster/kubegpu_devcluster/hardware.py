"""The simulated hardware: what GPU Feature Discovery would read from each GPU model.

This table plays the part of the GPUs themselves and is kept apart from the collection's own catalog on
purpose, so that tests compare the collection against an independent account of the hardware.
Source: shared/reference/gpu-node-labels.md ("Per model"); values marked (d) there are derived.
Models added for issue 9 (any NVIDIA GPU) follow GFD's rule for gpu.product (the NVML name, spaces -> '-'):
NVIDIA-A40, NVIDIA-H200-NVL and NVIDIA-RTX-A6000 are seen as labels on real nodes; NVIDIA-RTX-PRO-5000-Blackwell
is derived. Their gpu.memory values are derived from nvidia-smi totals (d), PCI ids from the PCI ID database;
MIG-capable per NVIDIA's MIG User Guide ("Supported GPUs": H200 NVL and RTX PRO 5000 Blackwell yes, A40 and
RTX A6000 no). RTX PRO 5000 is MIG-capable hardware that the collection's MIG catalog does not cover (it is not
in the operator's default-mig-parted-config), which is what the tests need it for.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    product: str          # nvidia.com/gpu.product as GFD writes it
    memory_mib: int       # nvidia.com/gpu.memory
    compute: tuple        # (major, minor)
    family: str           # nvidia.com/gpu.family
    mig_capable: bool
    pci_device: str       # PCI device id (vendor 10de)
    arch: str = "amd64"


GPUS = {
    "A100-40GB": Gpu("NVIDIA-A100-SXM4-40GB", 40960, (8, 0), "ampere", True, "20B0"),
    "A100-80GB": Gpu("NVIDIA-A100-SXM4-80GB", 81920, (8, 0), "ampere", True, "20B2"),
    "A100-80GB-PCIE": Gpu("NVIDIA-A100-80GB-PCIe", 81920, (8, 0), "ampere", True, "20B5"),
    "H100-80GB": Gpu("NVIDIA-H100-80GB-HBM3", 81559, (9, 0), "hopper", True, "2330"),
    "H100-PCIE": Gpu("NVIDIA-H100-PCIe", 81559, (9, 0), "hopper", True, "2331"),
    "H100-94GB": Gpu("NVIDIA-H100-NVL", 95830, (9, 0), "hopper", True, "2321"),
    "H200": Gpu("NVIDIA-H200", 143771, (9, 0), "hopper", True, "2335"),
    "H200-NVL": Gpu("NVIDIA-H200-NVL", 143771, (9, 0), "hopper", True, "233B"),
    "GH200": Gpu("NVIDIA-GH200-480GB", 97871, (9, 0), "hopper", True, "2342", "arm64"),
    "B200": Gpu("NVIDIA-B200", 183359, (10, 0), "blackwell", True, "2901"),
    "A30": Gpu("NVIDIA-A30", 24576, (8, 0), "ampere", True, "20B7"),
    "L40S": Gpu("NVIDIA-L40S", 46068, (8, 9), "ada-lovelace", False, "26B9"),
    "L4": Gpu("NVIDIA-L4", 23034, (8, 9), "ada-lovelace", False, "27B8"),
    "A10G": Gpu("NVIDIA-A10G", 23028, (8, 6), "ampere", False, "2237"),
    "A40": Gpu("NVIDIA-A40", 46068, (8, 6), "ampere", False, "2235"),
    "RTX-A6000": Gpu("NVIDIA-RTX-A6000", 49140, (8, 6), "ampere", False, "2230"),
    "RTX-PRO-5000": Gpu("NVIDIA-RTX-PRO-5000-Blackwell", 48935, (12, 0), "blackwell", True, "2BB3"),
    "T4": Gpu("Tesla-T4", 15360, (7, 5), "turing", False, "1EB8"),
}


# The device name NVML reports (nvidia-smi's "name"); GFD turns its spaces into '-' for gpu.product, the DRA
# driver publishes it as productName. "NVIDIA H200" as captured in tests/fixtures/hardware/nvidia-h200.
NVML_NAMES = {
    "A100-40GB": "NVIDIA A100-SXM4-40GB", "A100-80GB": "NVIDIA A100-SXM4-80GB", "A100-80GB-PCIE": "NVIDIA A100 80GB PCIe",
    "H100-80GB": "NVIDIA H100 80GB HBM3", "H100-PCIE": "NVIDIA H100 PCIe", "H100-94GB": "NVIDIA H100 NVL",
    "H200": "NVIDIA H200", "GH200": "NVIDIA GH200 480GB", "B200": "NVIDIA B200", "A30": "NVIDIA A30",
    "L40S": "NVIDIA L40S", "L4": "NVIDIA L4", "A10G": "NVIDIA A10G", "T4": "Tesla T4",
}


def gpu(model: str) -> Gpu:
    try:
        return GPUS[model]
    except KeyError:
        raise ValueError(f"unknown GPU model {model!r} in fleet file (known: {', '.join(sorted(GPUS))})") from None


# -- MIG (shared/reference/gpu-operator.md "Profiles (MIG User Guide)" and gpu-node-labels.md "default-mig-parted-config")
# Per MIG-capable model: profile -> (memory slices, max count). A GPU has 8 memory slices and 7 compute slices
# (A30: 4 and 4); a profile "<n>g.<mem>gb" takes n compute slices. "+me" profiles (media extensions) are the
# 1-slice profile with the GPU's only set of media engines, hence at most one.
_MIG_80GB = {"1g.10gb": (1, 7), "1g.10gb+me": (1, 1), "1g.20gb": (2, 4), "2g.20gb": (2, 3), "3g.40gb": (4, 2),
             "4g.40gb": (4, 1), "7g.80gb": (8, 1)}
MIG_PROFILES = {
    "A30": {"1g.6gb": (1, 4), "1g.6gb+me": (1, 1), "2g.12gb": (2, 2), "2g.12gb+me": (2, 1), "4g.24gb": (4, 1)},
    "A100-40GB": {"1g.5gb": (1, 7), "1g.5gb+me": (1, 1), "1g.10gb": (2, 4), "2g.10gb": (2, 3), "3g.20gb": (4, 2),
                  "4g.20gb": (4, 1), "7g.40gb": (8, 1)},
    "A100-80GB": _MIG_80GB,
    "A100-80GB-PCIE": _MIG_80GB,
    "H100-80GB": _MIG_80GB,
    "H100-PCIE": _MIG_80GB,
    "H100-94GB": {"1g.12gb": (1, 7), "1g.12gb+me": (1, 1), "1g.24gb": (2, 4), "2g.24gb": (2, 3), "3g.47gb": (4, 2),
                  "4g.47gb": (4, 1), "7g.94gb": (8, 1)},
    "GH200": {"1g.12gb": (1, 7), "1g.12gb+me": (1, 1), "1g.24gb": (2, 4), "2g.24gb": (2, 3), "3g.48gb": (4, 2),
              "4g.48gb": (4, 1), "7g.96gb": (8, 1)},
    "H200": {"1g.18gb": (1, 7), "1g.18gb+me": (1, 1), "1g.35gb": (2, 4), "2g.35gb": (2, 3), "3g.71gb": (4, 2),
             "4g.71gb": (4, 1), "7g.141gb": (8, 1)},
    # H200 NVL: the operator's default config gives it H200's geometry (device filters 0x2335, 0x233B).
    "H200-NVL": {"1g.18gb": (1, 7), "1g.18gb+me": (1, 1), "1g.35gb": (2, 4), "2g.35gb": (2, 3),
                 "3g.71gb": (4, 2), "4g.71gb": (4, 1), "7g.141gb": (8, 1)},
    "B200": {"1g.23gb": (1, 7), "1g.23gb+me": (1, 1), "1g.45gb": (2, 4), "2g.45gb": (2, 3), "3g.90gb": (4, 2),
             "4g.90gb": (4, 1), "7g.180gb": (8, 1)},
}
# all-balanced per GPU (default-mig-parted-config, by device filter).
_BALANCED_80GB = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
MIG_BALANCED = {
    "A30": {"1g.6gb": 2, "2g.12gb": 1},
    "A100-40GB": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    "A100-80GB": _BALANCED_80GB,
    "A100-80GB-PCIE": _BALANCED_80GB,
    "H100-80GB": _BALANCED_80GB,
    "H100-PCIE": _BALANCED_80GB,
    "H100-94GB": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
    "GH200": {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1},
    "H200": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    "H200-NVL": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    "B200": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
}


def mig_slices(model: str) -> tuple:
    """(memory slices, compute slices) of one GPU of the model."""
    return (4, 4) if model == "A30" else (8, 7)


def model_by_product(product: str) -> str | None:
    """The hardware key of a gpu.product label, with GFD's -MIG-<profile> and -SHARED suffixes removed."""
    base = product.split("-MIG-")[0]
    if base.endswith("-SHARED"):
        base = base[:-len("-SHARED")]
    return next((key for key, g in GPUS.items() if g.product == base), None)


def device_id(model: str) -> str:
    """The PCI id as mig-parted's device-filter writes it: 0x<device><vendor>, e.g. 0x233010DE."""
    return f"0x{GPUS[model].pci_device}10DE"
