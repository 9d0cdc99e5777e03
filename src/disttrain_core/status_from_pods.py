"""Status from observed pods: a pure function, so every rule of it is a unit test.

A finished job stays finished: once Succeeded or Failed, later pod changes (cleanup deleting PS
pods, a garbage-collected worker) only update the counts, never the outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType, SuccessPolicy
from disttrain_core.api.status import (
    MAX_CONDITION_MESSAGE,
    MAX_UNKEPT_LOGS,
    Condition,
    ConditionStatus,
    ConditionType,
    DistTrainJobStatus,
    JobPhase,
    Progress,
    ProgressPoint,
    ReplicaStatus,
    SavedCheckpoint,
    UnkeptLogs,
)
from disttrain_core.observed import PodPhase, PodView, find_pod
from disttrain_core.progress import Report, newest, reporting_task, with_report
from disttrain_core.restarts.rules import diverged, fails_job
from disttrain_core.restarts.stalls import (
    NOT_REPORTED,
    PROGRESSING,
    StallReading,
    Unjudged,
    answered_in_run,
    running_since,
    stall,
)
from disttrain_core.types import Verdict

logger = logging.getLogger(__name__)

JOB_RUNNING = "JobRunning"  # the Running condition's reason while the pods run
CHILDREN_CREATED = Verdict("ChildrenCreated", "the job's Service, volume and pods were created")
PODS_NOT_RUNNING = Verdict("PodsNotRunning", "waiting for the job's pods to run")


def with_condition(
    conditions: Sequence[Condition],
    kind: ConditionType,
    *,
    holds: bool,
    verdict: Verdict,
    now: datetime,
    generation: int | None,
) -> list[Condition]:
    """The conditions with `kind` set; its transition time moves only when its status changes."""
    status = ConditionStatus.TRUE if holds else ConditionStatus.FALSE
    previous = next((condition for condition in conditions if condition.type is kind), None)
    changed = previous is None or previous.status is not status
    updated = Condition(
        type=kind,
        status=status,
        reason=verdict.reason,
        message=verdict.message,
        last_transition_time=now if changed or previous is None else previous.last_transition_time,
        observed_generation=generation,
    )
    others = [condition for condition in conditions if condition.type is not kind]
    return sorted([*others, updated], key=lambda condition: list(ConditionType).index(condition.type))


def condition_holds(status: DistTrainJobStatus, kind: ConditionType) -> bool:
    found = status.condition(kind)
    return found is not None and found.status is ConditionStatus.TRUE


def _message(status: DistTrainJobStatus, kind: ConditionType) -> str:
    found = status.condition(kind)
    return found.message if found is not None else ""


def is_finished(status: DistTrainJobStatus) -> bool:
    return condition_holds(status, ConditionType.SUCCEEDED) or condition_holds(status, ConditionType.FAILED)


def replica_statuses(job: DistTrainJob, pods: Sequence[PodView]) -> dict[ReplicaType, ReplicaStatus]:
    return {
        replica_type: _moved(
            job.status.replica_statuses.get(replica_type, ReplicaStatus()),
            job.spec.replicas(replica_type),
            came=[pod for pod in pods if pod.replica_type is replica_type],
            counted_anew=True,
        )
        for replica_type in job.spec.replica_specs
    }


def _tally(pods: Sequence[PodView]) -> tuple[int, int, int, int]:
    """What pods add to a replica's counts: active, ready, succeeded, failed."""
    return (
        sum(pod.active for pod in pods),
        sum(pod.ready for pod in pods),
        sum(pod.phase is PodPhase.SUCCEEDED for pod in pods),
        sum(pod.phase is PodPhase.FAILED for pod in pods),
    )


