"""GPU model table and gpu.product lookup, checked against the reference node-label tables."""

import re

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import (
    MODELS,
    UnknownGpuError,
    base_product,
    gfd_gpu_count_problem,
    known_products,
    model_for_key,
    model_for_labels,
    model_for_product,
)

# gpu.product -> (key, gpu.memory MiB, family, compute capability, mig.capable, PCI filter)
# from reference gpu-node-labels.md "Per model" (GH200 144G and GB200 label/memory: see gpu_models).
PRODUCTS = [
    ("NVIDIA-A30", "A30-24GB", 24576, "ampere", "8.0", True, "0x20B710DE"),
    ("NVIDIA-A100-SXM4-40GB", "A100-40GB", 40960, "ampere", "8.0", True, "0x20B010DE"),
    ("A100-SXM4-40GB", "A100-40GB", 40960, "ampere", "8.0", True, "0x20B010DE"),
    ("NVIDIA-A100-PCIE-40GB", "A100-40GB", 40960, "ampere", "8.0", True, "0x20B110DE"),
    ("NVIDIA-A800-40GB-Active", "A800-40GB", None, "ampere", "8.0", True, "0x20F610DE"),
    ("NVIDIA-A100-SXM4-80GB", "A100-80GB", 81920, "ampere", "8.0", True, "0x20B210DE"),
    ("NVIDIA-A100-80GB-PCIe", "A100-80GB", 81920, "ampere", "8.0", True, "0x20B510DE"),
    ("NVIDIA-A800-SXM4-80GB", "A800-80GB", 81920, "ampere", "8.0", True, "0x20F310DE"),
    ("NVIDIA-A800-80GB-PCIe", "A800-80GB", 81920, "ampere", "8.0", True, "0x20F510DE"),
    ("NVIDIA-H100-80GB-HBM3", "H100-80GB", 81559, "hopper", "9.0", True, "0x233010DE"),
    ("NVIDIA-H100-PCIe", "H100-80GB", 81559, "hopper", "9.0", True, "0x233110DE"),
    ("NVIDIA-H800", "H800-80GB", None, "hopper", "9.0", True, "0x232410DE"),
    ("NVIDIA-H800-PCIe", "H800-80GB", None, "hopper", "9.0", True, "0x232210DE"),
    ("NVIDIA-H100-NVL", "H100-94GB", 95830, "hopper", "9.0", True, "0x232110DE"),
    ("NVIDIA-H800-NVL", "H800-94GB", None, "hopper", "9.0", True, "0x233A10DE"),
    ("NVIDIA-GH200-480GB", "H100-96GB", 97871, "hopper", "9.0", True, "0x234210DE"),
    ("NVIDIA-H100-96GB-HBM3", "H100-96GB", 97871, "hopper", "9.0", True, "0x233D10DE"),
    ("NVIDIA-H20", "H20-96GB", None, "hopper", "9.0", True, "0x232910DE"),
    ("NVIDIA-H200", "H200-141GB", 143771, "hopper", "9.0", True, "0x233510DE"),
    ("NVIDIA-H200-NVL", "H200-141GB", 143771, "hopper", "9.0", True, "0x233B10DE"),
    ("NVIDIA-GH200-144G-HBM3e", "GH200-144GB", 146831, "hopper", "9.0", True, "0x234810DE"),
    ("NVIDIA-B200", "B200-180GB", 183359, "blackwell", "10.0", True, "0x290110DE"),
    ("NVIDIA-GB200", "GB200-186GB", 189471, "blackwell", "10.0", True, "0x294110DE"),
    ("NVIDIA-B300-SXM6-AC", "B300-288GB", None, "blackwell", "10.3", True, "0x318210DE"),
    ("NVIDIA-GB300", "GB300-288GB", None, "blackwell", "10.3", True, "0x31C210DE"),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTX-PRO-6000-96GB", None, "blackwell", "12.0", True,
     "0x2BB510DE"),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Workstation-Edition", "RTX-PRO-6000-96GB", None, "blackwell", "12.0", True,
     "0x2BB510DE"),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition", "RTX-PRO-6000-96GB", None, "blackwell", "12.0",
     True, "0x2BB510DE"),
    ("NVIDIA-L40S", "L40S", 46068, "ada-lovelace", "8.9", False, "0x26B910DE"),
    ("NVIDIA-L4", "L4", 23034, "ada-lovelace", "8.9", False, "0x27B810DE"),
    ("NVIDIA-A10G", "A10G", 23028, "ampere", "8.6", False, "0x223710DE"),
    ("NVIDIA-A40", "A40", None, "ampere", "8.6", False, "0x223510DE"),
    ("Tesla-T4", "T4", 15360, "turing", "7.5", False, "0x1EB810DE"),
    ("Tesla-V100-SXM2-32GB", "V100-32GB", None, "volta", "7.0", False, "0x1DB510DE"),
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
    ["NVIDIA-H30", "nvidia-h100-80gb-hbm3", "NVIDIA-H100-80GB", "H100", "NVIDIA-RTX-PRO-6000-SHARED"],
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


