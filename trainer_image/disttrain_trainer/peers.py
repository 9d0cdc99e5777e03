"""Wait until the servers of the cluster accept connections, before the coordinator connects to them.

A restarted ParameterServer chief would otherwise fail at once (and cost a restart) when a PS or
worker pod that was restarted with it is still starting its server. Pure sockets: no TensorFlow.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable

from disttrain_contract.exit_codes import ExitCode, TrainerError
from disttrain_trainer.reporting import log


def _accepts(address: str, timeout: float) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def wait_for_peers(addresses: Iterable[str], timeout: float, interval: float = 0.5) -> None:
    """Return once every `host:port` accepts a connection; PEER_LOST (retryable) after `timeout` seconds."""
    waiting = sorted(set(addresses))
    deadline = time.monotonic() + timeout
    while waiting:
        waiting = [address for address in waiting if not _accepts(address, interval)]
        if not waiting:
            return
        if time.monotonic() >= deadline:
            raise TrainerError(ExitCode.PEER_LOST, f"peers not reachable after {timeout:.0f}s: {', '.join(waiting)}")
        log("waiting", peers=waiting)
        time.sleep(interval)
