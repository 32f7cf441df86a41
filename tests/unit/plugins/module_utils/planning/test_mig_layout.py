"""MIG layout validation, placement, mig-parted rendering and advertised resources."""

import itertools
import re

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import model_for_key
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import catalog_for
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_layout import (
    LayoutEntry,
    LayoutError,
    MigLayout,
    render_mig_parted_config,
    required_strategy,
    resources_for,
    validate_layout,
)

H100 = model_for_key("H100-80GB")
A30 = model_for_key("A30-24GB")

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
# Layouts as column letters: o=1g, m=1g+me, d=1g 2-slice, t=2g, h=3g, f=4g, s=7g.
# Valid per the reference "Placement" line (4g+3g, 4g+2g+1g, 3g+2g+1g+1g, 2gx3+1g) and the
# slice budgets (8 memory, 7 compute).
VALID_SEVEN = [
    {"f": 1, "h": 1},
    {"f": 1, "t": 1, "o": 1},
    {"h": 1, "t": 1, "o": 2},
    {"t": 3, "o": 1},
    {"s": 1},
    {"o": 7},
    {"h": 2},
    {"h": 1, "o": 4},
    {"h": 1, "t": 2},
    {"d": 4},
    {"t": 3, "d": 1},
    {"f": 1, "d": 2},
    {"o": 6, "m": 1},
    {"f": 1, "m": 1, "o": 2},
    {"o": 2, "t": 1, "h": 1},
]
# (layout, message fragment) for layouts each 7-slice GPU must refuse.
INVALID_SEVEN = [
    ({"h": 2, "o": 1}, "needs 9 memory slices"),
    ({"h": 3}, "needs 12 memory slices"),
    ({"s": 1, "o": 1}, "needs 9 memory slices"),
    ({"d": 5}, "needs 10 memory slices"),
    ({"f": 1, "h": 1, "o": 1}, "needs 9 memory slices"),
    ({"f": 2}, "asks for 2 x {f}"),
    ({"m": 2}, "asks for 2 x {m}"),
    ({"o": 8}, "asks for 8 x {o}"),
    ({"f": 1, "o": 4}, "cannot be placed"),
    ({"t": 3, "o": 2}, "cannot be placed"),
    ({"f": 1, "t": 2}, "cannot be placed"),
    ({"o": 7, "m": 1}, "cannot be placed"),
]


def names(key):
    one, one_double, two, three, four, seven = SEVEN_SLICE[key]
    return {"o": one, "m": one + "+me", "d": one_double, "t": two, "h": three, "f": four, "s": seven}


def spelled(key, letters):
    columns = names(key)
    return dict((columns[letter], count) for letter, count in letters.items())


@pytest.mark.parametrize("key", sorted(SEVEN_SLICE))
@pytest.mark.parametrize("letters", VALID_SEVEN, ids=lambda letters: "+".join("%s%d" % kv for kv in letters.items()))
def test_seven_slice_gpus_accept_placeable_layouts(key, letters):
    layout = validate_layout(model_for_key(key), spelled(key, letters))
    assert dict(layout.entries[0].profiles) == spelled(key, letters)
    assert layout.entries[0].devices == "all" and layout.entries[0].mig_enabled is True


@pytest.mark.parametrize("key", sorted(SEVEN_SLICE))
@pytest.mark.parametrize("letters, fragment", INVALID_SEVEN, ids=str)
def test_seven_slice_gpus_refuse_unplaceable_layouts(key, letters, fragment):
    model = model_for_key(key)
    with pytest.raises(LayoutError) as err:
        validate_layout(model, spelled(key, letters))
    message = str(err.value)
    assert message.startswith("layout {")
    assert fragment.format(**names(key)) in message
    assert model.product in message
    assert "(valid: " in message


