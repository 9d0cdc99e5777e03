"""Kueue's contract carried out: the Workload made and the job suspended for it, a refused Workload said and
the job left as it was, and the quota released only once the job ended."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.status import Condition, ConditionStatus, ConditionType, DistTrainJobStatus, JobPhase
from disttrain_core.kueue import QUEUE_LABEL, workload, workload_view
from disttrain_core.served import JobShape
from disttrain_kube.api_errors import RefusedError
from disttrain_operator.kueue_adapter import KueueAdapter
from support.fakes import QueueingApi
from support.job_builder import JobBuilder

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class _Adapter:
    def __init__(self, api: QueueingApi) -> None:
        self.api = api
        self.events: list[tuple[str, str]] = []
        self.adapter = KueueAdapter(api, self._emit, lambda: NOW)

    def _emit(self, body: Any, *, type: str, reason: str, message: str) -> None:
        self.events.append((type, reason))


def _queued() -> tuple[dict[str, Any], DistTrainJob]:
    manifest = JobBuilder("train", "team").metadata(uid="u1", labels={QUEUE_LABEL: "research"}).counts({"Worker": 2})
    body = {**manifest.obj(), "status": {}}
    return body, DistTrainJob.model_validate(body)


def test_a_queued_job_without_a_workload_gets_one_and_waits_suspended_for_it() -> None:
    setup, (body, job) = _Adapter(QueueingApi()), _queued()
    followed = setup.adapter.follow(body, JobShape.of(body), job, None, has_pods=False)
    assert setup.api.created == [f"Workload/{workload(job, None)['metadata']['name']}"]
    assert setup.api.job_patches == [{"spec": {"runPolicy": {"suspend": True}}}]
    assert followed.spec.run_policy.suspend


class _RefusingWorkloads(QueueingApi):
    def create(self, manifest: dict[str, Any]) -> bool:
        raise RefusedError(422, "Workload is invalid: spec.podSets: Too many")


def test_a_refused_workload_is_a_warning_and_the_job_is_left_as_it_was() -> None:
    setup, (body, job) = _Adapter(_RefusingWorkloads()), _queued()
    assert setup.adapter.follow(body, JobShape.of(body), job, None, has_pods=False) == job
    assert setup.events == [("Warning", "CreateFailed")]
    assert setup.api.job_patches == []


def _in(job: DistTrainJob, phase: JobPhase, condition: ConditionType) -> DistTrainJob:
    said = Condition(type=condition, status=ConditionStatus.TRUE, reason=condition.value, last_transition_time=NOW)
    return job.model_copy(update={"status": DistTrainJobStatus(phase=phase, conditions=[said])})


def test_the_quota_is_released_once_the_job_ended_and_not_while_it_runs() -> None:
    setup, (_, job) = _Adapter(QueueingApi()), _queued()
    admitted = workload(job, None)
    admitted["status"] = {"conditions": [{"type": "Admitted", "status": "True"}], "admission": {"clusterQueue": "q"}}
    view = workload_view(admitted)
    setup.adapter.finish(_in(job, JobPhase.RUNNING, ConditionType.RUNNING), view)
    assert setup.api.workload_conditions == []
    ended = _in(job, JobPhase.SUCCEEDED, ConditionType.SUCCEEDED)
    setup.adapter.finish(ended, view)
    assert setup.api.workload_conditions == [(view.name, "Finished", "JobSucceeded")]
    setup.adapter.finish(ended, None)  # no Workload: nothing to release
    assert len(setup.api.workload_conditions) == 1
