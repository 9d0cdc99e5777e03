"""A local port that reaches a pod through the API server, two ways.

`PortForward` does as `kubectl port-forward`: each connection accepted here opens one port-forward stream
of the `kubernetes` client (`portforward`), whatever it carries. `ServiceProxy` relays HTTP requests
through the API server's proxy to a Service (`/api/v1/namespaces/NS/services/NAME:PORT/proxy/`), for nodes
that serve no port-forward, such as the local cluster's process node. A connection that cannot be made
either way is one warning line, never a traceback.

These are the client's only requests that do not go through `disttrain_kube.rest`: a port-forward is a
WebSocket stream, which only the `kubernetes` client's `stream` module speaks, and the proxy relays
whatever the browser sends, body and headers as they came."""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import portforward
from websocket import WebSocketException

from disttrain_kube.api_errors import NETWORK_ERRORS

logger = logging.getLogger(__name__)

_CHUNK = 1 << 16
# What opening a port-forward stream raises when the API server or the node refuses it.
STREAM_ERRORS = (ApiException, WebSocketException, *NETWORK_ERRORS)
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "upgrade", "content-length"})


class LocalPort:
    """A server on a free (or given) port of 127.0.0.1 that serves until closed."""

    def __init__(self, server: socketserver.TCPServer) -> None:
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="disttrain-local-port", daemon=True)

    @property
    def local_port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}/"

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
        forward = self

        class Connection(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                forward._pump(self.request)

        self._core, self._namespace, self._pod, self._port = client.CoreV1Api(api), namespace, pod, port
        server = socketserver.ThreadingTCPServer(("127.0.0.1", local_port), Connection)
        server.daemon_threads = True
        super().__init__(server)

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
        """Copy both ways between a local connection and a new stream to the pod, until either side closes."""
        try:
            stream = self._stream()
            remote = stream.socket(self._port)
        except STREAM_ERRORS as error:
            logger.warning("a connection to %s/%s:%d failed: %s", self._namespace, self._pod, self._port, error)
            return
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
            with contextlib.suppress(*STREAM_ERRORS):
                stream.close()


class ServiceProxy(LocalPort):
    """HTTP on a local port, each request relayed to `service:port` through the API server's Service proxy."""

    def __init__(self, api: client.ApiClient, namespace: str, service: str, port: str, *, local_port: int = 0) -> None:
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                relay._relay(self)

            def do_POST(self) -> None:
                relay._relay(self)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: one line per request is not what a user of the URL wants on their terminal."""

        self._api, self._prefix = api, f"/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy"
        server = ThreadingHTTPServer(("127.0.0.1", local_port), Handler)
        server.daemon_threads = True
        super().__init__(server)

    def _relay(self, request: BaseHTTPRequestHandler) -> None:
        path, _, query = request.path.partition("?")
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else None
        headers = {"Accept": request.headers.get("Accept", "*/*")}
        if request.headers.get("Content-Type"):
            headers["Content-Type"] = request.headers["Content-Type"]
        try:
            method, url, headers, _, _ = self._api.param_serialize(
                method=request.command,
                resource_path=self._prefix + path,
                query_params=parse_qsl(query, keep_blank_values=True),
                header_params=headers,
                auth_settings=["BearerToken"],
            )
            # The body as it came, whatever its type: the client's own request() would re-encode a form.
            answer = self._api.rest_client.pool_manager.request(
                method, url, body=body, headers=headers, timeout=urllib3.Timeout(connect=30, read=300)
            )
        except NETWORK_ERRORS as error:
            logger.warning("a request to %s%s failed: %s", self._prefix, path, error)
            request.send_error(502, "the API server did not answer")
            return
        request.send_response(answer.status)
        for name, value in answer.headers.items():
            if name.lower() not in _HOP_BY_HOP:
                request.send_header(name, value)
        data = answer.data or b""
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        with contextlib.suppress(OSError):  # the browser went away meanwhile
            request.wfile.write(data)
