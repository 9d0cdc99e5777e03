"""GangUnavailable: said while a job's gang cannot be one as asked, cleared once it can, absent where it never was."""

from __future__ import annotations

from datetime import UTC, datetime

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.status import Condition, ConditionStatus, ConditionType, DistTrainJobStatus
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.gang import GangScheduler
from disttrain_core.gang_status import GANG_TOO_LARGE, WORKLOAD_API_NOT_SERVED, with_gang
from support.builder_inputs import replica_spec, unchecked_job

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CREATED = DistTrainJobStatus(
    conditions=[
        Condition(type=ConditionType.CREATED, status=ConditionStatus.TRUE, reason="Created", last_transition_time=NOW)
    ]
)


def _job(run_policy: dict[str, object]) -> DistTrainJob:
    return unchecked_job({"replicaSpecs": {"Worker": replica_spec(2)}, "runPolicy": run_policy})


def _said(status: DistTrainJobStatus, kind: ConditionType) -> tuple[str, str] | None:
    found = status.condition(kind)
    return None if found is None else (found.status.value, found.reason)


def test_a_gang_larger_than_its_job_is_said_and_its_created_says_the_pods_wait() -> None:
    gang = BuildSettings().gang
    held = with_gang(_job({"schedulingPolicy": {"minAvailable": 5}}), CREATED, gang, NOW)
    assert _said(held, ConditionType.GANG_UNAVAILABLE) == ("True", GANG_TOO_LARGE)
    assert _said(held, ConditionType.CREATED) == ("True", "PodsHeld")
    lowered = with_gang(_job({"schedulingPolicy": {"minAvailable": 2}}), held, gang, NOW)
    assert _said(lowered, ConditionType.GANG_UNAVAILABLE) == ("False", "GangAvailable")


def test_a_gang_no_served_workload_api_can_build_is_said_and_the_job_runs() -> None:
    unserved = BuildSettings(gang_scheduler=GangScheduler.KUBERNETES, workload_api=None).gang
    status = with_gang(_job({"gang": True}), CREATED, unserved, NOW)
    assert _said(status, ConditionType.GANG_UNAVAILABLE) == ("True", WORKLOAD_API_NOT_SERVED)
    assert _said(status, ConditionType.CREATED) == ("True", "Created")


def test_a_job_that_never_had_a_gang_problem_carries_no_such_condition() -> None:
    assert with_gang(_job({"gang": True}), CREATED, BuildSettings().gang, NOW) == CREATED
