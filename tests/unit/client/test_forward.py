"""The local port of `disttrain jobs tensorboard`, against a stand-in API server on loopback: a node that
serves no port-forward (the process node) is found out, the pod's own address is reached where this machine
reaches it, and a connection that fails is one warning line, never a traceback."""

from __future__ import annotations

import logging
import socket
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from kubernetes import client

from disttrain.forward import LocalPort, PodAddress, PortForward
from support.local_http import http_server


class _ApiServer(BaseHTTPRequestHandler):
    """Refuses everything: a node that serves no port-forward."""

    def do_GET(self) -> None:
        self.send_error(400, "port-forward is not served by this node")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Pod(BaseHTTPRequestHandler):
    """A TensorBoard's page, HTML of its own encoding, as TensorBoard sends its index."""

    def do_GET(self) -> None:
        data = f"<title>TensorBoard</title>{self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Encoding", "identity")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[client.ApiClient]:
    with http_server(_ApiServer) as server:
        configuration = client.Configuration()
        configuration.host = f"http://127.0.0.1:{server.server_address[1]}"
        configuration.api_key = {"authorization": "Bearer t0ken"}
        yield client.ApiClient(configuration)


def test_the_pod_s_own_address_carries_its_page_as_it_is_sent() -> None:
    with http_server(_Pod) as pod, PodAddress("127.0.0.1", pod.server_address[1]) as board:
        assert board.works()
        with urllib.request.urlopen(f"{board.url}data/runs?x=1", timeout=10) as answer:
            assert answer.read() == b"<title>TensorBoard</title>/data/runs?x=1"
            assert answer.headers["Content-Encoding"] == "identity"


def test_an_address_this_machine_does_not_reach_is_found_out_and_a_connection_is_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = unused.getsockname()[1]  # nothing listens there once this socket goes
    assert f"a connection to 127.0.0.1:{closed} failed" in _refused(PodAddress("127.0.0.1", closed), caplog)


def test_a_node_without_port_forward_is_found_out_and_a_failed_connection_is_one_line(
    api: client.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    forward = PortForward(api, "team", "mnist-tensorboard-abc", 6006)
    assert "a connection to team/mnist-tensorboard-abc:6006 failed" in _refused(forward, caplog)


def _refused(forward: LocalPort, caplog: pytest.LogCaptureFixture) -> str:
    """What a forward that cannot reach its pod logs of a connection to its local port, which it closes: one
    warning line, no traceback."""
    assert not forward.works()
    with (
        caplog.at_level(logging.WARNING),
        forward,
        socket.create_connection(("127.0.0.1", forward.local_port), timeout=10) as connection,
    ):
        connection.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert connection.recv(1024) == b""  # closed: nothing to reach
    (record,) = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert record.exc_info is None
    return record.getMessage()
