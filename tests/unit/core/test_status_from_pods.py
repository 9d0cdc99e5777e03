"""Status from pods: every rule of the pure aggregation, a diverged trainer's failure, the rate and the time left."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from disttrain_contract.exit_codes import ExitCode
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.status import ConditionStatus, ConditionType, Evaluation, JobPhase, Progress, SavedCheckpoint
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.observed import PodPhase, PodView
from disttrain_core.planner import Plan, plan
from disttrain_core.progress import Report
from disttrain_core.status_from_pods import aggregated, condition_holds, failed_status
from disttrain_core.types import Verdict
from support.job_builder import T0, JobBuilder, make_job, make_pod, running_pods

T1 = T0 + timedelta(minutes=1)
SETTINGS = BuildSettings()


def _next(job: DistTrainJob, pods: list[PodView], now: datetime = T0, created: bool = True) -> DistTrainJob:
    status = aggregated(job, pods, created=created, now=now).status
    return job.model_copy(update={"status": status})


def test_pending_until_the_pods_run() -> None:
    job = _next(make_job({"Worker": 2}), [make_pod(ReplicaType.WORKER, 0, PodPhase.PENDING)])
    assert job.status.phase is JobPhase.PENDING
    assert condition_holds(job.status, ConditionType.CREATED)
    assert job.status.start_time == T0
    assert job.status.ready == "0/2"
    assert job.status.observed_generation == 3


def test_running_needs_every_worker_without_a_chief() -> None:
    job = make_job({"Worker": 2})
    assert _next(job, running_pods(ReplicaType.WORKER, 1)).status.phase is JobPhase.PENDING
    running = _next(job, running_pods(ReplicaType.WORKER, 2))
    assert running.status.phase is JobPhase.RUNNING
    assert running.status.ready == "2/2"


def test_running_follows_the_chief_when_there_is_one() -> None:
    job = make_job({"Chief": 1, "Worker": 2})
    status = _next(job, running_pods(ReplicaType.CHIEF, 1)).status
    assert status.phase is JobPhase.RUNNING


def test_worker_zero_decides_success_without_a_chief() -> None:
    job = _next(make_job({"Worker": 2}), running_pods(ReplicaType.WORKER, 2))
    done = _next(
        job, [make_pod(ReplicaType.WORKER, 0, PodPhase.SUCCEEDED), *running_pods(ReplicaType.WORKER, 2)[1:]], T1
    )
    assert done.status.phase is JobPhase.SUCCEEDED
    assert done.status.completion_time == T1
    running = next(c for c in done.status.conditions if c.type is ConditionType.RUNNING)
    assert running.status is ConditionStatus.FALSE
    assert done.status.replica_statuses[ReplicaType.WORKER].succeeded == 1


def test_all_workers_policy_waits_for_every_worker() -> None:
    job = make_job({"Chief": 1, "Worker": 2}, successPolicy="AllWorkers")
    pods = [make_pod(ReplicaType.CHIEF, 0, PodPhase.SUCCEEDED), make_pod(ReplicaType.WORKER, 0, PodPhase.SUCCEEDED)]
    assert _next(job, [*pods, *running_pods(ReplicaType.WORKER, 2)[1:]]).status.phase is not JobPhase.SUCCEEDED
    assert _next(job, [*pods, make_pod(ReplicaType.WORKER, 1, PodPhase.SUCCEEDED)]).status.phase is JobPhase.SUCCEEDED


def test_ps_and_evaluator_never_count_for_success() -> None:
    job = make_job({"Chief": 1, "Worker": 1, "PS": 1, "Evaluator": 1})
    pods = [
        make_pod(ReplicaType.PS, 0, PodPhase.SUCCEEDED),
        make_pod(ReplicaType.EVALUATOR, 0, PodPhase.SUCCEEDED),
        *running_pods(ReplicaType.CHIEF, 1),
    ]
    assert _next(job, pods).status.phase is JobPhase.RUNNING


def test_worker_failure_with_never_fails_the_job() -> None:
    job = make_job({"Worker": 2})
    pods = [
        make_pod(ReplicaType.WORKER, 1, PodPhase.FAILED, exit_code=3, reason="Error"),
        *running_pods(ReplicaType.WORKER, 1),
    ]
    status = _next(job, pods).status
    assert status.phase is JobPhase.FAILED
    failed = next(c for c in status.conditions if c.type is ConditionType.FAILED)
    assert failed.reason == "ReplicaFailed"
    assert "job-worker-1 failed with exit code 3 (Error)" in failed.message


def test_evaluator_failure_is_reported_not_fatal() -> None:
    job = make_job({"Chief": 1, "Evaluator": 1})
    pods = [*running_pods(ReplicaType.CHIEF, 1), make_pod(ReplicaType.EVALUATOR, 0, PodPhase.FAILED, exit_code=1)]
    status = _next(job, pods).status
    assert status.phase is JobPhase.RUNNING
    assert status.replica_statuses[ReplicaType.EVALUATOR].failed == 1


def test_exit_code_policy_fails_only_on_permanent_codes() -> None:
    job = JobBuilder().workers(2, restartPolicy="ExitCode").job()
    retryable = [make_pod(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=137)]
    assert _next(job, retryable).status.phase is not JobPhase.FAILED
    permanent = [make_pod(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=2)]
    assert _next(job, permanent).status.phase is JobPhase.FAILED


def test_a_finished_job_stays_finished() -> None:
    job = _next(make_job({"Worker": 1}), [make_pod(ReplicaType.WORKER, 0, PodPhase.SUCCEEDED)], T0)
    later = _next(job, [], T1)
    assert later.status.phase is JobPhase.SUCCEEDED
    assert later.status.completion_time == T0
    assert later.status.replica_statuses[ReplicaType.WORKER].succeeded == 0


def test_transition_times_move_only_on_change() -> None:
    job = _next(make_job({"Worker": 1}), running_pods(ReplicaType.WORKER, 1), T0)
    again = _next(job, running_pods(ReplicaType.WORKER, 1), T1)
    assert again.status == job.status
    stopped = _next(job, [make_pod(ReplicaType.WORKER, 0, PodPhase.PENDING)], T1)
    running = next(c for c in stopped.status.conditions if c.type is ConditionType.RUNNING)
    created = next(c for c in stopped.status.conditions if c.type is ConditionType.CREATED)
    assert (running.status, running.last_transition_time) == (ConditionStatus.FALSE, T1)
    assert created.last_transition_time == T0


def test_not_created_yet() -> None:
    status = _next(make_job({"Worker": 1}), [], created=False).status
    assert status.conditions == []
    assert status.start_time is None
    assert status.phase is JobPhase.PENDING


def test_deadline_fails_a_running_job() -> None:
    job = _next(
        make_job({"Worker": 1}, runPolicy={"activeDeadlineSeconds": 60}), running_pods(ReplicaType.WORKER, 1), T0
    )
    assert _next(job, running_pods(ReplicaType.WORKER, 1), T0 + timedelta(seconds=59)).status.phase is JobPhase.RUNNING
    late = _next(job, running_pods(ReplicaType.WORKER, 1), T0 + timedelta(seconds=60)).status
    assert late.phase is JobPhase.FAILED
    assert next(c for c in late.conditions if c.type is ConditionType.FAILED).reason == "DeadlineExceeded"


def test_succeeded_indexes_are_remembered_when_pods_disappear() -> None:
    job = make_job({"Chief": 1, "Worker": 2}, successPolicy="AllWorkers")
    first = _next(job, [*running_pods(ReplicaType.CHIEF, 1), make_pod(ReplicaType.WORKER, 1, PodPhase.SUCCEEDED)])
    later = _next(first, running_pods(ReplicaType.CHIEF, 1), T1)
    assert later.status.replica_statuses[ReplicaType.WORKER].succeeded_indexes == [1]


def test_suspend_and_resume() -> None:
    running = _next(make_job({"Worker": 1}), running_pods(ReplicaType.WORKER, 1), T0)
    suspended_spec = running.spec.model_copy(
        update={"run_policy": running.spec.run_policy.model_copy(update={"suspend": True})}
    )
    suspended = _next(running.model_copy(update={"spec": suspended_spec}), [], T1)
    assert suspended.status.phase is JobPhase.SUSPENDED
    said = {c.type: (c.status, c.reason) for c in suspended.status.conditions}
    assert said[ConditionType.SUSPENDED] == (ConditionStatus.TRUE, "JobSuspended")
    assert said[ConditionType.RUNNING] == (ConditionStatus.FALSE, "JobSuspended")
    later = T1 + timedelta(minutes=5)
    resumed = _next(suspended.model_copy(update={"spec": running.spec}), [], later)
    assert resumed.status.phase is JobPhase.PENDING
    assert resumed.status.start_time == later
    condition = next(c for c in resumed.status.conditions if c.type is ConditionType.SUSPENDED)
    assert (condition.status, condition.reason) == (ConditionStatus.FALSE, "JobResumed")


def test_a_job_created_suspended_is_not_created_yet() -> None:
    status = _next(make_job({"Worker": 1}, runPolicy={"suspend": True}), [], created=True).status
    assert status.phase is JobPhase.SUSPENDED
    assert not condition_holds(status, ConditionType.CREATED)
    assert status.start_time is None


def _chief_done_evaluator(evaluator: PodPhase, **fields: object) -> list[PodView]:
    """The chief ended at T0; the worker and PS run on; the evaluator as given."""
    return [
        make_pod(ReplicaType.CHIEF, 0, PodPhase.SUCCEEDED, finished_at=T0),
        *running_pods(ReplicaType.WORKER, 1),
        *running_pods(ReplicaType.PS, 1),
        make_pod(ReplicaType.EVALUATOR, 0, evaluator, **fields),  # type: ignore[arg-type]
    ]


def test_the_evaluator_is_given_time_to_score_the_final_checkpoint() -> None:
    job = make_job({"Chief": 1, "Worker": 1, "PS": 1, "Evaluator": 1}, runPolicy={"finalEvaluationSeconds": 120})
    evaluating = _next(job, _chief_done_evaluator(PodPhase.RUNNING), now=T0 + timedelta(seconds=5))
    assert evaluating.status.phase is JobPhase.RUNNING
    running = next(c for c in evaluating.status.conditions if c.type is ConditionType.RUNNING)
    assert running.reason == "FinalEvaluation" and "for up to 120s" in running.message
    assert plan(evaluating, _chief_done_evaluator(PodPhase.RUNNING), [], SETTINGS, now=T0).wake_at == T0 + timedelta(
        seconds=120
    )

    scores = Evaluation(checkpoint="/checkpoints/ckpt-660", step=660, metrics={"accuracy": 0.96}, final=True)
    done = _next(evaluating, _chief_done_evaluator(PodPhase.SUCCEEDED, evaluation=scores), now=T1)
    assert done.status.phase is JobPhase.SUCCEEDED and done.status.evaluation == scores
    succeeded = next(c for c in done.status.conditions if c.type is ConditionType.SUCCEEDED)
    assert succeeded.message == "chief-0 succeeded"


def test_a_held_up_evaluator_never_holds_the_job_past_its_time() -> None:
    job = make_job({"Chief": 1, "Worker": 1, "PS": 1, "Evaluator": 1}, runPolicy={"finalEvaluationSeconds": 60})
    pods = _chief_done_evaluator(PodPhase.RUNNING)
    assert _next(job, pods, now=T0 + timedelta(seconds=59)).status.phase is JobPhase.RUNNING
    late = _next(job, pods, now=T0 + timedelta(seconds=60))
    assert late.status.phase is JobPhase.SUCCEEDED
    succeeded = next(c for c in late.status.conditions if c.type is ConditionType.SUCCEEDED)
    assert "did not end within finalEvaluationSeconds (60s) and is stopped" in succeeded.message
    assert "job-evaluator-0" in plan(late, pods, [], SETTINGS, now=T0 + timedelta(seconds=60)).delete


def test_without_an_evaluator_or_an_end_time_success_is_at_once() -> None:
    job = make_job({"Chief": 1, "Worker": 1, "Evaluator": 1})
    ended = [make_pod(ReplicaType.CHIEF, 0, PodPhase.SUCCEEDED), make_pod(ReplicaType.EVALUATOR, 0, PodPhase.RUNNING)]
    assert _next(job, ended).status.phase is JobPhase.SUCCEEDED  # no end time to count from
    evaluator_gone = _chief_done_evaluator(PodPhase.FAILED)
    assert _next(make_job({"Chief": 1, "Worker": 1, "PS": 1, "Evaluator": 1}), evaluator_gone).status.phase is (
        JobPhase.SUCCEEDED
    )
    at_once = make_job({"Chief": 1, "Worker": 1, "PS": 1, "Evaluator": 1}, runPolicy={"finalEvaluationSeconds": 0})
    assert _next(at_once, _chief_done_evaluator(PodPhase.RUNNING)).status.phase is JobPhase.SUCCEEDED


# A diverged trainer, the rate and the time left: the job as the operator leaves it after each reconcile.
WORKERS = running_pods(ReplicaType.WORKER, 2)


def _two_workers(**run_policy: Any) -> DistTrainJob:
    return JobBuilder().counts({"Worker": 2}, restartPolicy="OnFailure").run_policy(**run_policy).job()


def _seen(job: DistTrainJob, seconds: float, pods: list[PodView] = WORKERS, **kwargs: Any) -> DistTrainJob:
    """The job after a reconcile `seconds` after T0; its trainer answers the progress poll (`answered`) unless
    told otherwise, as disttrain's trainer does from its start."""
    kwargs.setdefault("answered", T0 + timedelta(seconds=seconds))
    status = aggregated(job, pods, True, T0 + timedelta(seconds=seconds), **kwargs).status
    return job.model_copy(update={"status": status})


