"""Ports for the processes the local cluster and local runs start: none that another process can take first."""

from __future__ import annotations

import socket

import pytest

from disttrain.local import ports


def test_ports_lie_below_the_ranges_the_kernel_and_kubernetes_hand_out_and_never_repeat() -> None:
    start = int(ports.EPHEMERAL_RANGE.read_text().split()[0])
    handed = [ports.free_port() for _ in range(200)]
    assert len(set(handed)) == len(handed)
    assert all(ports.LOWEST <= port < min(start, ports.NODE_PORTS_START) for port in handed)


def test_a_port_some_address_holds_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))  # held on every address, as a server holds it
        held = holder.getsockname()[1]
        with socket.socket() as spare:
            spare.bind(("127.0.0.1", 0))
            free = spare.getsockname()[1]
        draws = iter([held, free])
        monkeypatch.setattr("disttrain.local.ports.random.randrange", lambda low, high: next(draws))
        assert ports.free_port() == free
