"""The glue from the operator's watches to its reconciles (`build_runtime`), on a fake API: which changes
reconcile a job, and which of two namesakes keeps the names."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fakes import RecordingApi

from disttrain_operator.core import served
from disttrain_operator.core.types import JobKey
from disttrain_operator.runtime.handlers import _reconcile_job, build_runtime
from disttrain_operator.runtime.job_queue import JobQueue
from disttrain_operator.runtime.settings import OperatorSettings
from disttrain_operator.runtime.watch import Scope
from disttrain_operator.runtime.watched import DISTTRAIN_JOBS, SERVED_TFJOBS

KEY = ("team", "mnist")
EVERYWHERE = Scope(None)


class _Api(RecordingApi):
    """Lists what `listed` holds by path; its watches end at once."""

    def __init__(self, listed: dict[str, list[dict[str, Any]]]) -> None:
        super().__init__()
        self.listed = listed

    def list_page(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        return {"items": self.listed.get(path, []), "metadata": {"resourceVersion": "1"}}

    def stream_lines(self, path: str, query: dict[str, str], read_timeout: float) -> Iterator[bytes]:
        return iter(())


class _Queue(JobQueue[JobKey]):
    """Records the jobs named to it, and runs none."""

    def __init__(self) -> None:
        super().__init__(lambda key: None, workers=0)
        self.added: list[JobKey] = []

    def add(self, key: JobKey) -> None:
        self.added.append(key)


def _tfjob() -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "tensorflow", "image": "i"}]}}
    metadata = {"name": "mnist", "namespace": "team", "uid": "u1", "generation": 1, "labels": {}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {**metadata, "creationTimestamp": "2026-01-01T00:00:05Z"},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": template}}},
        "status": {},
    }


def _disttrainjob() -> dict[str, Any]:
    job = {**served.job_manifest(_tfjob()), "apiVersion": "disttrain.io/v1alpha1", "kind": "DistTrainJob"}
    job["metadata"] = {**job["metadata"], "uid": "u0", "creationTimestamp": "2026-01-01T00:00:00Z"}
    return {**job, "status": {}}


def test_changes_reconcile_a_job_its_own_status_write_does_not_and_a_deleted_namesake_wakes_the_other() -> None:
    tfjob, disttrainjob = _tfjob(), _disttrainjob()
    api = _Api({DISTTRAIN_JOBS.path(None): [disttrainjob], SERVED_TFJOBS.path(None): [tfjob]})
    runtime = build_runtime(OperatorSettings(serve_tfjobs=True), api)
    queue = runtime.queue = _Queue()
    jobs, tfjobs = runtime.watches[:2]
    for watch in runtime.watches:
        watch._list(EVERYWHERE)
    assert queue.added == [KEY, KEY]

    _reconcile_job(runtime, KEY)  # the DistTrainJob, created first, keeps the names; the TFJob is refused
    assert api.created[0] == "Service/mnist" and "Pod/mnist-worker-0" in api.created
    assert {item["metadata"]["ownerReferences"][0]["kind"] for item in api.manifests} == {"DistTrainJob"}
    assert api.status_kinds == ["TFJob"]

    queue.added.clear()
    tfjobs._apply(EVERYWHERE, "MODIFIED", {**tfjob, "status": api.statuses[-1]})  # the echo of that write
    assert queue.added == []
    relabelled = {**tfjob, "metadata": {**tfjob["metadata"], "labels": {"team": "a"}}, "status": api.statuses[-1]}
    tfjobs._apply(EVERYWHERE, "MODIFIED", relabelled)
    assert queue.added == [KEY]

    queue.added.clear()
    jobs._apply(EVERYWHERE, "DELETED", disttrainjob)
    assert queue.added == [KEY]  # the TFJob left is reconciled again: its wake-ups (TTL) return
    assert "u0" in runtime.reconciler._jobs  # forgotten by the queue's thread for the job, not the watch's
    created = len(api.created)
    _reconcile_job(runtime, KEY)
    assert "u0" not in runtime.reconciler._jobs
    assert (len(api.created), api.status_kinds) == (created, ["TFJob"])  # it failed once, and stays failed
