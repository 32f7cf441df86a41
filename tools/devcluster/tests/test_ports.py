"""Ports for the local cluster's processes: distinct, free, and outside the range outgoing connections use."""
from __future__ import annotations

import socket

from kubegpu_devcluster import ports


def test_one_start_never_gets_the_same_port_twice_and_each_is_free():
    for dummy in range(50):
        chosen = ports.free_ports(6)
        assert len(set(chosen)) == 6
        assert all(ports.LOWEST <= p < ports._ephemeral_start() for p in chosen), chosen
        for port in chosen:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))


def test_a_port_in_use_is_not_chosen(monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    try:
        port = taken.getsockname()[1]
        # The first two draws offer the port in use; then the real draws go on. (A fixed next port, port + 1, was
        # itself in use now and then on a busy machine: the ports beside an ephemeral one are other connections'.)
        offered = [port, port]
        real = ports.random.randrange
        monkeypatch.setattr(ports.random, "randrange", lambda lo, hi: offered.pop(0) if offered else real(lo, hi))
        chosen = ports.free_ports(1)
        assert offered == [] and chosen != [port], chosen
    finally:
        taken.close()
