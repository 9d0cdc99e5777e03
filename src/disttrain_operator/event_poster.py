"""The operator's Events, posted by a thread of their own: a reconcile hands an Event over and goes on.

Events are for people reading `kubectl describe`; a job's state lives in its status. So an Event
the API server does not take is logged and dropped, never retried, and when the API server falls
behind, at most `QUEUE_LIMIT` wait: the oldest go first. Each job has a budget, as client-go's
EventRecorder gives each object: `EVENT_BURST` Events, then one more every `EVENT_REFILL`; a job that
restarts without end (backoffLimit may be 2^31) cannot fill etcd with Events.
"""

from __future__ import annotations

import logging
import socket
from collections import OrderedDict, deque
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from disttrain_contract.timestamps import format_time
from disttrain_core.builders.events import event_manifest
from disttrain_core.types import Body, Manifest
from disttrain_kube.api_errors import RefusedError, TransientApiError
from disttrain_operator import metrics
from disttrain_operator.workers import Workers

logger = logging.getLogger(__name__)

QUEUE_LIMIT = 10_000
EVENT_BURST = 25
EVENT_REFILL = timedelta(minutes=5)
TRACKED_JOBS = 10_000  # jobs whose budget is remembered; the least recently heard of is forgotten first


class EventBudget:
    """Per job: `burst` Events at once, then one for each `refill` that passed (client-go's spam filter)."""

    def __init__(self, burst: int = EVENT_BURST, refill: timedelta = EVENT_REFILL, tracked: int = TRACKED_JOBS) -> None:
        self._burst, self._refill, self._tracked = burst, refill, tracked
        self._left: OrderedDict[str, tuple[float, datetime]] = OrderedDict()

    def take(self, uid: str, now: datetime) -> bool:
        """One Event of the job `uid` may be posted now."""
        left, since = self._left.pop(uid, (float(self._burst), now))
        left = min(float(self._burst), left + max((now - since) / self._refill, 0.0))
        allowed = left >= 1
        self._left[uid] = (left - 1 if allowed else left, now)
        while len(self._left) > self._tracked:
            self._left.popitem(last=False)
        return allowed


class EventApi(Protocol):
    def create(self, manifest: Manifest) -> bool: ...


class EventPoster(Workers):
    def __init__(
        self, kube: EventApi, clock: Callable[[], datetime], instance: str = "", limit: int = QUEUE_LIMIT
    ) -> None:
        """`instance`: the operator's pod (the host name) by default, as each Event's reportingInstance."""
        super().__init__("disttrain-events")
        self._kube = kube
        self._clock = clock
        self._instance = instance or socket.gethostname()
        self._waiting: deque[Manifest] = deque(maxlen=limit)
        self._budget = EventBudget()

    def __call__(self, body: Body, *, type: str, reason: str, message: str) -> None:
        """Queue an Event of the job `body`: the reconciler's `EventSink`."""
        now = self._clock()
        manifest = event_manifest(
            body, type=type, reason=reason, message=message, now=format_time(now), instance=self._instance
        )
        with self._condition:
            if not self._budget.take(str(body["metadata"]["uid"]), now):
                metrics.EVENTS_DROPPED.inc()
                logger.info(
                    "Event %s of %s not posted: the job's Event budget is spent",
                    reason,
                    manifest["involvedObject"]["name"],
                )
                return
            if len(self._waiting) == self._waiting.maxlen:
                logger.warning("too many Events waiting: the oldest, %s, is dropped", self._waiting[0]["reason"])
            self._waiting.append(manifest)
            self._condition.notify()

    def _next(self) -> Manifest | None:
        """The oldest Event waiting; None once stopped and none is left."""
        with self._condition:
            while not self._waiting and not self._stopped:
                self._condition.wait()
            return self._waiting.popleft() if self._waiting else None

    def _post(self, manifest: Manifest) -> None:
        try:
            self._kube.create(manifest)
        except (TransientApiError, RefusedError) as error:
            involved = manifest["involvedObject"]
            logger.warning("Event %s of %s not posted: %s", manifest["reason"], involved["name"], error)

    def _work(self) -> None:
        while (manifest := self._next()) is not None:
            self._post(manifest)
