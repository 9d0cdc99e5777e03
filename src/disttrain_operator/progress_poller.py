"""Poll each running job's reporting pod for the trainer's progress; one thread for all jobs.

The operator reads progress over the pod network, like a metrics scraper, so trainer pods need no
API access. A poll without a report is skipped quietly: the final report still arrives through the
pod's termination message. A trainer that answers without a report (204: the reporting task serves
from before TensorFlow loads, and answers so until its first report) is asked again at the next
interval, so its first report reaches the status within one interval. A pod that does not answer (a
refused connection: no server there, as in a user's own container; a NetworkPolicy dropping the
poll; an unreachable address) is polled less often (`MISSED_POLL_BACKOFF`), so that thousands of such
jobs cost a poll each a minute rather than every interval, and polls that time out cannot fill every
interval.
"""

from __future__ import annotations

import http.client
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from disttrain_contract.progress import PROGRESS_PATH
from disttrain_core.api.spec import DistTrainJobSpec
from disttrain_core.api.status import Progress
from disttrain_core.backoff import Backoff
from disttrain_core.observed import PodPhase, PodView, find_pod
from disttrain_core.progress import parse_progress, reporting_task
from disttrain_core.types import JobKey
from disttrain_operator.workers import ended_threads

logger = logging.getLogger(__name__)

POLL_TIMEOUT_SECONDS = 2.0
MAX_RESPONSE_BYTES = 65536
# After n silent polls in a row a job waits this many intervals for its next: 1, 2, 4, then 6.
MISSED_POLL_BACKOFF = Backoff(first=1, longest=6)


def progress_url(spec: DistTrainJobSpec, pods: Sequence[PodView]) -> str | None:
    """Where the running job's progress is served; None while its reporting pod is not running with an IP."""
    pod = find_pod(pods, *reporting_task(spec))
    if pod is None or pod.phase is not PodPhase.RUNNING or pod.deleting or not pod.pod_ip:
        return None
    host = f"[{pod.pod_ip}]" if ":" in pod.pod_ip else pod.pod_ip
    return f"http://{host}:{spec.progress_port}{PROGRESS_PATH}"


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # pod IPs are never behind a proxy


class SilentTrainerError(Exception):
    """No HTTP answer on the progress port: refused, dropped until the timeout, or unreachable."""


def fetch_progress(url: str, timeout: float = POLL_TIMEOUT_SECONDS) -> Progress | None:
    """The trainer's latest report; None when it answered without one (204 before its first, a status or a
    body that is no report); SilentTrainerError when nothing answered."""
    try:
        with _DIRECT.open(url, timeout=timeout) as response:
            return parse_progress(response.read(MAX_RESPONSE_BYTES).decode(errors="replace"))
    except (urllib.error.HTTPError, http.client.HTTPException, ValueError):  # an answer, if not a report
        return None
    except OSError as error:
        raise SilentTrainerError(url) from error


class ProgressPoller:
    """Every `interval` seconds, poll every target; a report that differs from the last one is passed on."""

    def __init__(
        self,
        targets: Callable[[], Iterable[tuple[JobKey, str]]],
        on_report: Callable[[JobKey], None],
        interval: float,
        *,
        fetch: Callable[[str], Progress | None] = fetch_progress,
        concurrency: int = 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._targets = targets
        self._on_report = on_report
        self._interval = interval
        self._fetch = fetch
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="disttrain-progress")
        self._clock = clock
        self._latest: dict[JobKey, Progress] = {}
        self._misses: dict[JobKey, int] = {}  # silent polls in a row
        self._due: dict[JobKey, float] = {}  # a job that stays silent is not polled before then
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="disttrain-progress-poller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def ended(self) -> list[str]:
        return ended_threads([self._thread], self._stop.is_set())

    def latest(self, key: JobKey) -> Progress | None:
        return self._latest.get(key)

    def forget(self, key: JobKey) -> None:
        self._latest.pop(key, None)
        self._misses.pop(key, None)
        self._due.pop(key, None)

    def poll_once(self) -> list[JobKey]:
        """Poll every target that is due; returns the jobs with a new report (each already passed on)."""
        now = self._clock()
        targets = [(key, url) for key, url in self._targets() if self._due.get(key, now) <= now]
        answers = self._pool.map(self._ask, [url for _, url in targets])
        changed: list[JobKey] = []
        for (key, _), (report, silent) in zip(targets, answers, strict=True):
            self._back_off(key, now, silent=silent)
            if report is not None and report != self._latest.get(key):
                self._latest[key] = report
                changed.append(key)
        for key in changed:
            try:
                self._on_report(key)
            except Exception:  # one job's failed reconcile must not stop the polling of every other job
                logger.exception("progress update of %s failed", key)
        return changed

    def _ask(self, url: str) -> tuple[Progress | None, bool]:
        """The report, if any, and whether the trainer was silent."""
        try:
            return self._fetch(url), False
        except SilentTrainerError:
            return None, True

    def _back_off(self, key: JobKey, now: float, *, silent: bool) -> None:
        if not silent:
            self._misses.pop(key, None)
            self._due.pop(key, None)
            return
        misses = self._misses[key] = self._misses.get(key, 0) + 1
        intervals = MISSED_POLL_BACKOFF.delay(misses)
        self._due[key] = now + (intervals - 0.5) * self._interval  # due at the tick `intervals` from now

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.poll_once()
            except Exception:
                logger.exception("progress poll failed")
