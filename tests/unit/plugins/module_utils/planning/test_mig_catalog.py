"""MIG catalog data, checked against the reference MIG tables and the operator's config names."""

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import MODELS, model_for_key
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import (
    LayoutError,
    canonical_profile_name,
    catalog_for,
    named_layout_for,
    resource_name,
)

# Reference gpu-operator.md "Profiles": key -> 1g, 1g 2-slice, 2g, 3g, 4g, 7g.
SEVEN_SLICE = {
    "A100-40GB": ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "A100-80GB": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100-80GB": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100-94GB": ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    "H100-96GB": ("1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
    "H200-141GB": ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    "GH200-144GB": ("1g.18gb", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb"),
    "B200-180GB": ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
    "GB200-186GB": ("1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"),
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
}
NON_MIG = ("L40S", "L4", "A10G", "T4")


def seven_slice_profiles(key):
    one, one_double, two, three, four, seven = SEVEN_SLICE[key]
    names = (one, one + "+me", one_double, two, three, four, seven)
    return tuple((name,) + shape for name, shape in zip(names, SEVEN_SLICE_SHAPES))


def expected_profiles(key):
    return A30_PROFILES if key == "A30-24GB" else seven_slice_profiles(key)


def as_rows(catalog):
    return tuple(
        (p.name, p.compute_slices, p.memory_slices, p.max_count, p.starts) for p in catalog.profiles
    )


@pytest.mark.parametrize("key", sorted(BALANCED))
def test_profiles_match_the_reference_table(key):
    assert as_rows(catalog_for(model_for_key(key))) == expected_profiles(key)


@pytest.mark.parametrize(
    "key, memory_slices, compute_slices",
    [("A30-24GB", 4, 4)] + [(key, 8, 7) for key in sorted(SEVEN_SLICE)],
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
    assert "%s is not MIG-capable (nvidia.com/mig.capable=false)" % model.product in message
    assert "only all-disabled applies" in message
    assert "H100-80GB" in message and "A30-24GB" in message


@pytest.mark.parametrize("key", sorted(BALANCED))
def test_named_layouts_are_the_operator_names(key):
    rows = expected_profiles(key)
    expected = {
        "all-disabled": (False, ()),
        "all-enabled": (True, ()),
        "all-balanced": (True, BALANCED[key]),
    }
    for name, _compute, _memory, max_count, _starts in rows:
        expected["all-" + name.replace("+me", ".me")] = (True, ((name, max_count),))
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
    [("1g.10gb", "1g.10gb"), ("1g.10gb.me", "1g.10gb+me"), ("1g.10gb+me", "1g.10gb+me"), ("2g.12gb.me", "2g.12gb+me")],
)
def test_canonical_profile_name(name, expected):
    assert canonical_profile_name(name) == expected


@pytest.mark.parametrize(
    "profile, expected",
    [("3g.40gb", "all-3g.40gb"), ("1g.10gb+me", "all-1g.10gb.me"), ("2g.12gb+me", "all-2g.12gb.me")],
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
