"""Status from pods: every rule of the pure aggregation."""

from __future__ import annotations

from datetime import datetime, timedelta

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType, RestartPolicy
from disttrain_core.api.status import ConditionStatus, ConditionType, Evaluation, JobPhase
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.observed import PodPhase, PodView
from disttrain_core.planner import plan
from disttrain_core.restarts.record import record_restart
from disttrain_core.status_from_pods import aggregate, condition_holds
from support.job_builder import T0, JobBuilder, make_job, make_pod, running_pods

T1 = T0 + timedelta(minutes=1)
SETTINGS = BuildSettings()


def _next(job: DistTrainJob, pods: list[PodView], now: datetime = T0, created: bool = True) -> DistTrainJob:
    status = aggregate(job, pods, created=created, now=now)
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


def test_a_restart_is_counted_and_shown_until_the_pods_run_again() -> None:
    job = _next(make_job({"Worker": 2}), running_pods(ReplicaType.WORKER, 2), T0)
    failed = [make_pod(ReplicaType.WORKER, 1, PodPhase.FAILED, exit_code=130)]
    status = record_restart(job.status, failed, "worker-1 failed: the whole job restarts", T1, 3)
    assert (status.restart_count, status.replica_statuses[ReplicaType.WORKER].restarts) == (1, 1)
    assert status.phase is JobPhase.RESTARTING
    restarting = job.model_copy(update={"status": status})
    assert (
        _next(restarting, [make_pod(ReplicaType.WORKER, 0, PodPhase.PENDING)], T1).status.phase is JobPhase.RESTARTING
    )
    recovered = _next(restarting, running_pods(ReplicaType.WORKER, 2), T1 + timedelta(minutes=1))
    assert recovered.status.phase is JobPhase.RUNNING
    restart_condition = next(c for c in recovered.status.conditions if c.type is ConditionType.RESTARTING)
    assert (restart_condition.status, restart_condition.reason) == (ConditionStatus.FALSE, "Recovered")
    assert restart_condition.message == (  # the cause stays on the job once the job runs again
        "the restarted pods are running again after: worker-1 failed: the whole job restarts"
    )
    assert recovered.status.restart_count == 1


def test_a_disruption_is_counted_apart_from_restarts_and_never_fails_the_job() -> None:
    made = make_job({"Worker": 2})
    never = {
        kind: spec.model_copy(update={"restart_policy": RestartPolicy.NEVER})
        for kind, spec in made.spec.replica_specs.items()
    }
    made = made.model_copy(update={"spec": made.spec.model_copy(update={"replica_specs": never})})
    job = _next(made, running_pods(ReplicaType.WORKER, 2), T0)
    evicted = make_pod(ReplicaType.WORKER, 1, PodPhase.FAILED, exit_code=143, disruption="TerminationByKubelet")
    message = "worker-1 was taken away (TerminationByKubelet): the whole job restarts"
    status = record_restart(job.status, [evicted], message, T1, 3, disruption="TerminationByKubelet")
    assert (status.restart_count, status.disruptions, status.phase) == (0, 1, JobPhase.RESTARTING)
    assert status.last_disruption is not None
    assert (status.last_disruption.reason, status.last_disruption.time) == ("TerminationByKubelet", T1)
    restarting = next(c for c in status.conditions if c.type is ConditionType.RESTARTING)
    assert (restarting.reason, restarting.message) == ("Disrupted", message)
    after = _next(job.model_copy(update={"status": status}), [evicted, *running_pods(ReplicaType.WORKER, 1)], T1)
    assert after.status.phase is not JobPhase.FAILED  # a Never replica's failure would fail it


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
