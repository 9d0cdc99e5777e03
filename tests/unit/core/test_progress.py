"""Trainer progress as the core reads it: a report parsed, the newest chosen, the reporting task, and the
status curve it makes."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.status import MAX_HISTORY, Progress, ProgressPoint
from disttrain_core.observed import PodPhase, pod_view
from disttrain_core.progress import Report, newest, parse_progress, reporting_task, with_report
from disttrain_core.status_from_pods import aggregated
from support.job_builder import T0, make_job, make_pod, running_pods


def _report(step: int, at: datetime | None) -> Report:
    return Report(Progress(step=step, update_time=at))


def test_a_trainer_record_is_parsed_and_its_extra_fields_ignored() -> None:
    text = json.dumps(
        {
            "step": 120,
            "totalSteps": 300,
            "epoch": 2,
            "loss": 0.25,
            "examplesPerSecond": 4100.5,
            "updateTime": "2026-01-01T00:00:00Z",
            "finished": False,
            "accuracy": 0.9,
        }
    )
    assert parse_progress(text) == Progress(
        step=120, total_steps=300, epoch=2, loss=0.25, examples_per_second=4100.5, update_time=T0
    )


def test_anything_else_is_no_report() -> None:
    texts = (None, "", "Error: out of memory", "[1, 2]", '{"epoch": 1}', '{"step": -1}', '{"step": "x"}')
    for text in texts:
        assert parse_progress(text) is None, text


def test_a_diverged_loss_is_no_value_and_the_step_still_counts() -> None:
    """NaN and Infinity are no JSON: the API server would refuse them in the status."""
    for text in ('{"step": 1, "loss": NaN}', '{"step": 1, "examplesPerSecond": Infinity, "loss": -Infinity}'):
        assert parse_progress(text) == Progress(step=1), text


def test_a_time_without_zone_is_read_as_utc() -> None:
    progress = parse_progress('{"step": 1, "updateTime": "2026-01-01T00:00:00"}')
    assert progress is not None and progress.update_time == T0


def test_the_newest_report_wins_even_with_a_lower_step_after_a_resume() -> None:
    before_restart = Progress(step=120, update_time=T0)
    resumed = Progress(step=100, update_time=T0 + timedelta(seconds=30))
    assert newest(before_restart, resumed) == resumed
    assert newest(resumed, None, before_restart) == resumed
    assert newest(None, None) is None
    assert newest(Progress(step=5), Progress(step=7)) == Progress(step=7)
    assert newest(Progress(step=9), Progress(step=1, update_time=T0)) == Progress(step=1, update_time=T0)


def test_the_chief_reports_or_worker_zero_without_one() -> None:
    assert reporting_task(make_job({"Chief": 1, "Worker": 2}).spec) == (ReplicaType.CHIEF, 0)
    assert reporting_task(make_job({"Worker": 2}).spec) == (ReplicaType.WORKER, 0)


def test_the_termination_message_of_an_ended_pod_is_its_final_report() -> None:
    message = '{"step": 300, "updateTime": "2026-01-01T00:00:00Z", "finished": true}'
    body = {
        "metadata": {
            "name": "j-chief-0",
            "uid": "u1",
            "labels": {"disttrain.io/replica-type": "chief", "disttrain.io/replica-index": "0"},
        },
        "status": {
            "phase": "Succeeded",
            "podIP": "10.0.0.7",
            "containerStatuses": [{"name": "tensorflow", "state": {"terminated": {"exitCode": 0, "message": message}}}],
        },
    }
    view = pod_view(body)
    assert view is not None
    assert view.final_report == _report(300, T0)
    assert (view.exit_code, view.pod_ip) == (None, "10.0.0.7")


def test_status_takes_the_polled_report_then_the_final_one_and_keeps_it_across_restarts() -> None:
    job = make_job({"Chief": 1, "Worker": 1})
    polled = _report(50, T0)
    running = aggregated(
        job, running_pods(ReplicaType.CHIEF, 1) + running_pods(ReplicaType.WORKER, 1), True, T0, polled
    ).status
    assert running.progress is not None and running.progress.step == 50
    job = job.model_copy(update={"status": running})
    restarting = aggregated(job, [], created=True, now=T0).status
    assert restarting.progress == running.progress
    final = _report(300, T0 + timedelta(minutes=5))
    ended = [make_pod(ReplicaType.CHIEF, 0, PodPhase.SUCCEEDED, final_report=final)]
    after = aggregated(job, ended, created=True, now=T0, reported=polled).status.progress
    assert after is not None and (after.step, after.update_time) == (300, final.progress.update_time)


def test_the_curve_keeps_the_whole_run_within_its_limit() -> None:
    curve: list[ProgressPoint] = []
    for step in range(1, 1001):
        curve = with_report(curve, Progress(step=step, loss=1.0 / step, examples_per_second=50.0))
        assert len(curve) <= MAX_HISTORY
    steps = [point.step for point in curve]
    assert steps == sorted(steps) and steps[-1] == 1000 and steps[0] < 20  # the start is still in view
    assert curve[-1] == ProgressPoint(step=1000, loss=0.001, examples_per_second=50.0)
    assert with_report(curve, Progress(step=1000, loss=0.001, examples_per_second=50.0)) is curve  # the same report
    assert with_report(curve, Progress(step=None)) is curve


def test_a_resume_from_an_earlier_checkpoint_cuts_the_curve_back() -> None:
    curve = [ProgressPoint(step=step, loss=0.5) for step in (10, 20, 30, 40)]
    assert [point.step for point in with_report(curve, Progress(step=25, loss=0.4))] == [10, 20, 25]


def test_status_records_each_new_report_on_the_curve() -> None:
    job = make_job({"Worker": 1})
    pods = running_pods(ReplicaType.WORKER, 1)
    first = aggregated(job, pods, True, T0, reported=Report(Progress(step=5, loss=2.0, update_time=T0))).status
    job = job.model_copy(update={"status": first})
    again = aggregated(job, pods, True, T0, reported=Report(Progress(step=5, loss=2.0, update_time=T0))).status
    job = job.model_copy(update={"status": again})
    later = aggregated(
        job, pods, True, T0, reported=Report(Progress(step=9, loss=1.5, update_time=T0 + timedelta(seconds=5)))
    ).status
    assert [(point.step, point.loss) for point in later.progress_history] == [(5, 2.0), (9, 1.5)]