def _report(step: int, seconds: float) -> Report:
    return Report(Progress(step=step, total_steps=1000, update_time=T0 + timedelta(seconds=seconds)))


def _plan(job: DistTrainJob, seconds: float, pods: list[PodView] = WORKERS) -> Plan:
    return plan(job, pods, [], SETTINGS, now=T0 + timedelta(seconds=seconds))


def test_a_diverged_trainer_fails_the_job_at_once_unless_a_rule_restarts_it() -> None:
    message = "the loss became nan at step 512: training stopped there; the last finite checkpoint is ckpt/ckpt-500"
    diverged = make_pod(
        ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=int(ExitCode.DIVERGED), message=message, diverged=True
    )
    pods = [diverged, WORKERS[1]]
    job = _seen(_seen(_two_workers(), 0), 5, pods=pods)
    failed = next(c for c in job.status.conditions if c.type is ConditionType.FAILED)
    assert failed.reason == "Diverged" and "step 512" in failed.message and "ckpt/ckpt-500" in failed.message
    rule = {"rules": [{"action": "RestartJob", "onExitCodes": {"operator": "In", "values": [5]}}]}
    retried = _seen(_seen(_two_workers(failurePolicy=rule), 0), 5, pods=pods)
    assert not any(c.type is ConditionType.FAILED for c in retried.status.conditions)
    assert _plan(retried, 5, pods=pods).restart is not None


