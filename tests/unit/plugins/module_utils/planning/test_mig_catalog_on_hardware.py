"""The MIG catalogue against what a real GPU reports.

tests/fixtures/hardware/<gpu>/ holds read-only output captured on a real machine (MIG mode
disabled, nothing changed on it): `nvidia-smi --query-gpu=...` (query.csv), the GPU instance
profiles (`nvidia-smi mig -lgip`, lgip.txt) and their placements (`nvidia-smi mig -lgipp`,
lgipp.txt). The catalogue was written from NVIDIA's MIG guide and the operator's
default-mig-parted-config; this test shows it agrees with the hardware where we had one.
To add a GPU, capture the same three files on it into a new folder.
"""

import csv
import re
from pathlib import Path

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import model_for_product
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import catalog_for

HARDWARE = Path(__file__).resolve().parents[4] / "fixtures" / "hardware"
CAPTURED = sorted(p.name for p in HARDWARE.iterdir() if (p / "lgip.txt").exists())

# "|   0  MIG 1g.18gb         19     7/7        16.00      No     16     1     0   |"
_PROFILE_ROW = re.compile(r"^\|\s+\d+\s+MIG\s+(\S+)\s+(\d+)\s+\d+/(\d+)\s")
# "GPU  0 Profile ID 15 Placements: {0,2,4,6}:2"
_PLACEMENT_ROW = re.compile(r"Profile ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,]+)\}:(\d+)")


def _profiles(folder):
    """{profile name: (max instances, memory slices, start slices)} from lgip + lgipp."""
    ids = {}
    for line in (folder / "lgip.txt").read_text().splitlines():
        match = _PROFILE_ROW.match(line)
        if match:
            name, profile_id, total = match.groups()
            ids[int(profile_id)] = (name, int(total))
    profiles = {}
    for line in (folder / "lgipp.txt").read_text().splitlines():
        match = _PLACEMENT_ROW.search(line)
        if match:
            profile_id, starts, size = match.groups()
            name, total = ids[int(profile_id)]
            profiles[name] = (total, int(size), tuple(int(s) for s in starts.split(",")))
    return profiles


def _query(folder):
    with (folder / "query.csv").open() as f:
        return {k.strip(): v.strip() for k, v in next(csv.DictReader(f, skipinitialspace=True)).items()}


def test_fixtures_hold_at_least_one_gpu():
    assert CAPTURED, "no captured hardware under %s" % HARDWARE


@pytest.mark.parametrize("gpu", CAPTURED)
def test_model_facts_match_the_gpu(gpu):
    query = _query(HARDWARE / gpu)
    # GFD's product label is the NVML name with spaces replaced by '-'.
    model = model_for_product(query["name"].replace(" ", "-"))
    assert model.memory_mib == int(query["memory.total [MiB]"].split()[0])
    assert model.compute_capability == query["compute_cap"]
    assert model.device_filter[0].lower() == query["pci.device_id"].lower()


@pytest.mark.parametrize("gpu", CAPTURED)
def test_mig_profiles_and_placements_match_the_gpu(gpu):
    folder = HARDWARE / gpu
    measured = _profiles(folder)
    catalog = catalog_for(model_for_product(_query(folder)["name"].replace(" ", "-")))
    ours = {p.name: (p.max_count, p.memory_slices, p.starts) for p in catalog.profiles}
    assert measured, "no profiles parsed from %s" % folder
    assert ours == measured
