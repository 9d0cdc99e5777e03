"""The jobs due a reconcile, handled by a few threads: each job once however often it was asked for.

Every trigger (a job's event, any of its pods' events, a wake-up, a progress report) only names the
job. A job asked for while it waits is not queued twice, and one asked for while a thread
reconciles it is queued again once that reconcile ends, so no job is reconciled by two threads at
once and the reconcile that follows reads the newest state. A burst of a job's pod events costs one
or two reconciles rather than one each, and memory holds at most one entry per job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from disttrain_operator import metrics
from disttrain_operator.workers import Workers

logger = logging.getLogger(__name__)

Key = TypeVar("Key", bound=Hashable)


class JobQueue(Workers, Generic[Key]):
    def __init__(
        self,
        handle: Callable[[Key], None],
        workers: int,
        ready: threading.Event | None = None,
        name: str = metrics.CONTROLLER,
    ) -> None:
        """`ready`: threads handle nothing before it is set (each of the operator's watches listed once).
        `name`: the queue's label on its metrics."""
        super().__init__(*(f"disttrain-reconcile-{n}" for n in range(workers)))
        self._handle = handle
        self._ready = ready or threading.Event()
        if ready is None:
            self._ready.set()
        self._order: deque[Key] = deque()
        self._waiting: set[Key] = set()
        self._running: set[Key] = set()
        self._since: dict[Key, float] = {}  # when each waiting job was named
        self._depth = metrics.QUEUE_DEPTH.labels(name)
        self._adds = metrics.QUEUE_ADDS.labels(name)
        self._wait = metrics.QUEUE_WAIT.labels(name)
        self._work_time = metrics.QUEUE_WORK.labels(name)
        self._active = metrics.ACTIVE_WORKERS.labels(name)
        metrics.MAX_WORKERS.labels(name).set(workers)

    def stop(self) -> None:
        super().stop()
        self._ready.set()

    def depth(self) -> int:
        """Jobs waiting for a thread."""
        with self._condition:
            return len(self._order)

    def add(self, key: Key) -> None:
        with self._condition:
            if key in self._waiting:
                return
            self._waiting.add(key)
            self._since[key] = time.monotonic()
            self._adds.inc()
            if key not in self._running:  # else queued when its running reconcile ends
                self._order.append(key)
                self._depth.set(len(self._order))
                self._condition.notify()

    def _next(self) -> Key | None:
        with self._condition:
            while not self._order and not self._stopped:
                self._condition.wait()
            if self._stopped:
                return None
            key = self._order.popleft()
            self._depth.set(len(self._order))
            self._waiting.discard(key)
            self._wait.observe(time.monotonic() - self._since.pop(key))
            self._running.add(key)
            return key

    def _done(self, key: Key) -> None:
        with self._condition:
            self._running.discard(key)
            if key in self._waiting:
                self._order.append(key)
                self._depth.set(len(self._order))
                self._condition.notify()

    def _work(self) -> None:
        self._ready.wait()
        while (key := self._next()) is not None:
            started = time.monotonic()
            self._active.inc()
            try:
                self._handle(key)
            except Exception:  # one job's failure must not end a thread that serves every job
                logger.exception("reconcile of %s failed", key)
            finally:
                self._active.dec()
                self._work_time.observe(time.monotonic() - started)
                self._done(key)