def _moved(
    counts: ReplicaStatus,
    replicas: int,
    *,
    came: Sequence[PodView],
    gone: Sequence[PodView] = (),
    counted_anew: bool = False,
) -> ReplicaStatus:
    """A replica's counts once `gone` left its pods and `came` joined them (counted from nothing where
    `counted_anew`); the restarts, the indexes that succeeded and the attempts made are kept and grow."""
    start = (0, 0, 0, 0) if counted_anew else (counts.active, counts.ready, counts.succeeded, counts.failed)
    active, ready, succeeded, failed = (
        before - out + into for before, out, into in zip(start, _tally(gone), _tally(came), strict=True)
    )
    indexes = {pod.index for pod in came if pod.phase is PodPhase.SUCCEEDED}
    return ReplicaStatus(
        active=active,
        ready=ready,
        succeeded=succeeded,
        failed=failed,
        restarts=counts.restarts,
        succeeded_indexes=sorted(indexes.union(counts.succeeded_indexes)),
        attempts=_attempts(replicas, counts.attempts, came),
    )


def _ready(counts: Mapping[ReplicaType, ReplicaStatus], job: DistTrainJob) -> str:
    return f"{sum(status.ready for status in counts.values())}/{job.spec.total_replicas}"


def with_unkept_logs(status: DistTrainJobStatus, reported: Sequence[UnkeptLogs]) -> DistTrainJobStatus:
    """The status naming also the runs of attempts reported without a kept log, the latest MAX_UNKEPT_LOGS."""
    new = [entry for entry in reported if entry not in status.unkept_logs]
    if not new:
        return status
    return status.model_copy(update={"unkept_logs": [*status.unkept_logs, *new][-MAX_UNKEPT_LOGS:]})


def _attempts(replicas: int, previous: Sequence[int], pods: Sequence[PodView]) -> list[int]:
    """By index, the latest attempt made: as remembered, or a pod's own number where the view shows a later
    one (a pod made just before the operator stopped, whose status write was lost)."""
    made = [previous[index] if index < len(previous) else 0 for index in range(replicas)]
    for pod in pods:
        if pod.attempt is not None and pod.index < replicas:
            made[pod.index] = max(made[pod.index], pod.attempt)
    return made if any(made) else []


def success(job: DistTrainJob, pods: Sequence[PodView]) -> Verdict | None:
    """Default: the Chief succeeded, or worker 0 without a Chief. AllWorkers: the Chief and every Worker.

    PS and Evaluator never count: parameter servers serve until stopped and an evaluator is a side-car.
    """
    spec = job.spec
    required = [reporting_task(spec)]
    if spec.success_policy is SuccessPolicy.ALL_WORKERS:
        required = [(ReplicaType.CHIEF, 0)] if spec.replicas(ReplicaType.CHIEF) else []
        required += [(ReplicaType.WORKER, index) for index in range(spec.replicas(ReplicaType.WORKER))]
    for replica_type, index in required:
        pod = find_pod(pods, replica_type, index)
        if pod is None or pod.phase is not PodPhase.SUCCEEDED:
            return None
    names = ", ".join(f"{replica_type.task_type}-{index}" for replica_type, index in required)
    return Verdict("JobSucceeded", f"{names} succeeded")


def evaluation_due(job: DistTrainJob, pods: Sequence[PodView]) -> datetime | None:
    """Until when the job waits for its Evaluator to score the final checkpoint, once training succeeded: the
    chief's (or worker 0's) end plus runPolicy.finalEvaluationSeconds. None when there is nothing to wait
    for: no Evaluator, or one that ended, or training that ended without a time to count from."""
    evaluator = find_pod(pods, ReplicaType.EVALUATOR, 0)
    if evaluator is None or not evaluator.active:
        return None
    reporter = find_pod(pods, *reporting_task(job.spec))
    if reporter is None or reporter.finished_at is None:
        return None
    return reporter.finished_at + timedelta(seconds=job.spec.run_policy.final_evaluation_seconds)


def describe_failure(pod: PodView) -> str:
    if pod.disruption is not None:
        return f"{pod.name} was taken away ({pod.disruption})"
    if pod.deleting and pod.phase is not PodPhase.FAILED:
        return f"{pod.name} was deleted while {pod.phase.value.lower()}"
    code = "no exit code" if pod.exit_code is None else f"exit code {pod.exit_code}"
    said = f": {pod.message}" if pod.message else ""
    return f"{pod.name} failed with {code}" + (f" ({pod.reason})" if pod.reason else "") + said


