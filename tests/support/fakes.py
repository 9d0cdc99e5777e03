"""Fakes of the operator's API calls, for unit tests of the reconcile: they record, never talk to a server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class RecordingApi:
    """A `JobApi` that records creations, deletions, pod patches and status writes; other calls are not expected."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.manifests: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self.status_kinds: list[str] = []  # the kind of the job each status was written to
        self.deleted: list[str] = []
        self.pod_patches: list[tuple[str, list[dict[str, Any]]]] = []
        self.calls: list[str] = []  # "create", "delete", "patch" and "status", in the order they were made

    def read(self, path: str, params: dict[str, str]) -> dict[str, Any] | None:
        raise AssertionError(f"no job here is held without its templates, to be read whole: {path}")

    def create(self, manifest: dict[str, Any]) -> bool:
        self.created.append(f"{manifest['kind']}/{manifest['metadata']['name']}")
        self.calls.append("create")
        self.manifests.append(manifest)
        return True

    def delete_pod(self, namespace: str, name: str, force: bool = False, resource_version: str | None = None) -> bool:
        self.deleted.append(name)
        self.calls.append("delete")
        return True

    def patch_pod(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> bool:
        self.pod_patches.append((name, patch))
        self.calls.append("patch")
        return True

    def patch_job_status(self, job: Mapping[str, Any], status: dict[str, Any]) -> None:
        self.statuses.append(status)
        self.calls.append("status")
        self.status_kinds.append(str(job.get("kind")))

    def delete_job(self, job: Mapping[str, Any]) -> bool:
        raise AssertionError("no job here outlives its TTL")

    def patch_job(self, job: Mapping[str, Any], patch: dict[str, Any]) -> None:
        raise AssertionError("no job here is queued in Kueue")

    def apply_status_condition(self, manifest: dict[str, Any], condition: dict[str, Any], field_manager: str) -> None:
        raise AssertionError("no job here has a Workload")

    def patch_object_status(self, manifest: Mapping[str, Any], patch: dict[str, Any]) -> None:
        raise AssertionError("no job here has a Workload")

    def get_cluster_object(self, api_version: str, plural: str, name: str) -> dict[str, Any] | None:
        raise AssertionError("no job here has a Workload")


class QueueingApi(RecordingApi):
    """Records the job patches and Workload conditions Kueue's contract makes."""

    def __init__(self) -> None:
        super().__init__()
        self.job_patches: list[dict[str, Any]] = []
        self.workload_conditions: list[tuple[str, str, str]] = []  # the Workload, the condition's type and reason

    def patch_job(self, job: Mapping[str, Any], patch: dict[str, Any]) -> None:
        self.job_patches.append(patch)

    def apply_status_condition(self, manifest: dict[str, Any], condition: dict[str, Any], field_manager: str) -> None:
        self.workload_conditions.append((manifest["metadata"]["name"], condition["type"], condition["reason"]))
