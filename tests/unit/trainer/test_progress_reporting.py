"""The trainer's side of the progress contract: what it serves and what it leaves as termination message."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from disttrain.local.ports import free_port
from disttrain_contract.divergence import report_divergence
from disttrain_contract.exit_codes import ExitCode
from disttrain_contract.progress import PROGRESS_PORT_ENV, TERMINATION_MESSAGE_ENV
from disttrain_core.naming import REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL
from disttrain_core.observed import pod_view
from disttrain_core.progress import Report, parse_progress, parse_report
from disttrain_operator.progress_poller import NO_REPORT_YET, fetch_progress
from disttrain_trainer.reporting import ProgressReporter, ProgressServer, fail


def test_the_chief_serves_its_latest_report_and_leaves_it_as_termination_message(tmp_path: Path) -> None:
    port, message = free_port(), tmp_path / "termination-log"
    environ = {PROGRESS_PORT_ENV: str(port), TERMINATION_MESSAGE_ENV: str(message)}
    progress = ProgressReporter(tmp_path / "checkpoints", True, 64, total_steps=300, environ=environ)
    assert progress.server is not None
    url = f"http://127.0.0.1:{port}/progress"
    try:
        assert fetch_progress(url) is NO_REPORT_YET  # 204 before the first report
        progress.report(10, 1, 0.5)
        progress.report(20, 1, 0.25)
        served = fetch_progress(url)
        assert isinstance(served, Report)
        assert (served.progress.step, served.progress.total_steps, served.progress.loss) == (
            20,
            300,
            0.25,
        )
        assert parse_report(message.read_text()) == served
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
        assert fetch_progress(f"http://127.0.0.1:{port}/progress") is NO_REPORT_YET  # it answers: 204, nothing reported
    finally:
        server.close()


def test_other_tasks_publish_nothing(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    environ = {PROGRESS_PORT_ENV: str(free_port()), TERMINATION_MESSAGE_ENV: str(message)}
    progress = ProgressReporter(tmp_path, False, 64, total_steps=10, environ=environ)
    progress.report(10, 1, 0.5)
    assert progress.server is None and not message.exists() and not (tmp_path / "progress.json").exists()


def test_an_unwritable_termination_message_does_not_stop_training(tmp_path: Path) -> None:
    environ = {TERMINATION_MESSAGE_ENV: str(tmp_path / "missing" / "termination-log")}
    ProgressReporter(tmp_path, True, 64, total_steps=10, environ=environ).report(1, 1, 0.5)
    assert (tmp_path / "progress.json").exists()


def test_a_run_with_no_step_reports_no_loss(tmp_path: Path) -> None:
    progress = ProgressReporter(tmp_path, True, 64, total_steps=10, environ={})
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


def test_the_final_report_keeps_the_rate_and_a_resumed_run_measures_from_its_own_start(tmp_path: Path) -> None:
    """The final report repeats the last step: it kept 0.0 examples per second before. A run resumed at step
    200 measures its first report from 200, not from 0."""
    progress = ProgressReporter(tmp_path, True, 64, total_steps=300, environ={}, start_step=200)
    time.sleep(0.05)
    progress.report(210, 1, 0.5)
    first = json.loads((tmp_path / "progress.json").read_text())["examplesPerSecond"]
    assert 0 < first <= 10 * 64 / 0.05
    progress.report(300, 1, 0.25)
    progress.report(300, 1, 0.25, finished=True)
    final = json.loads((tmp_path / "progress.json").read_text())
    assert final["finished"] and final["examplesPerSecond"] > 0


def test_each_record_names_the_last_checkpoint_saved_or_restored(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "ckpt-200.index").write_text("")
    progress = ProgressReporter(
        tmp_path, True, 64, total_steps=300, environ={}, start_step=200, restored=str(tmp_path / "ckpt" / "ckpt-200")
    )
    progress.report(210, 1, 0.5)
    report = parse_report((tmp_path / "progress.json").read_text())
    assert report is not None and report.checkpoint is not None
    assert (report.checkpoint.step, report.checkpoint.path) == (200, "ckpt/ckpt-200")
    (tmp_path / "ckpt" / "ckpt-250.index").write_text("")
    progress.saved(250, str(tmp_path / "ckpt" / "ckpt-250"))  # said at once, not at the next report
    again = parse_report((tmp_path / "progress.json").read_text())
    assert again is not None and again.checkpoint is not None and again.checkpoint.step == 250
    assert again.progress.step == 210 and again.progress.update_time is not None
    assert report.progress.update_time is not None and again.progress.update_time >= report.progress.update_time


def test_a_user_s_own_trainer_reports_divergence_through_the_contract(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    message.write_text(json.dumps({"step": 40}))
    code = report_divergence(41, float("nan"), "ckpt/ckpt-40", environ={TERMINATION_MESSAGE_ENV: str(message)})
    assert code == ExitCode.DIVERGED and int(code) == 5
    record = json.loads(message.read_text())
    assert record["step"] == 40 and "nan at step 41" in record["error"] and "ckpt/ckpt-40" in record["error"]
    assert record["diverged"] is True  # the word the operator fails the job on, with the exit code
    view = pod_view(_ended_with(code, message.read_text()))
    assert view is not None and view.diverged and view.exit_code == 5


def test_the_trainer_says_diverged_only_when_it_did(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    fail("the loss became nan at step 3", {TERMINATION_MESSAGE_ENV: str(message)}, diverged=True)
    assert json.loads(message.read_text()) == {"error": "the loss became nan at step 3", "diverged": True}
    message.unlink()
    fail("data not found", {TERMINATION_MESSAGE_ENV: str(message)})
    assert "diverged" not in json.loads(message.read_text())


def _ended_with(code: int, message: str) -> dict[str, Any]:
    labels = {REPLICA_TYPE_LABEL: "worker", REPLICA_INDEX_LABEL: "0"}
    ended = [{"name": "tensorflow", "state": {"terminated": {"exitCode": code, "message": message}}}]
    return {
        "metadata": {"name": "job-worker-0", "uid": "u", "labels": labels},
        "status": {"phase": "Failed", "containerStatuses": ended},
    }


def test_a_task_s_failure_on_stderr_names_the_program_that_ends(capsys: pytest.CaptureFixture[str]) -> None:
    fail("a peer was lost", {}, program="disttrain-stand-in")
    fail("preempted: saved at step 3", {}, preempted=True)
    assert capsys.readouterr().err.splitlines() == [
        "disttrain-stand-in: error: a peer was lost",
        "disttrain-train: preempted: saved at step 3",
    ]
