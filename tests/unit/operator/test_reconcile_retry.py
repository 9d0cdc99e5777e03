"""Only API and network errors are transient; a bug surfaces with its traceback, in a metric, and on the job."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import REGISTRY

from disttrain_kube.api_errors import KubeApiError, RefusedError, TransientApiError
from disttrain_kube.rest import Kube
from disttrain_operator import metrics
from disttrain_operator.reconcile_retry import SURFACE_AFTER, ReconcileRetry
from support.local_http import http_server

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KEY = ("team", "mnist")
JOB_KIND = {"apiVersion": "disttrain.io/v1alpha1", "kind": "DistTrainJob"}  # its path comes from the models


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port  # closed again when the socket is: nothing listens there


def _kube(port: int) -> Kube:
    configuration = client.Configuration(host=f"http://127.0.0.1:{port}")
    configuration.retries = 0
    return Kube(client.ApiClient(configuration), on_error=metrics.count_api_error)


def _api_errors(operation: str) -> float:
    return REGISTRY.get_sample_value("disttrain_api_errors_total", {"operation": operation}) or 0.0


def test_a_refused_connection_is_an_api_error_worth_a_retry() -> None:
    before = _api_errors("GET")
    with pytest.raises(TransientApiError, match="GET /api/v1/namespaces/x/pods"):
        _kube(_closed_port()).list_page("/api/v1/namespaces/x/pods", {})
    assert _api_errors("GET") == before + 1


def test_a_programming_error_is_not_an_api_error() -> None:
    """A body the client cannot serialise is the operator's bug: it surfaces as itself."""
    before = _api_errors("POST")
    with pytest.raises(Exception) as raised:
        _kube(_closed_port()).create({**JOB_KIND, "metadata": {"namespace": "x"}, "spec": {"bad": object()}})
    assert not isinstance(raised.value, KubeApiError)
    assert _api_errors("POST") == before


class _Harness:
    def __init__(self) -> None:
        self.scheduled: list[datetime] = []
        self.surfaced: list[str] = []
        self.policy = ReconcileRetry(lambda key, at: self.scheduled.append(at), clock=lambda: NOW)

    def run(self, error: Exception | None) -> None:
        def reconcile() -> None:
            if error is not None:
                raise error

        self.policy.run(KEY, reconcile, self.surfaced.append)


def _reconcile_errors(error: str) -> float:
    return REGISTRY.get_sample_value("disttrain_reconcile_errors_total", {"error": error}) or 0.0


def test_an_api_error_is_retried_soon_and_never_shown_on_the_job() -> None:
    harness = _Harness()
    for _ in range(SURFACE_AFTER + 1):
        harness.run(TransientApiError(503, "GET /x"))
    assert harness.scheduled == [NOW + timedelta(seconds=5)] * (SURFACE_AFTER + 1)
    assert harness.surfaced == []


def test_a_bug_is_logged_counted_retried_later_and_shown_on_the_job_after_a_few_tries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    harness = _Harness()
    before = _reconcile_errors("KeyError")
    with caplog.at_level(logging.ERROR):
        for _ in range(SURFACE_AFTER + 1):
            harness.run(KeyError("replicaSpecs"))
    assert [at - NOW for at in harness.scheduled] == [timedelta(seconds=s) for s in (5, 10, 20, 40)]
    assert _reconcile_errors("KeyError") == before + SURFACE_AFTER + 1
    (message,) = harness.surfaced  # once, at the third failure in a row
    assert "3 times in a row" in message and "KeyError" in message and "replicaSpecs" in message
    assert all(record.exc_info is not None for record in caplog.records)  # with its traceback


def test_a_success_ends_the_run_of_failures() -> None:
    harness = _Harness()
    for _ in range(SURFACE_AFTER - 1):
        harness.run(ValueError("a bug"))
    harness.run(None)
    for _ in range(SURFACE_AFTER - 1):
        harness.run(ValueError("a bug"))
    assert harness.surfaced == []
    assert harness.scheduled[-1] == NOW + timedelta(seconds=5 * 2 ** (SURFACE_AFTER - 2))


def _counts() -> list[float]:
    """Reconciles that succeeded, that failed, and retries scheduled, so far."""
    results = [
        ("controller_runtime_reconcile_total", {"controller": "disttrainjob", "result": result})
        for result in ("success", "error")
    ]
    samples = [*results, ("workqueue_retries_total", {"name": "disttrainjob"})]
    return [REGISTRY.get_sample_value(name, labels) or 0.0 for name, labels in samples]


def test_every_reconcile_is_counted_by_result_and_each_failure_as_a_retry() -> None:
    before = _counts()
    harness = _Harness()
    harness.run(None)
    harness.run(TransientApiError(503, "GET /x"))
    harness.run(ValueError("a bug"))
    assert [after - earlier for after, earlier in zip(_counts(), before, strict=True)] == [1, 2, 2]


def _status_404(details: dict[str, str]) -> dict[str, Any]:
    return {"kind": "Status", "message": "not found", "reason": "NotFound", "details": details}


@contextmanager
def _cluster(discovery: dict[str, Any] | None, created: dict[str, Any]) -> Iterator[int]:
    """A server answering a group version's discovery with `discovery` (404 for None), every create with a
    404 Status `created`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer(200, discovery) if discovery is not None else self._answer(404, _status_404({}))

        def do_POST(self) -> None:
            self._answer(404, created)

        def _answer(self, code: int, answer: dict[str, Any]) -> None:
            body = json.dumps(answer).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    with http_server(Handler) as server:
        yield server.server_address[1]


GANG = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload", "metadata": {"name": "j", "namespace": "x"}}
SERVED = {"resources": [{"name": "workloads", "kind": "Workload", "namespaced": True}]}


def test_a_child_whose_api_the_cluster_does_not_serve_is_refused_for_good() -> None:
    """An unserved API cannot appear by retrying: the job fails saying which (a Warning Event and a condition)."""
    with _cluster(None, {}) as port, pytest.raises(RefusedError, match=r"does not serve scheduling\.k8s\.io/v1alpha2"):
        _kube(port).create(GANG)  # discovery says so
    unserved = r"the cluster does not serve scheduling\.k8s\.io/v1alpha2 workloads"
    with _cluster(SERVED, _status_404({})) as port, pytest.raises(RefusedError, match=unserved):
        _kube(port).create(GANG)  # gone since discovery was read
    with _cluster(SERVED, _status_404({"name": "x", "kind": "namespaces"})) as port, pytest.raises(TransientApiError):
        _kube(port).create(GANG)  # the namespace is gone, not the API: worth a retry
