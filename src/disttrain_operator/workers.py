"""Daemon threads that sleep on one condition until there is work or they are stopped: the shape of
the job queue, the wake-ups and the Event poster; `repeat` is the loop of those that work every so
many seconds (the kept-log sweeper, the claim checker)."""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable

from disttrain_kube.api_errors import TransientApiError
from disttrain_operator import metrics

logger = logging.getLogger(__name__)


def ended_threads(threads: Iterable[threading.Thread], stopped: bool) -> list[str]:
    """The names of the threads that ended though no one stopped them: a part of the operator that no
    longer works, which the liveness probe reports."""
    return [] if stopped else [thread.name for thread in threads if thread.ident is not None and not thread.is_alive()]


class Workers(ABC):
    def __init__(self, *names: str) -> None:
        self._condition = threading.Condition()
        self._stopped = False
        self._threads = [threading.Thread(target=self._work, name=name, daemon=True) for name in names]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Wake every thread: each ends once it sees `_stopped`."""
        with self._condition:
            self._stopped = True
            self._condition.notify_all()

    def ended(self) -> list[str]:
        return ended_threads(self._threads, self._stopped)

    def join(self, timeout: float | None = None) -> None:
        """After `stop`: wait for the threads to end."""
        for thread in self._threads:
            thread.join(timeout)

    @abstractmethod
    def _work(self) -> None:
        """A thread's loop; it returns once `_stopped` is set."""

    def repeat(self, action: Callable[[], None], interval: float, part: str) -> None:
        """`action` every `interval` seconds until stopped. An API error waits for the next time; so does a
        bug, with its traceback logged and counted, for the thread must outlive it."""
        while True:
            try:
                action()
            except TransientApiError as error:
                logger.info("%s: %s", part, error)
            except Exception:
                metrics.ITEM_ERRORS.labels(part).inc()
                logger.exception("%s failed", part)
            with self._condition:
                if not self._stopped:
                    self._condition.wait(timeout=interval)
                if self._stopped:
                    return
