"""The operator's progress poller: where it asks, how often, what it passes on, and the bounds of one poll."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import ClassVar

import pytest

from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.status import Progress
from disttrain_core.observed import PodPhase
from disttrain_core.progress import Report, parse_report
from disttrain_operator.progress_poller import (
    NO_REPORT_YET,
    PER_NAMESPACE,
    Polled,
    ProgressPoller,
    SilentTrainerError,
    Target,
    fetch_progress,
    progress_url,
)
from support.job_builder import T0, make_job, make_pod
from support.local_http import http_server


def _report(step: int, at: datetime | None) -> Report:
    return Report(Progress(step=step, update_time=at))


def test_progress_is_polled_only_from_a_running_reporting_pod_with_an_address() -> None:
    spec = make_job({"Chief": 1, "Worker": 2}, progressPort=9000).spec
    chief = make_pod(ReplicaType.CHIEF, 0, PodPhase.RUNNING, pod_ip="10.0.0.7")
    assert progress_url(spec, [chief]) == "http://10.0.0.7:9000/progress"
    assert progress_url(spec, [make_pod(ReplicaType.CHIEF, 0, PodPhase.RUNNING, pod_ip="fd00::7")]) == (
        "http://[fd00::7]:9000/progress"
    )
    assert progress_url(spec, [make_pod(ReplicaType.CHIEF, 0, PodPhase.PENDING, pod_ip="10.0.0.7")]) is None
    assert progress_url(spec, [make_pod(ReplicaType.CHIEF, 0, PodPhase.RUNNING)]) is None
    assert progress_url(spec, [make_pod(ReplicaType.WORKER, 0, PodPhase.RUNNING, pod_ip="10.0.0.8")]) is None


def test_the_poller_passes_on_only_new_reports() -> None:
    reports = {"http://a/progress": _report(1, T0), "http://b/progress": None}
    passed_on: list[tuple[str, str]] = []
    targets = [Target(("ns", "a"), "http://a/progress"), Target(("ns", "b"), "http://b/progress")]
    poller = ProgressPoller(lambda: targets, passed_on.append, interval=60, fetch=reports.get)
    assert poller.poll_once() == [("ns", "a")]
    assert poller.poll_once() == []
    reports["http://a/progress"] = _report(2, datetime(2026, 1, 1, 0, 1, tzinfo=UTC))
    assert poller.poll_once() == [("ns", "a")]
    assert passed_on == [("ns", "a"), ("ns", "a")]
    assert poller.latest(("ns", "a")) == reports["http://a/progress"]
    poller.forget(("ns", "a"))
    assert poller.latest(("ns", "a")) is None
    poller.stop()


def _polls(answers: Sequence[Polled | type[SilentTrainerError]], deadline: float | None = None) -> list[float]:
    """When a job is polled over len(answers) intervals of 10 s, each interval's answer given."""
    clock = [0.0]
    polled: list[float] = []

    def fetch(url: str) -> Polled:
        polled.append(clock[0])
        answer = answers[int(clock[0] // 10)]
        if answer is SilentTrainerError:
            raise SilentTrainerError(url)
        return answer  # type: ignore[return-value]

    targets = [Target(("ns", "a"), "http://a/progress", deadline)]
    poller = ProgressPoller(lambda: targets, lambda _: None, 10, fetch=fetch, clock=lambda: clock[0])
    for tick in range(len(answers)):
        clock[0] = tick * 10.0
        poller.poll_once()
    poller.stop()
    return polled


def test_a_silent_job_is_polled_less_often_until_it_answers() -> None:
    # 1, 2, 4, then 6 intervals apart; it answers from 150 on, which the poll at 190 finds, and each interval after
    assert _polls([SilentTrainerError] * 15 + [_report(1, T0)] * 7) == [0, 10, 30, 70, 130, 190, 200, 210]


def test_a_trainer_that_answers_without_a_report_yet_is_asked_every_interval() -> None:
    """204 before the first report: its first report is in within an interval."""
    assert _polls([NO_REPORT_YET] * 15 + [_report(1, T0)] * 2) == [10.0 * tick for tick in range(17)]


def test_a_silent_job_is_polled_at_least_twice_within_its_progress_deadline() -> None:
    """A trainer slow to answer (a loaded node) is not judged on polls the poller did not make: with a 40 s
    deadline the back-off stops at 2 intervals, with 30 s at 1."""
    assert _polls([SilentTrainerError] * 12, deadline=40) == [0, 10, 30, 50, 70, 90, 110]
    assert _polls([SilentTrainerError] * 6, deadline=30) == [10.0 * tick for tick in range(6)]


def test_a_job_whose_trainer_starts_answering_is_passed_on_and_its_answer_kept() -> None:
    """What a progress deadline needs: when the trainer last answered as the contract says (a report or a 204),
    and a reconcile as soon as it answers after it did not; a refusal or another answer keeps the last time."""
    answers: list[Polled | type[SilentTrainerError]] = [SilentTrainerError, NO_REPORT_YET, NO_REPORT_YET, None]
    now = [T0]
    passed_on: list[tuple[str, str]] = []

    def fetch(url: str) -> Polled:
        answer = answers.pop(0)
        if answer is SilentTrainerError:
            raise SilentTrainerError(url)
        return answer  # type: ignore[return-value]

    targets = [Target(("ns", "a"), "http://a/progress")]

    def seconds() -> float:
        return (now[0] - T0).total_seconds()

    poller = ProgressPoller(
        lambda: targets, passed_on.append, 10, fetch=fetch, clock=seconds, wall_clock=lambda: now[0]
    )
    seen = []
    for second in (0, 10, 20, 30):  # one silence: the next poll is still due an interval later
        now[0] = T0 + timedelta(seconds=second)
        poller.poll_once()
        seen.append(poller.answered(("ns", "a")))
    poller.stop()
    assert seen == [None, T0 + timedelta(seconds=10), T0 + timedelta(seconds=20), T0 + timedelta(seconds=20)]
    assert passed_on == [("ns", "a")]  # its first answer, not each one after


class _NoReportYet(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def test_a_204_is_an_answer_and_a_refusal_or_a_timeout_is_silence() -> None:
    with http_server(_NoReportYet) as server:
        assert fetch_progress(f"http://127.0.0.1:{server.server_address[1]}/progress", timeout=2) is NO_REPORT_YET
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()  # accepts, never answers
    port = listening.getsockname()[1]
    with pytest.raises(SilentTrainerError):
        fetch_progress(f"http://127.0.0.1:{port}/progress", timeout=0.2)
    listening.close()
    with pytest.raises(SilentTrainerError):  # refused now
        fetch_progress(f"http://127.0.0.1:{port}/progress", timeout=0.2)


def test_a_failing_callback_does_not_stop_the_poll() -> None:
    def broken(key: tuple[str, str]) -> None:
        raise RuntimeError(key)

    targets = [Target(("ns", "a"), "a"), Target(("ns", "b"), "b")]
    poller = ProgressPoller(lambda: targets, broken, interval=60, fetch=lambda url: _report(len(url), T0))
    assert sorted(poller.poll_once()) == [("ns", "a"), ("ns", "b")]
    poller.stop()


REPORT = json.dumps({"step": 8000, "updateTime": "2026-01-01T00:00:00Z"}).encode()


class _Trickling(BaseHTTPRequestHandler):
    """A tenant's trainer that sends its report a byte every 0.2 s: each read is quick, the answer is not."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(REPORT)))
        self.end_headers()
        for byte in REPORT:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(0.2)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


class _Asked(BaseHTTPRequestHandler):
    """Counts the requests it is sent, and answers each with a report."""

    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Asked.asked.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(REPORT)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def test_a_poll_has_one_deadline_for_the_whole_answer() -> None:
    """A trainer whose every read comes within the timeout, but whose answer does not, is silent."""
    with http_server(_Trickling) as server, pytest.raises(SilentTrainerError):
        fetch_progress(f"http://127.0.0.1:{server.server_address[1]}/progress", timeout=1.0)


def test_a_poll_follows_no_redirect_and_reads_a_bounded_answer() -> None:
    """A tenant's trainer cannot make the operator fetch what it points at, nor read without end."""
    _Asked.asked = []
    with http_server(_Asked) as elsewhere:
        target = f"http://127.0.0.1:{elsewhere.server_address[1]}/secret"

        class Redirecting(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(302)
                self.send_header("Location", target)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

        class Endless(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.end_headers()
                self.wfile.write(REPORT[:-1] + b" " * (8 << 20) + b"}")

            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

        with http_server(Redirecting) as redirecting:
            assert fetch_progress(f"http://127.0.0.1:{redirecting.server_address[1]}/progress", timeout=2) is None
        with http_server(Endless) as endless:
            assert fetch_progress(f"http://127.0.0.1:{endless.server_address[1]}/progress", timeout=2) is None
        assert fetch_progress(f"{target}/../progress", timeout=2) == parse_report(REPORT.decode())
    assert _Asked.asked == ["/secret/../progress"]  # the redirect's target was never asked


def test_one_namespace_s_slow_trainers_do_not_delay_another_s_progress() -> None:
    """Twenty of tenant A's trainers hang on every poll; tenant B's report is passed on all the same, while A
    holds at most its share of the pool."""
    release, reported, counting = threading.Event(), threading.Event(), threading.Lock()
    asking = [0, 0]  # A's polls in hand now, and the most at once

    def fetch(url: str) -> Report | None:
        if url.startswith("a"):
            with counting:
                asking[0] += 1
                asking[1] = max(asking)
            release.wait(10)
            with counting:
                asking[0] -= 1
            return None
        return _report(1, T0)

    targets = [Target(("team-a", f"job-{n}"), f"a{n}") for n in range(20)] + [Target(("team-b", "job"), "b")]
    poller = ProgressPoller(lambda: targets, lambda key: reported.set(), 10, fetch=fetch)
    poller.queue_due()
    assert reported.wait(5)
    assert poller.latest(("team-b", "job")) == _report(1, T0) and asking[1] <= PER_NAMESPACE
    release.set()
    poller.stop()
