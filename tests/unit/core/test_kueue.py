"""The job side of Kueue's contract: the Workload, and each step from queued to finished."""

from __future__ import annotations

from typing import Any

import pytest

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.status import ConditionStatus, ConditionType, JobPhase
from disttrain_core.kueue import (
    PREBUILT_WORKLOAD,
    PRIORITY_CLASS_LABEL,
    KueueStep,
    PodSetInfo,
    PriorityClassRef,
    finish_verdict,
    flavor_info,
    kueue_step,
    merge_patch,
    released_status,
    workload,
    workload_reference,
    workload_view,
)
from disttrain_core.status_from_pods import with_condition
from disttrain_core.types import Verdict
from support.job_builder import T0, make_job

QUEUE = {"kueue.x-k8s.io/queue-name": "team-a"}
GPU_FLAVOR = PodSetInfo({"pool": "a100"}, ({"key": "gpu", "operator": "Exists"},))


def _queued(suspend: bool = False, priority_class: str | None = None) -> DistTrainJob:
    scheduling = {"schedulingPolicy": {"priorityClass": priority_class}} if priority_class else {}
    job = make_job({"Chief": 1, "Worker": 2}, runPolicy={"suspend": suspend, **scheduling})
    return job.model_copy(update={"metadata": job.metadata.model_copy(update={"labels": QUEUE, "uid": "u1"})})


def _workload_body(job: DistTrainJob, conditions: dict[str, str], admitted: bool = True) -> dict[str, Any]:
    body = workload(job, None)
    assignments = [{"name": "worker", "count": 2, "flavors": {"nvidia.com/gpu": "a100"}}]
    body["status"] = {
        "conditions": [{"type": kind, "status": status} for kind, status in conditions.items()],
        "admission": {"clusterQueue": "cq", "podSetAssignments": assignments} if admitted else None,
        "admissionChecks": [{"podSetUpdates": [{"name": "chief", "labels": {"checked": "yes"}}]}],
    }
    return body


def _no_priority(source: PriorityClassRef) -> int | None:
    raise AssertionError(f"a job naming no priority class read {source}")


def _flavors(name: str) -> PodSetInfo:
    assert name == "a100"
    return GPU_FLAVOR


