"""The progress deadline's clock at its edges and what a stall calls for: the pure status and plan."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.parsing import parse_job
from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.status import (
    Condition,
    ConditionStatus,
    ConditionType,
    DistTrainJobStatus,
    JobPhase,
    Progress,
    SavedCheckpoint,
)
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.observed import PodPhase, PodView
from disttrain_core.planner import Plan, plan
from disttrain_core.progress import Report
from disttrain_core.restarts.record import record_restart
from disttrain_core.restarts.stalls import Unjudged, stall
from disttrain_core.status_from_pods import aggregated
from disttrain_core.tfjob_conversion import convert
from support.job_builder import JobBuilder, make_pod, running_pods

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = BuildSettings()
WORKERS = running_pods(ReplicaType.WORKER, 2)


def _job(**run_policy: Any) -> DistTrainJob:
    return JobBuilder().counts({"Worker": 2}, restartPolicy="OnFailure").run_policy(**run_policy).job()


def _seen(job: DistTrainJob, seconds: float, pods: list[PodView] = WORKERS, **kwargs: Any) -> DistTrainJob:
    """The job as the operator leaves it after a reconcile `seconds` after T0; its trainer answers the progress
    poll (`answered`) unless told otherwise, as disttrain's trainer does from its start."""
    kwargs.setdefault("answered", T0 + timedelta(seconds=seconds))
    status = aggregated(job, pods, True, T0 + timedelta(seconds=seconds), **kwargs).status
    return job.model_copy(update={"status": status})


def _report(step: int, seconds: float, checkpoint: int | None = None) -> Report:
    saved = None if checkpoint is None else SavedCheckpoint(step=checkpoint, time=T0, path=f"ckpt/ckpt-{checkpoint}")
    return Report(Progress(step=step, total_steps=1000, update_time=T0 + timedelta(seconds=seconds)), saved)


def _stalled(job: DistTrainJob) -> ConditionStatus | None:
    return next((c.status for c in job.status.conditions if c.type is ConditionType.STALLED), None)


def _plan(job: DistTrainJob, seconds: float, pods: list[PodView] = WORKERS) -> Plan:
    return plan(job, pods, [], SETTINGS, now=T0 + timedelta(seconds=seconds))


def test_a_step_that_stops_advancing_stalls_the_job_at_the_deadline_and_restarts_it_counted() -> None:
    job = _seen(_job(progressDeadlineSeconds=30), 0)  # Running from T0
    job = _seen(job, 5, reported=_report(100, 5, checkpoint=100))
    job = _seen(job, 10, reported=_report(120, 10, checkpoint=100))
    assert stall(job, T0 + timedelta(seconds=39), None) == T0 + timedelta(seconds=40)  # the operator wakes then
    assert _stalled(_seen(job, 39, reported=_report(120, 10))) is None  # the same report again: no advance
    job = _seen(job, 40, reported=_report(120, 10))
    assert _stalled(job) is ConditionStatus.TRUE
    stalled = next(c for c in job.status.conditions if c.type is ConditionType.STALLED)
    assert stalled.reason == "NoProgress" and "step 120" in stalled.message and "(30 s)" in stalled.message
    decided = _plan(job, 40)
    assert decided.restart is not None and decided.restart.stalled and decided.fail is None
    assert set(decided.delete) == {pod.name for pod in WORKERS}
    status = record_restart(job.status, (), decided.restart.message, T0 + timedelta(seconds=40), 1, stalled=True)
    restarting = next(c for c in status.conditions if c.type is ConditionType.RESTARTING)
    assert (status.restart_count, restarting.reason) == (1, "Stalled")
    said = "resumes from the last checkpoint reported, step 100 (ckpt/ckpt-100), or one saved since, redoing the 20"
    assert said in restarting.message
    stopping = [replace(pod, deleting=True) for pod in WORKERS]  # still running while they stop
    after = aggregated(job.model_copy(update={"status": status}), stopping, True, T0 + timedelta(seconds=41)).status
    assert after.phase is JobPhase.RESTARTING


def test_the_first_step_of_each_run_has_the_startup_allowance() -> None:
    job = _seen(_job(progressDeadlineSeconds=30), 0)
    assert stall(job, T0 + timedelta(seconds=299), None) == T0 + timedelta(seconds=300)  # at least 300 s by default
    short = _seen(_job(progressDeadlineSeconds=30, startupDeadlineSeconds=60), 0)
    assert stall(short, T0 + timedelta(seconds=59), None) == T0 + timedelta(seconds=60)
    verdict = stall(short, T0 + timedelta(seconds=60), None)
    assert not isinstance(verdict, datetime) and verdict is not None and "within 60 s of the run" in verdict.message


