"""Keeps each ended attempt's log, then lets its pod go (core/kept_logs.py says what and why), on threads
of its own, so a node slow to send a log never holds a reconcile. The pod watch offers every pod whose log
is due; the threads start once every watch and kopf's index listed once, so a pod is never judged
orphaned while its job is merely not indexed yet.

A pod whose container never started has no log to keep. A log the API server answers with an error (a
lost node, a node that serves no logs) is given up at once, and one whose reading or keeping fails
otherwise (the network, a namespace being deleted, a quota) after `KEEP_TRIES` tries, 5 s apart: a
finalizer must not hold a pod, and its restart, for ever. The pod's release itself is retried until
it lands. Any other error on one pod (a bug) is logged with its traceback and the pod's name, counted in
`disttrain_item_errors_total`, and retried with a growing delay, as a failed keep: no thread ends on
one pod, since two threads keep the logs of every namespace.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from disttrain_operator.core import kept_logs
from disttrain_operator.core.backoff import Backoff
from disttrain_operator.core.types import Body, JobKey, Manifest
from disttrain_operator.runtime import metrics
from disttrain_operator.runtime.kube import POD_PATH, ChildRejectedError, LogUnreadableError, TransientApiError
from disttrain_operator.runtime.watch import Scope
from disttrain_operator.runtime.workers import Workers

logger = logging.getLogger(__name__)

KEEP_TRIES = 5
RETRY_SECONDS = 5.0
ERROR_BACKOFF_FACTOR = 60  # a pod failing on a bug is retried at most every 60 retry periods


class LogApi(Protocol):
    def read(self, path: str, params: dict[str, str]) -> dict[str, Any] | None: ...
    def pod_log_chunks(self, namespace: str, name: str, container: str) -> Iterator[bytes]: ...
    def create(self, manifest: Manifest) -> bool: ...
    def patch_pod(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> bool: ...
    def list_metadata(self, path: str, query: dict[str, str]) -> list[dict[str, Any]]: ...
    def delete_object(self, manifest: Mapping[str, Any]) -> bool: ...


@dataclass
class _Task:
    namespace: str
    name: str
    uid: str
    job: JobKey
    body: Body | None = None  # the pod as the watch last saw it, for the first try; a retry reads it afresh
    tries: int = 0
    errors: int = 0  # failures that were no API error, in a row
    given_up: bool = False
    due: float = 0.0


def _due_index(retries: deque[_Task], due: float) -> int:
    """Where a retry due at `due` goes in `retries`, which stays in the order its tasks come due."""
    return next((index for index, task in enumerate(retries) if task.due > due), len(retries))


def precise_now() -> datetime:
    return datetime.now(UTC)


class LogKeeper(Workers):
    def __init__(
        self,
        kube: LogApi,
        job_uids: Callable[[JobKey], set[str]],
        *,
        clock: Callable[[], datetime] = precise_now,
        threads: int = 2,
        ready: threading.Event | None = None,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        """`job_uids`: the uids of the jobs of a key that exist now; `clock`: with microseconds, as it orders the
        attempts of a replica, which can end within one second."""
        super().__init__(*(f"disttrain-logs-{n}" for n in range(threads)))
        self._kube = kube
        self._job_uids = job_uids
        self._clock = clock
        self._ready = ready or threading.Event()
        if ready is None:
            self._ready.set()
        self._retry_seconds = retry_seconds
        self._error_backoff = Backoff(first=retry_seconds, longest=ERROR_BACKOFF_FACTOR * retry_seconds)
        self._fresh: deque[_Task] = deque()
        self._retries: deque[_Task] = deque()  # in the order they come due
        self._pending: set[str] = set()  # uids queued or in hand

    def stop(self) -> None:
        super().stop()
        self._ready.set()

    def offer(self, job: JobKey, namespace: str, name: str, uid: str, body: Body | None = None) -> None:
        """A pod whose log is due (`PodView.log_due`), as the watch saw it; a pod offered again while in hand is
        not queued twice."""
        with self._condition:
            if uid in self._pending:
                return
            self._pending.add(uid)
            self._fresh.append(_Task(namespace, name, uid, job, body))
            self._condition.notify()

    def _next(self) -> _Task | None:
        with self._condition:
            while not self._stopped:
                if self._fresh:
                    return self._fresh.popleft()
                wait = self._retries[0].due - time.monotonic() if self._retries else None
                if wait is not None and wait <= 0:
                    return self._retries.popleft()
                self._condition.wait(timeout=wait)
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
                if done:
                    self._pending.discard(task.uid)
                else:
                    task.due = time.monotonic() + delay
                    self._retries.insert(_due_index(self._retries, task.due), task)

    def _failed(self, task: _Task) -> float:
        """A bug on one pod: logged and counted; after KEEP_TRIES its log is given up so that the pod is let go."""
        task.errors += 1
        task.given_up = task.given_up or task.errors >= KEEP_TRIES
        metrics.ITEM_ERRORS.labels("log-keeper").inc()
        logger.exception("keeping the log of %s/%s failed (%d in a row)", task.namespace, task.name, task.errors)
        return self._error_backoff.delay(task.errors)

    def _keep(self, task: _Task) -> bool:
        """Keep the pod's log and let it go; False when its release is worth another try, and TransientApiError
        when keeping the log is."""
        pod = task.body or self._kube.read(POD_PATH, {"namespace": task.namespace, "name": task.name})
        task.body = None  # a retry starts from the pod as it is then: the release below tests uid and finalizers
        if pod is None or pod["metadata"].get("uid") != task.uid or not kept_logs.log_due(pod):
            return True  # gone, replaced, or let go already
        if not task.given_up and kept_logs.started(pod):
            try:
                self._kept(pod, task)
            except TransientApiError as error:
                task.tries += 1
                if task.tries < KEEP_TRIES:
                    raise
                logger.warning("the log of %s/%s was not kept: %s", task.namespace, task.name, error)
                task.given_up = True
        if self._kube.patch_pod(task.namespace, task.name, kept_logs.release_patch(pod)):
            return True
        return self._kube.read(POD_PATH, {"namespace": task.namespace, "name": task.name}) is None

    def _kept(self, pod: Body, task: _Task) -> None:
        """Keep the log, unless the API server says it cannot be read (the container's node cannot serve it),
        its job is gone and keeps nothing past itself, or the ConfigMap is refused as built."""
        try:
            chunks = self._kube.pod_log_chunks(task.namespace, task.name, kept_logs.logged_container(pod))
            tail = kept_logs.log_tail(chunks, kept_logs.max_bytes(pod))
        except LogUnreadableError as error:
            logger.info("the log of %s/%s cannot be read, not kept: %s", task.namespace, task.name, error)
            return
        present = str((kept_logs.controller(pod) or {}).get("uid")) in self._job_uids(task.job)
        selector = kept_logs.kept_log_selector(pod)
        kept = (
            []
            if selector is None
            else self._kube.list_metadata(_configmaps(task.namespace), {"labelSelector": selector})
        )
        if any(item["metadata"].get("name") == kept_logs.kept_log_name(pod) for item in kept):
            return  # kept on an earlier try, whose release did not land
        attempt = kept_logs.next_attempt(kept)
        manifest = kept_logs.kept_log(pod, tail, self._clock(), job_present=present, attempt=attempt)
        if manifest is None:
            return
        try:
            self._kube.create(manifest)
        except ChildRejectedError as error:  # refused as built (a policy): no retry makes it pass
            logger.warning("the log of %s/%s was not kept: %s", task.namespace, task.name, error)
            return
        for item in kept_logs.surplus([*kept, manifest]):  # the job's budget: its first and latest attempts stay
            self._kube.delete_object(_config_map(item))


SWEEP_SECONDS = 60.0


class SweepApi(Protocol):
    def list_metadata(self, path: str, query: dict[str, str]) -> list[dict[str, Any]]: ...
    def merge_patch(self, manifest: Mapping[str, Any], patch: dict[str, Any]) -> bool: ...
    def delete_object(self, manifest: Mapping[str, Any]) -> bool: ...


def _config_map(item: Body) -> Manifest:
    metadata = item["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {key: metadata[key] for key in ("name", "namespace")}}


def _configmaps(namespace: str | None) -> str:
    return "/api/v1/configmaps" if namespace is None else f"/api/v1/namespaces/{namespace}/configmaps"


class KeptLogSweeper(Workers):
    """Deletes the kept logs that outlived their job by their TTL (core.kept_logs.sweep), every `interval`
    seconds; it reads only their metadata, never the logs."""

    def __init__(
        self,
        kube: SweepApi,
        job_uids: Callable[[], set[str]],
        clock: Callable[[], datetime],
        scopes: Sequence[Scope],
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
        while True:
            try:
                self.sweep()
            except TransientApiError as error:
                logger.info("sweeping kept logs: %s", error)
            except Exception:  # a bug: the next sweep tries again; the thread must outlive it
                metrics.ITEM_ERRORS.labels("log-sweeper").inc()
                logger.exception("sweeping kept logs failed")
            with self._condition:
                if not self._stopped:
                    self._condition.wait(timeout=self._interval)
                if self._stopped:
                    return

    def sweep(self) -> None:
        now = self._clock()
        query = {"labelSelector": kept_logs.OUTLIVES_JOB_LABEL}
        items = [
            item
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
