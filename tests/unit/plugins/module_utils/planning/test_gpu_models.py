"""GPU model table and gpu.product lookup, checked against the reference node-label tables."""

import re

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import (
    MODELS,
    UnknownGpuError,
    base_product,
    model_for_key,
    model_for_product,
)

# gpu.product -> (key, gpu.memory MiB, family, compute capability, mig.capable, PCI filter)
# from reference gpu-node-labels.md "Per model" (GH200 144G and GB200 label/memory: see gpu_models).
PRODUCTS = [
    ("NVIDIA-A30", "A30-24GB", 24576, "ampere", "8.0", True, "0x20B710DE"),
    ("NVIDIA-A100-SXM4-40GB", "A100-40GB", 40960, "ampere", "8.0", True, "0x20B010DE"),
    ("A100-SXM4-40GB", "A100-40GB", 40960, "ampere", "8.0", True, "0x20B010DE"),
    ("NVIDIA-A100-SXM4-80GB", "A100-80GB", 81920, "ampere", "8.0", True, "0x20B210DE"),
    ("NVIDIA-A100-80GB-PCIe", "A100-80GB", 81920, "ampere", "8.0", True, "0x20B510DE"),
    ("NVIDIA-H100-80GB-HBM3", "H100-80GB", 81559, "hopper", "9.0", True, "0x233010DE"),
    ("NVIDIA-H100-PCIe", "H100-80GB", 81559, "hopper", "9.0", True, "0x233110DE"),
    ("NVIDIA-H100-NVL", "H100-94GB", 95830, "hopper", "9.0", True, "0x232110DE"),
    ("NVIDIA-GH200-480GB", "H100-96GB", 97871, "hopper", "9.0", True, "0x234210DE"),
    ("NVIDIA-H200", "H200-141GB", 143771, "hopper", "9.0", True, "0x233510DE"),
    ("NVIDIA-GH200-144G-HBM3e", "GH200-144GB", 146831, "hopper", "9.0", True, "0x234810DE"),
    ("NVIDIA-B200", "B200-180GB", 183359, "blackwell", "10.0", True, "0x290110DE"),
    ("NVIDIA-GB200", "GB200-186GB", 189471, "blackwell", "10.0", True, "0x294110DE"),
    ("NVIDIA-L40S", "L40S", 46068, "ada-lovelace", "8.9", False, "0x26B910DE"),
    ("NVIDIA-L4", "L4", 23034, "ada-lovelace", "8.9", False, "0x27B810DE"),
    ("NVIDIA-A10G", "A10G", 23028, "ampere", "8.6", False, "0x223710DE"),
    ("Tesla-T4", "T4", 15360, "turing", "7.5", False, "0x1EB810DE"),
]


@pytest.mark.parametrize("product, key, memory, family, cc, mig_capable, pci", PRODUCTS)
def test_model_for_product_knows_every_reference_product(product, key, memory, family, cc, mig_capable, pci):
    model = model_for_product(product)
    assert model.key == key
    assert model.memory_mib == memory
    assert model.family == family
    assert model.compute_capability == cc
    assert model.mig_capable is mig_capable
    assert pci in model.device_filter
    assert product in model.products


def test_models_are_exactly_the_reference_models():
    assert sorted(model.key for model in MODELS) == sorted(set(row[1] for row in PRODUCTS))
    assert sorted(p for model in MODELS for p in model.products) == sorted(row[0] for row in PRODUCTS)


@pytest.mark.parametrize(
    "key, primary",
    [
        ("H100-80GB", "NVIDIA-H100-80GB-HBM3"),
        ("A100-40GB", "NVIDIA-A100-SXM4-40GB"),
        ("H100-96GB", "NVIDIA-GH200-480GB"),
        ("T4", "Tesla-T4"),
    ],
)
def test_primary_product_is_the_current_driver_spelling(key, primary):
    assert model_for_key(key).product == primary


@pytest.mark.parametrize(
    "label, expected_key",
    [
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "H100-80GB"),
        ("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", "H100-80GB"),
        ("NVIDIA-H100-80GB-HBM3-MIG-INVALID", "H100-80GB"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-40GB"),
        ("NVIDIA-H100-NVL-SHARED", "H100-94GB"),
        ("Tesla-T4-SHARED", "T4"),
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED", "H100-80GB"),
        ("NVIDIA-A30-MIG-2g.12gb", "A30-24GB"),
    ],
)
def test_model_for_product_strips_gfd_suffixes(label, expected_key):
    assert model_for_product(label).key == expected_key


@pytest.mark.parametrize(
    "label, expected",
    [
        ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3"),
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED", "NVIDIA-H100-80GB-HBM3"),
        ("NVIDIA-H100-NVL-SHARED", "NVIDIA-H100-NVL"),
        ("NVIDIA-H100-80GB-HBM3-MIG-INVALID", "NVIDIA-H100-80GB-HBM3"),
    ],
)
def test_base_product(label, expected):
    assert base_product(label) == expected


@pytest.mark.parametrize(
    "label",
    ["NVIDIA-H20", "nvidia-h100-80gb-hbm3", "NVIDIA-H100-80GB", "H100", "NVIDIA-RTX-PRO-6000-SHARED"],
)
def test_unknown_product_is_refused_with_the_known_list(label):
    with pytest.raises(UnknownGpuError) as err:
        model_for_product(label)
    message = str(err.value)
    assert "unknown GPU product '%s'" % label in message
    assert "nvidia.com/gpu.product" in message
    for known in ("NVIDIA-H100-80GB-HBM3", "Tesla-T4", "A100-SXM4-40GB", "NVIDIA-A30"):
        assert known in message
    assert "gpu_models.py" in message


@pytest.mark.parametrize("label", ["", None, 42])
def test_missing_product_label_is_refused(label):
    with pytest.raises(UnknownGpuError, match="nvidia.com/gpu.product is"):
        model_for_product(label)


def test_unknown_key_lists_known_keys():
    with pytest.raises(UnknownGpuError) as err:
        model_for_key("H100")
    assert "unknown GPU model 'H100'" in str(err.value)
    assert "H100-80GB" in str(err.value) and "A30-24GB" in str(err.value)


def test_unknown_gpu_error_is_a_value_error():
    assert issubclass(UnknownGpuError, ValueError)


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.key)
def test_model_fields_have_the_label_and_filter_formats(model):
    label_value = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
    assert all(label_value.match(product) for product in model.products)
    assert all(re.match(r"^0x[0-9A-F]{4}10DE$", pci) for pci in model.device_filter)
    assert re.match(r"^\d+\.\d$", model.compute_capability)
