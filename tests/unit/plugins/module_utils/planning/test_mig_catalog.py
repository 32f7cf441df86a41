"""MIG catalog data, checked against the reference MIG tables and the operator's config names."""

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import (
    MODELS,
    model_for_key,
    model_for_labels,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import (
    LayoutError,
    canonical_profile_name,
    catalog_for,
    known_mig_products,
    label_safe_profile_name,
    named_layout_for,
    resource_name,
)

# Reference gpu-operator.md "Profiles": key -> 1g, 1g 2-slice, 2g, 3g, 4g, 7g. Rows added for issue 9
# (A800, H800, H20, B300, GB300) written out from NVIDIA/mig-parted deployments/systemd/config-default.yaml
# (the operator's default-mig-parted-config): its all-<profile> entries and device-filter groups.
A100_40GB = ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
GB80 = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
GB94 = ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb")
GB96 = ("1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb")
SEVEN_SLICE = {
    "A100-40GB": A100_40GB,
    "A800-40GB": A100_40GB,
    "A100-80GB": GB80,
    "A800-80GB": GB80,
    "H100-80GB": GB80,
    "H800-80GB": GB80,
    "H100-94GB": GB94,
    "H800-94GB": GB94,
    "H100-96GB": GB96,
    "H20-96GB": GB96,
    "H200-141GB": ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    "GH200-144GB": ("1g.18gb", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb"),
    "B200-180GB": ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
    "GB200-186GB": ("1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"),
    "B300-288GB": ("1g.34gb", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb"),
    "GB300-288GB": ("1g.35gb", "1g.70gb", "2g.70gb", "3g.139gb", "4g.139gb", "7g.278gb"),
}
# Reference "Placement": compute slices, memory slices, max per GPU, start slices, for the
# columns 1g, 1g+me, 1g 2-slice, 2g, 3g, 4g, 7g.
SEVEN_SLICE_SHAPES = (
    (1, 1, 7, (0, 1, 2, 3, 4, 5, 6)),
    (1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
    (1, 2, 4, (0, 2, 4, 6)),
    (2, 2, 3, (0, 2, 4)),
    (3, 4, 2, (0, 4)),
    (4, 4, 1, (0,)),
    (7, 8, 1, (0,)),
)
A30_PROFILES = (
    ("1g.6gb", 1, 1, 4, (0, 1, 2, 3)),
    ("1g.6gb+me", 1, 1, 1, (0, 1, 2, 3)),
    ("2g.12gb", 2, 2, 2, (0, 2)),
    ("2g.12gb+me", 2, 2, 1, (0, 2)),
    ("4g.24gb", 4, 4, 1, (0,)),
)
# RTX PRO 6000 Blackwell: the operator config's all-1g.24gb.gfx x4, all-1g.24gb.me.all x1, all-1g.24gb-me x4,
# all-2g.48gb(.gfx, -me) x2, all-2g.48gb.me.all x1, all-4g.96gb(.gfx) x1; plain 1g.24gb x4 (its all-balanced
# uses it; the MIG User Guide caps the card at 4 instances). Placement as on A30 (4 slices).
RTX_PRO_PROFILES = (
    ("1g.24gb", 1, 1, 4, (0, 1, 2, 3)),
    ("1g.24gb+gfx", 1, 1, 4, (0, 1, 2, 3)),
    ("1g.24gb-me", 1, 1, 4, (0, 1, 2, 3)),
    ("1g.24gb+me.all", 1, 1, 1, (0, 1, 2, 3)),
    ("2g.48gb", 2, 2, 2, (0, 2)),
    ("2g.48gb+gfx", 2, 2, 2, (0, 2)),
    ("2g.48gb-me", 2, 2, 2, (0, 2)),
    ("2g.48gb+me.all", 2, 2, 1, (0, 2)),
    ("4g.96gb", 4, 4, 1, (0,)),
    ("4g.96gb+gfx", 4, 4, 1, (0,)),
)
# Reference gpu-node-labels.md default-mig-parted-config all-balanced per GPU.
BALANCED = {
    "A30-24GB": (("1g.6gb", 2), ("2g.12gb", 1)),
    "A100-40GB": (("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)),
    "A100-80GB": (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)),
    "H100-80GB": (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)),
    "H100-94GB": (("1g.12gb", 2), ("2g.24gb", 1), ("3g.47gb", 1)),
    "H100-96GB": (("1g.12gb", 2), ("2g.24gb", 1), ("3g.48gb", 1)),
    "H200-141GB": (("1g.18gb", 2), ("2g.35gb", 1), ("3g.71gb", 1)),
    "GH200-144GB": (("1g.18gb", 2), ("2g.36gb", 1), ("3g.72gb", 1)),
    "B200-180GB": (("1g.23gb", 2), ("2g.45gb", 1), ("3g.90gb", 1)),
    "GB200-186GB": (("1g.23gb", 2), ("2g.47gb", 1), ("3g.93gb", 1)),
    # Issue 9, from the operator config's all-balanced entries (device filter groups).
    "A800-40GB": (("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)),
    "A800-80GB": (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)),
    "H800-80GB": (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)),
    "H800-94GB": (("1g.12gb", 2), ("2g.24gb", 1), ("3g.47gb", 1)),
    "H20-96GB": (("1g.12gb", 2), ("2g.24gb", 1), ("3g.48gb", 1)),
    "B300-288GB": (("1g.34gb", 2), ("2g.67gb", 1), ("3g.135gb", 1)),
    "GB300-288GB": (("1g.35gb", 2), ("2g.70gb", 1), ("3g.139gb", 1)),
    "RTX-PRO-6000-96GB": (("1g.24gb", 2), ("2g.48gb", 1)),
}
NON_MIG = ("L40S", "L4", "A10G", "A40", "T4", "V100-32GB")


def seven_slice_profiles(key):
    one, one_double, two, three, four, seven = SEVEN_SLICE[key]
    names = (one, one + "+me", one_double, two, three, four, seven)
    return tuple((name,) + shape for name, shape in zip(names, SEVEN_SLICE_SHAPES))


def expected_profiles(key):
    if key == "A30-24GB":
        return A30_PROFILES
    if key == "RTX-PRO-6000-96GB":
        return RTX_PRO_PROFILES
    return seven_slice_profiles(key)


def as_rows(catalog):
    return tuple(
        (p.name, p.compute_slices, p.memory_slices, p.max_count, p.starts) for p in catalog.profiles
    )


@pytest.mark.parametrize("key", sorted(BALANCED))
def test_profiles_match_the_reference_table(key):
    assert as_rows(catalog_for(model_for_key(key))) == expected_profiles(key)


@pytest.mark.parametrize(
    "key, memory_slices, compute_slices",
    [("A30-24GB", 4, 4), ("RTX-PRO-6000-96GB", 4, 4)] + [(key, 8, 7) for key in sorted(SEVEN_SLICE)],
)
def test_slice_counts(key, memory_slices, compute_slices):
    catalog = catalog_for(model_for_key(key))
    assert (catalog.memory_slices, catalog.compute_slices) == (memory_slices, compute_slices)


@pytest.mark.parametrize("key", sorted(BALANCED))
def test_every_start_keeps_the_instance_on_the_gpu(key):
    # The placement search relies on this and checks only overlap.
    catalog = catalog_for(model_for_key(key))
    for profile in catalog.profiles:
        assert profile.starts and all(
            0 <= start and start + profile.memory_slices <= catalog.memory_slices for start in profile.starts
        ), profile.name


@pytest.mark.parametrize("key", sorted(BALANCED))
def test_balanced_matches_the_operator_default(key):
    assert catalog_for(model_for_key(key)).balanced == BALANCED[key]


def test_every_mig_capable_model_has_a_catalog_and_no_other():
    mig_keys = sorted(model.key for model in MODELS if model.mig_capable)
    assert mig_keys == sorted(BALANCED)
    assert sorted(model.key for model in MODELS if not model.mig_capable) == sorted(NON_MIG)


@pytest.mark.parametrize("key", NON_MIG)
def test_non_mig_models_have_no_catalog(key):
    model = model_for_key(key)
    with pytest.raises(LayoutError) as err:
        catalog_for(model)
    message = str(err.value)
    assert "%s is not MIG-capable; only all-disabled applies" % model.product in message
    assert "time-slicing or mps" in message
    assert "NVIDIA-H100-80GB-HBM3" in message and "NVIDIA-A30" in message and "NVIDIA-H20" in message


@pytest.mark.parametrize("labels, expected", [
    # Not in the table, GFD says not MIG-capable: refused as such, naming GFD as the source.
    ({"nvidia.com/gpu.product": "NVIDIA-RTX-A6000", "nvidia.com/mig.capable": "false"},
     "NVIDIA-RTX-A6000 is not MIG-capable (GPU Feature Discovery: nvidia.com/mig.capable is not true); "
     "only all-disabled applies"),
    ({"nvidia.com/gpu.product": "NVIDIA-RTX-A6000"}, "NVIDIA-RTX-A6000 is not MIG-capable (GPU Feature Discovery"),
    # Not in the table but MIG-capable: refused as unknown to the catalog, naming the known models.
    ({"nvidia.com/gpu.product": "NVIDIA-X999", "nvidia.com/mig.capable": "true"},
     "NVIDIA-X999 is not in the MIG catalog, so no MIG layout can be checked for it (known MIG models: NVIDIA-A30, "
     "NVIDIA-A100-SXM4-40GB, "),
])
def test_uncatalogued_models_have_no_catalog(labels, expected):
    with pytest.raises(LayoutError) as err:
        catalog_for(model_for_labels(labels))
    assert expected in str(err.value)


def test_unknown_mig_model_message_names_every_known_model_and_what_to_do():
    with pytest.raises(LayoutError) as err:
        catalog_for(model_for_labels({"nvidia.com/gpu.product": "NVIDIA-X999", "nvidia.com/mig.capable": "true"}))
    message = str(err.value)
    for product in known_mig_products():
        assert product in message
    assert "time-slicing, mps or none" in message and "mig_catalog.py" in message


def test_known_mig_products_is_one_per_catalogued_model():
    assert sorted(known_mig_products()) == sorted(m.product for m in MODELS if m.mig_capable)


@pytest.mark.parametrize("key", sorted(BALANCED))
def test_named_layouts_are_the_operator_names(key):
    rows = expected_profiles(key)
    expected = {
        "all-disabled": (False, ()),
        "all-enabled": (True, ()),
        "all-balanced": (True, BALANCED[key]),
    }
    for name, _compute, _memory, max_count, _starts in rows:
        expected["all-" + name.replace("+", ".")] = (True, ((name, max_count),))
    assert catalog_for(model_for_key(key)).named_layouts() == expected


def test_h100_named_layout_names_literally():
    # The names users see in nvidia.com/mig.config on H100 nodes (operator per-node config).
    assert list(catalog_for(model_for_key("H100-80GB")).named_layouts()) == [
        "all-disabled", "all-enabled", "all-balanced", "all-1g.10gb", "all-1g.10gb.me",
        "all-1g.20gb", "all-2g.20gb", "all-3g.40gb", "all-4g.40gb", "all-7g.80gb",
    ]


@pytest.mark.parametrize(
    "key, name, expected",
    [
        ("H100-80GB", "all-1g.10gb", (True, (("1g.10gb", 7),))),
        ("H100-80GB", "all-1g.10gb.me", (True, (("1g.10gb+me", 1),))),
        ("H100-80GB", "all-1g.10gb+me", (True, (("1g.10gb+me", 1),))),
        ("A100-40GB", "all-1g.5gb", (True, (("1g.5gb", 7),))),
        ("A100-40GB", "all-1g.10gb", (True, (("1g.10gb", 4),))),
        ("A30-24GB", "all-1g.6gb", (True, (("1g.6gb", 4),))),
        ("A30-24GB", "all-2g.12gb.me", (True, (("2g.12gb+me", 1),))),
        ("H200-141GB", "all-7g.141gb", (True, (("7g.141gb", 1),))),
        ("B200-180GB", "all-3g.90gb", (True, (("3g.90gb", 2),))),
        ("GB200-186GB", "all-1g.23gb.me", (True, (("1g.23gb+me", 1),))),
        # Issue 9: the operator config's names for the new models.
        ("H20-96GB", "all-3g.48gb", (True, (("3g.48gb", 2),))),
        ("H200-141GB", "all-1g.35gb", (True, (("1g.35gb", 4),))),
        ("GB300-288GB", "all-1g.35gb", (True, (("1g.35gb", 7),))),
        ("B300-288GB", "all-1g.34gb.me", (True, (("1g.34gb+me", 1),))),
        ("B300-288GB", "all-7g.269gb", (True, (("7g.269gb", 1),))),
        ("RTX-PRO-6000-96GB", "all-1g.24gb.gfx", (True, (("1g.24gb+gfx", 4),))),
        ("RTX-PRO-6000-96GB", "all-1g.24gb+gfx", (True, (("1g.24gb+gfx", 4),))),
        ("RTX-PRO-6000-96GB", "all-1g.24gb.me.all", (True, (("1g.24gb+me.all", 1),))),
        ("RTX-PRO-6000-96GB", "all-1g.24gb+me.all", (True, (("1g.24gb+me.all", 1),))),
        ("RTX-PRO-6000-96GB", "all-1g.24gb-me", (True, (("1g.24gb-me", 4),))),
        ("RTX-PRO-6000-96GB", "all-2g.48gb.me.all", (True, (("2g.48gb+me.all", 1),))),
        ("RTX-PRO-6000-96GB", "all-4g.96gb.gfx", (True, (("4g.96gb+gfx", 1),))),
        ("RTX-PRO-6000-96GB", "all-balanced", (True, (("1g.24gb", 2), ("2g.48gb", 1)))),
    ],
)
def test_named_layout_lookup(key, name, expected):
    assert catalog_for(model_for_key(key)).named_layout(name) == expected


@pytest.mark.parametrize(
    "key, name, valid",
    [
        ("H100-80GB", "all-3g.20gb", "all-3g.40gb"),
        ("A30-24GB", "all-3g.12gb", "all-4g.24gb"),
        ("A30-24GB", "balanced", "all-balanced"),
        ("H100-80GB", "all-1g.20gb+me", "all-1g.10gb.me"),
    ],
)
def test_unknown_named_layout_lists_valid_names(key, name, valid):
    model = model_for_key(key)
    with pytest.raises(LayoutError) as err:
        catalog_for(model).named_layout(name)
    message = str(err.value)
    assert "unknown named layout %r for %s" % (name, model.product) in message
    assert valid in message and "all-disabled" in message


@pytest.mark.parametrize(
    "key, name, expected",
    [
        ("H100-80GB", "3g.40gb", "3g.40gb"),
        ("H100-80GB", "1g.10gb+me", "1g.10gb+me"),
        ("H100-80GB", "1g.10gb.me", "1g.10gb+me"),
        ("A30-24GB", "2g.12gb.me", "2g.12gb+me"),
        ("RTX-PRO-6000-96GB", "1g.24gb.gfx", "1g.24gb+gfx"),
        ("RTX-PRO-6000-96GB", "1g.24gb+gfx", "1g.24gb+gfx"),
        ("RTX-PRO-6000-96GB", "2g.48gb.me.all", "2g.48gb+me.all"),
        ("RTX-PRO-6000-96GB", "2g.48gb+me.all", "2g.48gb+me.all"),
        ("RTX-PRO-6000-96GB", "2g.48gb-me", "2g.48gb-me"),
        ("B300-288GB", "1g.34gb.me", "1g.34gb+me"),
    ],
)
def test_profile_lookup_accepts_both_me_spellings(key, name, expected):
    assert catalog_for(model_for_key(key)).profile(name).name == expected


@pytest.mark.parametrize(
    "key, name, valid",
    [
        ("H100-80GB", "3g.20gb", "1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"),
        ("A30-24GB", "3g.12gb", "1g.6gb, 1g.6gb+me, 2g.12gb, 2g.12gb+me, 4g.24gb"),
        ("A30-24GB", "7g.24gb", "1g.6gb, 1g.6gb+me, 2g.12gb, 2g.12gb+me, 4g.24gb"),
    ],
)
def test_unknown_profile_lists_the_models_profiles(key, name, valid):
    model = model_for_key(key)
    with pytest.raises(LayoutError) as err:
        catalog_for(model).profile(name)
    assert str(err.value) == "unknown MIG profile %r for %s (valid: %s)" % (name, model.product, valid)


@pytest.mark.parametrize(
    "name, expected",
    [("1g.10gb", "1g.10gb"), ("1g.10gb.me", "1g.10gb+me"), ("1g.10gb+me", "1g.10gb+me"), ("2g.12gb.me", "2g.12gb+me"),
     ("1g.24gb.gfx", "1g.24gb+gfx"), ("1g.24gb+gfx", "1g.24gb+gfx"), ("1g.24gb.me.all", "1g.24gb+me.all"),
     ("1g.24gb+me.all", "1g.24gb+me.all"), ("1g.24gb-me", "1g.24gb-me"), ("4g.96gb.gfx", "4g.96gb+gfx"),
     ("1g.24gb.other", "1g.24gb.other"), ("all-balanced", "all-balanced")],
)
def test_canonical_profile_name(name, expected):
    assert canonical_profile_name(name) == expected


@pytest.mark.parametrize(
    "name, expected",
    [("1g.10gb+me", "1g.10gb.me"), ("1g.24gb+me.all", "1g.24gb.me.all"), ("2g.48gb+gfx", "2g.48gb.gfx"),
     ("1g.24gb-me", "1g.24gb-me"), ("2g.48gb.gfx", "2g.48gb.gfx"), ("3g.40gb", "3g.40gb")],
)
def test_label_safe_profile_name(name, expected):
    assert label_safe_profile_name(name) == expected


@pytest.mark.parametrize(
    "profile, expected",
    [("3g.40gb", "all-3g.40gb"), ("1g.10gb+me", "all-1g.10gb.me"), ("2g.12gb+me", "all-2g.12gb.me"),
     ("1g.24gb+gfx", "all-1g.24gb.gfx"), ("1g.24gb+me.all", "all-1g.24gb.me.all"), ("1g.24gb-me", "all-1g.24gb-me")],
)
def test_named_layout_for(profile, expected):
    assert named_layout_for(profile) == expected


@pytest.mark.parametrize(
    "profile, strategy, expected",
    [
        ("1g.10gb", "mixed", "nvidia.com/mig-1g.10gb"),
        ("3g.40gb", "mixed", "nvidia.com/mig-3g.40gb"),
        ("1g.10gb+me", "mixed", "nvidia.com/mig-1g.10gb.me"),
        ("2g.12gb+me", "mixed", "nvidia.com/mig-2g.12gb.me"),
        ("7g.141gb", "mixed", "nvidia.com/mig-7g.141gb"),
        ("1g.24gb+gfx", "mixed", "nvidia.com/mig-1g.24gb.gfx"),
        ("1g.24gb+me.all", "mixed", "nvidia.com/mig-1g.24gb.me.all"),
        ("1g.24gb.me.all", "mixed", "nvidia.com/mig-1g.24gb.me.all"),
        ("1g.24gb-me", "mixed", "nvidia.com/mig-1g.24gb-me"),
        ("1g.10gb", "single", "nvidia.com/gpu"),
        ("1g.10gb+me", "single", "nvidia.com/gpu"),
    ],
)
def test_resource_name(profile, strategy, expected):
    assert resource_name(profile, strategy) == expected


@pytest.mark.parametrize("strategy", ["none", "Mixed", ""])
def test_resource_name_refuses_other_strategies(strategy):
    with pytest.raises(LayoutError, match=r"mig strategy .* \(valid: single, mixed\)"):
        resource_name("1g.10gb", strategy)


def test_layout_error_is_a_value_error():
    assert issubclass(LayoutError, ValueError)
