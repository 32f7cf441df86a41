"""Run every simulator until terminated: python -m kubegpu_devcluster.simulators <state dir>."""
from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from pathlib import Path

from ..cluster import kubeconfig_path
from .device_plugin import DevicePluginSimulator
from .dra_plugin import DraPluginSimulator
from .gpu_operator import GpuOperatorSimulator
from .cert_manager import CertManagerSimulator
from .dcgm_exporter import DcgmExporterSimulator
from .keda import KedaSimulator
from .knative import KnativeSimulator
from .kueue_operator import KueueOperatorSimulator
from .kserve import KServeSimulator
from .mig_manager import MigManagerSimulator
from .olm import OlmSimulator
from .openshift_ai import OpenShiftAISimulator

SIMULATORS = {"olm": OlmSimulator, "gpu-operator": GpuOperatorSimulator, "mig-manager": MigManagerSimulator,
              "device-plugin": DevicePluginSimulator, "dra-plugin": DraPluginSimulator,
              "kserve": KServeSimulator, "keda": KedaSimulator, "knative": KnativeSimulator,
              "cert-manager": CertManagerSimulator, "openshift-ai": OpenShiftAISimulator,
              "kueue-operator": KueueOperatorSimulator, "dcgm-exporter": DcgmExporterSimulator}


# A simulator's construction reads the API server (discovery, its knobs); one that fails (the API server busy, a
# CRD deleted at that moment) is made again, not allowed to end the process: the cluster would go on without any.
START_ATTEMPTS = 30


def construct(name: str, cls, kubeconfig: str):
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return cls(kubeconfig)
        except Exception:
            if attempt == START_ATTEMPTS:
                raise
            logging.getLogger("simulators").exception("%s: could not start (attempt %d); trying again", name, attempt)
            time.sleep(1.0)


def main() -> None:
    state = Path(sys.argv[1])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(levelname)s %(message)s")
    running = [construct(name, cls, str(kubeconfig_path(state, f"sim-{name}"))) for name, cls in SIMULATORS.items()]
    for sim in running:
        sim.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    for sim in running:
        sim.stop()


if __name__ == "__main__":
    main()
