"""What a failed reconcile means. Only API and network errors are transient: the job is simply tried
again soon. Anything else is a bug: logged with its traceback, counted in
`disttrain_reconcile_errors_total` by error, retried with a growing delay, and from the third failure in a row
shown on the job as a Warning Event, so its owner sees that the operator is stuck on it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from disttrain_core.backoff import Backoff
from disttrain_core.types import JobKey
from disttrain_kube.api_errors import TransientApiError
from disttrain_operator import metrics

logger = logging.getLogger(__name__)

TRANSIENT_RETRY = timedelta(seconds=5)
ERROR_BACKOFF = Backoff(first=5, longest=300)  # seconds
SURFACE_AFTER = 3  # failures in a row before the job gets a Warning Event

Schedule = Callable[[JobKey, datetime], None]
Surface = Callable[[str], None]  # posts a Warning Event on the job with this message


class ReconcileRetry:
    def __init__(self, schedule: Schedule, clock: Callable[[], datetime]) -> None:
        self._schedule = schedule
        self._clock = clock
        self._errors: dict[JobKey, int] = {}  # per job: failures in a row that were not API errors

    def run(self, key: JobKey, reconcile: Callable[[], None], surface: Surface) -> None:
        """Run one job's reconcile, timed and counted, and schedule its retry if it failed; never raises."""
        try:
            with metrics.RECONCILE_TIME.labels(metrics.CONTROLLER).time():
                reconcile()
        except TransientApiError as error:
            logger.warning("reconcile of %s/%s failed, retrying in %d s: %s", *key, TRANSIENT_RETRY.seconds, error)
            self._retry(key, TRANSIENT_RETRY)
            return
        except Exception as error:
            self._failed(key, error, surface)
            return
        metrics.RECONCILES.labels(metrics.CONTROLLER, "success").inc()
        self._errors.pop(key, None)

    def _retry(self, key: JobKey, delay: timedelta) -> None:
        metrics.RECONCILES.labels(metrics.CONTROLLER, "error").inc()
        metrics.RECONCILE_FAILURES.labels(metrics.CONTROLLER).inc()
        metrics.QUEUE_RETRIES.labels(metrics.CONTROLLER).inc()
        self._schedule(key, self._clock() + delay)

    def forget(self, key: JobKey) -> None:
        self._errors.pop(key, None)

    def _failed(self, key: JobKey, error: Exception, surface: Surface) -> None:
        count = self._errors[key] = self._errors.get(key, 0) + 1
        delay = timedelta(seconds=ERROR_BACKOFF.delay(count))
        metrics.RECONCILE_ERRORS.labels(type(error).__name__).inc()
        logger.exception("reconcile of %s/%s failed (%d in a row), retrying in %d s", *key, count, delay.seconds)
        if count == SURFACE_AFTER:
            surface(
                f"the operator failed {count} times in a row on this job: {type(error).__name__}: {error}; "
                f"it keeps retrying, every {ERROR_BACKOFF.longest / 60:.0f} min at most; its log has the traceback"
            )
        self._retry(key, delay)