def test_the_workload_has_one_pod_set_per_replica_type_and_belongs_to_the_job() -> None:
    job = _queued()
    built = workload(job, None)
    assert built["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert built["metadata"]["name"] == "disttrainjob-job"
    assert built["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert built["spec"]["queueName"] == "team-a"
    assert [(s["name"], s["count"]) for s in built["spec"]["podSets"]] == [("chief", 1), ("worker", 2)]


def test_a_job_without_a_queue_name_is_not_kueue_s() -> None:
    assert kueue_step(make_job({"Worker": 1}), None, _flavors, _no_priority, has_pods=False).create is None


def test_a_queued_job_gets_its_workload_and_is_held_suspended() -> None:
    step = kueue_step(_queued(), None, _flavors, _no_priority, has_pods=False)
    assert step.create is not None and step.create["kind"] == "Workload"
    assert step.job_patch == {"spec": {"runPolicy": {"suspend": True}}}
    assert step.event is not None and step.event.reason == "Queued"
    assert kueue_step(_queued(suspend=True), None, _flavors, _no_priority, has_pods=False).job_patch is None


@pytest.mark.parametrize("where", ["annotations", "labels"])
def test_a_worker_cluster_s_copy_waits_for_the_workload_multikueue_made_and_runs_on_its_admission(where: str) -> None:
    """MultiKueue creates the job on a worker cluster after its Workload, and names that one (an annotation, or
    a label before Kueue's WorkloadIdentifierAnnotations): the job is held suspended until it shows, and never
    given a second one. The Workload is addressed as its watch found it (labelled with the job's name), never
    by the name on the job, which whoever edits the job writes."""
    queued = _queued()
    named = {PREBUILT_WORKLOAD: "../../../other-team/workloads/theirs"}  # anyone who can edit the job writes it
    update = {"labels": {**QUEUE, **named}} if where == "labels" else {"annotations": named}
    copy = queued.model_copy(update={"metadata": queued.metadata.model_copy(update=update)})
    waiting = kueue_step(copy, None, _flavors, _no_priority, has_pods=False)
    assert waiting == KueueStep(job_patch={"spec": {"runPolicy": {"suspend": True}}})
    held = DistTrainJob.model_validate(merge_patch(copy.model_dump(mode="json", by_alias=True), waiting.job_patch))
    assert kueue_step(held, None, _flavors, _no_priority, has_pods=False) == KueueStep()
    admitted = workload_view(_workload_body(held, {"QuotaReserved": "True", "Admitted": "True"}))
    assert workload_reference(held, admitted)["metadata"]["name"] == "disttrainjob-job"  # the watch's, not the name
    step = kueue_step(held, admitted, _flavors, _no_priority, has_pods=False)
    assert step.job_patch is not None and step.job_patch["spec"]["runPolicy"] == {"suspend": False}


def test_admission_injects_flavors_and_check_updates_then_unsuspends() -> None:
    job = _queued(suspend=True)
    view = workload_view(_workload_body(job, {"QuotaReserved": "True", "Admitted": "True"}))
    step = kueue_step(job, view, _flavors, _no_priority, has_pods=False)
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
    admitted = merge_patch(
        job.model_dump(mode="json", by_alias=True),
        kueue_step(job, original, _flavors, _no_priority, has_pods=False).job_patch,
    )
    running = DistTrainJob.model_validate(admitted)
    evicted = workload_view(_workload_body(job, {"Admitted": "True", "Evicted": "True"}))
    assert not evicted.admitted
    step = kueue_step(running, evicted, _flavors, _no_priority, has_pods=False)
    assert step.event is not None and step.event.reason == "Evicted"
    restored = merge_patch(admitted, step.job_patch)
    assert restored["spec"]["runPolicy"]["suspend"] is True
    for kind, spec in job.spec.replica_specs.items():
        restored_template = restored["spec"]["replicaSpecs"][kind.value]["template"]
        assert PodSetInfo.of_template(restored_template) == PodSetInfo.of_template(spec.template)


def test_nothing_to_do_while_waiting_or_running() -> None:
    job = _queued(suspend=True)
    pending = workload_view(_workload_body(job, {"QuotaReserved": "False"}, admitted=False))
    assert kueue_step(job, pending, _flavors, _no_priority, has_pods=False) == KueueStep()


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
    assert finish_verdict(done, view) == Verdict("JobSucceeded", "the DistTrainJob succeeded")
    assert kueue_step(done, view, _flavors, _no_priority, has_pods=False) == KueueStep()  # nothing before the plan
    assert finish_verdict(job, view) is None
    finished = workload_view(_workload_body(job, {"Admitted": "True", "Finished": "True"}))
    assert finish_verdict(done, finished) is None


def test_flavor_and_merge_patch_helpers() -> None:
    flavor = {"spec": {"nodeLabels": {"pool": "a100"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]}}
    assert flavor_info(flavor) == GPU_FLAVOR
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None, "d": 3}, "l": [2]}) == {
        "a": {"c": 2, "d": 3},
        "l": [2],
    }


PRIORITIES = {("WorkloadPriorityClass", "urgent"): 1000, ("PriorityClass", "high"): 100}


def _priorities(source: PriorityClassRef) -> int | None:
    return PRIORITIES.get((source.kind, source.name))


def _labelled(job: DistTrainJob, **labels: str) -> DistTrainJob:
    return job.model_copy(update={"metadata": job.metadata.model_copy(update={"labels": {**QUEUE, **labels}})})


def _created_spec(job: DistTrainJob) -> tuple[dict[str, Any], Verdict | None]:
    step = kueue_step(job, None, _flavors, _priorities, has_pods=False)
    assert step.create is not None
    return step.create["spec"], step.warning


