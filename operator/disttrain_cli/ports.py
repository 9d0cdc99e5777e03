"""Loopback ports for processes this machine starts: the local cluster and local runs."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the OS picks it; the caller binds it soon after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
