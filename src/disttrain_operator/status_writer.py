"""A job's status write: only when it changed, counts batched, an Event per condition that became true,
and the jobs-by-phase gauges kept as phases change."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

import pydantic

from disttrain_contract.timestamps import format_time
from disttrain_core.api.status import ConditionType, DistTrainJobStatus, JobPhase
from disttrain_core.restarts.stalls import NOT_REPORTED
from disttrain_core.status_from_pods import failed_status
from disttrain_core.tensorboard_status import FAILURE_REASONS
from disttrain_core.types import Body, Verdict
from disttrain_kube.api_errors import RefusedError
from disttrain_operator import metrics
from disttrain_operator.job_memory import JobMemory

logger = logging.getLogger(__name__)

# A job's status writes that change only counts and progress come at most this often (see `StatusWriter.write`).
STATUS_BATCH = timedelta(seconds=2)
# A restart's status waits at most this long for the replacements of the pods it deleted (`StatusWriter.write`).
RESTART_HOLD = STATUS_BATCH
_COUNTS = frozenset({"replicaStatuses", "ready", "progress"})
_WARNING_CONDITIONS = {
    ConditionType.FAILED.value,
    ConditionType.RESTARTING.value,
    ConditionType.STALLED.value,
    ConditionType.GANG_UNAVAILABLE.value,
    ConditionType.VOLUME_UNBOUND.value,
}


class EventSink(Protocol):
    def __call__(self, body: Body, *, type: str, reason: str, message: str) -> None: ...


class StatusApi(Protocol):
    def patch_job_status(self, job: Body, status: dict[str, Any]) -> None: ...


def dump_status(status: DistTrainJobStatus) -> dict[str, Any]:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


class StatusWriter:
    def __init__(self, kube: StatusApi, emit: EventSink, clock: Callable[[], datetime]) -> None:
        self._kube = kube
        self._emit = emit
        self._clock = clock
        # Known jobs by (namespace, phase), kept as phases change: the gauges are set per status write, and
        # counting every job's phase on each one made a burst of N new jobs cost N^2.
        self._phases: Counter[tuple[str, str]] = Counter()
        self._phases_lock = threading.Lock()  # reconciles of different jobs run on different threads

    def forget(self, memory: JobMemory) -> None:
        """A deleted job leaves the gauges."""
        self._set_phase(memory, None)

    def write(
        self, body: Body, memory: JobMemory, status: DistTrainJobStatus, *, batch: bool = False
    ) -> datetime | None:
        """Write the status if it changed. With `batch`, a change nobody waits on is held back until it is
        due (`_batch_due`), and that time is returned: pods of a job start within moments of each other,
        and each one's report need not cost a write of its own. A restart's status waits too, while its pods
        make way (`JobMemory.making_way_until`): the replacements of the pods it deleted are created once
        those are gone, by a later reconcile, and its write then follows their creation instead of coming
        between a failed pod and its replacement.
        Conditions newly true get an Event each; Created has one already, listing what was created."""
        new = dump_status(status)
        previous: dict[str, Any] = memory.written or dict(body.get("status") or {})
        if new == previous:
            memory.unwritten = None
            return None
        now = self._clock()
        due = (memory.making_way_until or _batch_due(status, previous, new, memory.last_write)) if batch else None
        if due is not None and now < due:
            memory.unwritten = new
            return due
        memory.making_way_until = None
        metadata = body["metadata"]
        try:
            self._kube.patch_job_status(body, _patch(previous, memory.shape.status_out(new, format_time(now))))
        except RefusedError as error:
            new = self._refused(body, memory, status=status, previous=previous, error=error, now=now)
        memory.written, memory.last_write, memory.unwritten = new, now, None
        for condition in _newly_false(previous, new):
            kind = "Warning" if condition["type"] == ConditionType.TENSORBOARD_READY else "Normal"
            self._emit(body, type=kind, reason=condition["reason"], message=condition.get("message", ""))
        for condition in _newly_true(previous, new):
            kind = "Warning" if condition["type"] in _WARNING_CONDITIONS else "Normal"
            if condition["type"] != ConditionType.CREATED:
                self._emit(body, type=kind, reason=condition["reason"], message=condition.get("message", ""))
            metrics.count_transition(metadata["namespace"], condition["type"], condition["reason"])
        self._set_phase(memory, (metadata["namespace"], str(new.get("phase", ""))))
        if new.get("phase") != previous.get("phase"):
            logger.info("job %s/%s is %s", metadata["namespace"], metadata["name"], new.get("phase"))
        return None

    def _refused(
        self,
        body: Body,
        memory: JobMemory,
        *,
        status: DistTrainJobStatus,
        previous: Mapping[str, Any],
        error: RefusedError,
        now: datetime,
    ) -> dict[str, Any]:
        """A status the API server refuses as invalid: retrying the same write cannot pass, and a job whose
        status cannot be written cannot be followed. The job fails, saying why, with the status it had: the
        last one written, which the API server took."""
        metadata = body["metadata"]
        logger.error("the status of %s/%s was refused: %s", metadata["namespace"], metadata["name"], error)
        metrics.ITEM_ERRORS.labels("status-writer").inc()
        try:
            base = DistTrainJobStatus.model_validate(previous)
        except pydantic.ValidationError:
            base = DistTrainJobStatus()
        verdict = Verdict("StatusRefused", f"the API server refused the job's status: {error}")
        failed = dump_status(failed_status(base, verdict, now, status.observed_generation))
        self._kube.patch_job_status(body, memory.shape.status_out(failed, format_time(now)))
        return failed

    def _set_phase(self, memory: JobMemory, phase: tuple[str, str] | None) -> None:
        with self._phases_lock:
            if phase == memory.phase:
                return
            if memory.phase is not None:
                self._phases[memory.phase] -= 1
            if phase is not None:
                self._phases[phase] += 1
            memory.phase = phase
            metrics.set_active(self._phases)


def _patch(previous: Mapping[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A merge patch from the status written before to `new`: a field `new` no longer has is sent as null,
    which clears it (a merge patch that leaves a field out leaves it as it was)."""
    return {**{key: None for key in previous if key not in new}, **new}


