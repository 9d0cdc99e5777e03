"""Kueue's contract for a queued job, done: `disttrain_core.kueue` decides (`kueue_step` before the reconcile's plan,
`finish_verdict` after it), this makes its calls (the Workload created, its quota released, its Finished
condition, the job's suspend and pod set patches)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from disttrain_contract.timestamps import format_time
from disttrain_core.api.job import DistTrainJob
from disttrain_core.kueue import (
    MANAGER,
    RESOURCE_FLAVOR_API_VERSION,
    PodSetInfo,
    PriorityClassRef,
    WorkloadView,
    finish_verdict,
    finished_condition,
    flavor_info,
    kueue_step,
    merge_patch,
    released_status,
    workload_reference,
)
from disttrain_core.served import JobShape
from disttrain_core.types import Body, Manifest
from disttrain_kube.api_errors import RefusedError
from disttrain_operator.status_writer import EventSink


class KueueApi(Protocol):
    def create(self, manifest: Manifest) -> bool: ...
    def patch_job(self, job: Body, patch: dict[str, Any]) -> None: ...
    def apply_status_condition(self, manifest: Manifest, condition: dict[str, Any], field_manager: str) -> None: ...
    def patch_object_status(self, manifest: Body, patch: dict[str, Any]) -> None: ...
    def get_cluster_object(self, api_version: str, plural: str, name: str) -> dict[str, Any] | None: ...


class KueueAdapter:
    def __init__(self, kube: KueueApi, emit: EventSink, clock: Callable[[], datetime]) -> None:
        self._kube = kube
        self._emit = emit
        self._clock = clock

    def follow(
        self, body: Body, shape: JobShape, job: DistTrainJob, workload: WorkloadView | None, *, has_pods: bool
    ) -> DistTrainJob:
        """Do the contract's next step; returns the job as it is after any change made to it."""
        step = kueue_step(job, workload, self._flavor, self._priority, has_pods=has_pods)
        if step.release and workload is not None:
            self._kube.patch_object_status(
                workload_reference(job, workload), released_status(workload, format_time(self._clock()))
            )
        if step.create is not None:
            try:
                self._kube.create(step.create)
            except RefusedError as error:
                self._emit(body, type="Warning", reason="CreateFailed", message=f"Workload was refused: {error}")
                return job
        if step.event is not None:
            self._emit(body, type="Normal", reason=step.event.reason, message=step.event.message)
        if step.warning is not None:
            self._emit(body, type="Warning", reason=step.warning.reason, message=step.warning.message)
        if step.job_patch is None:
            return job
        self._kube.patch_job(body, shape.patch_out(step.job_patch))
        patched = merge_patch(job.model_dump(mode="json", by_alias=True, exclude_none=True), step.job_patch)
        return DistTrainJob.model_validate(patched)

    def finish(self, job: DistTrainJob, workload: WorkloadView | None) -> None:
        """Release the quota of a job whose status, as the reconcile just decided it, says it ended."""
        verdict = finish_verdict(job, workload)
        if verdict is not None and workload is not None:
            condition = finished_condition(verdict, format_time(self._clock()))
            self._kube.apply_status_condition(workload_reference(job, workload), condition, MANAGER)

    def _priority(self, source: PriorityClassRef) -> int | None:
        found = self._kube.get_cluster_object(*source.path, source.name)
        return int(found["value"]) if found is not None else None

    def _flavor(self, name: str) -> PodSetInfo:
        flavor = self._kube.get_cluster_object(RESOURCE_FLAVOR_API_VERSION, "resourceflavors", name)
        return flavor_info(flavor) if flavor is not None else PodSetInfo()
