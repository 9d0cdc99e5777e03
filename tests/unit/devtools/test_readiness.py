"""The process node's readiness probes, against a server on loopback: an HTTP GET by named port or a TCP
connection, due after the initial delay and then every period; the pod is Ready only once they succeed."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

from disttrain_dev.process_pods import ContainerState, pod_status
from disttrain_dev.readiness import ReadinessProbe
from support.local_http import http_server


class _Board(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/" else 500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _container(probe: dict[str, Any], port: int) -> dict[str, Any]:
    return {"name": "board", "ports": [{"name": "http", "containerPort": port}], "readinessProbe": probe}


def test_an_http_probe_by_named_port_is_due_after_its_delay_then_every_period() -> None:
    with http_server(_Board) as board:
        port = board.server_address[1]
        probe = {"httpGet": {"path": "/", "port": "http"}, "initialDelaySeconds": 2, "periodSeconds": 5}
        readiness = ReadinessProbe.of(_container(probe, port), started=100.0)
        assert readiness is not None
        assert readiness.check("127.0.0.1", 101.0) is None  # in its initial delay
        assert readiness.check("127.0.0.1", 102.0) is True
        assert readiness.check("127.0.0.1", 106.0) is None  # its period has not passed
        failing = ReadinessProbe.of(_container({"httpGet": {"path": "/missing", "port": port}}, port), 0.0)
        assert failing is not None and failing.check("127.0.0.1", 0.0) is False


def test_a_tcp_probe_fails_where_nothing_listens_and_no_probe_is_none() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = unused.getsockname()[1]
    readiness = ReadinessProbe.of(_container({"tcpSocket": {"port": closed}}, closed), 0.0)
    assert readiness is not None and readiness.check("127.0.0.1", 0.0) is False
    assert ReadinessProbe.of({"name": "plain"}, 0.0) is None
    assert ReadinessProbe.of({"name": "exec", "readinessProbe": {"exec": {"command": ["true"]}}}, 0.0) is None


def test_a_pod_is_ready_only_once_every_running_container_is() -> None:
    started = datetime(2026, 11, 28, tzinfo=UTC)
    pod = {"spec": {"containers": [{"name": "board"}, {"name": "sidecar"}]}}
    waiting = [ContainerState("board", started, ready=False), ContainerState("sidecar", started)]
    status = pod_status(pod, waiting, "10.250.0.2", "10.250.0.1", started)
    ready = {condition["type"]: condition["status"] for condition in status["conditions"]}
    assert (ready["Ready"], [c["ready"] for c in status["containerStatuses"]]) == ("False", [False, True])
    status = pod_status(pod, [ContainerState("board", started), waiting[1]], "10.250.0.2", "10.250.0.1", started)
    assert next(c for c in status["conditions"] if c["type"] == "Ready")["status"] == "True"
