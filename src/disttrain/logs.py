"""A replica's log, streamed: read a chunk at a time and handed on a line at a time, so a log of any length
costs the same memory. Following waits through a Pending pod and on through the replica's restarts (a new
pod of the same name, or the same pod's container run again in place), until the replica or the job is done."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from disttrain.calls import client_error
from disttrain.errors import AttemptNotFoundError, LogsUnavailableError, PodGoneError, ReplicaNotFoundError
from disttrain.kept_log_reader import Attempt, KeptLog, live_attempt
from disttrain.pod_reads import read_pod, wait_for_pod_change
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType, trainer_container
from disttrain_core.naming import pod_name
from disttrain_core.observed import container_status
from disttrain_core.progress import reporting_task
from disttrain_core.summary import replica_pods
from disttrain_kube.api_errors import NO_ANSWER, LogUnreadableError, TransientApiError
from disttrain_kube.rest import Kube

_CHUNK = 1 << 16
LONGEST_LINE = 1 << 20  # a longer run of bytes without a newline is handed on in pieces of this size
_READ_TIMEOUT = 120.0  # a silent log stream is read again from where it stopped (a dead connection says nothing)
_CHANGE_SECONDS = 5  # how long one wait for the pod to change lasts before the job's state is read again
_RESUME_MARGIN = 300  # seconds of log read again on a resume, beyond the time since the last line (clock skew)


def replica_task(job: DistTrainJob, replica: str | None) -> tuple[ReplicaType, int]:
    """`worker-1`, `chief` (index 0), or None for the replica that reports progress (the chief, else worker 0)."""
    if replica is None:
        return reporting_task(job.spec)
    task_type, _, index = replica.lower().partition("-")
    try:
        replica_type, number = ReplicaType.from_task_type(task_type), int(index or 0)
    except ValueError:
        replica_type, number = None, -1
    if replica_type is None or not 0 <= number < job.spec.replicas(replica_type):
        raise ReplicaNotFoundError(f"{job.metadata.name} has no replica {replica!r}; it has {', '.join(replicas(job))}")
    return replica_type, number


def replicas(job: DistTrainJob) -> list[str]:
    return [replica for _, replica in replica_pods(job)]


@dataclass
class _Position:
    """Where the stream of one container run got to: its pod's uid and restart count, and the timestamp of the
    last line handed on."""

    run: tuple[str, int] | None = None
    last: bytes = b""


class ReplicaLog:
    """The log of one replica of one job, read from its pod through the API server."""

    def __init__(
        self,
        kube: Kube,
        job: DistTrainJob,
        replica: tuple[ReplicaType, int],
        finished: Callable[[], bool],
    ) -> None:
        self._kube = kube
        self._namespace = job.metadata.namespace
        self._pod = pod_name(job.metadata.name, *replica)
        template = job.spec.replica_specs[replica[0]].template
        self._container = str(trainer_container(template["spec"]["containers"])["name"])
        self._label = f"{replica[0].task_type}-{replica[1]}"
        self._finished = finished

    def lines(self, *, follow: bool, tail: int | None) -> Iterator[str]:
        if not follow:
            return self._once(tail)
        return self._follow(tail)

    def started_pod(self) -> dict[str, Any] | None:
        """The replica's pod if its container started (it runs, or it ended and the pod is still there)."""
        pod = self._read()
        return pod if pod is not None and _started(pod, self._container) else None

    def _once(self, tail: int | None) -> Iterator[str]:
        pod = self._read()
        if pod is None:
            raise LogsUnavailableError(f"{self._label} has no pod now ({self._pod}) and no kept log; follow waits")
        if not _started(pod, self._container):
            phase = pod.get("status", {}).get("phase", "Pending")
            raise LogsUnavailableError(f"{self._label} ({self._pod}) is {phase}, not started yet; follow waits for it")
        return self._stream(pod, _Position(), follow=False, tail=tail)

    def _follow(self, tail: int | None) -> Iterator[str]:
        position = _Position()
        while True:
            pod = self._next(position)
            if pod is None:
                return
            run = _run(pod, self._container)
            resumed = run == position.run
            if not resumed:
                first = position.run is None
                same_pod = position.run is not None and position.run[0] == run[0]
                position = _Position(run, position.last if same_pod else b"")  # a run's lines come after its last
            read = 0
            for line in self._stream(pod, position, follow=True, tail=tail if not resumed and first else None):
                read += 1
                yield line
            if resumed and not read:
                self._wait_for_change(None)  # the container ended and its status does not say so yet

    def _next(self, position: _Position) -> dict[str, Any] | None:
        """The pod to read next: a newer pod or container run that started, or the same run still going (its
        stream broke); None once the replica succeeded or the job ended without a newer run."""
        while True:
            pod, version = self._read_with_version()
            if pod is not None:
                state = _container_state(pod, self._container)
                run = _run(pod, self._container)
                if run != position.run and _started(pod, self._container):
                    return pod
                if run == position.run:
                    if "running" in state and position.last:
                        return pod  # read on from the last line's timestamp (a node without them is not resumed)
                    if (state.get("terminated") or {}).get("exitCode") == 0:
                        return None
            if self._finished():
                return None
            self._wait_for_change(version)

    def _stream(self, pod: dict[str, Any], position: _Position, *, follow: bool, tail: int | None) -> Iterator[str]:
        query = {"timestamps": "true"}
        if tail is not None:
            query["tailLines"] = str(tail)
        if position.last:
            query["sinceSeconds"] = str(_seconds_since(position.last) + _RESUME_MARGIN)
        chunks = self._kube.pod_log_chunks(
            self._namespace,
            pod["metadata"]["name"],
            self._container,
            follow=follow,
            query=query,
            read_timeout=_READ_TIMEOUT if follow else None,
        )
        try:
            for stamp, text in _split(chunks):
                if stamp and position.last and stamp <= position.last:
                    continue  # read before the stream broke
                if stamp:
                    position.last = stamp
                yield text
        except LogUnreadableError as error:
            if follow and error.status in (400, 404):  # not started after all, or deleted: look again
                return
            if error.status == 404:
                raise PodGoneError(error.status, f"log of {self._label}: {error.reason}") from error
            raise client_error(error, f"log of {self._label}") from error
        except TransientApiError as error:
            if follow and error.status == NO_ANSWER:  # the stream broke or went silent: read on from the last line
                return
            raise client_error(error, f"log of {self._label}") from error

    def _read(self) -> dict[str, Any] | None:
        return self._read_with_version()[0]

    def _read_with_version(self) -> tuple[dict[str, Any] | None, str]:
        return read_pod(self._kube, self._namespace, self._pod, what=f"the pod of {self._label}")

    def _wait_for_change(self, version: str | None) -> None:
        """Until the pod changes (or appears), or a few seconds pass."""
        if version is None:
            time.sleep(1)
            return
        wait_for_pod_change(self._kube, self._namespace, self._pod, version, _CHANGE_SECONDS)