def failure(job: DistTrainJob, pods: Sequence[PodView]) -> Verdict | None:
    """A pod failed for good (`restarts.rules.fails_job`): a FailJob rule matched it (failed, or deleted before
    it ended), or, with no rule, it failed and its restartPolicy is Never or its exit code permanent under
    ExitCode. An Evaluator's failure fails the job only by a rule (replicaStatuses report it otherwise); a pod
    taken away on purpose only by a rule too."""
    for pod in pods:
        if not pod.lost:
            continue
        answer = fails_job(job, pod)
        if answer is None or (answer.rule is None and pod.phase is not PodPhase.FAILED):
            continue
        if answer.rule is not None:
            message = f"pod {describe_failure(pod)}; failurePolicy rule {answer.rule} fails the job"
            return Verdict("FailurePolicy", message)
        if diverged(pod):
            message = f"pod {describe_failure(pod)}; not retried: a restart from the same checkpoint diverges again"
            return Verdict("Diverged", message)
        policy = job.spec.replica_specs[pod.replica_type].restart_policy
        return Verdict("ReplicaFailed", f"pod {describe_failure(pod)}; restartPolicy is {policy.value}")
    return None


def running(job: DistTrainJob, pods: Sequence[PodView]) -> bool:
    """The Chief runs, or without a Chief every Worker runs."""
    if job.spec.replicas(ReplicaType.CHIEF) > 0:
        return _runs(find_pod(pods, ReplicaType.CHIEF, 0))
    workers = [pod for pod in pods if pod.replica_type is ReplicaType.WORKER and _runs(pod)]
    return len(workers) == job.spec.replicas(ReplicaType.WORKER) > 0


def _runs(pod: PodView | None) -> bool:
    """A pod being deleted, or owed a restart in place, runs no more (a restart that stops running pods, as a
    stall's, is not over while they stop)."""
    return pod is not None and pod.phase is PodPhase.RUNNING and not pod.deleting and not pod.owed_restart_in_place


def deadline_exceeded(job: DistTrainJob, now: datetime) -> Verdict | None:
    """activeDeadlineSeconds counts from startTime; the operator wakes itself for it (see planner)."""
    seconds, start = job.spec.run_policy.active_deadline_seconds, job.status.start_time
    if seconds is None or start is None or (now - start).total_seconds() < seconds:
        return None
    return Verdict("DeadlineExceeded", f"the job ran longer than activeDeadlineSeconds ({seconds}s)")


def _phase(status: DistTrainJobStatus) -> JobPhase:
    for kind, phase in (
        (ConditionType.FAILED, JobPhase.FAILED),
        (ConditionType.SUCCEEDED, JobPhase.SUCCEEDED),
        (ConditionType.SUSPENDED, JobPhase.SUSPENDED),
        (ConditionType.RESTARTING, JobPhase.RESTARTING),
        (ConditionType.RUNNING, JobPhase.RUNNING),
    ):
        if condition_holds(status, kind):
            return phase
    return JobPhase.PENDING


def _suspended(status: DistTrainJobStatus, now: datetime, generation: int | None) -> DistTrainJobStatus:
    """Kueue (or a user) suspended the job: no pods, the volume kept, and time stops counting."""
    verdict = Verdict("JobSuspended", "runPolicy.suspend is true: the pods are deleted, the volume is kept")
    conditions = with_condition(
        status.conditions, ConditionType.SUSPENDED, holds=True, verdict=verdict, now=now, generation=generation
    )
    if condition_holds(status, ConditionType.RUNNING):
        stopped = Verdict("JobSuspended", "the job is suspended")
        conditions = with_condition(
            conditions, ConditionType.RUNNING, holds=False, verdict=stopped, now=now, generation=generation
        )
    return status.model_copy(update={"conditions": conditions, "phase": JobPhase.SUSPENDED})


