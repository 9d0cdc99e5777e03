"""Keeps each attempt's log (`disttrain_core.kept_logs` says what and why) on threads of its own, so a node slow to
send a log never holds a reconcile. A pod that ended is kept at once and its job woken (the planner
deletes no such pod before its log is kept or given up); a pod deleted while it runs is followed until its
container ends, and kept as the watch then shows it (how it ended). Follows wait on their sockets as long
as a container takes to stop, so they have threads of their own (`MAX_FOLLOWS`, at most
`MAX_FOLLOWS_PER_NAMESPACE` for one tenant), and pods that ended always have threads besides. A log that
cannot be read is given up (at once for an API answer, after `KEEP_TRIES` otherwise), and shows as a gap
in its replica's attempts; an error on one pod is logged, counted and retried, never the end of a thread
that serves every namespace. docs/architecture.md#logs-that-outlive-pods says why there is no finalizer."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from disttrain_core import kept_logs
from disttrain_core.api.status import MAX_UNKEPT_LOGS, UnkeptLogs
from disttrain_core.backoff import Backoff
from disttrain_core.restarts.in_place import run_key
from disttrain_core.types import Body, JobKey, Manifest
from disttrain_kube.api_errors import LogUnreadableError, RefusedError, TransientApiError
from disttrain_kube.rest import POD_PATH
from disttrain_operator import metrics
from disttrain_operator.watch import WatchScope
from disttrain_operator.workers import Workers

logger = logging.getLogger(__name__)

KEEP_TRIES = 5
RETRY_SECONDS = 5.0
ERROR_BACKOFF_FACTOR = 60  # a pod failing on a bug is retried at most every 60 retry periods
MAX_FOLLOWS = 32
MAX_FOLLOWS_PER_NAMESPACE = 16
THREADS = MAX_FOLLOWS + 2  # the 2 besides keep the logs of pods that ended, which restarts wait for
END_SECONDS = 10.0  # how long a followed log, once its stream ended, waits for its pod to show how it ended
# A follow's bounds: a tenant's pod may stop slowly (a grace period of its own choosing) or print without end.
# Past either, what was read is kept, and the follow's thread serves others.
FOLLOW_SECONDS = 300.0
FOLLOW_BYTES = 256 * 1024 * 1024


class LogApi(Protocol):
    def read(self, path: str, params: dict[str, str]) -> dict[str, Any] | None: ...
    def pod_log_chunks(
        self,
        namespace: str,
        name: str,
        container: str,
        *,
        follow: bool = False,
        query: dict[str, str] | None = None,
        read_timeout: float | None = None,
    ) -> Iterator[bytes]: ...
    def create(self, manifest: Manifest) -> bool: ...
    def patch_pod(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> bool: ...
    def list_metadata(self, path: str, query: dict[str, str]) -> Iterable[dict[str, Any]]: ...
    def delete_object(self, manifest: Mapping[str, Any]) -> bool: ...


@dataclass
class _Task:
    namespace: str
    name: str
    uid: str  # the pod's, or for a run that ended in place its key (`in_place.run_key`)
    job: JobKey
    body: Body | None = None  # the pod as the watch last saw it, for the first try; a retry reads it afresh
    follow: bool = False  # deleted while it may still run: its log is read to its end
    live: bool = False  # offered once every watch had listed: seen ending, or being deleted, as it happened
    pod_uid: str = ""
    run: int | None = None  # the run whose log is kept, one the pod restarted in place after
    tries: int = 0
    errors: int = 0  # failures that were no API error, in a row
    given_up: bool = False
    due: float = 0.0


def _due_index(retries: deque[_Task], due: float) -> int:
    """Where a retry due at `due` goes in `retries`, which stays in the order its tasks come due."""
    return next((index for index, task in enumerate(retries) if task.due > due), len(retries))


def precise_now() -> datetime:
    return datetime.now(UTC)


class KeptLogKeeper(Workers):
    def __init__(
        self,
        kube: LogApi,
        job_uids: Callable[[JobKey], set[str]],
        *,
        wake: Callable[[JobKey], None] = lambda key: None,
        clock: Callable[[], datetime] = precise_now,
        threads: int = THREADS,
        max_follows: int = MAX_FOLLOWS,
        max_follows_per_namespace: int = MAX_FOLLOWS_PER_NAMESPACE,
        ready: threading.Event | None = None,
        retry_seconds: float = RETRY_SECONDS,
        end_seconds: float = END_SECONDS,
        follow_seconds: float = FOLLOW_SECONDS,
    ) -> None:
        """`job_uids`: the uids of the jobs of a key that exist now; `wake`: asks for a job's reconcile once one
        of its pods' logs is done with; `clock`: with microseconds, as it orders the attempts of a replica, which
        can end within one second."""
        super().__init__(*(f"disttrain-logs-{n}" for n in range(threads)))
        self._kube = kube
        self._job_uids = job_uids
        self._wake = wake
        self._clock = clock
        self._max_follows = max(1, min(max_follows, threads - 1))  # one thread: it follows too
        self._ready = ready or threading.Event()
        if ready is None:
            self._ready.set()
        self._retry_seconds = retry_seconds
        self._error_backoff = Backoff(first=retry_seconds, longest=ERROR_BACKOFF_FACTOR * retry_seconds)
        self._fresh: deque[_Task] = deque()
        self._retries: deque[_Task] = deque()  # in the order they come due
        self._pending: set[str] = set()  # uids queued or in hand
        self._following: Counter[str] = Counter()  # follows in hand, by namespace
        self._max_follows_per_namespace = max_follows_per_namespace
        self._contending: set[str] = set()  # namespaces that hold a follow or wait for one, as `_next` last saw
        self._follow_seconds = follow_seconds
        self._done: set[str] = set()  # uids of pods whose log is kept or given up, until the pod is gone
        self._runs: dict[str, set[str]] = {}  # by the pod's uid, the keys of its runs in `_done` or in hand
        self._unkept: dict[str, list[UnkeptLogs]] = {}  # by the job's uid
        self._end_seconds = end_seconds
        self._endings = threading.Condition()  # its own: a follow waiting on it takes no wakeup meant for a task
        self._ends: dict[str, Body | None] = {}  # by uid, of pods in hand: the pod once it ended, or None: gone

    def stop(self) -> None:
        super().stop()
        self._ready.set()
        with self._endings:
            self._endings.notify_all()

    def offer(
        self, job: JobKey, namespace: str, name: str, uid: str, body: Body | None = None, *, run: int | None = None
    ) -> bool:
        """A pod whose log is due (`PodView.log_due`), or whose `run` ended and restarted in place
        (`PodView.run_log_due`), as the watch saw it; a pod (or run) offered again while in hand, or once
        done with, is not queued again. True when it is queued now: its job is woken once it is done with."""
        key = uid if run is None else run_key(uid, run)
        with self._condition:
            if run is None and uid in self._pending and body is not None and kept_logs.container_ended(body):
                self._ended(uid, body)
            if key in self._pending or key in self._done:
                return False
            self._pending.add(key)
            if run is not None:
                self._runs.setdefault(uid, set()).add(key)
            follow = run is None and body is not None and kept_logs.to_follow(body)
            live = self._ready.is_set()
            self._fresh.append(_Task(namespace, name, key, job, body, follow, live=live, pod_uid=uid, run=run))
            self._condition.notify()
            return True

    def log_done(self, uid: str) -> bool:
        """The pod's log is kept, or given up: the pod may go."""
        with self._condition:
            return uid in self._done

    def forget(self, uid: str) -> None:
        """The pod is gone."""
        with self._condition:
            self._done.discard(uid)
            self._done.difference_update(self._runs.pop(uid, ()))
            if uid in self._pending:
                self._ended(uid, None)

    def _ended(self, uid: str, pod: Body | None) -> None:
        """News of a pod in hand: it ended (`pod`), or it is gone, which tells no more than an end seen before."""
        with self._endings:
            if pod is not None or uid not in self._ends:
                self._ends[uid] = pod
            self._endings.notify_all()

    def _how_it_ended(self, pod: Body, task: _Task) -> Body:
        """The followed pod as it ended: its log's stream ends a moment before its node reports how its
        container ended, which the watch then offers. A pod gone without saying stays as it was last seen; one
        the watch says nothing of within `end_seconds` is read again, as it may have ended unseen."""
        with self._endings:
            self._endings.wait_for(lambda: task.uid in self._ends or self._stopped, timeout=self._end_seconds)
            if task.uid in self._ends:  # as it ended, or gone
                return self._ends[task.uid] or pod
        read = self._kube.read(POD_PATH, {"namespace": task.namespace, "name": task.name})
        return read if read is not None and read["metadata"].get("uid") == task.uid else pod

    def unkept(self, job_uid: str) -> list[UnkeptLogs]:
        """The runs of attempts of the job found without a kept log, oldest first."""
        with self._condition:
            return list(self._unkept.get(job_uid, ()))

    def forget_job(self, job_uid: str) -> None:
        with self._condition:
            self._unkept.pop(job_uid, None)

    def _take(self, tasks: deque[_Task], due: float | None = None) -> _Task | None:
        """The first task (due by `due`) that a thread may take: a follow only while the keeper, and the pod's
        namespace, hold fewer than their most."""
        for index, task in enumerate(tasks):
            if due is not None and task.due > due:
                return None
            if not task.follow or self._may_follow(task.namespace):
                del tasks[index]
                if task.follow:
                    self._following[task.namespace] += 1
                return task
        return None

    def _may_follow(self, namespace: str) -> bool:
        """While the follows are not all taken, and the namespace holds fewer than its share: the keeper's follows
        split evenly between the namespaces that hold or wait for one, at most `max_follows_per_namespace`
        each. A follow lasts at most FOLLOW_SECONDS, so a namespace over its share gives way within that."""
        share = max(1, self._max_follows // max(1, len(self._contending)))
        in_namespace = self._following[namespace]
        return self._following.total() < self._max_follows and in_namespace < min(
            share, self._max_follows_per_namespace
        )

    def _next(self) -> _Task | None:
        with self._condition:
            while not self._stopped:
                now = time.monotonic()
                self._contending = set(self._following) | {
                    task.namespace for queue in (self._fresh, self._retries) for task in queue if task.follow
                }
                task = self._take(self._fresh) or self._take(self._retries, due=now)
                if task is not None:
                    return task
                later = [t.due for t in self._retries if t.due > now]
                self._condition.wait(timeout=min(later) - now if later else None)
            return None

    def _work(self) -> None:
        self._ready.wait()
        while (task := self._next()) is not None:
            delay = self._retry_seconds
            try:
                done = self._keep(task)
            except TransientApiError as error:
                logger.info("keeping the log of %s/%s: %s; trying again", task.namespace, task.name, error)
                done = False
            except Exception:
                done = False
                delay = self._failed(task)
            with self._condition:
                if task.follow:
                    self._following[task.namespace] -= 1
                    if not self._following[task.namespace]:
                        del self._following[task.namespace]
                if done:
                    self._pending.discard(task.uid)
                    if task.run is None or task.uid in self._runs.get(task.pod_uid, ()):  # not gone meanwhile
                        self._done.add(task.uid)
                    with self._endings:
                        self._ends.pop(task.uid, None)
                else:
                    task.due = time.monotonic() + delay
                    self._retries.insert(_due_index(self._retries, task.due), task)
                self._condition.notify()  # a follow's thread is free again
            if done:
                self._wake(task.job)

    def _failed(self, task: _Task) -> float:
        """A bug on one pod: logged and counted; after KEEP_TRIES its log is given up so that the pod is let go."""
        task.errors += 1
        task.given_up = task.given_up or task.errors >= KEEP_TRIES
        metrics.ITEM_ERRORS.labels("log-keeper").inc()
        logger.exception("keeping the log of %s/%s failed (%d in a row)", task.namespace, task.name, task.errors)
        return self._error_backoff.delay(task.errors)

    def _keep(self, task: _Task) -> bool:
        """Keep the pod's log, and let go a pod an earlier version holds; False when its release is worth another
        try, and TransientApiError when keeping the log is."""
        pod = task.body or self._kube.read(POD_PATH, {"namespace": task.namespace, "name": task.name})
        task.body = None  # a retry starts from the pod as it is then: the release below tests uid and finalizers
        if pod is None or pod["metadata"].get("uid") != (task.pod_uid or task.uid):
            return True  # gone (a gap its replica's next kept log shows), or replaced
        if task.run is not None:  # kept while the kubelet keeps it: the log of the run before the current one
            if kept_logs.previous_run_due(pod) == task.run and not task.given_up:
                self._kept_run(kept_logs.previous_run(pod, task.run), task)
            return True
        if not kept_logs.log_due(pod):
            return True  # let go already
        if not task.given_up and kept_logs.started(pod):
            try:
                self._kept(pod, task)
            except TransientApiError as error:
                task.tries += 1
                if task.tries < KEEP_TRIES:
                    raise
                logger.warning("the log of %s/%s was not kept: %s", task.namespace, task.name, error)
                task.given_up = True
        if not kept_logs.held_by_legacy_finalizer(pod["metadata"]):
            return True
        if self._kube.patch_pod(task.namespace, task.name, kept_logs.release_patch(pod)):
            return True
        return self._kube.read(POD_PATH, {"namespace": task.namespace, "name": task.name}) is None

    def _kept_run(self, pod: Body, task: _Task) -> None:
        """`_kept` for a run that ended in place, given up after KEEP_TRIES like a pod's log."""
        try:
            self._kept(pod, task)
        except TransientApiError as error:
            task.tries += 1
            if task.tries < KEEP_TRIES:
                raise
            logger.warning("the log of %s/%s, run %s, was not kept: %s", task.namespace, task.name, task.run, error)

    def _kept(self, pod: Body, task: _Task) -> None:
        """Keep the log, unless it is kept already, its job is gone and keeps nothing past itself, the API server
        says it cannot be read (the container's node cannot serve it, the pod is gone), or the ConfigMap is
        refused as built."""
        present = str((kept_logs.controller(pod) or {}).get("uid")) in self._job_uids(task.job)
        if not (present or kept_logs.outlives_job(pod)):
            return
        # A pod seen ending while this operator ran has no kept log yet, and its replacement waits: its log is
        # read first. One listed at the start (a previous operator may have kept it) or tried before is looked
        # up first, so that an operator's restart reads no log twice.
        kept = None if task.live and not task.tries and not task.errors else self._kept_logs(pod, task)
        if kept is not None and _has(kept, pod):
            return
        try:
            chunks = self._kube.pod_log_chunks(
                task.namespace,
                task.name,
                kept_logs.logged_container(pod),
                follow=task.follow,
                query={"previous": "true"} if task.run is not None else None,
                read_timeout=self._follow_seconds / 2 if task.follow else None,
            )
            if task.follow:
                chunks = self._bounded(chunks, task)
            tail = kept_logs.log_tail(chunks, kept_logs.max_bytes(pod))
        except LogUnreadableError as error:
            logger.info("the log of %s/%s cannot be read, not kept: %s", task.namespace, task.name, error)
            return
        if task.follow:
            pod = self._how_it_ended(pod, task)
        if kept is None:
            kept = self._kept_logs(pod, task)
            if _has(kept, pod):
                return
        attempt = kept_logs.pod_attempt(pod, kept)
        manifest = kept_logs.kept_log(pod, tail, self._clock(), job_present=present, attempt=attempt)
        if manifest is None:
            return
        try:
            self._kube.create(manifest)
        except RefusedError as error:  # refused as built (a policy): no retry makes it pass
            logger.warning("the log of %s/%s was not kept: %s", task.namespace, task.name, error)
            return
        for item in kept_logs.surplus([*kept, manifest]):  # the job's budget: its first and latest attempts stay
            self._kube.delete_object(_config_map(item))
        gap = kept_logs.unkept_before(kept, attempt)
        replica = kept_logs.replica_of(pod)
        if gap is not None and present and replica is not None:
            self._report(pod, UnkeptLogs(replica=replica, first_attempt=gap[0], last_attempt=gap[1], reason=UNKEPT))

    def _bounded(self, chunks: Iterator[bytes], task: _Task) -> Iterator[bytes]:
        """A follow's chunks until FOLLOW_BYTES or half of `follow_seconds`, each read waiting at most the other
        half (a silent stream's read gives up then): a follow ends within `follow_seconds` whatever its stream does,
        where a chunk just before the deadline, then silence, once held it twice as long."""
        deadline, read = time.monotonic() + self._follow_seconds / 2, 0
        try:
            for chunk in chunks:
                yield chunk
                read += len(chunk)
                if read >= FOLLOW_BYTES or time.monotonic() >= deadline:
                    break
            else:
                return
        except TransientApiError:
            if time.monotonic() < deadline:  # broken off, not silent to the end: worth another try
                raise
        metrics.FOLLOWS_CUT.inc()
        logger.info("the log of %s/%s: its follow cut after %d bytes", task.namespace, task.name, read)

    def _kept_logs(self, pod: Body, task: _Task) -> list[dict[str, Any]]:
        """The pod's replica's kept logs (what of their metadata `kept_logs.essentials` keeps)."""
        selector = kept_logs.kept_log_selector(pod)
        if selector is None:
            return []
        found = self._kube.list_metadata(_configmaps(task.namespace), {"labelSelector": selector})
        return [kept_logs.essentials(item) for item in found]

    def _report(self, pod: Body, unkept: UnkeptLogs) -> None:
        job_uid = str((kept_logs.controller(pod) or {}).get("uid"))
        with self._condition:
            reported = self._unkept.setdefault(job_uid, [])
            if unkept not in reported:
                reported.append(unkept)
                del reported[:-MAX_UNKEPT_LOGS]


UNKEPT = "their pods went while no operator ran, or before their log could be read"


def _has(kept: list[dict[str, Any]], pod: Body) -> bool:
    """The pod's log is among a replica's kept logs: kept on an earlier try, or by an operator before this one."""
    return any(item["metadata"].get("name") == kept_logs.kept_log_name(pod) for item in kept)


SWEEP_SECONDS = 60.0


class SweepApi(Protocol):
    def list_metadata(self, path: str, query: dict[str, str]) -> Iterable[dict[str, Any]]: ...
    def merge_patch(self, manifest: Mapping[str, Any], patch: dict[str, Any]) -> bool: ...
    def delete_object(self, manifest: Mapping[str, Any]) -> bool: ...


def _config_map(item: Body) -> Manifest:
    metadata = item["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {key: metadata[key] for key in ("name", "namespace")}}


def _configmaps(namespace: str | None) -> str:
    return "/api/v1/configmaps" if namespace is None else f"/api/v1/namespaces/{namespace}/configmaps"


class KeptLogSweeper(Workers):
    """Deletes the kept logs that outlived their job by their TTL (`disttrain_core.kept_logs.sweep`), every `interval`
    seconds; it reads only their metadata, never the logs, a page at a time, and holds only its essentials."""

    def __init__(
        self,
        kube: SweepApi,
        job_uids: Callable[[], set[str]],
        clock: Callable[[], datetime],
        scopes: Sequence[WatchScope],
        *,
        ready: threading.Event,
        interval: float = SWEEP_SECONDS,
    ) -> None:
        """`scopes`: where the operator watches; `job_uids`: every job that exists now."""
        super().__init__("disttrain-log-sweeper")
        self._kube = kube
        self._job_uids = job_uids
        self._clock = clock
        self._scopes = scopes
        self._ready = ready
        self._interval = interval

    def stop(self) -> None:
        super().stop()
        self._ready.set()

    def _work(self) -> None:
        self._ready.wait()
        self.repeat(self.sweep, self._interval, "log-sweeper")

    def sweep(self) -> None:
        now = self._clock()
        query = {"labelSelector": kept_logs.OUTLIVES_JOB_LABEL}
        items = [
            kept_logs.essentials(item)
            for scope in self._scopes
            for item in self._kube.list_metadata(_configmaps(scope.namespace), query)
            if scope.accepts(str(item["metadata"].get("namespace", "")))
        ]
        found = kept_logs.sweep(items, self._job_uids(), now)
        mark, unmark = kept_logs.gone_since_patch(now), kept_logs.gone_since_patch(None)
        for item in found.mark:
            self._act(item, lambda config_map: self._kube.merge_patch(config_map, mark))
        for item in found.unmark:
            self._act(item, lambda config_map: self._kube.merge_patch(config_map, unmark))
        for item in found.delete:
            self._act(item, self._kube.delete_object)

    def _act(self, item: Body, act: Callable[[Manifest], object]) -> None:
        """One kept log's mark, unmark or deletion: an API error leaves it for the next sweep."""
        config_map = _config_map(item)
        try:
            act(config_map)
        except TransientApiError as error:
            metadata = config_map["metadata"]
            logger.info("sweeping %s/%s: %s", metadata["namespace"], metadata["name"], error)
