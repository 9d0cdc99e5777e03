"""The trainer's side of the progress contract: what it serves and what it leaves as termination message."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from disttrain.local.ports import free_port
from disttrain_contract.progress import PROGRESS_PORT_ENV, TERMINATION_MESSAGE_ENV
from disttrain_core.progress import parse_progress
from disttrain_operator.progress_poller import fetch_progress
from disttrain_trainer.reporting import Progress, ProgressServer, fail


def test_the_chief_serves_its_latest_report_and_leaves_it_as_termination_message(tmp_path: Path) -> None:
    port, message = free_port(), tmp_path / "termination-log"
    environ = {PROGRESS_PORT_ENV: str(port), TERMINATION_MESSAGE_ENV: str(message)}
    progress = Progress(tmp_path / "checkpoints", True, 64, total_steps=300, environ=environ)
    assert progress.server is not None
    url = f"http://127.0.0.1:{port}/progress"
    try:
        assert fetch_progress(url) is None  # 204 before the first report
        progress.report(10, 1, 0.5)
        progress.report(20, 1, 0.25)
        served = fetch_progress(url)
        assert served is not None and (served.step, served.total_steps, served.loss) == (20, 300, 0.25)
        assert parse_progress(message.read_text()) == served
        assert json.loads((tmp_path / "checkpoints" / "progress.json").read_text())["step"] == 20
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=2)
    finally:
        progress.server.close()


def test_the_progress_server_starts_without_asking_dns_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python's HTTPServer looks its address up in DNS (`socket.getfqdn`), 10 s in a pod whose nameserver
    does not answer: the reporting task's start must not wait on it."""

    def no_dns(name: str = "") -> str:
        raise AssertionError(f"asked DNS for {name!r}")

    monkeypatch.setattr(socket, "getfqdn", no_dns)
    port = free_port()
    server = ProgressServer(port)
    try:
        assert fetch_progress(f"http://127.0.0.1:{port}/progress") is None  # it answers: 204, nothing reported
    finally:
        server.close()


def test_other_tasks_publish_nothing(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    environ = {PROGRESS_PORT_ENV: str(free_port()), TERMINATION_MESSAGE_ENV: str(message)}
    progress = Progress(tmp_path, False, 64, total_steps=10, environ=environ)
    progress.report(10, 1, 0.5)
    assert progress.server is None and not message.exists() and not (tmp_path / "progress.json").exists()


def test_an_unwritable_termination_message_does_not_stop_training(tmp_path: Path) -> None:
    environ = {TERMINATION_MESSAGE_ENV: str(tmp_path / "missing" / "termination-log")}
    Progress(tmp_path, True, 64, total_steps=10, environ=environ).report(1, 1, 0.5)
    assert (tmp_path / "progress.json").exists()


def test_a_run_with_no_step_reports_no_loss(tmp_path: Path) -> None:
    progress = Progress(tmp_path, True, 64, total_steps=10, environ={})
    progress.report(10, 1, float("nan"), finished=True)
    record = json.loads((tmp_path / "progress.json").read_text())
    assert record["loss"] is None and parse_progress(json.dumps(record)) is not None


def test_a_failing_task_adds_its_error_to_its_termination_message(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    fail("peers unreachable after 60s: job-worker-1.job.ns.svc:2222", {TERMINATION_MESSAGE_ENV: str(message)})
    assert json.loads(message.read_text()) == {"error": "peers unreachable after 60s: job-worker-1.job.ns.svc:2222"}
    message.write_text(json.dumps({"step": 40, "finished": False}))  # the chief's last report stays beside it
    fail("a peer was lost", {TERMINATION_MESSAGE_ENV: str(message)})
    assert json.loads(message.read_text()) == {"step": 40, "finished": False, "error": "a peer was lost"}