def _outcome(
    job: DistTrainJob, pods: Sequence[PodView], now: datetime
) -> tuple[Verdict | None, ConditionType, Verdict | None]:
    """How the job ended (Failed or Succeeded, and why), or None; and, while training succeeded but the
    Evaluator still scores the final checkpoint within its time, why the job runs on."""
    failed = failure(job, pods) or deadline_exceeded(job, now)
    if failed is not None:
        return failed, ConditionType.FAILED, None
    succeeded = success(job, pods)
    due = evaluation_due(job, pods) if succeeded is not None else None
    if succeeded is None or due is None:
        return succeeded, ConditionType.SUCCEEDED, None
    seconds = job.spec.run_policy.final_evaluation_seconds
    if now < due:
        message = f"{succeeded.message}; the evaluator scores the final checkpoint (for up to {seconds}s)"
        return None, ConditionType.SUCCEEDED, Verdict("FinalEvaluation", message)
    stopped = f"the evaluator did not end within finalEvaluationSeconds ({seconds}s) and is stopped"
    return Verdict(succeeded.reason, f"{succeeded.message}; {stopped}"), ConditionType.SUCCEEDED, None


@dataclass(frozen=True)
class Aggregated:
    """A job's status from its pods, and the stall reading that status was judged by (`stalls.stall`), which
    the restart decision takes rather than read again."""

    status: DistTrainJobStatus
    stall: StallReading


def aggregated(
    job: DistTrainJob,
    pods: Sequence[PodView],
    created: bool,
    now: datetime,
    reported: Report | None = None,
    *,
    answered: datetime | None = None,
    progress_deadline: int | None = None,
) -> Aggregated:
    """The job's next status from its observed pods; `created` says every child exists.

    `reported` is the report the operator last polled from the running trainer, if any, and `answered` when
    the trainer last answered on its progress port (`stalls`); `progress_deadline` the operator's default for
    runPolicy.progressDeadlineSeconds.
    """
    previous = job.status
    generation = job.metadata.generation
    unread = StallReading(None)  # a finished or suspended job, or one that ends now, is not judged by a deadline
    if is_finished(previous):
        return Aggregated(_counted(job, pods, reported, now, running_since(previous)), unread)
    if job.spec.run_policy.suspend:
        counted = _counted(job, pods, reported, now, running_since(previous))
        return Aggregated(_suspended(counted, now, generation), unread)
    conditions = list(previous.conditions)
    resumed = condition_holds(previous, ConditionType.SUSPENDED)
    if resumed:
        verdict = Verdict("JobResumed", "runPolicy.suspend is false: the pods are created again")
        conditions = with_condition(
            conditions, ConditionType.SUSPENDED, holds=False, verdict=verdict, now=now, generation=generation
        )
    if created or condition_holds(previous, ConditionType.CREATED):
        conditions = with_condition(
            conditions, ConditionType.CREATED, holds=True, verdict=CHILDREN_CREATED, now=now, generation=generation
        )
    decided = _outcome(job, pods, now)
    conditions = _running_conditions(job, pods, conditions, outcome=decided, now=now)
    outcome = decided[0]
    # the reports are judged by the run these conditions say, so the same pods aggregated again change nothing
    base = _counted(job, pods, reported, now, running_since(previous.model_copy(update={"conditions": conditions})))
    if resumed:
        base = base.model_copy(update={"start_time": now})  # deadlines count from the resume
    status = base.model_copy(update={"conditions": conditions})
    status = status.model_copy(update={"progress_answer_time": _first_answer(status, answered)})
    status = _time_left_lapsed(status, now)
    reading = unread
    if outcome is None:
        judged = job.model_copy(update={"status": status})
        reading = StallReading(stall(judged, now, progress_deadline))
        status = _stalled(judged, now, reading.found)
    update: dict[str, object] = {"phase": _phase(status)}
    if status.start_time is None and condition_holds(status, ConditionType.CREATED):
        update["start_time"] = now
    if outcome is not None:
        update["completion_time"] = now
    return Aggregated(status.model_copy(update=update), reading)