def test_a_restart_restores_a_lower_step_and_the_clock_starts_anew() -> None:
    job = _seen(_job(progressDeadlineSeconds=30), 0)
    job = _seen(job, 10, reported=_report(120, 10, checkpoint=100))
    job = _seen(job, 40, reported=_report(120, 10))  # stalled
    status = record_restart(job.status, (), "stalled", T0 + timedelta(seconds=40), 1, stalled=True)
    job = job.model_copy(update={"status": status})
    job = _seen(job, 45, pods=[])  # its pods are gone
    job = _seen(job, 60)  # the new pods run: a new run, and Stalled turns False
    assert _stalled(job) is ConditionStatus.FALSE
    assert stall(job, T0 + timedelta(seconds=100), None) == T0 + timedelta(seconds=360)  # the startup allowance
    job = _seen(job, 80, reported=_report(101, 79))  # resumed from step 100: lower, and the truth
    assert job.status.progress is not None and job.status.progress.step == 101
    assert stall(job, T0 + timedelta(seconds=80), None) == T0 + timedelta(seconds=110)
    backwards = _seen(job, 90, reported=_report(95, 89))  # lower within one run: ignored
    assert backwards.status.progress == job.status.progress


def test_a_report_from_before_the_run_does_not_start_its_clock() -> None:
    job = _seen(_job(progressDeadlineSeconds=30), 0)
    job = _seen(job, 10, reported=_report(120, 10))
    status = record_restart(job.status, (), "a worker failed", T0 + timedelta(seconds=20), 1)
    job = _seen(job.model_copy(update={"status": status}), 25, pods=[])
    job = _seen(job, 30)  # the new run
    ended = make_pod(ReplicaType.WORKER, 0, PodPhase.RUNNING, final_report=_report(130, 21))  # the old pod's last word
    job = _seen(job, 31, pods=[ended, *WORKERS[1:]])
    assert stall(job, T0 + timedelta(seconds=100), None) == T0 + timedelta(seconds=330)


def test_suspended_the_clock_stops_and_resumed_it_starts_anew() -> None:
    job = _seen(_job(progressDeadlineSeconds=30), 0)
    job = _seen(job, 10, reported=_report(120, 10))
    suspended = job.model_copy(
        update={
            "spec": job.spec.model_copy(update={"run_policy": job.spec.run_policy.model_copy(update={"suspend": True})})
        }
    )
    suspended = _seen(suspended, 20, pods=[])
    assert stall(suspended, T0 + timedelta(hours=1), None) is None
    resumed = suspended.model_copy(update={"spec": job.spec})
    resumed = _seen(resumed, 3600, pods=[])
    resumed = _seen(resumed, 3610)
    assert stall(resumed, T0 + timedelta(seconds=3611), None) == T0 + timedelta(seconds=3910)


def test_an_operator_restarted_mid_deadline_keeps_the_clock_from_the_status() -> None:
    job = _seen(_job(progressDeadlineSeconds=30), 0)
    job = _seen(job, 10, reported=_report(120, 10))
    written = job.status.model_dump(mode="json", by_alias=True, exclude_none=True)  # as the API server keeps it
    again = job.model_copy(update={"status": DistTrainJobStatus.model_validate(written)})
    assert stall(again, T0 + timedelta(seconds=20), None) == stall(job, T0 + timedelta(seconds=20), None)
    assert _plan(_seen(again, 40), 40).restart is not None


def test_a_restart_in_place_keeps_the_pods_and_starts_the_clock_anew() -> None:
    """Restarted in place, the pods stay Running throughout: the restart's decision begins the next run."""
    job = _seen(_job(progressDeadlineSeconds=30), 0)
    job = _seen(job, 10, reported=_report(120, 10))
    status = record_restart(job.status, (), "stalled", T0 + timedelta(seconds=40), 1, stalled=True)
    job = _seen(job.model_copy(update={"status": status}), 41)  # the same pods, running
    assert stall(job, T0 + timedelta(seconds=70), None) == T0 + timedelta(seconds=341)


def test_the_operator_s_default_applies_and_the_job_s_own_wins() -> None:
    job = _seen(_job(), 0, progress_deadline=60)
    assert stall(job, T0, 60) == T0 + timedelta(seconds=300)
    assert stall(job, T0, None) is None
    own = _seen(_job(progressDeadlineSeconds=400), 0)
    assert stall(own, T0, 60) == T0 + timedelta(seconds=400)


def test_past_the_backoff_limit_or_by_a_rule_a_stall_fails_the_job() -> None:
    limited = _seen(_seen(_job(progressDeadlineSeconds=30, backoffLimit=0), 0), 400)
    failed = _plan(limited, 400).fail
    assert failed is not None and failed.reason == "Stalled" and "backoffLimit 0 is reached" in failed.message
    rule = {"rules": [{"action": "FailJob", "onStall": True}]}
    ruled = _seen(_seen(_job(progressDeadlineSeconds=30, failurePolicy=rule), 0), 400)
    failed = _plan(ruled, 400).fail
    assert failed is not None and failed.reason == "Stalled" and "failurePolicy rule 1" in failed.message