@pytest.mark.parametrize(
    "layout, message",
    [
        (
            {"3g.40gb": 3},
            "layout {3g.40gb: 3} needs 12 memory slices, NVIDIA-H100-80GB-HBM3 has 8 (valid: up to 2 x 3g.40gb)",
        ),
        (
            {"3g.40gb": 2, "1g.10gb": 1},
            "layout {3g.40gb: 2, 1g.10gb: 1} needs 9 memory slices, NVIDIA-H100-80GB-HBM3 has 8 "
            "(valid: {3g.40gb: 1, 1g.10gb: 1} or {3g.40gb: 2})",
        ),
        (
            {"4g.40gb": 1, "1g.10gb": 4},
            "layout {4g.40gb: 1, 1g.10gb: 4} cannot be placed on NVIDIA-H100-80GB-HBM3: the instances "
            "overlap at every combination of their allowed start memory slices (4g.40gb at 0; "
            "1g.10gb at 0, 1, 2, 3, 4, 5, 6) (valid: {4g.40gb: 1, 1g.10gb: 3})",
        ),
        (
            {"1g.10gb+me": 2},
            "layout {1g.10gb+me: 2} asks for 2 x 1g.10gb+me, NVIDIA-H100-80GB-HBM3 takes at most 1 "
            "(valid: up to 1 x 1g.10gb+me)",
        ),
        (
            {"7g.80gb": 1, "3g.40gb": 1, "4g.40gb": 1},
            "layout {7g.80gb: 1, 3g.40gb: 1, 4g.40gb: 1} needs 16 memory slices, NVIDIA-H100-80GB-HBM3 "
            "has 8 (valid: {3g.40gb: 1, 4g.40gb: 1} or {7g.80gb: 1})",
        ),
        (
            # Issue 9: the alternative used to be "{2g.20gb: 2} leaves no room for 4g.40gb".
            {"2g.20gb": 2, "4g.40gb": 1},
            "layout {2g.20gb: 2, 4g.40gb: 1} cannot be placed on NVIDIA-H100-80GB-HBM3: the instances overlap at "
            "every combination of their allowed start memory slices (2g.20gb at 0, 2, 4; 4g.40gb at 0) "
            "(valid: {2g.20gb: 1, 4g.40gb: 1})",
        ),
        (
            {"1g.10gb+me": 2, "1g.10gb": 1},
            "layout {1g.10gb+me: 2, 1g.10gb: 1} asks for 2 x 1g.10gb+me, NVIDIA-H100-80GB-HBM3 takes at most 1 "
            "(valid: {1g.10gb+me: 1, 1g.10gb: 1})",
        ),
        (
            {"2g.20gb": 4, "1g.10gb": 1},
            "layout {2g.20gb: 4, 1g.10gb: 1} needs 9 memory slices, NVIDIA-H100-80GB-HBM3 has 8 "
            "(valid: {2g.20gb: 3, 1g.10gb: 1})",
        ),
    ],
)
def test_h100_messages_in_full(layout, message):
    with pytest.raises(LayoutError) as err:
        validate_layout(H100, layout)
    assert str(err.value) == message


@pytest.mark.parametrize(
    "layout",
    [
        {"1g.6gb": 4},
        {"2g.12gb": 2},
        {"4g.24gb": 1},
        {"2g.12gb": 1, "1g.6gb": 2},
        {"1g.6gb+me": 1, "1g.6gb": 3},
        {"2g.12gb+me": 1, "2g.12gb": 1},
        {"2g.12gb+me": 1, "1g.6gb+me": 1, "1g.6gb": 1},
    ],
)
def test_a30_accepts_its_own_geometry(layout):
    assert dict(validate_layout(A30, layout).entries[0].profiles) == layout


