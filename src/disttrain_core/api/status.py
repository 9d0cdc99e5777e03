"""The DistTrainJob status: what the operator observes. Every field must be in the CRD or it is pruned."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import Field

from disttrain_core.api.spec import MAX_ATTEMPT, MAX_REPLICAS, ApiModel, ReplicaType


class JobPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"


class ConditionType(StrEnum):
    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"
    STALLED = "Stalled"
    TENSORBOARD_READY = "TensorBoardReady"
    GANG_UNAVAILABLE = "GangUnavailable"
    VOLUME_UNBOUND = "VolumeUnbound"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


MAX_CONDITION_MESSAGE = 32768  # metav1.Condition's bound on a message


class Condition(ApiModel):
    """The metav1.Condition shape, so `kubectl wait --for=condition=...` and dashboards understand it."""

    type: ConditionType
    status: ConditionStatus
    reason: str = Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    message: str = Field("", max_length=MAX_CONDITION_MESSAGE)
    last_transition_time: datetime
    observed_generation: int | None = Field(None, ge=0)


class ReplicaStatus(ApiModel):
    active: int = Field(0, ge=0, description="Pods pending or running.")
    ready: int = Field(0, ge=0, description="Pods running and ready.")
    succeeded: int = Field(0, ge=0)
    failed: int = Field(0, ge=0)
    restarts: int = Field(0, ge=0, description="Restarts of this replica type counted against backoffLimit.")
    succeeded_indexes: list[int] = Field(
        default_factory=list, description="Indexes that succeeded: their pods are never created again."
    )
    attempts: list[Annotated[int, Field(ge=0, le=MAX_ATTEMPT)]] = Field(
        default_factory=list,
        max_length=MAX_REPLICAS,
        description="By index, the attempt its latest pod is (from 1; 0 before its first): the next is one more.",
    )


# The largest integer every JSON reader keeps exact; the API server could not write a larger report
# (and refuses 2**63 - 1 as a schema bound, since it turns it into a float on the way).
MAX_COUNT = 2**53


class Progress(ApiModel):
    """The trainer's latest progress report (see disttrain_contract.progress), and what the operator reads from
    the reports it saw: the rate, the time left, and when the step last advanced (`OPERATOR_FIELDS`)."""

    step: int | None = Field(None, ge=0, le=MAX_COUNT)
    total_steps: int | None = Field(None, ge=0, le=MAX_COUNT)
    epoch: int | None = Field(None, ge=0, le=MAX_COUNT)
    loss: float | None = Field(None, allow_inf_nan=False)
    examples_per_second: float | None = Field(None, ge=0, allow_inf_nan=False)
    update_time: datetime | None = Field(None, description="When the trainer made the report.")
    steps_per_second: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="Steps per second over the reports of the last minute."
    )
    estimated_remaining_seconds: int | None = Field(
        None, ge=0, le=MAX_COUNT, description="Steps left over stepsPerSecond, where totalSteps is known."
    )
    fraction_done: float | None = Field(None, ge=0, le=1, allow_inf_nan=False, description="step over totalSteps.")
    last_advance_time: datetime | None = Field(
        None,
        description="When the operator first saw this run report a step, or a step higher than the one before: "
        "runPolicy.progressDeadlineSeconds counts from it.",
    )


OPERATOR_FIELDS = frozenset({"steps_per_second", "estimated_remaining_seconds", "fraction_done", "last_advance_time"})


class SavedCheckpoint(ApiModel):
    """The last checkpoint the trainer saved, as it reported it: a restart resumes from it."""

    step: int = Field(ge=0, le=MAX_COUNT)
    time: datetime | None = Field(None, description="When it was saved.")
    path: str | None = Field(None, max_length=1024, description="Its path inside the job's checkpoint volume.")


MAX_HISTORY = 64


class ProgressPoint(ApiModel):
    """One report on the job's curve (`status.progressHistory`)."""

    step: int = Field(ge=0, le=MAX_COUNT)
    loss: float | None = Field(None, allow_inf_nan=False)
    examples_per_second: float | None = Field(None, ge=0, allow_inf_nan=False)
    time: datetime | None = Field(None, description="When the trainer made the report.")


HISTORY_DESCRIPTION = (
    f"The loss and throughput curve: the trainer's reports in order, at most {MAX_HISTORY} points; when full,"
    " every other older point is dropped, so the whole run stays in view."
)

MAX_METRICS = 32
MAX_METRIC_NAME = 128