def _stalled(job: DistTrainJob, now: datetime, verdict: Verdict | Unjudged | datetime | None) -> DistTrainJobStatus:
    """The status with Stalled True while the job runs past its progress deadline (`verdict`, `stalls.stall`'s);
    once it runs again after the restart the stall called for, Stalled turns False. A run the deadline does not
    judge has Stalled False saying why (`stalls.Unjudged`), until its trainer answers."""
    status, generation = job.status, job.metadata.generation
    stalled = status.condition(ConditionType.STALLED)
    since = running_since(status)
    if isinstance(verdict, Verdict | Unjudged):
        holds = isinstance(verdict, Verdict)
        said = verdict if isinstance(verdict, Verdict) else verdict.verdict()
    elif stalled is not None and stalled.status is ConditionStatus.TRUE:
        if since is None or since <= stalled.last_transition_time:
            return status
        holds, said = (
            False,
            Verdict(PROGRESSING, "the job runs again since its restart; the progress deadline counts anew"),
        )
    elif stalled is not None and stalled.reason == NOT_REPORTED and answered_in_run(status):
        holds, said = (
            False,
            Verdict(PROGRESSING, "the trainer answers on its progress port: the deadline judges the run"),
        )
    else:
        return status
    conditions = with_condition(
        status.conditions, ConditionType.STALLED, holds=holds, verdict=said, now=now, generation=generation
    )
    return status.model_copy(update={"conditions": conditions})


def _counted(
    job: DistTrainJob, pods: Sequence[PodView], reported: Report | None, now: datetime, since: datetime | None
) -> DistTrainJobStatus:
    """The previous status with what the pods count now: replicas, readiness, progress and its curve (the run
    began `since`), the last checkpoint, the Evaluator's scores."""
    previous = job.status
    counts = replica_statuses(job, pods)
    reporter = find_pod(pods, *reporting_task(job.spec))
    evaluator = find_pod(pods, ReplicaType.EVALUATOR, 0)
    reports = [report for report in (reporter.final_report if reporter else None, reported) if report is not None]
    progress = _progress(previous.progress, [report.progress for report in reports], now, since)
    history = (
        previous.progress_history if progress == previous.progress else with_report(previous.progress_history, progress)
    )
    if progress is not None and progress != previous.progress:
        progress = _with_rate(progress, history, previous.progress, since)
    return previous.model_copy(
        update={
            "replica_statuses": counts,
            "ready": _ready(counts, job),
            "observed_generation": job.metadata.generation,
            "progress": progress,
            "progress_history": history,
            "checkpoint": _latest_checkpoint(previous.checkpoint, *(report.checkpoint for report in reports)),
            "evaluation": (evaluator.evaluation if evaluator else None) or previous.evaluation,
        }
    )


def _progress(
    previous: Progress | None, reports: Sequence[Progress], now: datetime, since: datetime | None
) -> Progress | None:
    """The newest report, and when the step last advanced (`Progress.last_advance_time`, this clock). Within
    one run (begun `since`) a report of a lower step is logged and ignored; the first report a run makes
    (dated from its start on) counts as an advance, whatever its step: a run resumed from a checkpoint starts
    lower."""
    latest = newest(previous, *reports)
    if latest is None or latest is previous:
        return previous
    advanced_at = previous.last_advance_time if previous is not None else None
    this_run = advanced_at is not None and since is not None and advanced_at >= since
    step, before = latest.step or 0, (previous.step or 0) if previous is not None else 0
    if this_run and step < before:
        logger.warning("a report of step %d after step %d in the same run is ignored", step, before)
        return previous
    # a run's first report counts where it was made since the run began: an ended pod's last report does not
    first = since is None or latest.update_time is None or latest.update_time >= since
    advanced = step > before if this_run else first
    return latest.model_copy(update={"last_advance_time": now if advanced else advanced_at})


