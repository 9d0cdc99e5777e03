"""The jobs the dashboard shows, kept current by one watch per kind of job and shared by every open page.

A page never polls: it gets the jobs as they are from `snapshot`, then each change through a queue of
its own (`subscribe`). A watch the viewer may not make (forbidden) is a `problem` the pages show in
words; a kind the cluster does not serve (TFJobs without their CRD) simply has no jobs. Both are tried
again later, since rights and CRDs change. A job is kept, and given to pages, as `held_job` holds it: without its
pod templates past 64 KiB, which no list page reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from dataclasses import dataclass

from disttrain import Client, DisttrainError, DistTrainJob, JobNotFoundError
from disttrain.job_kinds import JobKind
from disttrain_core.held import held_job

log = logging.getLogger(__name__)

RETRY_SECONDS = 30.0
QUEUE_LIMIT = 256  # changes a page may lag behind before its stream is ended
KINDS: tuple[JobKind, ...] = ("DistTrainJob", "TFJob")
# Every feed lists its jobs on its own, and a tenant's job may be 20 MiB parsed: the feeds read LISTING_PAGE jobs
# a page, and one page at a time between them.
LISTING_PAGE = 5
LISTINGS = threading.BoundedSemaphore(1)


@dataclass(frozen=True)
class Change:
    type: str  # ADDED, MODIFIED or DELETED
    job: DistTrainJob


def job_key(job: DistTrainJob) -> tuple[str, str, str]:
    return job.kind, job.metadata.namespace, job.metadata.name


class JobFeed:
    """Every job of the dashboard's scope (one namespace, or all) as the API server has it now."""

    def __init__(self, client: Client, namespace: str | None, kinds: tuple[JobKind, ...] = KINDS) -> None:
        self.client = client
        self.namespace = namespace  # None: every namespace
        self.kinds = kinds
        self._jobs: dict[tuple[str, str, str], DistTrainJob] = {}
        self._problems: dict[str, str] = {}
        self._listed: set[str] = set()
        self._lock = threading.Lock()
        self._subscribers: set[asyncio.Queue[Change | None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = threading.Event()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        for kind in self.kinds:
            threading.Thread(target=self._follow, args=(kind,), name=f"feed-{kind}", daemon=True).start()

    def stop(self) -> None:
        self._stopping.set()

    def snapshot(self) -> list[DistTrainJob]:
        with self._lock:
            return list(self._jobs.values())

    def problems(self) -> dict[str, str]:
        """Why a kind of job is not shown, by kind."""
        with self._lock:
            return dict(self._problems)

    def wait_listed(self, seconds: float) -> bool:
        """Wait up to `seconds` for every kind to be listed or refused, so that a page drawn now shows the
        cluster rather than "Listing jobs"; whether it was."""
        deadline = time.monotonic() + seconds
        while not self.listed() and time.monotonic() < deadline:
            self._stopping.wait(0.05)
        return self.listed()

    def listed(self) -> bool:
        """Every kind has been listed once (or is not served, or has a problem): the snapshot is the cluster's."""
        with self._lock:
            return all(kind in self._listed or kind in self._problems for kind in self.kinds)

    def subscribe(self) -> asyncio.Queue[Change | None]:
        """A page's changes; None in it means the page fell `QUEUE_LIMIT` behind and its stream must end (its
        EventSource reconnects and starts again from a snapshot)."""
        queue: asyncio.Queue[Change | None] = asyncio.Queue(maxsize=QUEUE_LIMIT + 1)
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Change | None]) -> None:
        self._subscribers.discard(queue)

    def _offer(self, queue: asyncio.Queue[Change | None], change: Change) -> None:
        """In the event loop: the change to one page, or the end of a page that is too far behind."""
        if queue not in self._subscribers:
            return
        if queue.qsize() < QUEUE_LIMIT:
            queue.put_nowait(change)
            return
        self._subscribers.discard(queue)
        queue.put_nowait(None)

    def _follow(self, kind: JobKind) -> None:
        """Watch one kind for as long as the dashboard runs; a refusal is recorded and tried again later."""
        while not self._stopping.is_set():
            try:
                for event in self.client.watch(
                    namespace=self.namespace,
                    all_namespaces=self.namespace is None,
                    kind=kind,
                    stop=self._stopping,
                    on_listed=lambda: self._listed_kind(kind),
                    page=LISTING_PAGE,
                    listing_gate=LISTINGS,
                ):
                    self._apply(kind, Change(event.type, held_job(event.job)))
                    if self._stopping.is_set():
                        return
            except JobNotFoundError:  # the cluster serves no such kind (TFJobs without their CRD): none to show
                self._listed_kind(kind)
                self._stopping.wait(RETRY_SECONDS)
            except DisttrainError as error:
                self._refused(kind, error)
                self._stopping.wait(RETRY_SECONDS)

    def _apply(self, kind: str, change: Change) -> None:
        with self._lock:
            self._problems.pop(kind, None)
            self._listed.add(kind)
            if change.type == "DELETED":
                self._jobs.pop(job_key(change.job), None)
            else:
                self._jobs[job_key(change.job)] = change.job
        self._publish(change)

    def _listed_kind(self, kind: str) -> None:
        """Listed: the kind has no job here (or, the cluster serves none), or every one it has was given."""
        with self._lock:
            self._problems.pop(kind, None)
            self._listed.add(kind)

    def _refused(self, kind: str, error: DisttrainError) -> None:
        where = f"namespace {self.namespace}" if self.namespace else "every namespace"
        with self._lock:
            self._problems[kind] = f"{kind}s in {where} cannot be shown: {error}"
            for key in [key for key in self._jobs if key[0] == kind]:
                del self._jobs[key]
        log.warning("watching %ss: %s", kind, error)

    def _publish(self, change: Change) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        for queue in list(self._subscribers):
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the dashboard is stopping
                loop.call_soon_threadsafe(self._offer, queue, change)
