"""Make the local cluster's package (tools/devcluster) importable: the DRA plugin simulator and charts_dir()."""

import os
import sys

_DEVCLUSTER = os.path.join(os.path.dirname(__file__), *([os.pardir] * 6 + ["tools", "devcluster"]))
sys.path.insert(0, os.path.abspath(_DEVCLUSTER))
