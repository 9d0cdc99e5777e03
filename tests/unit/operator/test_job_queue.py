"""The reconcile queue: each job once however often it is asked for, and never by two threads at once.

Nothing here sleeps and then asserts that nothing happened: a sentinel key added last is handled after
everything queued before it (the queue is first in, first out), and `stop` then `join` lets every
thread finish what it took."""

from __future__ import annotations

import threading

from prometheus_client import REGISTRY

from disttrain_dev.polling import wait_for
from disttrain_operator.job_queue import JobQueue


class _Recorder:
    """Handles keys, holding them until released; counts overlap per key."""

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


class _Gate(threading.Event):
    """The queue's `ready` event, counting the threads that wait on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = 0
        self._lock = threading.Lock()

    def wait(self, timeout: float | None = None) -> bool:
        with self._lock:
            self.waiting += 1
        return super().wait(timeout)


def _finish(queue: JobQueue[str], recorder: _Recorder) -> None:
    """Once the sentinel was handled, everything queued before it was taken: let those reconciles end."""
    queue.add("sentinel")
    wait_for("the sentinel", lambda: "sentinel" in recorder.handled, timeout=10, interval=0.01)
    queue.stop()
    queue.join(timeout=10)


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
    _finish(queue, recorder)
    assert sorted(recorder.handled) == ["a", "b", "sentinel"]


def test_a_job_asked_for_while_running_runs_again_after_never_alongside() -> None:
    recorder = _Recorder()
    queue = JobQueue(recorder, workers=4)
    queue.start()
    queue.add("a")
    assert recorder.entered.wait(10)
    for _ in range(5):  # the first reconcile still runs: one more follows it, on whichever thread
        queue.add("a")
    recorder.release.set()
    wait_for("both reconciles of a", lambda: recorder.handled.count("a") == 2, timeout=10, interval=0.01)
    _finish(queue, recorder)
    assert (recorder.handled, recorder.overlaps) == (["a", "a", "sentinel"], 0)


def test_nothing_is_handled_before_ready() -> None:
    recorder = _Recorder()
    recorder.release.set()
    gate = _Gate()
    queue = JobQueue(recorder, workers=2, ready=gate)
    queue.start()
    wait_for("both threads at the gate", lambda: gate.waiting == 2, timeout=10, interval=0.01)
    queue.add("a")
    assert recorder.handled == []  # every thread is held at the gate
    gate.set()
    wait_for("a, once ready", lambda: recorder.handled == ["a"], timeout=10, interval=0.01)
    queue.stop()


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
    wait_for("good", lambda: handled == ["good"], timeout=10, interval=0.01)
    queue.stop()


def _sample(name: str, queue: str) -> float:
    return REGISTRY.get_sample_value(name, {"name": queue}) or 0.0


def test_the_queue_reports_its_depth_adds_and_waits_as_client_go_names_them() -> None:
    recorder = _Recorder()
    queue: JobQueue[str] = JobQueue(recorder, workers=1, name="test-metrics")
    queue.start()
    queue.add("a")
    assert recorder.entered.wait(10)  # "a" runs, held
    for key in ("b", "c", "b", "a"):  # "b" once, "a" again after its run
        queue.add(key)
    assert (_sample("workqueue_depth", "test-metrics"), _sample("workqueue_adds_total", "test-metrics")) == (2, 4)
    recorder.release.set()
    queue.add("sentinel")
    wait_for("the sentinel handled", lambda: "sentinel" in recorder.handled)
    queue.stop()
    assert _sample("workqueue_depth", "test-metrics") == 0
    assert _sample("workqueue_queue_duration_seconds_count", "test-metrics") == 5  # a, b, c, a again, sentinel
    assert _sample("workqueue_work_duration_seconds_count", "test-metrics") == 5
