"""The glue from kopf and the operator's own watches to its reconciles (`build_runtime` and kopf's
handlers), on a fake API: which changes reconcile a job, which of two namesakes keeps the names, and
when the reconciles may start."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

import kopf

from disttrain_core import served
from disttrain_core.held import PLACEHOLDER_TEMPLATE
from disttrain_core.kueue import PRIORITY_CLASS_LABEL
from disttrain_core.types import JobKey
from disttrain_operator.handlers import (
    Runtime,
    _reconcile_job,
    build_runtime,
    job_event,
    nothing_to_index,
    tune,
)
from disttrain_operator.indexed_jobs import IndexedJobs, copied
from disttrain_operator.job_queue import JobQueue
from disttrain_operator.operator_settings import OperatorSettings
from disttrain_operator.watch import WatchScope
from disttrain_operator.watched import DISTTRAIN_JOBS, PROJECTED, SERVED_TFJOBS, job_body, job_path
from support.fakes import RecordingApi
from support.job_builder import JobBuilder

KEY = ("team", "mnist")
EVERYWHERE = WatchScope(None)


class _Api(RecordingApi):
    """Lists what `listed` holds by path; its watches end at once."""

    def __init__(self, listed: dict[str, list[dict[str, Any]]]) -> None:
        super().__init__()
        self.listed = listed
        self.jobs: dict[str, dict[str, Any]] = {}  # what a GET of a job's path finds

    def list_page(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        return {"items": self.listed.get(path, []), "metadata": {"resourceVersion": "1"}}

    def stream_lines(self, path: str, query: dict[str, str], read_timeout: float) -> Iterator[bytes]:
        return iter(())

    def read(self, path: str, params: dict[str, str]) -> dict[str, Any] | None:
        if path in self.jobs:
            return self.jobs[path]
        raise AssertionError("no pod here ends")

    def pod_log_chunks(
        self,
        namespace: str,
        name: str,
        container: str,
        *,
        follow: bool = False,
        query: dict[str, str] | None = None,
        read_timeout: float | None = None,
    ) -> Iterator[bytes]:
        raise AssertionError("no pod here ends")

    def patch_pod(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> bool:
        raise AssertionError("no pod here ends")

    def list_metadata(self, path: str, query: dict[str, str]) -> list[dict[str, Any]]:
        return []

    def merge_patch(self, manifest: Mapping[str, Any], patch: dict[str, Any]) -> bool:
        raise AssertionError("no log here outlives its job")

    def delete_object(self, manifest: Mapping[str, Any]) -> bool:
        raise AssertionError("no log here outlives its job")


class _Queue(JobQueue[JobKey]):
    """Records the jobs named to it, and runs none."""

    def __init__(self) -> None:
        super().__init__(lambda key: None, workers=0)
        self.added: list[JobKey] = []

    def add(self, key: JobKey) -> None:
        self.added.append(key)


def _tfjob() -> dict[str, Any]:
    metadata = {"uid": "u1", "generation": 1, "labels": {}, "creationTimestamp": "2026-01-01T00:00:05Z"}
    return JobBuilder("mnist", "team").metadata(**metadata).workers(1).status().tfjob()


def _disttrainjob() -> dict[str, Any]:
    job = {**served.job_manifest(_tfjob()), "apiVersion": "disttrain.io/v1alpha1", "kind": "DistTrainJob"}
    job["metadata"] = {**job["metadata"], "uid": "u0", "creationTimestamp": "2026-01-01T00:00:00Z"}
    return {**job, "status": {}}


def _runtime(api: _Api, tfjob: dict[str, Any], disttrainjob: dict[str, Any]) -> tuple[Runtime, _Queue]:
    indexes = {DISTTRAIN_JOBS.index: {KEY: [job_body(disttrainjob)]}, SERVED_TFJOBS.index: {KEY: [job_body(tfjob)]}}
    runtime = build_runtime(OperatorSettings(serve_tfjobs=True), api, indexes)
    queue = runtime.queue = _Queue()
    return runtime, queue


def test_changes_reconcile_a_job_its_own_status_write_does_not_and_a_deleted_namesake_wakes_the_other() -> None:
    tfjob, disttrainjob = _tfjob(), _disttrainjob()
    api = _Api({})
    runtime, queue = _runtime(api, tfjob, disttrainjob)
    job_event(runtime, "ADDED", disttrainjob)
    job_event(runtime, "ADDED", tfjob)
    assert queue.added == [KEY, KEY]

    _reconcile_job(runtime, KEY)  # the DistTrainJob, created first, keeps the names; the TFJob is refused
    assert api.created[0] == "Service/mnist" and "Pod/mnist-worker-0" in api.created
    assert {item["metadata"]["ownerReferences"][0]["kind"] for item in api.manifests} == {"DistTrainJob"}
    assert api.status_kinds == ["TFJob"]

    queue.added.clear()
    job_event(runtime, "MODIFIED", {**tfjob, "status": api.statuses[-1]})  # the echo of that write
    annotated = {**tfjob["metadata"], "annotations": {"a": "b"}, "managedFields": [{"manager": "kubectl"}]}
    job_event(runtime, "MODIFIED", {**tfjob, "metadata": annotated, "status": api.statuses[-1]})  # nothing read
    assert queue.added == []
    team_label = {**tfjob["metadata"], "labels": {"team": "a"}}
    job_event(runtime, "MODIFIED", {**tfjob, "metadata": team_label, "status": api.statuses[-1]})  # nor this
    assert queue.added == []
    queued = {**tfjob["metadata"], "labels": {PRIORITY_CLASS_LABEL: "high"}}
    relabelled = {**tfjob, "metadata": queued, "status": api.statuses[-1]}
    job_event(runtime, "MODIFIED", relabelled)
    assert queue.added == [KEY]

    queue.added.clear()
    runtime.jobs = IndexedJobs([{}, {KEY: [job_body(relabelled)]}], api.read)  # kopf took the DistTrainJob out
    job_event(runtime, "DELETED", disttrainjob)
    assert queue.added == [KEY]  # the TFJob left is reconciled again: its wake-ups (TTL) return
    assert "u0" in runtime.reconciler._jobs  # forgotten by the queue's thread for the job, not kopf's
    created = len(api.created)
    _reconcile_job(runtime, KEY)
    assert "u0" not in runtime.reconciler._jobs
    assert (len(api.created), api.status_kinds) == (created, ["TFJob"])  # it failed once, and stays failed


def test_a_job_held_without_its_templates_is_read_whole_and_its_pods_built_from_them() -> None:
    job = _disttrainjob()
    padding = [{"name": f"PAD_{n}", "value": "x" * 60} for n in range(1200)]  # about 90 KiB
    template = job["spec"]["replicaSpecs"]["Worker"]["template"]
    template["spec"]["containers"][0]["env"] = padding
    held = job_body(job)
    assert held[PROJECTED] and held["spec"]["replicaSpecs"]["Worker"]["template"] == PLACEHOLDER_TEMPLATE
    api = _Api({})
    api.jobs[job_path(job)] = job
    runtime = build_runtime(OperatorSettings(), api, {DISTTRAIN_JOBS.index: {KEY: [held]}})
    _reconcile_job(runtime, KEY)
    worker = next(item for item in api.manifests if item["metadata"]["name"] == "mnist-worker-0")
    assert worker["spec"]["containers"][0]["env"][: len(padding)] == padding

    created = len(api.created)
    del api.jobs[job_path(job)]  # deleted since the index held it: no reconcile, its event follows
    api.jobs[job_path(job)] = {**job, "metadata": {**job["metadata"], "uid": "a namesake's"}}
    _reconcile_job(runtime, KEY)
    assert len(api.created) == created


def test_no_reconcile_runs_before_kopf_indexed_the_jobs_and_every_own_watch_listed_once() -> None:
    api = _Api({})
    runtime, _ = _runtime(api, _tfjob(), _disttrainjob())
    for watch in runtime.watches:
        watch._list(EVERYWHERE)
    assert not runtime.listings.done.is_set()
    assert runtime.listings.state()[DISTTRAIN_JOBS.path(None)] is False
    job_event(runtime, None, _disttrainjob())  # kopf's first event handler call: every index is full
    assert runtime.listings.done.is_set()
    assert all(runtime.listings.state().values())


def test_kopf_cannot_say_it_indexed_no_jobs_so_an_empty_list_at_start_says_so() -> None:
    assert nothing_to_index(_Api({}), [DISTTRAIN_JOBS.path(None)])
    assert not nothing_to_index(_Api({DISTTRAIN_JOBS.path(None): [_tfjob()]}), [DISTTRAIN_JOBS.path(None)])


def test_kopf_indexes_only_what_the_reconcile_reads() -> None:
    body = {**_disttrainjob(), "metadata": {**_disttrainjob()["metadata"], "managedFields": [{"manager": "kubectl"}]}}
    assert job_body(body)["metadata"] == {
        "name": "mnist",
        "namespace": "team",
        "uid": "u0",
        "generation": 1,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {},
        "annotations": {},
    }


def test_kopf_is_tuned_to_post_no_events_end_its_watches_as_the_operators_own_and_list_no_namespaces_in_vain() -> None:
    kopf_settings = kopf.OperatorSettings()
    tune(kopf_settings, OperatorSettings(watch_seconds=30))
    assert (kopf_settings.posting.enabled, kopf_settings.queueing.idle_timeout) == (False, 0.5)
    assert kopf_settings.persistence.diffbase_storage.build(body=kopf.Body(cast(kopf.RawBody, _tfjob()))) == {}
    assert (kopf_settings.watching.server_timeout, kopf_settings.watching.inactivity_timeout) == (30, 40)
    assert kopf_settings.scanning.disabled is False  # every namespace: CRDs installed later are served
    for namespaces, disabled in [(("team-a", "team-b"), True), (("team-*",), False)]:
        tune(kopf_settings, OperatorSettings(watch_namespaces=namespaces))
        assert kopf_settings.scanning.disabled is disabled, namespaces


def test_a_copy_of_an_index_another_thread_changed_meanwhile_is_taken_again() -> None:
    class Changing:
        def __init__(self) -> None:
            self.tries = 0

        def __iter__(self) -> Iterator[int]:
            self.tries += 1
            if self.tries == 1:
                raise RuntimeError("dictionary changed size during iteration")
            return iter([1, 2])

    changing = Changing()
    assert (copied(changing), changing.tries) == ([1, 2], 2)