def test_exit_code_5_without_the_trainers_word_follows_the_restart_policy() -> None:
    """Any program may exit 5: a TFJob's user code under OnFailure is retried, as TFJob retries it."""
    five = make_pod(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=int(ExitCode.DIVERGED), message="bad input")
    pods = [five, WORKERS[1]]
    retried = _seen(_seen(_two_workers(), 0), 5, pods=pods)
    assert not any(c.type is ConditionType.FAILED for c in retried.status.conditions)
    decided = _plan(retried, 5, pods=pods)
    assert decided.fail is None and decided.restart is not None
    never = JobBuilder().counts({"Worker": 2}, restartPolicy="Never").job()
    failed = next(c for c in _seen(_seen(never, 0), 5, pods=pods).status.conditions if c.type is ConditionType.FAILED)
    assert failed.reason == "ReplicaFailed" and "exit code 5" in failed.message
    assert "restartPolicy is Never" in failed.message


def test_the_rate_over_the_last_minute_gives_the_time_left() -> None:
    job = _seen(_two_workers(), 0)
    for seconds in range(10, 130, 10):  # 2 steps a second
        job = _seen(job, seconds, reported=_report(2 * seconds, seconds))
    progress = job.status.progress
    assert progress is not None
    assert (progress.steps_per_second, progress.fraction_done) == (2.0, 0.24)
    assert progress.estimated_remaining_seconds == (1000 - 240) // 2
    job = _seen(job, 200, reported=_report(250, 200))  # slower now: the window forgets the fast start
    progress = job.status.progress
    # since the last point a minute or more before (step 240 at 120 s), not since the run's start (1.211)
    assert progress is not None and progress.steps_per_second == round(10 / 80, 3), progress


