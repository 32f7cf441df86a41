"""Tests of the local cluster's simulators: kubegpu_devcluster importable; each module runs its own cluster."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
