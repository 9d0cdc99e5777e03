"""A reconcile's two pure steps: the decision records the restart it plans, and the status after the acts
applies what they did (pods deleted, restarting in place, made, a create refused) to the decided status without
aggregating the pods again: it is the status the pods as the acts leave them would aggregate to, and where they
changed no pod, the same pods aggregated again give the status decided. Each step aggregates and reads the
stall once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from disttrain_core import status_from_pods
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.status import ConditionType, JobPhase, Progress, SavedCheckpoint
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.claims import with_claims
from disttrain_core.gang_status import with_gang
from disttrain_core.job_step import Acts, Observed, Remembered, decide_next, status_after_acts, with_status
from disttrain_core.observed import PodPhase, PodView, Runs, created_pod_view
from disttrain_core.planner import Plan
from disttrain_core.progress import Report
from disttrain_core.restarts import decision
from disttrain_core.status_from_pods import aggregated, condition_holds
from disttrain_core.tensorboard_status import with_tensorboard
from disttrain_core.types import Verdict
from support.planning import NOW, SETTINGS, job_of, pod_of

IN_PLACE = BuildSettings(restart_in_place=True)


def test_the_decision_records_the_restart_it_plans_and_a_second_reconcile_of_the_same_pods_none() -> None:
    job = job_of({"Worker": 2})
    runs = Runs(ended=1, counted=0, exit_code=137, finished_at=NOW)
    pods = [pod_of(ReplicaType.WORKER, 0, runs=runs), pod_of(ReplicaType.WORKER, 1, runs=Runs(ended=0, counted=0))]
    status, next_plan = decide_next(job, Observed(pods, []), Remembered(), IN_PLACE, now=NOW)
    assert next_plan.restart is not None and next_plan.restart.in_place
    assert status.restart_count == 1
    after = status_after_acts(
        job, status, next_plan, Observed(pods, []), Acts(created_all=True), settings=IN_PLACE, now=NOW
    )
    assert after.restart_count == 1
    assert all(counts.ready == 0 for counts in after.replica_statuses.values())  # restarting, not running
    handled = Remembered(handled={pod.uid for pod in next_plan.restart.failed})
    again, _ = decide_next(job.model_copy(update={"status": after}), Observed(pods, []), handled, IN_PLACE, now=NOW)
    assert again.restart_count == 1


def test_the_status_after_the_acts_counts_the_pods_just_made_as_active() -> None:
    job = job_of({"Worker": 2})
    status, next_plan = decide_next(job, Observed([], []), Remembered(), SETTINGS, now=NOW)
    assert [manifest["kind"] for manifest in next_plan.create].count("Pod") == 2
    made = [pod_of(ReplicaType.WORKER, index, PodPhase.PENDING) for index in (0, 1)]
    after = status_after_acts(
        job, status, next_plan, Observed([], []), Acts(made, created_all=True), settings=SETTINGS, now=NOW
    )
    assert after.replica_statuses[ReplicaType.WORKER].active == 2
    assert after.phase is not JobPhase.FAILED


def test_a_create_the_api_server_refused_fails_the_status_after_the_acts() -> None:
    job = job_of({"Worker": 1})
    status, next_plan = decide_next(job, Observed([], []), Remembered(), SETTINGS, now=NOW)
    refused = Acts(rejected=Verdict("ChildRejected", "Pod job-worker-0 was refused: quota"))
    after = status_after_acts(job, status, next_plan, Observed([], []), refused, settings=SETTINGS, now=NOW)
    assert after.phase is JobPhase.FAILED
    assert any(condition.message.endswith("quota") for condition in after.conditions)


COUNTS = ({"Worker": 2}, {"Chief": 1, "Worker": 2}, {"Chief": 1, "Worker": 1, "PS": 1}, {"Worker": 1, "Evaluator": 1})
EXIT_CODES = (0, 1, 2, 5, 130, 137, 143)


@st.composite
def _pods(draw: st.DrawFn, counts: dict[str, int]) -> list[PodView]:
    """A pod for most tasks of the job, each in any phase: running, ready or not (perhaps after a run that ended
    in place, perhaps held back by the kubelet), or ended with any code."""
    pods = []
    for kind, count in counts.items():
        for index in range(count):
            if draw(st.integers(0, 5)) == 0:
                continue
            phase = draw(st.sampled_from(list(PodPhase)))
            ended = phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)
            code = draw(st.sampled_from(EXIT_CODES)) if ended else None
            ready = phase is PodPhase.RUNNING and draw(st.booleans())
            runs = None
            if phase is PodPhase.RUNNING and draw(st.booleans()):
                code, backing_off = draw(st.sampled_from(EXIT_CODES)), draw(st.booleans())
                runs = Runs(ended=draw(st.integers(0, 2)), counted=0, backing_off=backing_off, exit_code=code)
            pods.append(pod_of(ReplicaType(kind), index, phase, ready=ready, exit_code=code, runs=runs))
    return pods


@st.composite
def _reports(draw: st.DrawFn, moment: datetime) -> Report | None:
    """None, or the trainer's report at `moment`: a step, and perhaps a checkpoint at or before it."""
    if not draw(st.booleans()):
        return None
    step = draw(st.integers(0, 5000))
    saved = SavedCheckpoint(step=draw(st.integers(0, step))) if draw(st.booleans()) else None
    progress = Progress(step=step, total_steps=5000, loss=0.5, update_time=moment)
    return Report(progress, saved)