def test_a_trainer_cannot_write_the_operator_s_readings() -> None:
    from disttrain_core.progress import parse_report  # noqa: PLC0415

    report = parse_report('{"step": 5, "estimatedRemainingSeconds": 1, "lastAdvanceTime": "2030-01-01T00:00:00Z"}')
    assert report is not None and report.progress == Progress(step=5)
    saved = parse_report('{"step": 5, "checkpoint": {"step": 4, "time": "2026-01-01T00:00:00", "path": "ckpt/ckpt-4"}}')
    assert saved is not None and saved.checkpoint == SavedCheckpoint(step=4, time=T0, path="ckpt/ckpt-4")
    broken = parse_report('{"step": 5, "checkpoint": {"step": -1}}')
    assert broken is not None and broken.checkpoint is None and broken.progress.step == 5


def test_the_time_left_goes_blank_while_no_step_comes() -> None:
    """A stalled job does not show the time left measured before it stalled: a minute after its last step the
    rate and the time left are blank, and the operator wakes then to write it."""
    job = _seen(_two_workers(), 0)
    for seconds in range(10, 70, 10):
        job = _seen(job, seconds, reported=_report(2 * seconds, seconds))
    assert job.status.progress is not None and job.status.progress.estimated_remaining_seconds == (1000 - 120) // 2
    assert _plan(job, 60).wake_at == T0 + timedelta(seconds=120)
    quiet = _seen(job, 119, reported=_report(120, 60))
    assert quiet.status.progress is not None and quiet.status.progress.estimated_remaining_seconds is not None
    quiet = _seen(job, 120, reported=_report(120, 60))
    assert quiet.status.progress is not None
    assert (quiet.status.progress.estimated_remaining_seconds, quiet.status.progress.steps_per_second) == (None, None)
    assert quiet.status.progress.step == 120 and _plan(quiet, 120).wake_at is None
    moving = _seen(quiet, 130, reported=_report(140, 130))
    assert moving.status.progress is not None and moving.status.progress.estimated_remaining_seconds is not None