def _first_answer(status: DistTrainJobStatus, answered: datetime | None) -> datetime | None:
    """When the current run's trainer was first seen answering: kept once this run has one, else the latest
    answer where it came in this run (the poller sees an answer long before a reconcile passes it on)."""
    if answered_in_run(status) or answered is None:
        return status.progress_answer_time
    since = running_since(status)
    return answered if since is not None and answered >= since else status.progress_answer_time


RATE_WINDOW = timedelta(seconds=60)


def time_left_lapses(status: DistTrainJobStatus) -> datetime | None:
    """When the rate and the time left of a running job stop holding if no step comes: a minute after the last
    advance, or three of the curve's last gaps between reports where those are longer."""
    progress, history = status.progress, status.progress_history
    if progress is None or progress.last_advance_time is None or progress.estimated_remaining_seconds is None:
        return None
    if running_since(status) is None or is_finished(status):
        return None
    gap = timedelta(0)
    if len(history) >= 2 and history[-1].time is not None and history[-2].time is not None:
        gap = 3 * (history[-1].time - history[-2].time)
    return progress.last_advance_time + max(RATE_WINDOW, gap)


def _time_left_lapsed(status: DistTrainJobStatus, now: datetime) -> DistTrainJobStatus:
    """The status with no rate or time left once no step came for longer than they hold (`time_left_lapses`):
    a stalled job shows no time left, not the last one measured."""
    lapses = time_left_lapses(status)
    if status.progress is None or lapses is None or now < lapses:
        return status
    blank = status.progress.model_copy(update={"steps_per_second": None, "estimated_remaining_seconds": None})
    return status.model_copy(update={"progress": blank})


def _with_rate(
    progress: Progress, history: Sequence[ProgressPoint], previous: Progress | None, since: datetime | None
) -> Progress:
    """The report with the rate since the curve's last point of this run at or before RATE_WINDOW ago (its
    first point, where the run is younger), the time left at that rate and the fraction done; the rate
    before where this run has one point."""
    rate = previous.steps_per_second if previous is not None else None
    end = history[-1] if history else None
    if end is not None and end.time is not None:
        timed = [point for point in history if point.time is not None and (since is None or point.time >= since)]
        before = [point for point in timed if point.time is not None and point.time <= end.time - RATE_WINDOW]
        first = before[-1] if before else timed[0] if timed else end
        seconds = (end.time - first.time).total_seconds() if first.time is not None else 0.0
        if end.step > first.step and seconds > 0:
            rate = round((end.step - first.step) / seconds, 3)
    total, step = progress.total_steps, progress.step
    remaining, fraction = None, None
    if total and step is not None:
        fraction = round(min(step / total, 1.0), 4)
        remaining = int((total - step) / rate) if rate and total >= step else None
    return progress.model_copy(
        update={"steps_per_second": rate, "estimated_remaining_seconds": remaining, "fraction_done": fraction}
    )


def _latest_checkpoint(*saved: SavedCheckpoint | None) -> SavedCheckpoint | None:
    """The checkpoint saved last (by time, then step); the earliest argument wins a tie."""
    known = [checkpoint for checkpoint in saved if checkpoint is not None]
    return max(known, key=lambda checkpoint: (checkpoint.time or _NEVER, checkpoint.step), default=None)


_NEVER = datetime.min.replace(tzinfo=UTC)


