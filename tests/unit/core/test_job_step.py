"""A reconcile's two pure steps: the decision records the restart it plans, and the status after the acts
applies what they did (pods restarting in place, pods made, a create refused) to the decided status."""

from __future__ import annotations

from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.status import JobPhase
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.job_step import Acts, Observed, Remembered, decide_next, status_after_acts
from disttrain_core.observed import PodPhase, Runs
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
