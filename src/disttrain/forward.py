"""A local port that reaches a pod, two ways.

`PortForward` does as `kubectl port-forward`: each connection accepted here opens one port-forward stream
of the `kubernetes` client (`portforward`) through the API server, whatever it carries. `PodAddress` opens a
TCP connection to the pod's own address instead, for nodes that serve no port-forward where this machine
reaches the pod network: the local cluster's process node runs its pods on this machine's bridge. A
connection that cannot be made either way is one warning line, never a traceback.

The API server's Service proxy is no third way: it closes an HTML page it cannot rewrite, TensorBoard's
own (`Content-Encoding: identity`), unanswered (docs/tensorboard.md).

A port-forward is the client's only request that does not go through `disttrain_kube.rest`: it is a
WebSocket stream, which only the `kubernetes` client's `stream` module speaks."""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import socketserver
import threading
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Any, Self

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import portforward
from websocket import WebSocketException

from disttrain_kube.api_errors import NETWORK_ERRORS

logger = logging.getLogger(__name__)

_CHUNK = 1 << 16
# What opening a port-forward stream raises when the API server or the node refuses it.
STREAM_ERRORS = (ApiException, WebSocketException, *NETWORK_ERRORS)
_REACH_SECONDS = 3  # a pod address this machine reaches answers within milliseconds


class LocalPort(ABC):
    """A server on a free (or given) port of 127.0.0.1 that serves until closed: each connection it accepts
    is carried to the pod by `_pump`, on a thread of its own."""

    def __init__(self, local_port: int) -> None:
        forward = self

        class Connection(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                forward._pump(self.request)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", local_port), Connection)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="disttrain-local-port", daemon=True)

    @property
    def local_port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}/"

    @property
    @abstractmethod
    def route(self) -> str:
        """How it reaches the pod, in a user's words."""

    @abstractmethod
    def works(self) -> bool:
        """It reaches the pod from here."""

    @abstractmethod
    def _pump(self, local: socket.socket) -> None:
        """Carry one local connection to the pod and back, until either side closes."""

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._thread.is_alive():  # shutdown waits for a serving loop: never started, there is none
            self._server.shutdown()
        self._server.server_close()

    def wait(self) -> None:
        """Until closed (or interrupted)."""
        self._thread.join()


class PortForward(LocalPort):
    """`with PortForward(api, namespace, pod, port) as forward: forward.url`; it serves until closed."""

    def __init__(self, api: client.ApiClient, namespace: str, pod: str, port: int, *, local_port: int = 0) -> None:
        self._core, self._namespace, self._pod, self._port = client.CoreV1Api(api), namespace, pod, port
        super().__init__(local_port)

    @property
    def route(self) -> str:
        return "a port-forward through the API server"

    def _stream(self) -> Any:
        return portforward(
            self._core.connect_get_namespaced_pod_portforward, self._pod, self._namespace, ports=str(self._port)
        )

    def works(self) -> bool:
        """A stream to the pod can be opened: its node serves port-forwards."""
        try:
            stream = self._stream()
            stream.socket(self._port)
        except STREAM_ERRORS as error:
            logger.debug("no port-forward to %s/%s: %s", self._namespace, self._pod, error)
            return False
        with contextlib.suppress(*STREAM_ERRORS):
            stream.close()
        return True

    def _pump(self, local: socket.socket) -> None:
        """Through a new port-forward stream."""
        try:
            stream = self._stream()
            remote = stream.socket(self._port)
        except STREAM_ERRORS as error:
            logger.warning("a connection to %s/%s:%d failed: %s", self._namespace, self._pod, self._port, error)
            return
        try:
            _copy_both_ways(local, remote)
        finally:
            with contextlib.suppress(*STREAM_ERRORS):
                stream.close()


class PodAddress(LocalPort):
    """`with PodAddress(ip, port) as forward: forward.url`: each connection accepted here opens one to the pod's
    own address; it serves until closed."""

    def __init__(self, address: str, port: int, *, local_port: int = 0) -> None:
        self._address, self._port = address, port
        super().__init__(local_port)

    @property
    def route(self) -> str:
        return f"the pod's address {self._address}:{self._port}"

    def works(self) -> bool:
        """This machine reaches the pod's address."""
        try:
            socket.create_connection((self._address, self._port), timeout=_REACH_SECONDS).close()
        except OSError as error:
            logger.debug("no route to %s:%d: %s", self._address, self._port, error)
            return False
        return True

    def _pump(self, local: socket.socket) -> None:
        """Through a new connection to the pod's address."""
        try:
            remote = socket.create_connection((self._address, self._port), timeout=_REACH_SECONDS)
        except OSError as error:
            logger.warning("a connection to %s:%d failed: %s", self._address, self._port, error)
            return
        with remote:
            remote.settimeout(None)
            _copy_both_ways(local, remote)


def _copy_both_ways(local: socket.socket, remote: socket.socket) -> None:
    """Copy between a local connection and one to the pod until either side closes."""
    ends = [local, remote]
    try:
        while True:
            readable, _, _ = select.select(ends, [], [])
            for end in readable:
                data = end.recv(_CHUNK)
                if not data:
                    return
                (remote if end is local else local).sendall(data)
    except OSError:
        return
