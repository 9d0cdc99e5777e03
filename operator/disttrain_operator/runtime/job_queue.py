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
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from disttrain_operator.runtime.workers import Workers

logger = logging.getLogger(__name__)

Key = TypeVar("Key", bound=Hashable)


class JobQueue(Workers, Generic[Key]):
    def __init__(self, handle: Callable[[Key], None], workers: int, ready: threading.Event | None = None) -> None:
        """`ready`: threads handle nothing before it is set (each of the operator's watches listed once)."""
        super().__init__(*(f"disttrain-reconcile-{n}" for n in range(workers)))
        self._handle = handle
        self._ready = ready or threading.Event()
        if ready is None:
            self._ready.set()
        self._order: deque[Key] = deque()
        self._waiting: set[Key] = set()
        self._running: set[Key] = set()

    def stop(self) -> None:
        super().stop()
        self._ready.set()

    def add(self, key: Key) -> None:
        with self._condition:
            if key in self._waiting:
                return
            self._waiting.add(key)
            if key not in self._running:  # else queued when its running reconcile ends
                self._order.append(key)
                self._condition.notify()

    def _next(self) -> Key | None:
        with self._condition:
            while not self._order and not self._stopped:
                self._condition.wait()
            if self._stopped:
                return None
            key = self._order.popleft()
            self._waiting.discard(key)
            self._running.add(key)
            return key

    def _done(self, key: Key) -> None:
        with self._condition:
            self._running.discard(key)
            if key in self._waiting:
                self._order.append(key)
                self._condition.notify()

    def _work(self) -> None:
        self._ready.wait()
        while (key := self._next()) is not None:
            try:
                self._handle(key)
            except Exception:  # one job's failure must not end a thread that serves every job
                logger.exception("reconcile of %s failed", key)
            finally:
                self._done(key)