@st.composite
def _reconciles(draw: st.DrawFn) -> tuple[DistTrainJob, list[PodView], datetime, Report | None]:
    """A job (suspended, now and then) whose status the pods and report of an earlier moment made, and its pods and
    report of a later one."""
    counts = draw(st.sampled_from(COUNTS))
    policy = draw(st.sampled_from(["Never", "OnFailure", "ExitCode", "Always"]))
    job = job_of(counts, policy, backoffLimit=draw(st.integers(0, 2)), suspend=draw(st.integers(0, 4)) == 0)
    pods, report = draw(_pods(counts)), draw(_reports(NOW))
    earlier = aggregated(job, pods, created=draw(st.booleans()), now=NOW, reported=report, answered=NOW).status
    later = NOW + timedelta(seconds=draw(st.integers(0, 600)))
    return job.model_copy(update={"status": earlier}), draw(_pods(counts)), later, draw(_reports(later))


@settings(max_examples=400, deadline=None)
@given(_reconciles(), st.booleans())
def test_the_pods_aggregated_again_after_acts_that_change_none_give_the_status_decided(
    reconcile: tuple[DistTrainJob, list[PodView], datetime, Report | None], created_all: bool
) -> None:
    """Where a plan deletes no pod, restarts none in place and makes none, the status after its acts is the one
    decided: aggregating the same pods again over it changes nothing, unless the acts made the last child."""
    job, pods, now, report = reconcile
    observed = Observed(pods, [], reported=report, answered=now if report is not None else None)
    status, next_plan = decide_next(job, observed, Remembered(), SETTINGS, now=now)
    in_place = next_plan.restart.in_place if next_plan.restart is not None else ()
    assume(not next_plan.delete and not in_place and not any(m["kind"] == "Pod" for m in next_plan.create))
    assume(not created_all or condition_holds(status, ConditionType.CREATED))  # else the job starts now
    again = aggregated(
        with_status(job, status), pods, created=created_all, now=now, reported=report, answered=observed.answered
    ).status
    assert again == status


def _as_the_acts_leave_them(next_plan: Plan, pods: list[PodView], made: list[PodView]) -> list[PodView]:
    """The pods a watch would show after the plan's acts: those deleted gone, those restarting in place starting
    with their counts as written, those made Pending."""
    counts = dict(next_plan.restart.in_place) if next_plan.restart is not None else {}
    kept = [pod for pod in pods if pod.name not in next_plan.delete]
    return [*(_starting(pod, counts) for pod in kept), *made]


