"""A local port forwarded to a pod's port through the API server, as `kubectl port-forward` does: each
connection accepted here opens one port-forward stream of the `kubernetes` client (`portforward`)."""

from __future__ import annotations

import contextlib
import select
import socket
import socketserver
import threading
from types import TracebackType
from typing import Any

from kubernetes import client
from kubernetes.stream import portforward

_CHUNK = 1 << 16


class PortForward:
    """`with PortForward(core, namespace, pod, port) as forward: forward.url`; it serves until closed."""

    def __init__(self, core: client.CoreV1Api, namespace: str, pod: str, port: int, *, local_port: int = 0) -> None:
        forward = self

        class Connection(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                forward._pump(self.request)

        self._core, self._namespace, self._pod, self._port = core, namespace, pod, port
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", local_port), Connection)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="disttrain-port-forward", daemon=True)

    @property
    def local_port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}/"

    def __enter__(self) -> PortForward:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait(self) -> None:
        """Until closed (or interrupted)."""
        self._thread.join()

    def _pump(self, local: socket.socket) -> None:
        """Copy both ways between a local connection and a new stream to the pod, until either side closes."""
        stream: Any = portforward(
            self._core.connect_get_namespaced_pod_portforward, self._pod, self._namespace, ports=str(self._port)
        )
        remote = stream.socket(self._port)
        try:
            ends = [local, remote]
            while True:
                readable, _, _ = select.select(ends, [], [])
                for end in readable:
                    data = end.recv(_CHUNK)
                    if not data:
                        return
                    (remote if end is local else local).sendall(data)
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                stream.close()
