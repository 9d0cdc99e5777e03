"""The local port of `disttrain jobs tensorboard`, against a stand-in API server on loopback: where the node
serves no port-forward (the process node), requests go through the Service proxy, and a connection that
fails is one warning line, never a traceback."""

from __future__ import annotations

import json
import logging
import socket
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from kubernetes import client

from disttrain.forward import PortForward, ServiceProxy
from local_http import http_server

PROXY = "/api/v1/namespaces/team/services/mnist-tensorboard:http/proxy"


class _ApiServer(BaseHTTPRequestHandler):
    """Answers the Service proxy's path with what it was asked; refuses everything else (no port-forward)."""

    def do_GET(self) -> None:
        self._answer(b"")

    def do_POST(self) -> None:
        self._answer(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def _answer(self, body: bytes) -> None:
        if not self.path.startswith(PROXY):
            self.send_error(400, "port-forward is not served by this node")
            return
        said = {"path": self.path, "auth": self.headers.get("Authorization"), "body": body.decode()}
        data = json.dumps(said).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
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


def test_requests_go_through_the_service_proxy_with_their_query_and_body(api: client.ApiClient) -> None:
    with ServiceProxy(api, "team", "mnist-tensorboard", "http") as board:
        with urllib.request.urlopen(f"{board.url}data/plugin/scalars/tags?run=mnist&tag=loss", timeout=10) as answer:
            said = json.loads(answer.read())
        assert said == {
            "path": f"{PROXY}/data/plugin/scalars/tags?run=mnist&tag=loss",
            "auth": "Bearer t0ken",
            "body": "",
        }
        posted = urllib.request.Request(f"{board.url}data/plugin/timeseries/timeSeries", data=b"requests=[]")
        with urllib.request.urlopen(posted, timeout=10) as answer:
            assert json.loads(answer.read())["body"] == "requests=[]"


def test_a_node_without_port_forward_is_found_out_and_a_failed_connection_is_one_line(
    api: client.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    forward = PortForward(api, "team", "mnist-tensorboard-abc", 6006)
    assert not forward.works()
    with (
        caplog.at_level(logging.WARNING),
        forward,
        socket.create_connection(("127.0.0.1", forward.local_port), timeout=10) as connection,
    ):
        connection.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert connection.recv(1024) == b""  # closed: nothing to relay
    (record,) = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert "a connection to team/mnist-tensorboard-abc:6006 failed" in record.getMessage()
    assert record.exc_info is None
