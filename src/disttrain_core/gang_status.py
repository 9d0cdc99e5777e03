"""The condition that says a job asked to be a gang is not one as asked: the cluster serves no Workload API
disttrain builds (the job runs, its pods placed one by one), or the gang needs more pods together than the
job has (its pods wait). Either is said once, as the condition `GangUnavailable` and its Warning Event."""

from __future__ import annotations

from datetime import datetime

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.status import ConditionType, DistTrainJobStatus
from disttrain_core.builders.gang import Gang
from disttrain_core.status_from_pods import condition_holds, with_condition
from disttrain_core.types import Verdict

WORKLOAD_API_NOT_SERVED = "WorkloadAPINotServed"
GANG_TOO_LARGE = "GangTooLarge"


def gang_problem(job: DistTrainJob, gang: Gang) -> Verdict | None:
    oversized = gang.oversized(job)
    if oversized is not None:
        return Verdict(GANG_TOO_LARGE, oversized)
    unserved = gang.unserved(job)
    return None if unserved is None else Verdict(WORKLOAD_API_NOT_SERVED, unserved)


def with_gang(job: DistTrainJob, status: DistTrainJobStatus, gang: Gang, now: datetime) -> DistTrainJobStatus:
    """The status with `GangUnavailable` True while the gang cannot be one as asked, False once it can again;
    a job that never had the problem carries no such condition. A held job's Created says its pods wait."""
    problem = gang_problem(job, gang)
    had = any(condition.type is ConditionType.GANG_UNAVAILABLE for condition in status.conditions)
    if problem is None and not had:
        return status
    generation = job.metadata.generation
    verdict = problem or Verdict("GangAvailable", "the job's gang is made as its spec asks")
    conditions = with_condition(
        status.conditions,
        ConditionType.GANG_UNAVAILABLE,
        holds=problem is not None,
        verdict=verdict,
        now=now,
        generation=generation,
    )
    if problem is not None and problem.reason == GANG_TOO_LARGE and condition_holds(status, ConditionType.CREATED):
        held = Verdict(
            "PodsHeld", "the job's Service and volume were created; its pods wait for a gang that can be placed"
        )
        conditions = with_condition(
            conditions, ConditionType.CREATED, holds=True, verdict=held, now=now, generation=generation
        )
    return status.model_copy(update={"conditions": conditions})