def _running_conditions(
    job: DistTrainJob,
    pods: Sequence[PodView],
    conditions: list[Condition],
    *,
    outcome: tuple[Verdict | None, ConditionType, Verdict | None],
    now: datetime,
) -> list[Condition]:
    """Running, and Succeeded or Failed, as the outcome says: the job ended, runs (and recovered from a
    restart), waits for its final evaluation, or waits for its pods."""
    previous, generation = job.status, job.metadata.generation
    ended, kind, evaluating = outcome
    if evaluating is not None:
        return with_condition(
            conditions, ConditionType.RUNNING, holds=True, verdict=evaluating, now=now, generation=generation
        )
    if ended is not None:
        conditions = with_condition(conditions, kind, holds=True, verdict=ended, now=now, generation=generation)
        finished = Verdict("JobFinished", f"the job {kind.value.lower()}")
        return with_condition(
            conditions, ConditionType.RUNNING, holds=False, verdict=finished, now=now, generation=generation
        )
    if running(job, pods):
        verdict = Verdict(
            JOB_RUNNING, "the chief is running" if job.spec.replicas(ReplicaType.CHIEF) else "every worker is running"
        )
        conditions = with_condition(
            conditions, ConditionType.RUNNING, holds=True, verdict=verdict, now=now, generation=generation
        )
        if condition_holds(previous, ConditionType.RESTARTING):
            cause = _message(previous, ConditionType.RESTARTING)
            recovered = Verdict(
                "Recovered", f"the restarted pods are running again after: {cause}"[:MAX_CONDITION_MESSAGE]
            )
            conditions = with_condition(
                conditions, ConditionType.RESTARTING, holds=False, verdict=recovered, now=now, generation=generation
            )
        return conditions
    if condition_holds(previous, ConditionType.RUNNING):
        return with_condition(
            conditions, ConditionType.RUNNING, holds=False, verdict=PODS_NOT_RUNNING, now=now, generation=generation
        )
    return conditions


def after_acts(
    job: DistTrainJob,
    status: DistTrainJobStatus,
    *,
    gone: Sequence[PodView],
    came: Sequence[PodView],
    created: bool,
    now: datetime,
) -> DistTrainJobStatus:
    """The decided `status` with what a plan's acts did to the job's pods, none aggregated again: `gone` left
    the view (deleted, or stopped to restart in place), `came` joined it (made, or restarting in place, as the
    watch will show them). The counts move by those pods alone; Running turns False where a pod it needs went;
    Created holds once every child exists. The outcome, progress and stall stand as decided: no pod that came
    runs yet."""
    counts = {
        kind: _moved(
            replica,
            job.spec.replicas(kind),
            came=[pod for pod in came if pod.replica_type is kind],
            gone=[pod for pod in gone if pod.replica_type is kind],
        )
        for kind, replica in status.replica_statuses.items()
    }
    status = status.model_copy(update={"replica_statuses": counts, "ready": _ready(counts, job)})
    if is_finished(status) or job.spec.run_policy.suspend:
        return status
    generation, conditions = job.metadata.generation, status.conditions
    running_said = status.condition(ConditionType.RUNNING)
    if running_said is not None and running_said.reason == JOB_RUNNING and any(_runs_for(job, pod) for pod in gone):
        conditions = with_condition(
            conditions, ConditionType.RUNNING, holds=False, verdict=PODS_NOT_RUNNING, now=now, generation=generation
        )
    start_time = status.start_time
    if created:
        conditions = with_condition(
            conditions, ConditionType.CREATED, holds=True, verdict=CHILDREN_CREATED, now=now, generation=generation
        )
        start_time = start_time or now
    status = status.model_copy(update={"conditions": conditions, "start_time": start_time})
    return status.model_copy(update={"phase": _phase(status)})


def _runs_for(job: DistTrainJob, pod: PodView) -> bool:
    """The pod runs, and the job runs only while it does (`running`): the Chief, or without one a Worker."""
    needed = ReplicaType.CHIEF if job.spec.replicas(ReplicaType.CHIEF) > 0 else ReplicaType.WORKER
    return pod.replica_type is needed and (needed is ReplicaType.WORKER or pod.index == 0) and _runs(pod)


def failed_status(
    status: DistTrainJobStatus, verdict: Verdict, now: datetime, generation: int | None
) -> DistTrainJobStatus:
    """The status with the Failed condition of `verdict`."""
    conditions = with_condition(
        status.conditions, ConditionType.FAILED, holds=True, verdict=verdict, now=now, generation=generation
    )
    return status.model_copy(
        update={
            "conditions": conditions,
            "phase": JobPhase.FAILED,
            "completion_time": status.completion_time or now,
            "observed_generation": generation,
        }
    )