# ---------------------------------------------------------------------------------------------
# Any NVIDIA GPU: the model of a node's labels, catalogued or not (issue 9)
# ---------------------------------------------------------------------------------------------

GFD_KEYS = {"memory": "nvidia.com/gpu.memory", "family": "nvidia.com/gpu.family",
            "mig_capable": "nvidia.com/mig.capable", "major": "nvidia.com/gpu.compute.major",
            "minor": "nvidia.com/gpu.compute.minor"}


def gfd(product, **extra):
    labels = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": "4"}
    labels.update((GFD_KEYS[key], value) for key, value in extra.items())
    return labels


@pytest.mark.parametrize("product, key", [
    ("NVIDIA-A100-PCIE-40GB", "A100-40GB"),
    ("NVIDIA-H200-NVL", "H200-141GB"),
    ("NVIDIA-H200-NVL-SHARED", "H200-141GB"),
    ("NVIDIA-H20", "H20-96GB"),
    ("NVIDIA-A40", "A40"),
    ("Tesla-V100-SXM2-32GB", "V100-32GB"),
    ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "H100-80GB"),
])
def test_model_for_labels_finds_catalogued_models(product, key):
    model = model_for_labels(gfd(product))
    assert (model.key, model.catalogued) == (key, True)


@pytest.mark.parametrize("labels, expected", [
    (gfd("NVIDIA-RTX-A6000", memory="49140", family="ampere", mig_capable="false", major="8", minor="6"),
     ("NVIDIA-RTX-A6000", ("NVIDIA-RTX-A6000",), (), 49140, "ampere", "8.6", False)),
    (gfd("NVIDIA-RTX-A6000-SHARED"), ("NVIDIA-RTX-A6000", ("NVIDIA-RTX-A6000",), (), None, "", "", False)),
    (gfd("NVIDIA-X999-MIG-1g.20gb", mig_capable="true"), ("NVIDIA-X999", ("NVIDIA-X999",), (), None, "", "", True)),
    (gfd("NVIDIA-X999", memory="lots"), ("NVIDIA-X999", ("NVIDIA-X999",), (), None, "", "", False)),
])
def test_model_for_labels_reads_an_uncatalogued_gpu_from_its_labels(labels, expected):
    model = model_for_labels(labels)
    assert (model.key, model.products, model.device_filter, model.memory_mib, model.family,
            model.compute_capability, model.mig_capable) == expected
    assert model.catalogued is False
    assert model.product == expected[0]


@pytest.mark.parametrize("labels", [{}, None, {"nvidia.com/gpu.product": ""}, {"nvidia.com/gpu.count": "8"}])
def test_model_for_labels_refuses_a_node_without_a_product(labels):
    with pytest.raises(UnknownGpuError) as err:
        model_for_labels(labels)
    assert "nvidia.com/gpu.product is" in str(err.value)
    assert "GPU Feature Discovery" in str(err.value)


def test_model_for_product_stays_strict():
    # The mig_layout module relies on it to tell a typo from a model.
    with pytest.raises(UnknownGpuError):
        model_for_product("NVIDIA-RTX-A6000")


def test_known_products_is_every_product_sorted():
    assert known_products() == sorted(p for model in MODELS for p in model.products)


@pytest.mark.parametrize("labels, problem", [
    (gfd("NVIDIA-A40"), None),
    ({"nvidia.com/gpu.product": "NVIDIA-A40"}, None),                          # no count: not predicted, not odd
    (dict(gfd("NVIDIA-A40"), **{"nvidia.com/gpu.count": "0"}),
     "GPU Feature Discovery labels nvidia.com/gpu.count='0', nvidia.com/gpu.product='NVIDIA-A40': expected a GPU "
     "count of 1 or more"),
    (dict(gfd("NVIDIA-A40"), **{"nvidia.com/gpu.count": "four"}),
     "GPU Feature Discovery labels nvidia.com/gpu.count='four', nvidia.com/gpu.product='NVIDIA-A40'"),
    # Under MIG strategy single gpu.count counts MIG devices: 56, and 0 (MIG-INVALID, left by a roll-out
    # stopped halfway), are the planner's to read against the count it recorded (test_node_pools_resume).
    (dict(gfd("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"), **{"nvidia.com/gpu.count": "56"}), None),
    (dict(gfd("NVIDIA-H100-80GB-HBM3-MIG-INVALID"), **{"nvidia.com/gpu.count": "0"}), None),
    ({"nvidia.com/gpu.count": "0"}, None),
])
def test_gfd_gpu_count_problem(labels, problem):
    found = gfd_gpu_count_problem(labels)
    assert found == problem if problem is None else problem in found