@pytest.mark.parametrize(
    "layout, fragment",
    [
        ({"1g.6gb": 5}, "needs 5 memory slices, NVIDIA-A30 has 4 (valid: up to 4 x 1g.6gb)"),
        ({"2g.12gb": 3}, "needs 6 memory slices, NVIDIA-A30 has 4 (valid: up to 2 x 2g.12gb)"),
        ({"4g.24gb": 1, "1g.6gb": 1}, "needs 5 memory slices"),
        ({"2g.12gb": 2, "1g.6gb": 1}, "(valid: {2g.12gb: 1, 1g.6gb: 1} or {2g.12gb: 2})"),
        ({"1g.6gb+me": 2}, "asks for 2 x 1g.6gb+me, NVIDIA-A30 takes at most 1"),
        ({"2g.12gb+me": 2}, "asks for 2 x 2g.12gb+me, NVIDIA-A30 takes at most 1"),
        ({"3g.20gb": 1}, "unknown MIG profile '3g.20gb' for NVIDIA-A30 (valid: 1g.6gb, 1g.6gb+me, 2g.12gb, "),
        ({"1g.10gb": 1}, "unknown MIG profile '1g.10gb' for NVIDIA-A30"),
        ({"7g.24gb": 1}, "unknown MIG profile '7g.24gb'"),
    ],
)
def test_a30_refuses_what_does_not_fit_its_four_slices(layout, fragment):
    with pytest.raises(LayoutError) as err:
        validate_layout(A30, layout)
    assert fragment in str(err.value)


def per_profile_budget():
    """(key, compute, memory, max) per profile, from the reference tables."""
    seven = ((1, 1, 7), (1, 1, 1), (1, 2, 4), (2, 2, 3), (3, 4, 2), (4, 4, 1), (7, 8, 1))
    budgets = {"A30-24GB": (4, 4, [("1g.6gb", 1, 1, 4), ("1g.6gb+me", 1, 1, 1), ("2g.12gb", 2, 2, 2),
                                   ("2g.12gb+me", 2, 2, 1), ("4g.24gb", 4, 4, 1)])}
    for key in SEVEN_SLICE:
        column = names(key)
        budgets[key] = (7, 8, [(column[letter],) + shape for letter, shape in zip("omdthfs", seven)])
    return budgets


@pytest.mark.parametrize("key", sorted(per_profile_budget()))
def test_placement_agrees_with_slice_budgets_for_every_combination(key):
    # For the catalogued GPUs the start-slice rules allow exactly the combinations that keep
    # to the compute and memory budgets and the per-profile maxima (checked exhaustively).
    compute, memory, profiles = per_profile_budget()[key]
    model = model_for_key(key)
    accepted = 0
    for counts in itertools.product(*[range(p[3] + 2) for p in profiles]):
        layout = dict((p[0], n) for p, n in zip(profiles, counts) if n)
        if not layout:
            continue
        fits = (
            sum(p[1] * n for p, n in zip(profiles, counts)) <= compute
            and sum(p[2] * n for p, n in zip(profiles, counts)) <= memory
            and all(n <= p[3] for p, n in zip(profiles, counts))
        )
        try:
            validate_layout(model, layout)
        except LayoutError:
            assert not fits, layout
        else:
            assert fits, layout
            accepted += 1
    assert accepted > 10


