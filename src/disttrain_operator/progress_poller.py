"""Poll each running job's reporting pod for the trainer's progress; one thread schedules, a pool asks.

The operator reads progress over the pod network, like a metrics scraper, so trainer pods need no API
access. A report arrives within an interval; a 204 (`NO_REPORT_YET`, the trainer before its first step)
and a report both count as the trainer's answer (`answered`), which progress deadlines need
(`disttrain_core.restarts.stalls`). A pod that does not answer in time (a user's own container, a dropped or
trickling poll) is polled less often (`MISSED_POLL_BACKOFF`), at least twice within its deadline.

The port is the tenant's: one poll has one deadline for all of it and a size bound, follows no
redirect, and a namespace holds at most `PER_NAMESPACE` of the pool's threads at once.
"""

from __future__ import annotations

import http.client
import io
import logging
import socket
import threading
import time
import urllib.parse
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from enum import Enum
from typing import Literal, NamedTuple

from disttrain_contract.progress import PROGRESS_PATH
from disttrain_core.api.spec import DistTrainJobSpec
from disttrain_core.backoff import Backoff
from disttrain_core.observed import PodPhase, PodView, find_pod
from disttrain_core.progress import Report, parse_report, reporting_task
from disttrain_core.types import JobKey
from disttrain_operator.workers import ended_threads

logger = logging.getLogger(__name__)

POLL_TIMEOUT_SECONDS = 2.0  # for the whole poll: connecting, asking and reading the answer
MAX_RESPONSE_BYTES = 65536  # of the body; its headers may take as much again
CONCURRENCY = 16
PER_NAMESPACE = 2  # polls of one namespace at once
# After n silent polls in a row a job waits this many intervals for its next: 1, 2, 4, then 6.
MISSED_POLL_BACKOFF = Backoff(first=1, longest=6)


class Target(NamedTuple):
    """A running job's progress URL, and its progress deadline, if it has one."""

    key: JobKey
    url: str
    deadline_seconds: float | None = None


class Unreported(Enum):
    NO_REPORT_YET = "no report yet"


NO_REPORT_YET = Unreported.NO_REPORT_YET  # the trainer answered 204: it serves the contract, with no step yet
Polled = Report | Literal[Unreported.NO_REPORT_YET] | None


def progress_url(spec: DistTrainJobSpec, pods: Sequence[PodView]) -> str | None:
    """Where the running job's progress is served; None while its reporting pod is not running with an IP."""
    pod = find_pod(pods, *reporting_task(spec))
    if pod is None or pod.phase is not PodPhase.RUNNING or pod.deleting or not pod.pod_ip:
        return None
    host = f"[{pod.pod_ip}]" if ":" in pod.pod_ip else pod.pod_ip
    return f"http://{host}:{spec.progress_port}{PROGRESS_PATH}"


class SilentTrainerError(Exception):
    """No whole HTTP answer on the progress port in time: refused, dropped, unreachable, or trickling."""


