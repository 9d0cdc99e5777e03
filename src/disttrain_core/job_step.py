"""A reconcile's two pure steps: `decide_next`, a job's next status and plan from what was observed, and
`status_after_acts`, that status once the plan's acts are done. The reconciler observes, calls them, acts
and writes; what it remembers between reconciles (pods handled, expectations) reaches them as plain values."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.status import DistTrainJobStatus
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.claims import with_claims
from disttrain_core.gang_status import with_gang
from disttrain_core.observed import PodPhase, PodView
from disttrain_core.planner import STUCK_TERMINATING, Plan, plan
from disttrain_core.progress import Report
from disttrain_core.restarts.record import record_outrun, record_restart
from disttrain_core.status_from_pods import after_acts, aggregated, failed_status
from disttrain_core.tensorboard_status import TensorBoardView, with_tensorboard
from disttrain_core.types import ObjectRef, Verdict


@dataclass(frozen=True)
class Observed:
    """What a reconcile saw of a job besides its spec: its pods and other children, the trainer's last report
    and answer on its progress port, its TensorBoard, and its claims still Pending (claim name to words)."""

    pods: Sequence[PodView]
    children: Collection[ObjectRef]
    reported: Report | None = None
    answered: datetime | None = None
    tensorboard: TensorBoardView | None = None
    unbound: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Remembered:
    """What the operator remembers of a job that the decision reads: `handled`, the pod uids and run keys
    acted on already; `awaited`, the names of pods created but not seen yet; `unkept`, the uids of ended
    pods whose log is not kept yet."""

    handled: Collection[str] = ()
    awaited: Collection[str] = ()
    unkept: Collection[str] = ()


@dataclass(frozen=True)
class Acts:
    """What the plan's acts did: the pods created (as the watch will show them), whether every child now
    exists, and the API server's refusal of a create, if any."""

    made: Sequence[PodView] = ()
    created_all: bool = False
    rejected: Verdict | None = None


def decide_next(
    job: DistTrainJob,
    observed: Observed,
    remembered: Remembered,
    settings: BuildSettings,
    *,
    now: datetime,
    stuck_after: timedelta = STUCK_TERMINATING,
) -> tuple[DistTrainJobStatus, Plan]:
    """The status the pods make, with the plan's restart recorded, and the plan from it. A job past its
    backoffLimit is failed first and planned again, for the cleanup that follows."""
    generation = job.metadata.generation
    seen = aggregated(
        job,
        observed.pods,
        created=False,
        now=now,
        reported=observed.reported,
        answered=observed.answered,
        progress_deadline=settings.progress_deadline_seconds,
    )
    status = seen.status

    def plan_for(status: DistTrainJobStatus) -> Plan:
        return plan(
            with_status(job, status),
            observed.pods,
            observed.children,
            settings,
            now=now,
            handled=remembered.handled,
            awaited=remembered.awaited,
            unkept=remembered.unkept,
            stuck_after=stuck_after,
            stalled=seen.stall,
        )

    next_plan = plan_for(status)
    if next_plan.fail is not None:
        status = failed_status(status, next_plan.fail, now, generation)
        next_plan = plan_for(status)
    restart = next_plan.restart
    if restart is not None:
        status = record_restart(
            status,
            restart.failed,
            restart.message,
            now,
            generation,
            disruption=restart.disruption,
            stalled=restart.stalled,
        )
    return record_outrun(status, observed.pods, next_plan.outrun), next_plan


def status_after_acts(
    job: DistTrainJob,
    status: DistTrainJobStatus,
    next_plan: Plan,
    observed: Observed,
    acts: Acts,
    *,
    settings: BuildSettings,
    now: datetime,
    tensorboard_refused: Verdict | None = None,
) -> DistTrainJobStatus:
    """The decided status as the acts leave the job (`after_acts`: the pods deleted gone, those restarting in
    place starting, those just made Pending, Created once every child exists), no pod aggregated again; then
    its TensorBoard, gang and claims, and a create refused."""
    gone, came = _changed(next_plan, observed.pods)
    status = after_acts(job, status, gone=gone, came=[*came, *acts.made], created=acts.created_all, now=now)
    status = with_tensorboard(job, status, observed.tensorboard, now, refused=tensorboard_refused)
    status = with_gang(job, status, settings.gang, now)
    status = with_claims(job, status, observed.unbound, now)
    if acts.rejected is not None:
        status = failed_status(status, acts.rejected, now, job.metadata.generation)
    return status


def with_status(job: DistTrainJob, status: DistTrainJobStatus) -> DistTrainJob:
    """The job as planned and reported on: its spec with this status."""
    return job.model_copy(update={"status": status})


def _changed(next_plan: Plan, pods: Sequence[PodView]) -> tuple[list[PodView], list[PodView]]:
    """The pods the plan's deletes and restarts in place change, as they were and as they are left: those deleted
    gone; those restarting in place with their counts as written, and starting, so that the status says the job
    restarts (its condition and Event) before its pods say they run again, even where every trainer started
    again before the operator saw one end."""
    counts = dict(next_plan.restart.in_place) if next_plan.restart is not None else {}
    deleted = [pod for pod in pods if pod.name in next_plan.delete]
    restarting = [
        pod for pod in pods if pod.name in counts and pod.runs is not None and pod.name not in next_plan.delete
    ]
    starting = [
        replace(
            pod,
            phase=PodPhase.PENDING,
            ready=False,
            runs=replace(pod.runs, counted=max(pod.runs.counted, counts[pod.name])),
        )
        for pod in restarting
        if pod.runs is not None
    ]
    return [*deleted, *restarting], starting