def _batch_due(
    status: DistTrainJobStatus, previous: Mapping[str, Any], new: Mapping[str, Any], last_write: datetime | None
) -> datetime | None:
    """When a status change may wait until, None when it is written at once. Counts alone wait until
    STATUS_BATCH after the job's last write. A new job's first status, Pending with its children created,
    waits until STATUS_BATCH after their creation: its pods mostly run by then, and one write says both
    (in a burst of new jobs, one write fewer per job)."""
    if last_write is not None:
        return last_write + STATUS_BATCH if _counts_alone(previous, new) else None
    created = [condition for condition in status.conditions if condition.type is ConditionType.CREATED]
    if (
        not previous.get("conditions")
        and status.phase is JobPhase.PENDING
        and len(status.conditions) == 1 == len(created)
    ):
        return created[0].last_transition_time + STATUS_BATCH
    return None


def _counts_alone(previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Only replica counts, readiness or progress differ: nothing a user waits on (phase, conditions)."""
    return {k: v for k, v in previous.items() if k not in _COUNTS} == {k: v for k, v in new.items() if k not in _COUNTS}


def _newly_true(previous: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Conditions that became True (or changed reason while True): each is an Event users can search for."""
    before = {c["type"]: (c["status"], c.get("reason")) for c in previous.get("conditions", [])}
    return [
        condition
        for condition in new.get("conditions", [])
        if condition["status"] == "True" and before.get(condition["type"]) != ("True", condition.get("reason"))
    ]


# Conditions False for a reason worth an Event of its own: a TensorBoard the cluster cannot run (not one that
# starts), and a run that its progress deadline does not judge (`disttrain_core.restarts.stalls.Unjudged`).
_EVENTFUL_FALSE = {ConditionType.TENSORBOARD_READY.value: FAILURE_REASONS, ConditionType.STALLED.value: {NOT_REPORTED}}


def _newly_false(previous: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Conditions that turned False for a reason in `_EVENTFUL_FALSE`."""
    before = {c["type"]: (c["status"], c.get("reason")) for c in previous.get("conditions", [])}
    return [
        condition
        for condition in new.get("conditions", [])
        if condition["status"] == "False"
        and condition.get("reason") in _EVENTFUL_FALSE.get(condition["type"], ())
        and before.get(condition["type"]) != ("False", condition.get("reason"))
    ]