def _starting(pod: PodView, counts: dict[str, int]) -> PodView:
    if pod.name not in counts or pod.runs is None:
        return pod
    counted = max(pod.runs.counted, counts[pod.name])
    return replace(pod, phase=PodPhase.PENDING, ready=False, runs=replace(pod.runs, counted=counted))


@settings(max_examples=400, deadline=None)
@given(_reconciles(), st.booleans(), st.sampled_from([SETTINGS, IN_PLACE]), st.data())
def test_the_status_after_any_acts_is_what_the_pods_they_leave_would_aggregate_to(
    reconcile: tuple[DistTrainJob, list[PodView], datetime, Report | None],
    created_all: bool,
    chosen: BuildSettings,
    data: st.DataObject,
) -> None:
    """The acts' changes applied to the decided status (no pod aggregated again) give the status that aggregating
    the pods as the acts leave them over it gives: counts, Running, Created, the phase, and all else but the
    progress, which stands as the run decided judged it (a run the acts end would take a lower step anew). A
    restart recorded keeps Running False until a later reconcile sees the pods run, where aggregating again
    would say at once that the job recovered from it (restarting only an Evaluator, which it runs without)."""
    job, pods, now, report = reconcile
    observed = Observed(pods, [], reported=report, answered=now if report is not None else None)
    handled = data.draw(st.sets(st.sampled_from([pod.uid for pod in pods])) if pods else st.just(set[str]()))
    status, next_plan = decide_next(job, observed, Remembered(handled=handled), chosen, now=now)
    made = [view for manifest in next_plan.create if (view := created_pod_view(manifest)) is not None]
    after = status_after_acts(
        job, status, next_plan, observed, Acts(made, created_all=created_all), settings=chosen, now=now
    )
    aggregated_again = aggregated(
        with_status(job, status),
        _as_the_acts_leave_them(next_plan, pods, made),
        created=created_all,
        now=now,
        reported=report,
        answered=observed.answered,
        progress_deadline=chosen.progress_deadline_seconds,
    ).status
    assume(next_plan.restart is None or not condition_holds(aggregated_again, ConditionType.RUNNING))
    expected = with_gang(job, with_tensorboard(job, aggregated_again, None, now), chosen.gang, now)
    decided_progress = {"progress": status.progress, "progress_history": status.progress_history}
    expected = with_claims(job, expected, {}, now).model_copy(update=decided_progress)
    fields = type(after).model_fields
    assert {name: getattr(after, name) for name in fields} == {name: getattr(expected, name) for name in fields}


def test_a_reconcile_aggregates_its_pods_and_reads_the_stall_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A restart that deletes and makes pods, decided and settled: one aggregation, one stall reading."""
    calls: Counter[str] = Counter()

    def counting(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return function(*args, **kwargs)

        return counted

    monkeypatch.setattr(status_from_pods, "_counted", counting("aggregate", status_from_pods._counted))
    for module in (status_from_pods, decision):
        monkeypatch.setattr(module, "stall", counting("stall", module.stall))
    job = job_of({"Worker": 2}, "OnFailure", backoffLimit=3, progressDeadlineSeconds=60)
    started = aggregated(job, [pod_of(ReplicaType.WORKER, index) for index in (0, 1)], created=True, now=NOW).status
    calls.clear()
    job = with_status(job, started)
    pods = [pod_of(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=1), pod_of(ReplicaType.WORKER, 1)]
    status, next_plan = decide_next(job, Observed(pods, []), Remembered(), SETTINGS, now=NOW + timedelta(seconds=5))
    made = [view for manifest in next_plan.create if (view := created_pod_view(manifest)) is not None]
    assert next_plan.restart is not None and next_plan.delete
    after = status_after_acts(
        job, status, next_plan, Observed(pods, []), Acts(made, created_all=True), settings=SETTINGS, now=NOW
    )
    assert after.phase is JobPhase.RESTARTING
    assert calls == {"aggregate": 1, "stall": 1}