def unless_gone(lines: Iterator[str], read_again: Callable[[], Iterator[str]]) -> Iterator[str]:
    """A pod's log as its stream gives it; where the pod went between its read and the stream's start (its
    job's cleanup took it), what `read_again` finds then: the attempt's kept log."""
    try:
        first = next(lines, None)
    except PodGoneError:
        yield from read_again()
        return
    if first is not None:
        yield first
        yield from lines


def _split(chunks: Iterator[bytes]) -> Iterator[tuple[bytes, str]]:
    """(timestamp, text) of each line of a log read with timestamps."""
    pending = b""
    for chunk in chunks:
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        while len(pending) > LONGEST_LINE:
            lines.append(pending[:LONGEST_LINE])
            pending = pending[LONGEST_LINE:]
        for line in lines:
            yield _stamped(line)
    if pending:
        yield _stamped(pending)


def _stamped(line: bytes) -> tuple[bytes, str]:
    """The line's timestamp, made to sort as it reads (`2026-11-25T08:30:00.120000000`), and its text."""
    stamp, separator, text = line.partition(b" ")
    seconds, _, fraction = stamp.rstrip(b"Z").partition(b".")
    if not separator or len(seconds) != len(b"2006-01-02T15:04:05") or not fraction.isdigit():
        return b"", line.decode(errors="replace")
    return seconds + b"." + fraction.ljust(9, b"0")[:9], text.decode(errors="replace")


def _seconds_since(stamp: bytes) -> int:
    when = datetime.fromisoformat(stamp[:19].decode()).replace(tzinfo=UTC)
    return max(1, math.ceil((datetime.now(UTC) - when).total_seconds()))


def _container_state(pod: dict[str, Any], container: str) -> dict[str, Any]:
    return dict(container_status(pod.get("status", {}), container).get("state") or {})


def _run(pod: dict[str, Any], container: str) -> tuple[str, int]:
    """Which run of the container the pod shows: a restart in place keeps the uid and counts one more."""
    restarts = container_status(pod.get("status", {}), container).get("restartCount")
    return str(pod["metadata"]["uid"]), int(restarts or 0)


def _started(pod: dict[str, Any], container: str) -> bool:
    state = _container_state(pod, container)
    return "running" in state or "terminated" in state


@dataclass(frozen=True)
class ReplicaLogs:
    """Where a replica's log is now: its kept attempts, and its job, log reader and started pod while the job exists."""

    job_name: str
    replica: str
    read_kept: Callable[[], list[KeptLog]]  # read once, when first asked for: on a volume it costs a pod
    job: DistTrainJob | None = None
    log: ReplicaLog | None = None
    pod: dict[str, Any] | None = None

    @cached_property
    def kept(self) -> list[KeptLog]:
        return self.read_kept()

    @property
    def attempts(self) -> list[Attempt]:
        live = live_attempt(self.pod, self.kept)
        return [log.attempt for log in self.kept] + ([live] if live is not None else [])

    def attempt_lines(self, number: int, *, follow: bool, tail: int | None) -> Iterator[str]:
        if 1 <= number <= len(self.kept):
            return self.kept[number - 1].lines(tail)
        attempts = self.attempts
        if self.log is not None and attempts and not attempts[-1].kept and number == attempts[-1].number:
            return self.log.lines(follow=follow, tail=tail)
        there = ", ".join(attempt.describe() for attempt in attempts) or "none yet"
        raise AttemptNotFoundError(f"{self.replica} of {self.job_name} has no attempt {number}; its attempts: {there}")

    def no_log(self) -> Iterator[str]:
        """The reason there is nothing to read, raised by the live reader (no pod, or not started)."""
        if self.log is None:
            raise LogsUnavailableError(f"{self.replica} of {self.job_name} has no log")
        return self.log.lines(follow=False, tail=None)
