"""Run every simulator until terminated: python -m kubegpu_devcluster.simulators <state dir>."""
from __future__ import annotations

import logging
import multiprocessing
import signal
import sys
import threading
import time
from pathlib import Path

from ..cluster import kubeconfig_path
from .device_plugin import DevicePluginSimulator
from .dra_plugin import DraPluginSimulator
from .gpu_operator import GpuOperatorSimulator
from .dcgm_exporter import DcgmExporterSimulator
from .keda import KedaSimulator
from .knative import KnativeSimulator
from .kueue_operator import KueueOperatorSimulator
from .kserve import KServeSimulator
from .mig_manager import MigManagerSimulator
from .nvidia_driver import NvidiaDriverSimulator
from .olm import OlmSimulator
from .openshift_ai import OpenShiftAISimulator

SIMULATORS = {"olm": OlmSimulator, "gpu-operator": GpuOperatorSimulator, "mig-manager": MigManagerSimulator,
              "device-plugin": DevicePluginSimulator, "dra-plugin": DraPluginSimulator,
              "kserve": KServeSimulator, "keda": KedaSimulator, "knative": KnativeSimulator,
              "openshift-ai": OpenShiftAISimulator,
              "kueue-operator": KueueOperatorSimulator, "dcgm-exporter": DcgmExporterSimulator,
              "nvidia-driver": NvidiaDriverSimulator}


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


# The simulators that stand for one process on every node of a roll-out's batch run in processes of their own: in
# one interpreter, the mig-manager's and the device plugin's sixteen workers each took turns on one lock (the GIL)
# with every other simulator's threads while hundreds of nodes changed at once.
OWN_PROCESS = ("mig-manager", "device-plugin")
# A process that ends (it should not) is started again after this long.
RESTART_DELAY = 1.0


def process_groups() -> list:
    """The simulators of each process: one process per name of OWN_PROCESS, then one for all the others."""
    return [(name,) for name in OWN_PROCESS] + [tuple(n for n in SIMULATORS if n not in OWN_PROCESS)]


def until_signalled() -> threading.Event:
    """An event set by SIGTERM or SIGINT (the local cluster stopping)."""
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    return done


def serve(names: tuple, state: Path) -> None:
    """Run the simulators `names` until SIGTERM or SIGINT."""
    done = until_signalled()
    running = [construct(name, SIMULATORS[name], str(kubeconfig_path(state, f"sim-{name}"))) for name in names]
    for sim in running:
        sim.start()
    done.wait()
    for sim in running:
        sim.stop()


def main() -> None:
    state = Path(sys.argv[1])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(threadName)s %(levelname)s %(message)s")
    # Forked before any thread or client exists; the children share this process group, so stopping the local
    # cluster (a signal to the group) stops them too.
    ctx = multiprocessing.get_context("fork")
    children = {}
    done = until_signalled()
    while not done.is_set():
        for group in process_groups():
            child = children.get(group)
            if child is None or not child.is_alive():
                if child is not None:
                    logging.getLogger("simulators").error("%s: process ended (%s); starting it again",
                                                          ",".join(group), child.exitcode)
                children[group] = ctx.Process(target=serve, args=(group, state), name="+".join(group), daemon=True)
                children[group].start()
        done.wait(RESTART_DELAY)
    for child in children.values():
        child.terminate()
    for child in children.values():
        child.join(timeout=10)


if __name__ == "__main__":
    main()
