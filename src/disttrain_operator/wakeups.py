"""Wake a job's reconcile at a given time, with nothing else happening: deadlines and TTLs on time.

One thread for all jobs, and no per-object timer (kopf's timers would put a finalizer on every job).
A later request for the same job replaces the earlier one. The wait runs on the monotonic clock: a
wall clock stepped by NTP neither fires a deadline early nor holds it back.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable
from datetime import datetime

from disttrain_core.types import JobKey
from disttrain_operator.workers import Workers

logger = logging.getLogger(__name__)


class Wakeups(Workers):
    def __init__(
        self,
        callback: Callable[[JobKey], None],
        *,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__("disttrain-wakeups")
        self._callback = callback
        self._wall = wall
        self._monotonic = monotonic
        self._heap: list[tuple[float, int, JobKey]] = []  # (monotonic due time, order, job)
        self._due: dict[JobKey, tuple[float, float]] = {}  # job -> (the time asked for, its monotonic due time)
        self._counter = 0

    def schedule(self, key: JobKey, when: datetime) -> None:
        """Wake `key` at `when`, a wall-clock time turned into the monotonic clock's once, here."""
        asked = when.timestamp()
        with self._condition:
            if key in self._due and self._due[key][0] == asked:
                return
            at = self._monotonic() + (asked - self._wall())
            self._due[key] = (asked, at)
            self._counter += 1
            heapq.heappush(self._heap, (at, self._counter, key))
            self._condition.notify()

    def cancel(self, key: JobKey) -> None:
        with self._condition:
            self._due.pop(key, None)

    def _next_due(self) -> JobKey | None:
        """Wait for the earliest live entry to come due; None when stopped."""
        with self._condition:
            while not self._stopped:
                if not self._heap:
                    self._condition.wait()
                    continue
                at, _, key = self._heap[0]
                if key not in self._due or self._due[key][1] != at:
                    heapq.heappop(self._heap)  # replaced or cancelled
                    continue
                delay = at - self._monotonic()
                if delay > 0:
                    self._condition.wait(timeout=delay)
                    continue
                heapq.heappop(self._heap)
                del self._due[key]
                return key
            return None

    def _work(self) -> None:
        while (key := self._next_due()) is not None:
            try:
                self._callback(key)
            except Exception:  # a failed wake-up must not end the thread that serves every job
                logger.exception("wake-up of %s failed", key)
