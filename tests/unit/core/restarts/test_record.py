"""The record of a restart in the job's status: the counts, the Restarting condition until the pods run again, and
a disruption counted apart from restarts."""

from __future__ import annotations

from datetime import datetime, timedelta

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType, RestartPolicy
from disttrain_core.api.status import ConditionStatus, ConditionType, JobPhase
from disttrain_core.observed import PodPhase, PodView, Runs
from disttrain_core.restarts.record import record_outrun, record_restart
from disttrain_core.status_from_pods import aggregated
from support.job_builder import T0, make_job, make_pod, running_pods

T1 = T0 + timedelta(minutes=1)


def _next(job: DistTrainJob, pods: list[PodView], now: datetime = T0) -> DistTrainJob:
    return job.model_copy(update={"status": aggregated(job, pods, created=True, now=now).status})


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


def test_restarts_in_place_outrun_count_what_their_notes_lacked_against_each_pod_s_type() -> None:
    """A worker whose note counted 2 of 5 runs and a PS whose note counted none of 1, on a job that restarted
    once before: the status counts the 4 runs the notes lacked, 3 against Worker and 1 against PS."""
    job = _next(make_job({"Worker": 1, "PS": 1}), running_pods(ReplicaType.WORKER, 1), T0)
    earlier = record_restart(job.status, [make_pod(ReplicaType.WORKER, 0, PodPhase.FAILED)], "once", T0, 3)
    worker = make_pod(ReplicaType.WORKER, 0, PodPhase.RUNNING, runs=Runs(ended=5, counted=2))
    ps = make_pod(ReplicaType.PS, 0, PodPhase.RUNNING, runs=Runs(ended=1, counted=0))
    status = record_outrun(earlier, [worker, ps], [(worker.name, 5), (ps.name, 1)])
    assert status.restart_count == 1 + 4
    assert status.replica_statuses[ReplicaType.WORKER].restarts == 1 + 3
    assert status.replica_statuses[ReplicaType.PS].restarts == 1
    assert (status.phase, status.conditions) == (earlier.phase, earlier.conditions)
    assert record_outrun(earlier, [worker, ps], []) is earlier
