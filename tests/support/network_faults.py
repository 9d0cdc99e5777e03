"""Network faults the tests make: a proxy that goes silent, and bridged traffic sent through iptables."""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

BRIDGE_NETFILTER = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


class SilencingProxy:
    """A TCP proxy in front of the API server. `silence` stops every connection open now in both directions
    without closing it, as a dead peer behind a NAT or a half-open connection does; connections made
    afterwards pass as before."""

    def __init__(self, address: str, port: int) -> None:
        self._target = (address, port)
        self._listener = socket.create_server((address, 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._open: list[threading.Event] = []  # per connection: set once it is silenced
        threading.Thread(target=self._accept, daemon=True).start()

    def silence(self) -> None:
        with self._lock:
            for silenced in self._open:
                silenced.set()
            self._open = []

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            upstream = socket.create_connection(self._target)
            silenced = threading.Event()
            with self._lock:
                self._open.append(silenced)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink, silenced), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket, silenced: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if not silenced.is_set():  # else dropped, and the socket stays open
                    sink.sendall(data)
            if not silenced.is_set():
                sink.shutdown(socket.SHUT_WR)


@contextmanager
def bridged_traffic_through_iptables() -> Iterator[None]:
    """Bridged traffic passes iptables inside, as beside a Docker engine; as it was after. Skips the test
    where there is no iptables or bridge netfilter (br_netfilter) to turn on."""
    if shutil.which("iptables") is None or not BRIDGE_NETFILTER.exists():
        pytest.skip("needs iptables and bridge netfilter (br_netfilter), which a Docker engine brings")
    before = BRIDGE_NETFILTER.read_text().strip()
    BRIDGE_NETFILTER.write_text("1")
    try:
        yield
    finally:
        BRIDGE_NETFILTER.write_text(before)
