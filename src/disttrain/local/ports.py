"""Loopback ports for processes this machine starts: the local cluster and local runs."""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10000  # below, ports that well-known services take
NODE_PORTS_START = 30000  # from here to 32767, Kubernetes' NodePorts, then Linux's ephemeral range by default
TRIES = 64

_handed_out: set[int] = set()


def free_port() -> int:
    """A port free on every address right now, for the caller to bind soon after, and never handed out before
    in this process. It lies below the kernel's ephemeral range, which every outgoing connection and every
    bind to port 0 draws from: no other process takes it before the caller binds it, however long that
    takes (a process's start). Where none is free there, the OS picks one."""
    below = min(NODE_PORTS_START, _ephemeral_start())
    for _ in range(TRIES):
        port = random.randrange(LOWEST, below)
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        chosen: int = sock.getsockname()[1]
        return chosen


def _ephemeral_start() -> int:
    """Where the kernel's ephemeral range starts; where it starts too low to leave room below, or the
    machine does not say, the ports are drawn below the NodePorts and may race (the OS's pick would too)."""
    try:
        start = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return NODE_PORTS_START
    return start if start > LOWEST + TRIES else NODE_PORTS_START


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))  # only to learn that no address holds the port
        except OSError:
            return False
        return True
