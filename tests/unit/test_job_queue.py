"""The reconcile queue: each job once however often it is asked for, and never by two threads at once."""

from __future__ import annotations

import threading
import time

from disttrain_operator.job_queue import JobQueue


class _Recorder:
    """Handles keys, holding the first one until released; counts overlap per key."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.handled: list[str] = []
        self.overlaps = 0
        self._running: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, key: str) -> None:
        with self._lock:
            self.overlaps += key in self._running
            self._running.add(key)
        self.entered.set()
        self.release.wait(10)
        with self._lock:
            self._running.discard(key)
            self.handled.append(key)


def _drain(recorder: _Recorder, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(recorder.handled) < count and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_job_asked_for_while_waiting_is_handled_once() -> None:
    recorder = _Recorder()
    ready = threading.Event()
    queue = JobQueue(recorder, workers=4, ready=ready)
    queue.start()
    for _ in range(5):
        queue.add("a")
    queue.add("b")
    recorder.release.set()
    ready.set()
    _drain(recorder, 2)
    time.sleep(0.1)
    queue.stop()
    assert sorted(recorder.handled) == ["a", "b"]


def test_a_job_asked_for_while_running_runs_again_after_never_alongside() -> None:
    recorder = _Recorder()
    queue = JobQueue(recorder, workers=4)
    queue.start()
    queue.add("a")
    assert recorder.entered.wait(10)
    for _ in range(5):  # the first reconcile still runs: one more follows it, on whichever thread
        queue.add("a")
    recorder.release.set()
    _drain(recorder, 2)
    time.sleep(0.1)
    queue.stop()
    assert (recorder.handled, recorder.overlaps) == (["a", "a"], 0)


def test_nothing_is_handled_before_ready() -> None:
    recorder = _Recorder()
    recorder.release.set()
    ready = threading.Event()
    queue = JobQueue(recorder, workers=2, ready=ready)
    queue.start()
    queue.add("a")
    time.sleep(0.1)
    assert recorder.handled == []
    ready.set()
    _drain(recorder, 1)
    queue.stop()
    assert recorder.handled == ["a"]


def test_a_failing_reconcile_leaves_the_threads_serving() -> None:
    handled: list[str] = []

    def handle(key: str) -> None:
        if key == "bad":
            raise RuntimeError("a bug")
        handled.append(key)

    queue = JobQueue(handle, workers=1)
    queue.start()
    queue.add("bad")
    queue.add("good")
    deadline = time.monotonic() + 10
    while not handled and time.monotonic() < deadline:
        time.sleep(0.01)
    queue.stop()
    assert handled == ["good"]