BALANCED = {
    "A30-24GB": {"1g.6gb": 2, "2g.12gb": 1},
    "A100-40GB": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    "A100-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-94GB": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
    "H100-96GB": {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1},
    "H200-141GB": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    "GH200-144GB": {"1g.18gb": 2, "2g.36gb": 1, "3g.72gb": 1},
    "B200-180GB": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
    "GB200-186GB": {"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1},
}


def named_cases():
    maxima = {"o": 7, "m": 1, "d": 4, "t": 3, "h": 2, "f": 1, "s": 1}
    cases = []
    for key in sorted(BALANCED):
        cases.append((key, "all-disabled", False, {}))
        cases.append((key, "all-enabled", True, {}))
        cases.append((key, "all-balanced", True, BALANCED[key]))
    for key in sorted(SEVEN_SLICE):
        for letter, profile in names(key).items():
            cases.append((key, "all-" + profile.replace("+", "."), True, {profile: maxima[letter]}))
    a30 = [("1g.6gb", 4), ("1g.6gb+me", 1), ("2g.12gb", 2), ("2g.12gb+me", 1), ("4g.24gb", 1)]
    cases.extend(("A30-24GB", "all-" + p.replace("+", "."), True, {p: n}) for p, n in a30)
    return cases


@pytest.mark.parametrize("key, name, mig_enabled, profiles", named_cases())
def test_every_named_layout_of_every_model(key, name, mig_enabled, profiles):
    model = model_for_key(key)
    layout = validate_layout(model, name)
    assert layout.entries == (LayoutEntry("all", mig_enabled, tuple(profiles.items())),)
    # The expansion is itself a layout the validator accepts.
    if profiles:
        assert validate_layout(model, profiles).entries == layout.entries


@pytest.mark.parametrize("key", ["L40S", "L4", "A10G", "T4"])
def test_non_mig_models_accept_only_all_disabled(key):
    model = model_for_key(key)
    assert validate_layout(model, "all-disabled").entries == (LayoutEntry("all", False, ()),)
    for layout in ("all-balanced", "all-enabled", {"1g.10gb": 1}, {}, [{"devices": [0], "profiles": {}}]):
        with pytest.raises(LayoutError) as err:
            validate_layout(model, layout)
        assert "%s is not MIG-capable" % model.product in str(err.value)
    assert validate_layout(model, [{"devices": "all", "mig_enabled": False}]).entries[0].mig_enabled is False


def test_named_layout_errors_name_the_layout():
    with pytest.raises(LayoutError) as err:
        validate_layout(H100, "all-3g.20gb")
    assert str(err.value).startswith("layout 'all-3g.20gb': unknown named layout 'all-3g.20gb' for NVIDIA-H100-80GB-HBM3")


def test_profiles_are_stored_in_catalog_order_with_me_spelt_plus():
    layout = validate_layout(H100, {"3g.40gb": 1, "1g.10gb.me": 1, "1g.10gb": 1, "2g.20gb": 1})
    assert layout.entries[0].profiles == (("1g.10gb", 1), ("1g.10gb+me", 1), ("2g.20gb", 1), ("3g.40gb", 1))


def test_empty_mapping_means_mig_on_without_devices():
    assert validate_layout(H100, {}).entries == (LayoutEntry("all", True, ()),)


@pytest.mark.parametrize("count", [0, -1, True, "2", 1.5, None])
def test_counts_must_be_whole_numbers_from_one(count):
    with pytest.raises(LayoutError) as err:
        validate_layout(H100, {"1g.10gb": count})
    assert "count of 1g.10gb is %r, expected a whole number from 1 to 7" % (count,) in str(err.value)


def test_unknown_profile_message_names_layout_and_valid_profiles():
    with pytest.raises(LayoutError) as err:
        validate_layout(model_for_key("A100-40GB"), {"1g.10gb": 4, "1g.20gb": 1})
    assert str(err.value) == (
        "layout {1g.10gb: 4, 1g.20gb: 1}: unknown MIG profile '1g.20gb' for NVIDIA-A100-SXM4-40GB "
        "(valid: 1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb)"
    )


def test_same_profile_in_both_spellings_is_refused():
    with pytest.raises(LayoutError, match="names a profile twice"):
        validate_layout(H100, {"1g.10gb+me": 1, "1g.10gb.me": 1})


@pytest.mark.parametrize("layout", [42, None, 3.5, object()])
def test_other_shapes_are_refused(layout):
    with pytest.raises(LayoutError, match="expected a named layout .* a mapping .* or a list"):
        validate_layout(H100, layout)


MIXED_NODE = [
    {"devices": [0, 1, 2, 3], "profiles": {"1g.10gb": 7}},
    {"devices": [4, 5], "profiles": {"3g.40gb": 2}},
    {"devices": [7, 6], "mig_enabled": False},
]


def test_entries_are_validated_per_gpu_group():
    layout = validate_layout(H100, MIXED_NODE)
    assert layout.entries == (
        LayoutEntry((0, 1, 2, 3), True, (("1g.10gb", 7),)),
        LayoutEntry((4, 5), True, (("3g.40gb", 2),)),
        LayoutEntry((6, 7), False, ()),
    )


@pytest.mark.parametrize(
    "layout, message",
    [
        ([], "layout is an empty list, expected at least one {devices, profiles} entry"),
        (["all-balanced"], "layout[0] is 'all-balanced', expected a mapping with keys devices, mig_enabled, profiles"),
        ([{"devices": "all", "mig-devices": {}}], "layout[0] has unknown keys mig-devices (valid: devices, mig_enabled, profiles)"),
        ([{"profiles": {"1g.10gb": 7}}], "layout[0].devices is None, expected 'all' or a non-empty list of distinct GPU indices"),
        ([{"devices": []}], "layout[0].devices is [], expected 'all'"),
        ([{"devices": [0, 0]}], "layout[0].devices is [0, 0], expected 'all'"),
        ([{"devices": [-1]}], "layout[0].devices is [-1], expected 'all'"),
        ([{"devices": [True]}], "layout[0].devices is [True], expected 'all'"),
        ([{"devices": "some"}], "layout[0].devices is 'some', expected 'all'"),
        ([{"devices": 0}], "layout[0].devices is 0, expected 'all'"),
        ([{"devices": [0], "mig_enabled": "yes"}], "layout[0].mig_enabled is 'yes', expected true or false"),
        ([{"devices": [0], "profiles": "all-balanced"}], "layout[0].profiles is 'all-balanced', expected a mapping {profile: count}"),
        (
            [{"devices": [0], "mig_enabled": False, "profiles": {"1g.10gb": 7}}],
            "layout[0].profiles is {1g.10gb: 7} but mig_enabled is false; MIG devices need MIG on",
        ),
        (
            [{"devices": [0, 1], "profiles": {"1g.10gb": 7}}, {"devices": [1, 2], "profiles": {"2g.20gb": 3}}],
            "layout[1].devices lists GPU 1, already in layout[0].devices; each GPU belongs to one entry",
        ),
        (
            [{"devices": "all", "profiles": {"1g.10gb": 7}}, {"devices": [1], "mig_enabled": False}],
            "layout has 2 entries and one has devices 'all'",
        ),
        (
            [{"devices": [0], "profiles": {"1g.10gb": 7}}, {"devices": [1], "profiles": {"3g.40gb": 3}}],
            "layout[1].profiles {3g.40gb: 3} needs 12 memory slices, NVIDIA-H100-80GB-HBM3 has 8 (valid: up to 2 x 3g.40gb)",
        ),
        (
            [{"devices": [0], "profiles": {"3g.40gb": 1, "4g.40gb": 1, "1g.10gb": 1}}],
            "layout[0].profiles {3g.40gb: 1, 4g.40gb: 1, 1g.10gb: 1} needs 9 memory slices",
        ),
    ],
)
def test_entry_errors_name_the_field(layout, message):
    with pytest.raises(LayoutError) as err:
        validate_layout(H100, layout)
    assert message in str(err.value)


def test_validated_layout_passes_through_for_its_model_only():
    layout = validate_layout(H100, "all-balanced")
    assert validate_layout(H100, layout) is layout
    with pytest.raises(LayoutError, match="validated for NVIDIA-H100-80GB-HBM3, not NVIDIA-A30"):
        validate_layout(A30, layout)


def test_render_matches_mig_parted_format():
    configs = {
        "all-disabled": validate_layout(H100, "all-disabled"),
        "all-enabled": validate_layout(H100, "all-enabled"),
        "llm-h100": validate_layout(H100, "all-balanced"),
        "mixed-node": validate_layout(H100, MIXED_NODE),
    }
    assert render_mig_parted_config(configs) == {
        "version": "v1",
        "mig-configs": {
            "all-disabled": [{"devices": "all", "mig-enabled": False}],
            "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
            "llm-h100": [
                {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
            ],
            "mixed-node": [
                {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
                {"devices": [4, 5], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
                {"devices": [6, 7], "mig-enabled": False},
            ],
        },
    }


def test_render_with_device_filter_uses_the_models_pci_ids():
    document = render_mig_parted_config(
        {"h100-1g": validate_layout(H100, {"1g.10gb.me": 1}), "a30": validate_layout(A30, "all-balanced")},
        device_filter=True,
    )
    h100_entry = document["mig-configs"]["h100-1g"][0]
    assert h100_entry == {
        "device-filter": ["0x233010DE", "0x233110DE"],
        "devices": "all",
        "mig-enabled": True,
        "mig-devices": {"1g.10gb+me": 1},
    }
    # mig-parted's own configs list the keys in this order; keep diffs of rendered YAML stable.
    assert list(h100_entry) == ["device-filter", "devices", "mig-enabled", "mig-devices"]
    assert document["mig-configs"]["a30"][0]["device-filter"] == ["0x20B710DE"]
    assert document["mig-configs"]["a30"][0]["mig-devices"] == {"1g.6gb": 2, "2g.12gb": 1}


def test_render_of_nothing_is_an_empty_document():
    assert render_mig_parted_config({}) == {"version": "v1", "mig-configs": {}}


@pytest.mark.parametrize("name", ["Bad Name", "-leading", "trailing.", "a" * 64, "", "x+y", 7])
def test_render_refuses_names_that_cannot_be_label_values(name):
    with pytest.raises(LayoutError, match="cannot be a value of label nvidia.com/mig.config"):
        render_mig_parted_config({name: validate_layout(H100, "all-balanced")})


def test_render_accepts_the_longest_label_value():
    assert list(render_mig_parted_config({"a" * 63: validate_layout(H100, "all-balanced")})["mig-configs"]) == ["a" * 63]


def test_render_refuses_unvalidated_layouts():
    with pytest.raises(LayoutError, match="mig config 'raw' is .*expected a layout returned by validate_layout"):
        render_mig_parted_config({"raw": {"1g.10gb": 7}})


@pytest.mark.parametrize(
    "key, layout, gpus, strategy, expected",
    [
        # Reference: 8xH100 all-balanced, mixed.
        ("H100-80GB", "all-balanced", 8, "mixed",
         {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-3g.40gb": 8}),
        # Reference: 8xH100 all-3g.40gb, single.
        ("H100-80GB", "all-3g.40gb", 8, "single", {"nvidia.com/gpu": 16}),
        ("H100-80GB", "all-3g.40gb", 8, "mixed", {"nvidia.com/mig-3g.40gb": 16}),
        ("H100-80GB", {"1g.10gb": 7}, 2, "single", {"nvidia.com/gpu": 14}),
        ("H100-80GB", "all-1g.10gb.me", 4, "mixed", {"nvidia.com/mig-1g.10gb.me": 4}),
        ("H100-80GB", {"1g.10gb": 6, "1g.10gb+me": 1}, 1, "mixed",
         {"nvidia.com/mig-1g.10gb": 6, "nvidia.com/mig-1g.10gb.me": 1}),
        ("H100-80GB", "all-disabled", 4, "single", {"nvidia.com/gpu": 4}),
        ("H100-80GB", "all-disabled", 4, "mixed", {"nvidia.com/gpu": 4}),
        ("H100-80GB", MIXED_NODE, 8, "mixed",
         {"nvidia.com/mig-1g.10gb": 28, "nvidia.com/mig-3g.40gb": 4, "nvidia.com/gpu": 2}),
        ("A100-40GB", "all-1g.5gb", 8, "single", {"nvidia.com/gpu": 56}),
        ("A30-24GB", "all-balanced", 4, "mixed", {"nvidia.com/mig-1g.6gb": 8, "nvidia.com/mig-2g.12gb": 4}),
        ("A30-24GB", {"2g.12gb+me": 1, "2g.12gb": 1}, 2, "mixed",
         {"nvidia.com/mig-2g.12gb.me": 2, "nvidia.com/mig-2g.12gb": 2}),
        ("H200-141GB", "all-7g.141gb", 8, "single", {"nvidia.com/gpu": 8}),
        ("L4", "all-disabled", 2, "single", {"nvidia.com/gpu": 2}),
        ("H100-80GB", [{"devices": [1], "profiles": {"2g.20gb": 3}}, {"devices": [0], "profiles": {"2g.20gb": 3}}],
         2, "single", {"nvidia.com/gpu": 6}),
    ],
)
def test_resources_for(key, layout, gpus, strategy, expected):
    assert resources_for(model_for_key(key), layout, gpus, strategy) == expected


@pytest.mark.parametrize(
    "layout, gpus, strategy, message",
    [
        ("all-balanced", 8, "single",
         "mig strategy single advertises one kind of device per node, layout gives 1g.10gb, 2g.20gb, 3g.40gb; "
         "use mig strategy mixed, or one profile on every GPU"),
        (MIXED_NODE, 8, "single",
         "mig strategy single advertises one kind of device per node, layout gives 1g.10gb, 3g.40gb, "
         "whole GPUs (MIG off); use mig strategy mixed"),
        ("all-enabled", 2, "mixed",
         "GPUs 0, 1: MIG on and no MIG devices; the device plugin refuses such a node and advertises nothing"),
        ([{"devices": [0], "profiles": {}}, {"devices": [1], "profiles": {"1g.10gb": 7}}], 2, "mixed",
         "GPU 0: MIG on and no MIG devices"),
        (MIXED_NODE, 6, "mixed", "layout[2].devices lists GPU 6, the node has 6 GPUs (valid: 0 to 5)"),
        (MIXED_NODE, 10, "mixed", "layout has no entry for GPUs 8, 9 of the node's 10; add one (e.g. mig_enabled: false)"),
        (MIXED_NODE[:2], 7, "mixed", "layout has no entry for GPU 6 of the node's 7"),
        ("all-balanced", 0, "mixed", "gpus_per_node is 0, expected a whole number >= 1"),
        ("all-balanced", True, "mixed", "gpus_per_node is True, expected a whole number >= 1"),
        ("all-balanced", "8", "mixed", "gpus_per_node is '8', expected a whole number >= 1"),
        ("all-balanced", 8, "none", "mig strategy is 'none', expected one of single, mixed"),
        ({"3g.40gb": 3}, 8, "mixed", "layout {3g.40gb: 3} needs 12 memory slices"),
    ],
)
def test_resources_for_refuses(layout, gpus, strategy, message):
    with pytest.raises(LayoutError) as err:
        resources_for(H100, layout, gpus, strategy)
    assert message in str(err.value)


@pytest.mark.parametrize(
    "layout, expected",
    [
        ("all-balanced", "mixed"),
        ("all-1g.10gb", "single"),
        ("all-1g.10gb.me", "single"),
        ({"3g.40gb": 2}, "single"),
        ({"3g.40gb": 1, "4g.40gb": 1}, "mixed"),
        ({"1g.10gb": 6, "1g.10gb+me": 1}, "mixed"),
        ("all-disabled", "single"),
        ("all-enabled", "single"),
        ([{"devices": [0], "profiles": {"1g.10gb": 7}}, {"devices": [1], "profiles": {"1g.10gb": 7}}], "single"),
        ([{"devices": [0], "profiles": {"1g.10gb": 7}}, {"devices": [1], "profiles": {"2g.20gb": 3}}], "mixed"),
        ([{"devices": [0], "profiles": {"1g.10gb": 7}}, {"devices": [1], "mig_enabled": False}], "mixed"),
        ([{"devices": [0], "profiles": {"1g.10gb": 7}}, {"devices": [1], "profiles": {}}], "single"),
        (MIXED_NODE, "mixed"),
    ],
)
def test_required_strategy(layout, expected):
    assert required_strategy(validate_layout(H100, layout)) == expected


def test_mig_layout_is_immutable():
    layout = validate_layout(H100, "all-balanced")
    assert isinstance(layout, MigLayout)
    with pytest.raises(AttributeError):
        layout.entries = ()


# ---------------------------------------------------------------------------------------------
# Issue 9: whatever follows "valid:" is a layout that is valid on its own
# ---------------------------------------------------------------------------------------------

_ALTERNATIVE = re.compile(r"\{([^{}]*)\}")
_UP_TO = re.compile(r"^up to (\d+) x (\S+)$")


def _alternatives(message):
    """The layouts a message proposes after "(valid: ", as {profile: count} dicts."""
    proposed = message.rsplit("(valid: ", 1)[1][:-1]
    match = _UP_TO.match(proposed)
    if match:
        return [{match.group(2): int(match.group(1))}]
    layouts = []
    for body in _ALTERNATIVE.findall(proposed):
        layouts.append(dict((name.strip(), int(count)) for name, count in
                            (item.split(":") for item in body.split(","))))
    assert layouts and " or ".join("{%s}" % b for b in _ALTERNATIVE.findall(proposed)) == proposed, message
    return layouts


def _invalid_pairs(key):
    """Every two-profile layout of the model, counts up to one over each maximum, that is refused."""
    model = model_for_key(key)
    profiles = catalog_for(model).profiles
    for first, second in itertools.permutations(profiles, 2):
        for a in range(1, first.max_count + 2):
            for b in range(1, second.max_count + 2):
                layout = {first.name: a, second.name: b}
                try:
                    validate_layout(model, layout)
                except LayoutError as err:
                    yield layout, str(err)


@pytest.mark.parametrize("key", ["H100-80GB", "A30-24GB", "RTX-PRO-6000-96GB", "A100-40GB", "B300-288GB"])
def test_every_proposed_alternative_is_valid_on_its_own(key):
    model = model_for_key(key)
    checked = 0
    for layout, message in _invalid_pairs(key):
        if "(valid: " not in message or "unknown MIG profile" in message:
            continue
        for alternative in _alternatives(message):
            validate_layout(model, alternative)
            assert all(alternative[name] <= layout[name] for name in alternative), (layout, message)
            checked += 1
    assert checked > 20


@pytest.mark.parametrize("layout", [
    {"3g.40gb": 3}, {"1g.10gb": 8}, {"7g.80gb": 2}, {"1g.10gb+me": 2},
    {"3g.40gb": 2, "1g.10gb": 1}, {"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1},
    {"7g.80gb": 1, "1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 2},
])
def test_h100_alternatives_of_larger_layouts_are_valid(layout):
    with pytest.raises(LayoutError) as err:
        validate_layout(H100, layout)
    for alternative in _alternatives(str(err.value)):
        validate_layout(H100, alternative)


@pytest.mark.parametrize("layout, valid", [
    ({"1g.24gb+me.all": 2}, "(valid: up to 1 x 1g.24gb+me.all)"),
    ({"4g.96gb": 1, "1g.24gb.gfx": 1}, "(valid: {1g.24gb+gfx: 1} or {4g.96gb: 1})"),
    ({"2g.48gb": 2, "1g.24gb-me": 1}, "(valid: {2g.48gb: 1, 1g.24gb-me: 1} or {2g.48gb: 2})"),
])
def test_rtx_pro_6000_messages(layout, valid):
    with pytest.raises(LayoutError) as err:
        validate_layout(model_for_key("RTX-PRO-6000-96GB"), layout)
    assert valid in str(err.value)


@pytest.mark.parametrize("key, layout, resources", [
    ("RTX-PRO-6000-96GB", {"1g.24gb+gfx": 2, "2g.48gb": 1},
     {"nvidia.com/mig-1g.24gb.gfx": 8, "nvidia.com/mig-2g.48gb": 4}),
    ("RTX-PRO-6000-96GB", {"1g.24gb.me.all": 1, "1g.24gb-me": 3},
     {"nvidia.com/mig-1g.24gb.me.all": 4, "nvidia.com/mig-1g.24gb-me": 12}),
    ("H20-96GB", "all-balanced", {"nvidia.com/mig-1g.12gb": 8, "nvidia.com/mig-2g.24gb": 4, "nvidia.com/mig-3g.48gb": 4}),
    ("B300-288GB", {"3g.135gb": 1, "4g.135gb": 1}, {"nvidia.com/mig-3g.135gb": 4, "nvidia.com/mig-4g.135gb": 4}),
    ("H200-141GB", "all-1g.18gb.me", {"nvidia.com/mig-1g.18gb.me": 4}),
])
def test_new_models_advertise_label_safe_resources(key, layout, resources):
    assert resources_for(model_for_key(key), layout, 4, "mixed") == resources