def test_a_failed_status_ends_the_job_then_and_keeps_an_earlier_end() -> None:
    running = _next(make_job({"Worker": 1}), running_pods(ReplicaType.WORKER, 1), T0)
    failed = failed_status(running.status, Verdict("ChildRejected", "Pod demo-worker-0 was refused"), T1, 4)
    assert (failed.phase, failed.completion_time, failed.observed_generation) == (JobPhase.FAILED, T1, 4)
    condition = next(c for c in failed.conditions if c.type is ConditionType.FAILED)
    assert (condition.status, condition.reason, condition.message) == (
        ConditionStatus.TRUE,
        "ChildRejected",
        "Pod demo-worker-0 was refused",
    )
    again = failed_status(failed, Verdict("BackoffLimitExceeded", "later"), T1 + timedelta(minutes=1), 4)
    assert again.completion_time == T1


def test_the_rate_counts_from_the_point_exactly_a_minute_before_and_to_three_places() -> None:
    """40 steps in the first 10 s, then one a second: at 70 s the rate runs from the point at 10 s, a minute
    before, (100 - 40) / 60; from the start it would be 100 / 70."""
    job = _seen(_two_workers(), 0, reported=_report(0, 0))
    for seconds, step in ((10, 40), *((s, 30 + s) for s in range(20, 80, 10))):
        job = _seen(job, seconds, reported=_report(step, seconds))
    progress = job.status.progress
    assert progress is not None and progress.step == 100
    assert (progress.steps_per_second, progress.estimated_remaining_seconds) == (1.0, 900)
    job = _seen(job, 77, reported=_report(107, 77))  # a minute before 77 s is 17 s: the point at 10 s again
    assert job.status.progress is not None and job.status.progress.steps_per_second == round(67 / 67, 3)
    job = _seen(job, 83, reported=_report(115, 83))  # 65 steps in 63 s since the point at 20 s (step 50)
    assert job.status.progress is not None and job.status.progress.steps_per_second == 1.032


def test_a_run_s_rate_counts_none_of_the_points_of_the_run_before() -> None:
    """The job restarted at 50 s (its workers Pending, then Running again at 60 s) and resumed at step 20: the
    rate is this run's, from its first point, not from the fast points before."""
    job = _seen(_two_workers(), 0, reported=_report(0, 0))
    for seconds in (10, 20, 30, 40):
        job = _seen(job, seconds, reported=_report(10 * seconds, seconds))
    pending = [make_pod(ReplicaType.WORKER, index, PodPhase.PENDING) for index in (0, 1)]
    job = _seen(job, 50, pods=pending)
    job = _seen(job, 60, reported=_report(20, 60))
    job = _seen(job, 80, reported=_report(60, 80))
    progress = job.status.progress
    assert progress is not None and progress.steps_per_second == 2.0, progress


def test_the_fraction_done_stops_at_one_and_a_finished_count_has_no_time_left() -> None:
    job = _seen(_two_workers(), 0, reported=_report(0, 0))
    job = _seen(job, 10, reported=_report(1000, 10))
    progress = job.status.progress
    assert progress is not None and (progress.fraction_done, progress.estimated_remaining_seconds) == (1.0, 0)
    job = _seen(job, 20, reported=_report(1500, 20))  # a trainer that runs past its total
    progress = job.status.progress
    assert progress is not None and (progress.fraction_done, progress.estimated_remaining_seconds) == (1.0, None)