def test_the_workload_carries_the_priority_of_the_workload_priority_class_label_first() -> None:
    job = _labelled(_queued(priority_class="high"), **{PRIORITY_CLASS_LABEL: "urgent"})
    spec, warning = _created_spec(job)
    assert spec["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "urgent"}
    assert spec["priority"] == 1000
    assert warning is None


def test_without_the_label_the_pods_priority_class_sets_the_priority() -> None:
    spec, _ = _created_spec(_queued(priority_class="high"))
    assert spec["priorityClassRef"] == {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "high"}
    assert spec["priority"] == 100
    template_class = make_job({"Worker": 1})
    template = template_class.spec.replica_specs["Worker"].template  # type: ignore[index]
    named = template_class.model_dump(mode="json", by_alias=True)
    named["spec"]["replicaSpecs"]["Worker"]["template"] = {
        **template,
        "spec": {**template["spec"], "priorityClassName": "high"},
    }
    spec, _ = _created_spec(_labelled(DistTrainJob.model_validate(named)))
    assert spec["priority"] == 100


def test_a_job_naming_no_priority_gets_none_and_a_missing_class_is_a_warning() -> None:
    spec, warning = _created_spec(_queued())
    assert "priority" not in spec and "priorityClassRef" not in spec and warning is None
    spec, warning = _created_spec(_labelled(_queued(), **{PRIORITY_CLASS_LABEL: "absent"}))
    assert "priority" not in spec
    assert warning == Verdict(
        "PriorityClassNotFound", "WorkloadPriorityClass absent not found: the Workload has priority 0"
    )


def _evicted_body(job: DistTrainJob) -> dict[str, Any]:
    body = _workload_body(job, {"QuotaReserved": "True", "Admitted": "True", "Evicted": "True"})
    body["metadata"].update(resourceVersion="42", generation=1)
    for condition in body["status"]["conditions"]:
        condition.update(reason=condition["type"], message="", lastTransitionTime="2026-01-01T00:00:00Z")
    body["status"]["conditions"][2].update(reason="Preempted", message="preempted by a higher priority")
    return body


def test_an_evicted_job_gives_its_quota_back_once_its_pods_are_gone() -> None:
    job = _queued(suspend=True)
    view = workload_view(_evicted_body(job))
    assert not kueue_step(job, view, _flavors, _no_priority, has_pods=True).release
    assert kueue_step(job, view, _flavors, _no_priority, has_pods=False).release
    running = _queued(suspend=False)
    assert not kueue_step(running, view, _flavors, _no_priority, has_pods=False).release  # suspended first


def test_the_released_status_clears_the_admission_and_requeues_after_a_preemption() -> None:
    view = workload_view(_evicted_body(_queued(suspend=True)))
    patch = released_status(view, "2026-01-01T00:05:00Z")
    assert patch["metadata"] == {"resourceVersion": "42"}
    assert patch["status"]["admission"] is None
    conditions = {c["type"]: c for c in patch["status"]["conditions"]}
    assert [c["type"] for c in patch["status"]["conditions"]] == ["QuotaReserved", "Admitted", "Evicted", "Requeued"]
    assert (conditions["QuotaReserved"]["status"], conditions["QuotaReserved"]["reason"]) == (
        "False",
        "PendingEvaluation",
    )
    assert conditions["QuotaReserved"]["lastTransitionTime"] == "2026-01-01T00:05:00Z"
    assert (conditions["Admitted"]["status"], conditions["Admitted"]["reason"]) == ("False", "NoReservation")
    assert conditions["Evicted"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"  # others' conditions kept as they were
    assert conditions["Requeued"] == {
        "type": "Requeued",
        "status": "True",
        "reason": "Preempted",
        "message": "preempted by a higher priority",
        "lastTransitionTime": "2026-01-01T00:05:00Z",
        "observedGeneration": 1,
    }