class Evaluation(ApiModel):
    """The Evaluator's scores of a checkpoint, from its termination message (disttrain_contract.evaluation)."""

    checkpoint: str | None = Field(None, max_length=4096, description="The checkpoint scored.")
    step: int | None = Field(None, ge=0, le=MAX_COUNT, description="Its training step.")
    metrics: dict[Annotated[str, Field(max_length=MAX_METRIC_NAME)], Annotated[float, Field(allow_inf_nan=False)]] = (
        Field(default_factory=dict, max_length=MAX_METRICS, description="The scores by name, e.g. accuracy.")
    )
    final: bool = Field(False, description="The checkpoint is the one training ended with.")


class TensorBoardStatus(ApiModel):
    """Where the job's TensorBoard serves: `disttrain jobs tensorboard` forwards a local port to it."""

    service: str = Field(description="Its Service, in the job's namespace.")
    url: str = Field(description="Its address inside the cluster.")
    ready: bool = Field(False, description="It answers.")


MAX_UNKEPT_LOGS = 32


class UnkeptLogs(ApiModel):
    """Attempts of one replica whose log no ConfigMap keeps though the job asked for it."""

    replica: str = Field(max_length=64, description="The replica, e.g. worker-1.")
    first_attempt: int = Field(ge=1, le=MAX_ATTEMPT)
    last_attempt: int = Field(ge=1, le=MAX_ATTEMPT)
    reason: str = Field(max_length=1024)


MAX_DISRUPTION_REASON = 128
MAX_DISRUPTION_MESSAGE = 1024


class Disruption(ApiModel):
    """The last time the job's pods were taken away on purpose, and it restarted without counting it."""

    reason: str = Field(
        max_length=MAX_DISRUPTION_REASON,
        description="The pod condition DisruptionTarget's reason (EvictionByEvictionAPI, PreemptionByScheduler, "
        "DeletionByTaintManager, DeletionByPodGC, TerminationByKubelet), or Preempted for the trainer's exit code.",
    )
    message: str = Field(max_length=MAX_DISRUPTION_MESSAGE, description="Which pods, and what restarted.")
    time: datetime


class RestartBackoff(ApiModel):
    """Restarts that came one after another, each before the job had run a while, and the pause they earned."""

    quick_restarts: int = Field(
        ge=0, description="Restarts in a row that came before the job had run for a stretch; 0 after one that did."
    )
    last_restart: datetime = Field(description="When the latest restart was decided.")
    until: datetime = Field(description="No pod of the job is created again before this time.")
    recent_restarts: int = Field(
        0,
        ge=0,
        description="Restarts remembered: each until the job ran 10 minutes past it; beyond 5, a restart is quick.",
    )


class DistTrainJobStatus(ApiModel):
    phase: JobPhase | None = None
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    replica_statuses: dict[ReplicaType, ReplicaStatus] = Field(default_factory=dict)
    ready: str | None = Field(None, description="Ready pods over desired pods, e.g. 3/4.")
    restart_count: int = Field(0, ge=0, description="Restarts counted against runPolicy.backoffLimit.")
    disruptions: int = Field(
        0,
        ge=0,
        description="Restarts after pods were taken away on purpose (an eviction, a drain, a preemption, a lost "
        "node): not counted against runPolicy.backoffLimit.",
    )
    last_disruption: Disruption | None = None
    restart_backoff: RestartBackoff | None = Field(
        None, description="Restarts, counted or not, that follow each other quickly wait longer and longer to start."
    )
    start_time: datetime | None = None
    completion_time: datetime | None = None
    observed_generation: int | None = Field(None, ge=0)
    progress: Progress | None = None
    progress_answer_time: datetime | None = Field(
        None,
        description="When the operator first saw the current run's reporting trainer answer on its progress port (a "
        "report, or an answer that it has none yet): runPolicy.progressDeadlineSeconds judges a run only from then.",
    )
    progress_history: list[ProgressPoint] = Field(
        default_factory=list, max_length=MAX_HISTORY, description=HISTORY_DESCRIPTION
    )
    checkpoint: SavedCheckpoint | None = Field(
        None, description="The last checkpoint the trainer reported saving: where a restart resumes."
    )
    evaluation: Evaluation | None = Field(None, description="The Evaluator's last scores.")
    tensorboard: TensorBoardStatus | None = Field(None, description="The job's TensorBoard, with spec.tensorboard.")
    unkept_logs: list[UnkeptLogs] = Field(
        default_factory=list,
        max_length=MAX_UNKEPT_LOGS,
        description=f"Attempts whose log was not kept, and why; the latest {MAX_UNKEPT_LOGS} such runs of attempts.",
    )

    def condition(self, kind: ConditionType) -> Condition | None:
        """The condition of that type, if the status has one."""
        return next((condition for condition in self.conditions if condition.type is kind), None)