class _Received:
    """An answer already read, for http.client to parse (status, headers, a length or chunks)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def makefile(self, mode: str) -> io.BytesIO:
        return io.BytesIO(self._data)


def fetch_progress(url: str, timeout: float = POLL_TIMEOUT_SECONDS) -> Polled:
    """The trainer's latest report; NO_REPORT_YET for a 204 (its answer before its first report); None for any
    other answer (another status, a redirect, a body that is no report: not the trainer's contract);
    SilentTrainerError when no whole answer came within `timeout`.

    http.client's and urllib3's timeouts bound each socket read, not the exchange, so a trainer sending a
    byte a second held a poll as long as it liked: here the socket is read to a deadline and the answer
    parsed by http.client once read."""
    parts = urllib.parse.urlsplit(url)
    deadline = time.monotonic() + timeout
    request = f"GET {parts.path or '/'} HTTP/1.0\r\nHost: {parts.netloc}\r\nAccept: application/json\r\n\r\n"
    try:
        with socket.create_connection((parts.hostname or "", parts.port or 80), timeout=timeout) as connection:
            connection.sendall(request.encode())
            answer = _read_to_deadline(connection, deadline, 2 * MAX_RESPONSE_BYTES)
    except OSError as error:
        raise SilentTrainerError(url) from error
    try:
        response = http.client.HTTPResponse(_Received(answer))  # type: ignore[arg-type]
        response.begin()
        if response.status == http.client.NO_CONTENT:
            return NO_REPORT_YET
        body = response.read(MAX_RESPONSE_BYTES) if response.status == http.client.OK else b""
    except (http.client.HTTPException, ValueError):
        return None
    return parse_report(body.decode(errors="replace")) if body else None


def _read_to_deadline(connection: socket.socket, deadline: float, limit: int) -> bytes:
    """What the peer sends until it closes, or `limit` bytes; TimeoutError past the deadline."""
    received = bytearray()
    while len(received) < limit:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no whole answer in time")
        connection.settimeout(left)
        chunk = connection.recv(limit - len(received))
        if not chunk:
            break
        received += chunk
    return bytes(received)


class ProgressPoller:
    """Every `interval` seconds, poll every target that is due; a report that differs from the last one, and a
    job whose trainer answers after it did not, are passed on. A namespace's polls wait their turn in its own
    queue, at most `per_namespace` asked at once; a job still waiting or being asked is not queued again."""

    def __init__(
        self,
        targets: Callable[[], Iterable[Target]],
        on_report: Callable[[JobKey], None],
        interval: float,
        *,
        fetch: Callable[[str], Polled] = fetch_progress,
        concurrency: int = CONCURRENCY,
        per_namespace: int = PER_NAMESPACE,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC).replace(microsecond=0),
    ) -> None:
        self._targets = targets
        self._on_report = on_report
        self._interval = interval
        self._fetch = fetch
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="disttrain-progress")
        self._per_namespace = per_namespace
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Condition()
        self._latest: dict[JobKey, Report] = {}
        self._answered: dict[JobKey, datetime] = {}  # when its trainer last answered as the contract says
        self._answering: set[JobKey] = set()  # its last poll was so answered
        self._misses: dict[JobKey, int] = {}  # silent polls in a row
        self._due: dict[JobKey, float] = {}  # a job that stays silent is not polled before then
        # by namespace: (job, url, when queued, its progress deadline)
        self._waiting: dict[str, deque[tuple[JobKey, str, float, float | None]]] = {}
        self._asking: Counter[str] = Counter()  # polls in hand, by namespace
        self._queued: set[JobKey] = set()  # waiting or being asked
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="disttrain-progress-poller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def ended(self) -> list[str]:
        return ended_threads([self._thread], self._stop.is_set())

    def latest(self, key: JobKey) -> Report | None:
        with self._lock:
            return self._latest.get(key)

    def answered(self, key: JobKey) -> datetime | None:
        """When the job's trainer last answered a poll with a report or with NO_REPORT_YET."""
        with self._lock:
            return self._answered.get(key)

    def forget(self, key: JobKey) -> None:
        with self._lock:
            self._latest.pop(key, None)
            self._answered.pop(key, None)
            self._answering.discard(key)
            self._misses.pop(key, None)
            self._due.pop(key, None)

    def queue_due(self) -> None:
        """Queue every target that is due and not queued already, and start what each namespace may."""
        now = self._clock()
        with self._lock:
            for key, url, deadline in self._targets():
                if key in self._queued or self._due.get(key, now) > now:
                    continue
                self._queued.add(key)
                self._waiting.setdefault(key[0], deque()).append((key, url, now, deadline))
            for namespace in list(self._waiting):
                self._start(namespace)

    def poll_once(self, timeout: float = 4 * POLL_TIMEOUT_SECONDS) -> list[JobKey]:
        """Queue what is due and wait (at most `timeout`) for every poll to end; the jobs whose report changed,
        each already passed on."""
        with self._lock:
            before = dict(self._latest)
        self.queue_due()
        with self._lock:
            self._lock.wait_for(lambda: not self._queued, timeout=timeout)
            return [key for key, report in self._latest.items() if before.get(key) != report]

    def _start(self, namespace: str) -> None:
        """Hand the namespace's next polls to the pool, as far as its share allows; under the lock."""
        waiting = self._waiting.get(namespace)
        while waiting and self._asking[namespace] < self._per_namespace:
            key, url, queued_at, deadline = waiting.popleft()
            self._asking[namespace] += 1
            self._pool.submit(self._poll, key, url, queued_at, deadline)
        if not waiting:
            self._waiting.pop(namespace, None)

    def _poll(self, key: JobKey, url: str, queued_at: float, deadline: float | None) -> None:
        polled, silent = self._ask(url)
        report = polled if isinstance(polled, Report) else None
        with self._lock:
            self._back_off(key, queued_at, deadline, silent=silent)
            changed = report is not None and report != self._latest.get(key)
            if changed and report is not None:
                self._latest[key] = report
            if polled is None:
                self._answering.discard(key)
            else:
                self._answered[key] = self._wall_clock()
                changed = changed or key not in self._answering
                self._answering.add(key)
        if changed:
            try:
                self._on_report(key)
            except Exception:  # one job's failed reconcile must not stop the polling of every other job
                logger.exception("progress update of %s failed", key)
        with self._lock:
            self._asking[key[0]] -= 1
            if not self._asking[key[0]]:
                del self._asking[key[0]]
            self._queued.discard(key)
            self._start(key[0])
            self._lock.notify_all()

    def _ask(self, url: str) -> tuple[Polled, bool]:
        """What the poll heard, and whether the trainer was silent."""
        try:
            return self._fetch(url), False
        except SilentTrainerError:
            return None, True
        except Exception:  # a bug: this job's poll is lost, never the pool's thread or its namespace's share
            logger.exception("polling %s failed", url)
            return None, False

    def _back_off(self, key: JobKey, now: float, deadline: float | None, *, silent: bool) -> None:
        """After silent polls, wait longer for the next, but never so long that a deadline's span holds fewer
        than two polls: a trainer slow to answer must not be judged on what the poller did not ask."""
        if not silent:
            self._misses.pop(key, None)
            self._due.pop(key, None)
            return
        misses = self._misses[key] = self._misses.get(key, 0) + 1
        intervals = MISSED_POLL_BACKOFF.delay(misses)
        if deadline is not None:
            intervals = max(1, min(intervals, int(deadline / (2 * self._interval))))
        self._due[key] = now + (intervals - 0.5) * self._interval  # due at the tick `intervals` from now

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.queue_due()
            except Exception:
                logger.exception("progress poll failed")
