"""The job side of Kueue's contract: the Workload, and each step from queued to finished."""

from __future__ import annotations

from typing import Any

from job_fixtures import T0, make_job

from disttrain_operator.api.job import DistTrainJob
from disttrain_operator.api.status import ConditionStatus, ConditionType, JobPhase
from disttrain_operator.core.kueue import (
    KueueStep,
    PodSetInfo,
    flavor_info,
    kueue_step,
    merge_patch,
    workload,
    workload_view,
)
from disttrain_operator.core.status import with_condition
from disttrain_operator.core.types import Verdict

QUEUE = {"kueue.x-k8s.io/queue-name": "team-a"}
GPU_FLAVOR = PodSetInfo({"pool": "a100"}, ({"key": "gpu", "operator": "Exists"},))


def _queued(suspend: bool = False, **spec: Any) -> DistTrainJob:
    job = make_job({"Chief": 1, "Worker": 2}, runPolicy={"suspend": suspend}, **spec)
    return job.model_copy(update={"metadata": job.metadata.model_copy(update={"labels": QUEUE, "uid": "u1"})})


def _workload_body(job: DistTrainJob, conditions: dict[str, str], admitted: bool = True) -> dict[str, Any]:
    body = workload(job)
    assignments = [{"name": "worker", "count": 2, "flavors": {"nvidia.com/gpu": "a100"}}]
    body["status"] = {
        "conditions": [{"type": kind, "status": status} for kind, status in conditions.items()],
        "admission": {"clusterQueue": "cq", "podSetAssignments": assignments} if admitted else None,
        "admissionChecks": [{"podSetUpdates": [{"name": "chief", "labels": {"checked": "yes"}}]}],
    }
    return body


def _flavors(name: str) -> PodSetInfo:
    assert name == "a100"
    return GPU_FLAVOR


def test_the_workload_has_one_pod_set_per_replica_type_and_belongs_to_the_job() -> None:
    job = _queued()
    built = workload(job)
    assert built["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert built["metadata"]["name"] == "disttrainjob-job"
    assert built["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert built["spec"]["queueName"] == "team-a"
    assert [(s["name"], s["count"]) for s in built["spec"]["podSets"]] == [("chief", 1), ("worker", 2)]


def test_a_job_without_a_queue_name_is_not_kueue_s() -> None:
    assert kueue_step(make_job({"Worker": 1}), None, _flavors).create is None


def test_a_queued_job_gets_its_workload_and_is_held_suspended() -> None:
    step = kueue_step(_queued(), None, _flavors)
    assert step.create is not None and step.create["kind"] == "Workload"
    assert step.job_patch == {"spec": {"runPolicy": {"suspend": True}}}
    assert step.event is not None and step.event.reason == "Queued"
    assert kueue_step(_queued(suspend=True), None, _flavors).job_patch is None


def test_admission_injects_flavors_and_check_updates_then_unsuspends() -> None:
    job = _queued(suspend=True)
    view = workload_view(_workload_body(job, {"QuotaReserved": "True", "Admitted": "True"}))
    step = kueue_step(job, view, _flavors)
    assert step.job_patch is not None
    after = DistTrainJob.model_validate(merge_patch(job.model_dump(mode="json", by_alias=True), step.job_patch))
    assert after.spec.run_policy.suspend is False
    worker = after.spec.replica_specs["Worker"].template  # type: ignore[index]
    assert worker["spec"]["nodeSelector"] == {"pool": "a100"}
    assert worker["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    chief = after.spec.replica_specs["Chief"].template  # type: ignore[index]
    assert chief["metadata"]["labels"] == {"checked": "yes"} and "nodeSelector" not in chief["spec"]
    assert step.event is not None and step.event.reason == "Admitted"


def test_eviction_suspends_and_restores_the_templates_from_the_workload() -> None:
    job = _queued(suspend=True)
    original = workload_view(_workload_body(job, {"Admitted": "True"}))
    admitted = merge_patch(job.model_dump(mode="json", by_alias=True), kueue_step(job, original, _flavors).job_patch)
    running = DistTrainJob.model_validate(admitted)
    evicted = workload_view(_workload_body(job, {"Admitted": "True", "Evicted": "True"}))
    assert not evicted.admitted
    step = kueue_step(running, evicted, _flavors)
    assert step.event is not None and step.event.reason == "Evicted"
    restored = merge_patch(admitted, step.job_patch)
    assert restored["spec"]["runPolicy"]["suspend"] is True
    for kind, spec in job.spec.replica_specs.items():
        restored_template = restored["spec"]["replicaSpecs"][kind.value]["template"]
        assert PodSetInfo.of_template(restored_template) == PodSetInfo.of_template(spec.template)


def test_nothing_to_do_while_waiting_or_running() -> None:
    job = _queued(suspend=True)
    pending = workload_view(_workload_body(job, {"QuotaReserved": "False"}, admitted=False))
    assert kueue_step(job, pending, _flavors) == KueueStep()


def test_a_finished_job_marks_its_workload_finished_once() -> None:
    job = _queued()
    conditions = with_condition(
        [], ConditionType.SUCCEEDED, holds=True, verdict=Verdict("JobSucceeded", "done"), now=T0, generation=1
    )
    done = job.model_copy(
        update={"status": job.status.model_copy(update={"conditions": conditions, "phase": JobPhase.SUCCEEDED})}
    )
    assert conditions[0].status is ConditionStatus.TRUE
    view = workload_view(_workload_body(job, {"Admitted": "True"}))
    step = kueue_step(done, view, _flavors)
    assert step.finish == Verdict("JobSucceeded", "the DistTrainJob succeeded")
    finished = workload_view(_workload_body(job, {"Admitted": "True", "Finished": "True"}))
    assert kueue_step(done, finished, _flavors).finish is None


def test_flavor_and_merge_patch_helpers() -> None:
    flavor = {"spec": {"nodeLabels": {"pool": "a100"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]}}
    assert flavor_info(flavor) == GPU_FLAVOR
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None, "d": 3}, "l": [2]}) == {
        "a": {"c": 2, "d": 3},
        "l": [2],
    }
