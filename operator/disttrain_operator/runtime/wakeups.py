"""Wake a job's reconcile at a given time, with nothing else happening: deadlines and TTLs on time.

One thread for all jobs, and no per-object timer (kopf's timers would put a finalizer on every job).
A later request for the same job replaces the earlier one.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable
from datetime import datetime

from disttrain_operator.core.types import JobKey
from disttrain_operator.runtime.workers import Workers

logger = logging.getLogger(__name__)


class Wakeups(Workers):
    def __init__(self, callback: Callable[[JobKey], None]) -> None:
        super().__init__("disttrain-wakeups")
        self._callback = callback
        self._heap: list[tuple[float, int, JobKey]] = []
        self._due: dict[JobKey, float] = {}
        self._counter = 0

    def schedule(self, key: JobKey, when: datetime) -> None:
        at = when.timestamp()
        with self._condition:
            if self._due.get(key) == at:
                return
            self._due[key] = at
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
                if self._due.get(key) != at:
                    heapq.heappop(self._heap)  # replaced or cancelled
                    continue
                delay = at - datetime.now().timestamp()
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
