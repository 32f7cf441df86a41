"""Ports for the local cluster's processes (etcd, the API server, the controller-manager, the scheduler, KWOK).

Each process is told its port and binds it some time later. A port the kernel hands out for bind(("", 0)) comes
from the ephemeral range, the one every outgoing connection also takes its local port from, and once released it
can be handed out again at once: two components of one cluster were given the same port (KWOK exited at start,
"address already in use", on a busy machine). So the ports come from below the ephemeral range, where no
outgoing connection lands, at random (several clusters start side by side under pytest-xdist), each checked free
by binding it, and all of one start's ports are held until every one is chosen, so that none is given twice.
"""
from __future__ import annotations

import random
import socket

LOWEST = 20000


def _ephemeral_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int) -> list:
    """`count` distinct ports on 127.0.0.1, free when chosen, outside the ephemeral range."""
    top = max(_ephemeral_start(), LOWEST + 1000)
    held, ports = [], []
    try:
        while len(ports) < count:
            port = random.randrange(LOWEST, top)
            if port in ports:
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            held.append(s)
            ports.append(port)
    finally:
        for s in held:
            s.close()
    return ports
