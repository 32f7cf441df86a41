"""The simulators' and the local cluster's own tests: one real local cluster per session (kubegpu_devcluster.testing).

Run them with `make simulators` (part of `make integration`). The cluster lives in .cache/simulators-cluster, apart
from the collection's test cluster, and is stopped at the end of the session.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

DEVCLUSTER = Path(__file__).resolve().parents[1]
REPO = DEVCLUSTER.parents[1]
sys.path.insert(0, str(DEVCLUSTER))

from kubegpu_devcluster import testing  # noqa: E402


@pytest.fixture(scope="session")
def devcluster_session():
    state = Path(os.environ.get("KUBEGPU_SIMULATORS_CLUSTER_DIR", REPO / ".cache" / "simulators-cluster"))
    yield from testing.session(state)


@pytest.fixture
def dc(devcluster_session):
    """The session's cluster with the simulator knobs cleared before each test."""
    devcluster_session.clear_knobs()
    return devcluster_session
