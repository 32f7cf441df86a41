"""The simulated hardware: what GPU Feature Discovery would read from each GPU model.

This table plays the part of the GPUs themselves and is kept apart from the collection's own catalog on
purpose, so that tests compare the collection against an independent account of the hardware.
Source: shared/reference/gpu-node-labels.md ("Per model"); values marked (d) there are derived.
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
    "GH200": Gpu("NVIDIA-GH200-480GB", 97871, (9, 0), "hopper", True, "2342", "arm64"),
    "B200": Gpu("NVIDIA-B200", 183359, (10, 0), "blackwell", True, "2901"),
    "A30": Gpu("NVIDIA-A30", 24576, (8, 0), "ampere", True, "20B7"),
    "L40S": Gpu("NVIDIA-L40S", 46068, (8, 9), "ada-lovelace", False, "26B9"),
    "L4": Gpu("NVIDIA-L4", 23034, (8, 9), "ada-lovelace", False, "27B8"),
    "A10G": Gpu("NVIDIA-A10G", 23028, (8, 6), "ampere", False, "2237"),
    "T4": Gpu("Tesla-T4", 15360, (7, 5), "turing", False, "1EB8"),
}


def gpu(model: str) -> Gpu:
    try:
        return GPUS[model]
    except KeyError:
        raise ValueError(f"unknown GPU model {model!r} in fleet file (known: {', '.join(sorted(GPUS))})") from None
