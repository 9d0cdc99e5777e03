"""The status write: nothing sent when nothing changed, counts held for the batch, a restart's status held
while its pods make way, an Event per condition that became true, and a refused status failing the job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from disttrain_core.api.status import (
    Condition,
    ConditionStatus,
    ConditionType,
    DistTrainJobStatus,
    JobPhase,
)
from disttrain_kube.api_errors import RefusedError
from disttrain_operator.job_memory import JobMemory
from disttrain_operator.status_writer import STATUS_BATCH, StatusWriter, dump_status
from support.fakes import RecordingApi

START = datetime(2026, 1, 1, tzinfo=UTC)
BODY = {"metadata": {"namespace": "a", "name": "x"}}


class _Writer:
    """A StatusWriter over a recording API, its clock and the Events it posts."""

    def __init__(self, api: RecordingApi | None = None) -> None:
        self.now = START
        self.api = api or RecordingApi()
        self.events: list[tuple[str, str]] = []
        self.memory = JobMemory()
        self.writer = StatusWriter(self.api, self._emit, lambda: self.now)

    def _emit(self, body: Any, *, type: str, reason: str, message: str) -> None:
        self.events.append((type, reason))

    def write(self, status: DistTrainJobStatus, *, batch: bool = True) -> datetime | None:
        return self.writer.write(BODY, self.memory, status, batch=batch)


def _condition(kind: ConditionType, reason: str, status: ConditionStatus = ConditionStatus.TRUE) -> Condition:
    return Condition(type=kind, status=status, reason=reason, last_transition_time=START)


def _running(ready: str, *conditions: Condition) -> DistTrainJobStatus:
    return DistTrainJobStatus(phase=JobPhase.RUNNING, ready=ready, conditions=list(conditions))


def test_a_status_as_written_is_not_sent_again() -> None:
    setup = _Writer()
    setup.write(_running("1/2"))
    assert setup.write(_running("1/2")) is None
    assert len(setup.api.statuses) == 1
    assert setup.memory.unwritten is None


def test_counts_alone_wait_for_the_batch_and_a_phase_goes_out_at_once() -> None:
    setup = _Writer()
    setup.write(_running("1/2"))
    setup.now = START + STATUS_BATCH / 2
    assert setup.write(_running("2/2")) == START + STATUS_BATCH
    assert len(setup.api.statuses) == 1 and setup.memory.unwritten == dump_status(_running("2/2"))
    succeeded = DistTrainJobStatus(phase=JobPhase.SUCCEEDED, ready="0/2")
    assert setup.write(succeeded) is None
    assert setup.api.statuses[-1]["phase"] == "Succeeded" and setup.memory.unwritten is None


def test_without_batching_counts_go_out_at_once() -> None:
    setup = _Writer()
    setup.write(_running("1/2"))
    assert setup.write(_running("2/2"), batch=False) is None
    assert setup.api.statuses[-1]["ready"] == "2/2"


def test_a_restart_s_status_waits_while_its_pods_make_way_and_not_after() -> None:
    setup = _Writer()
    setup.write(_running("2/2"))
    setup.memory.making_way_until = START + timedelta(seconds=1)
    restarting = _running("1/2", _condition(ConditionType.RESTARTING, "ExitCode"))
    assert setup.write(restarting) == START + timedelta(seconds=1)
    assert len(setup.api.statuses) == 1
    setup.now = START + timedelta(seconds=1)
    assert setup.write(restarting) is None
    assert setup.api.statuses[-1]["conditions"][0]["type"] == "Restarting"
    assert setup.memory.making_way_until is None


def test_each_condition_that_becomes_true_is_one_event_and_created_has_its_own_elsewhere() -> None:
    setup = _Writer()
    created = _condition(ConditionType.CREATED, "Created")
    setup.write(_running("0/2", created))
    assert setup.events == []  # the reconciler's Created Event lists what was made
    restarting = _condition(ConditionType.RESTARTING, "ExitCode")
    setup.write(_running("0/2", created, restarting))
    setup.write(_running("0/2", created, restarting))
    assert setup.events == [("Warning", "ExitCode")]
    setup.write(_running("0/2", created, _condition(ConditionType.RESTARTING, "Evicted")))  # a new reason
    setup.write(_running("2/2", created, _condition(ConditionType.RUNNING, "AllRunning")))
    assert setup.events == [("Warning", "ExitCode"), ("Warning", "Evicted"), ("Normal", "AllRunning")]


def test_a_tensorboard_the_cluster_cannot_run_is_a_warning_and_one_that_starts_is_not() -> None:
    setup = _Writer()
    false = ConditionStatus.FALSE
    setup.write(_running("2/2", _condition(ConditionType.TENSORBOARD_READY, "Starting", false)))
    assert setup.events == []
    setup.write(_running("2/2", _condition(ConditionType.TENSORBOARD_READY, "FailedCreate", false)))
    assert setup.events == [("Warning", "FailedCreate")]


class _RefusingOnce(RecordingApi):
    def __init__(self) -> None:
        super().__init__()
        self.refused = False

    def patch_job_status(self, job: Any, status: dict[str, Any]) -> None:
        if not self.refused:
            self.refused = True
            raise RefusedError(422, "status.ready: Invalid value")
        super().patch_job_status(job, status)


def test_a_refused_status_fails_the_job_with_the_status_it_had_and_says_why() -> None:
    setup = _Writer(_RefusingOnce())
    setup.memory.written = dump_status(_running("1/2"))
    setup.write(_running("2/2"), batch=False)
    [written] = setup.api.statuses
    assert written["phase"] == "Failed" and written["ready"] == "1/2"
    failed = next(condition for condition in written["conditions"] if condition["type"] == "Failed")
    assert failed["reason"] == "StatusRefused" and "status.ready: Invalid value" in failed["message"]
    assert ("Warning", "StatusRefused") in setup.events


def test_a_field_the_status_no_longer_has_is_cleared_not_left_as_it_was() -> None:
    setup = _Writer()
    setup.memory.written = {
        "phase": "Running",
        "evaluation": {"step": 3, "metrics": {}, "final": False},
        "ready": "1/2",
    }
    setup.write(DistTrainJobStatus(phase=JobPhase.RUNNING, ready="2/2"))
    (patch,) = setup.api.statuses
    assert patch["evaluation"] is None and (patch["phase"], patch["ready"]) == ("Running", "2/2")