def test_an_on_stall_rule_matches_no_failed_pod() -> None:
    rule = {"rules": [{"action": "FailJob", "onStall": True}]}
    job = _seen(_job(progressDeadlineSeconds=30, failurePolicy=rule), 0)
    lost = make_pod(ReplicaType.WORKER, 1, PodPhase.FAILED, exit_code=137)
    decided = _plan(_seen(job, 5, pods=[WORKERS[0], lost]), 5, pods=[WORKERS[0], lost])
    assert decided.fail is None and decided.restart is not None  # OnFailure restarts it


def test_a_served_tfjob_takes_the_operator_s_default() -> None:
    """A TFJob has no progressDeadlineSeconds of its own: converted, it runs under the operator's default."""
    tfjob = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mnist", "namespace": "team"},
        "spec": {
            "tfReplicaSpecs": {
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "tensorflow", "image": "i"}]}}}
            }
        },
    }
    job = parse_job(convert(tfjob).job)
    pods = [make_pod(ReplicaType.WORKER, index, PodPhase.RUNNING, job="mnist") for index in range(2)]
    running = _seen(job, 0, pods=pods, progress_deadline=600)
    assert stall(running, T0, 600) == T0 + timedelta(seconds=600)
    # a TFJob's own code, which serves no progress port, runs unjudged under it
    silent = _seen(job, 0, pods=pods, progress_deadline=600, answered=None)
    silent = _seen(silent, 600, pods=pods, progress_deadline=600, answered=None)
    assert isinstance(stall(silent, T0 + timedelta(seconds=600), 600), Unjudged)
    assert "600 s, the operator's default" in _condition(silent, ConditionType.STALLED).message


def _condition(job: DistTrainJob, kind: ConditionType) -> Condition:
    return next(c for c in job.status.conditions if c.type is kind)


def test_a_job_whose_trainer_never_answers_runs_unjudged_and_its_status_says_why() -> None:
    """A user's own image serves no progress port: the deadline does not judge its run, which is never stalled
    or restarted for it; once the first step would have been due, Stalled False says why, and nothing more is
    due (no wake for the deadline)."""
    job = _seen(_job(progressDeadlineSeconds=30), 0, answered=None)
    assert stall(job, T0 + timedelta(seconds=10), None) == T0 + timedelta(seconds=300)  # the operator looks then
    job = _seen(job, 300, answered=None)
    assert _stalled(job) is ConditionStatus.FALSE
    said = _condition(job, ConditionType.STALLED)
    assert said.reason == "ProgressNotReported"
    assert "progressDeadlineSeconds (30 s, the job's) does not apply" in said.message and "(9471)" in said.message
    later = _seen(job, 5000, answered=None)
    assert _stalled(later) is ConditionStatus.FALSE and later.status.phase is JobPhase.RUNNING
    decided = _plan(later, 5000)
    assert decided.restart is None and decided.fail is None and decided.wake_at is None


def test_an_answer_from_an_earlier_run_does_not_judge_this_one() -> None:
    job = _seen(_job(progressDeadlineSeconds=30), 0)  # the first run's trainer answers
    status = record_restart(job.status, (), "a worker failed", T0 + timedelta(seconds=20), 1)
    job = _seen(job.model_copy(update={"status": status}), 25, pods=[], answered=T0 + timedelta(seconds=10))
    job = _seen(job, 30, answered=T0 + timedelta(seconds=10))  # the new run: its image answers no more
    assert isinstance(stall(job, T0 + timedelta(seconds=330), None), Unjudged)


def test_a_run_first_answered_past_its_allowance_has_its_allowance_from_the_answer() -> None:
    """A trainer that serves the contract late (a slow start before its server): judged from its first answer,
    not stalled at once for the time it was not judged; the Stalled condition says it is judged again."""
    job = _seen(_seen(_job(progressDeadlineSeconds=30), 0, answered=None), 300, answered=None)
    assert _condition(job, ConditionType.STALLED).reason == "ProgressNotReported"
    job = _seen(job, 400, answered=T0 + timedelta(seconds=390))
    assert job.status.progress_answer_time == T0 + timedelta(seconds=390)
    assert _condition(job, ConditionType.STALLED).reason == "Progressing"
    assert stall(job, T0 + timedelta(seconds=400), None) == T0 + timedelta(seconds=690)
    job = _seen(job, 500, answered=T0 + timedelta(seconds=499))
    assert job.status.progress_answer_time == T0 + timedelta(seconds=390)  # the first answer of the run stays
    assert _stalled(_seen(job, 690)) is ConditionStatus.TRUE
