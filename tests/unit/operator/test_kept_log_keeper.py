"""Logs that outlive pods, in pure code and on a fake API: when a pod's log is due, what is kept of it
(its end, bounded, whatever its length), who owns it, when the pod is let go, and when a kept log
outliving its job is deleted; then the client's numbering of attempts."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest

from disttrain import AttemptNotFoundError
from disttrain.kept_log_reader import Attempt, KeptLog
from disttrain.logs import ReplicaLogs
from disttrain_contract.kept_logs import DEFAULT_LOG_BYTES
from disttrain_core import kept_logs, served
from disttrain_core.api.job import API_VERSION, DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.status import UnkeptLogs
from disttrain_core.api.tenant_input import ATTEMPT, JOB_GONE_SINCE, LOG_MAX_BYTES, LOG_TTL, RUNS_COUNTED
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.objects import pod
from disttrain_core.kept_logs import (
    KEPT_ATTEMPTS_PER_REPLICA,
    KEPT_BYTES_PER_JOB,
    LEGACY_LOG_FINALIZER,
)
from disttrain_core.observed import pod_view
from disttrain_core.types import Body
from disttrain_dev.polling import wait_for
from disttrain_kube.api_errors import LogUnreadableError, TransientApiError
from disttrain_operator import kept_log_keeper
from disttrain_operator.kept_log_keeper import KEEP_TRIES, UNKEPT, KeptLogKeeper, KeptLogSweeper
from disttrain_operator.watch import WatchScope
from support.job_builder import JobBuilder

NOW = datetime(2026, 11, 25, 12, 0, 0, 123456, tzinfo=UTC)
JOB_UID = "job-uid-1"
POD_UID = "0f3c9a1e-5b7d-4c2a-9e8f-123456789abc"


def _job(logs: dict[str, Any] | None = None, workers: int = 2) -> DistTrainJob:
    builder = JobBuilder("mnist", "team").metadata(uid=JOB_UID).workers(workers, {"image": "trainer"})
    return builder.spec(**({"logs": logs} if logs is not None else {})).model()


def _pod(job: DistTrainJob, phase: str = "Running", **metadata: Any) -> dict[str, Any]:
    manifest = pod(job, ReplicaType.WORKER, 1, BuildSettings())
    manifest["metadata"].update({"uid": POD_UID, "creationTimestamp": "2026-11-25T11:00:00Z", **metadata})
    terminated = {"exitCode": 137, "finishedAt": "2026-11-25T11:59:00Z"}
    state = {"terminated": terminated} if phase in ("Succeeded", "Failed") else {"running": {}}
    manifest["status"] = {"phase": phase, "containerStatuses": [{"name": "tensorflow", "state": state}]}
    return manifest


def test_nothing_holds_a_pod_and_its_log_is_due_once_it_ended_or_is_being_deleted() -> None:
    job = _job()
    assert "finalizers" not in _pod(job)["metadata"]
    assert not kept_logs.log_due(_pod(job))
    assert kept_logs.log_due(_pod(job, "Failed")) and not kept_logs.to_follow(_pod(job, "Failed"))
    deleting = _pod(job, deletionTimestamp="2026-11-25T12:00:00Z", deletionGracePeriodSeconds=30)
    assert kept_logs.log_due(deleting) and kept_logs.to_follow(deleting)  # read as it grows, to its end
    assert pod_view(_pod(job, "Succeeded")) is not None and pod_view(_pod(job, "Succeeded")).log_due  # type: ignore[union-attr]
    unkept = _pod(_job({"keep": False}), "Failed")
    assert not kept_logs.log_due(unkept) and not kept_logs.log_due({**unkept, "metadata": {"name": "x"}})
    legacy = _pod(_job({"keep": False}), "Failed", finalizers=[LEGACY_LOG_FINALIZER])
    assert kept_logs.held_by_legacy_finalizer(legacy["metadata"]) and kept_logs.log_due(
        legacy
    )  # an earlier version's pod


def test_the_end_of_a_log_of_any_length_is_kept_from_a_line_start() -> None:
    lines = [f"line {n}\n".encode() for n in range(100_000)]
    tail = kept_logs.log_tail(iter(lines), 1024)
    assert tail.total == sum(map(len, lines)) and len(tail.data) <= 1024
    assert tail.data.startswith(b"line ") and tail.data.endswith(b"line 99999\n")
    assert tail.dropped == tail.total - len(tail.data)
    short = kept_logs.log_tail(iter([b"a\n", b"b\n"]), 1024)
    assert (short.data, short.dropped) == (b"a\nb\n", 0)
    one_line = kept_logs.log_tail(iter([b"x" * 5000]), 1024)
    assert one_line.data == b"x" * 1024  # no line break to cut at: the last bytes


def test_the_kept_log_is_owned_by_the_job_or_by_nothing_with_a_ttl() -> None:
    tail = kept_logs.LogTail(b"hello\n\xff\n", 9)
    owned = kept_logs.kept_log(_pod(_job(), "Failed"), tail, NOW, job_present=True)
    assert owned is not None
    assert owned["metadata"]["name"] == "mnist-worker-1-log-0f3c9a1e"
    assert owned["metadata"]["labels"][kept_logs.KEPT_LOG_LABEL] == "worker-1"
    assert owned["metadata"]["ownerReferences"][0]["uid"] == JOB_UID
    assert owned["metadata"]["annotations"][kept_logs.EXIT_CODE] == "137"
    assert owned["metadata"]["annotations"][kept_logs.KEPT_AT] == "2026-11-25T12:00:00.123456Z"
    assert owned["data"]["log"] == "hello\n\ufffd\n"
    assert kept_logs.kept_log(_pod(_job(), "Failed"), tail, NOW, job_present=False) is None  # gone with its job
    outliving = kept_logs.kept_log(
        _pod(_job({"ttlSecondsAfterJobDeleted": 60}), "Failed"), tail, NOW, job_present=False
    )
    assert outliving is not None and "ownerReferences" not in outliving["metadata"]
    assert outliving["metadata"]["labels"][kept_logs.OUTLIVES_JOB_LABEL] == "true"


def _kept(uid: str, gone_since: str | None = None, ttl: str = "60") -> dict[str, Any]:
    annotations = {LOG_TTL: ttl, **({JOB_GONE_SINCE: gone_since} if gone_since else {})}
    return {"metadata": {"name": uid, "labels": {kept_logs.JOB_UID_LABEL: uid}, "annotations": annotations}}


def test_a_kept_log_goes_its_ttl_after_its_job_was_first_seen_gone() -> None:
    fresh, marked, expired, back = (
        _kept("a"),
        _kept("b", "2026-11-25T11:59:30Z"),
        _kept("c", "2026-11-25T11:58:59Z"),
        _kept("d", "2026-11-25T11:00:00Z"),
    )
    found = kept_logs.sweep([fresh, marked, expired, back, _kept("e")], {"d", "e"}, NOW)
    assert (found.mark, found.unmark, found.delete) == ([fresh], [back], [expired])


class _LogApi:
    def __init__(self, found: dict[str, Any] | None, log: list[bytes] | Exception, refusals: int = 0) -> None:
        self.found = found
        self.log = log
        self.refusals = refusals  # creates that fail as a terminating namespace refuses them
        self.log_reads = 0
        self.created: list[dict[str, Any]] = []
        self.patches: list[list[dict[str, Any]]] = []
        self.released = threading.Event()

    def read(self, path: str, params: dict[str, str]) -> dict[str, Any] | None:
        return self.found

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
        self.log_reads += 1
        if isinstance(self.log, Exception):
            error, self.log = self.log, [b"read at last\n"]
            raise error
        return iter(self.log)

    def create(self, manifest: dict[str, Any]) -> bool:
        if self.refusals:
            self.refusals -= 1
            raise TransientApiError(403, "unable to create new content in namespace team: it is being terminated")
        if any(item["metadata"]["name"] == manifest["metadata"]["name"] for item in self.created):
            return False
        self.created.append(manifest)
        return True

    def patch_pod(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> bool:
        self.patches.append(patch)
        self.released.set()
        return True

    def list_metadata(self, path: str, query: dict[str, str]) -> list[dict[str, Any]]:
        wanted = dict(term.split("=") for term in query["labelSelector"].split(","))
        return [item for item in self.created if wanted.items() <= item["metadata"]["labels"].items()]

    def delete_object(self, manifest: Mapping[str, Any]) -> bool:
        name = manifest["metadata"]["name"]
        self.created = [item for item in self.created if item["metadata"]["name"] != name]
        return True


def _keep(api: _LogApi, job_uids: set[str], uid: str = POD_UID, body: dict[str, Any] | None = None) -> KeptLogKeeper:
    """The keeper's work on one pod, until it says the pod's log is settled (it wakes the pod's job)."""
    settled = threading.Event()
    keeper = KeptLogKeeper(
        api, lambda key: job_uids, wake=lambda key: settled.set(), clock=lambda: NOW, threads=2, retry_seconds=0.01
    )
    keeper.start()
    keeper.offer(("team", "mnist"), "team", "mnist-worker-1", uid, body)
    assert settled.wait(timeout=10)
    keeper.stop()
    keeper.join(timeout=10)
    assert keeper.log_done(uid)
    return keeper


@pytest.mark.parametrize(
    ("log", "job_uids", "kept"),
    [
        ([b"first\n", b"last\n"], {JOB_UID}, "first\nlast\n"),
        (TransientApiError(0, "connection reset"), {JOB_UID}, "read at last\n"),  # read again a moment later
        (LogUnreadableError(400, "container never started"), {JOB_UID}, None),  # nothing to keep
        ([b"orphan\n"], set(), None),  # the job is gone and its logs go with it
    ],
)
def test_the_keeper_keeps_what_it_can_read_and_always_settles_the_pod(
    log: list[bytes] | Exception, job_uids: set[str], kept: str | None
) -> None:
    api = _LogApi(_pod(_job(), "Failed"), log)
    _keep(api, job_uids)
    assert [item["data"]["log"] for item in api.created] == ([kept] if kept else [])
    assert api.patches == []  # nothing holds it: there is nothing to let go


def test_a_pod_that_never_ran_is_settled_unread_and_a_log_that_cannot_be_kept_is_given_up() -> None:
    never_ran = _pod(_job(), "Pending", deletionTimestamp="2026-11-25T12:00:00Z", deletionGracePeriodSeconds=0)
    never_ran["status"] = {"phase": "Pending"}
    api = _LogApi(never_ran, [b"unread\n"])
    _keep(api, {JOB_UID})
    assert (api.log_reads, api.created) == (0, [])
    refused = _LogApi(_pod(_job(), "Failed"), [b"log\n"], refusals=1000)
    _keep(refused, {JOB_UID})
    assert (refused.log_reads, refused.created) == (KEEP_TRIES, [])
    legacy = _LogApi(_pod(_job(), "Failed", finalizers=[LEGACY_LOG_FINALIZER]), [b"log\n"], refusals=1000)
    _keep(legacy, {JOB_UID})
    assert len(legacy.patches) == 1  # an earlier version's pod is let go all the same


def _attempt(number: int, exit_code: int) -> KeptLog:
    return KeptLog(Attempt(number, f"uid-{number}", None, None, exit_code, kept=True), f"attempt {number}\nend\n")


def test_attempts_are_numbered_kept_first_and_a_missing_one_names_those_there_are() -> None:
    logs = ReplicaLogs("mnist", "worker-1", lambda: [_attempt(1, 137), _attempt(2, 0)])
    assert list(logs.attempt_lines(1, follow=False, tail=None)) == ["attempt 1", "end"]
    assert list(logs.attempt_lines(2, follow=True, tail=1)) == ["end"]
    with pytest.raises(AttemptNotFoundError, match=r"no attempt 3; its attempts: 1 \(kept, exit code 137\), 2"):
        logs.attempt_lines(3, follow=False, tail=None)
    assert [attempt.number for attempt in logs.attempts] == [1, 2]


def test_a_reader_waits_for_the_keeper_only_while_the_latest_pod_s_log_is_unkept_in_config_maps() -> None:
    second_attempt = {"replicaStatuses": {"Worker": {"attempts": [1, 2]}}}
    job = JobBuilder("mnist", "team").workers(2, {"image": "trainer"}).status(**second_attempt).model()
    assert kept_logs.latest_unkept(job, ReplicaType.WORKER, 1, [])
    assert kept_logs.latest_unkept(job, ReplicaType.WORKER, 1, [1])  # the first attempt's is kept, not the latest's
    assert not kept_logs.latest_unkept(job, ReplicaType.WORKER, 1, [1, 2])
    assert not kept_logs.latest_unkept(job, ReplicaType.WORKER, 0, [1])
    never_made = JobBuilder("mnist", "team").workers(2, {"image": "trainer"}).model()
    assert not kept_logs.latest_unkept(never_made, ReplicaType.WORKER, 1, [])
    unkept = JobBuilder("mnist", "team").workers(2, {"image": "trainer"}).spec(logs={"keep": False})
    assert not kept_logs.latest_unkept(unkept.status(**second_attempt).model(), ReplicaType.WORKER, 1, [])


def test_a_kept_log_says_how_much_of_its_start_was_dropped() -> None:
    attempt = Attempt(1, "u", None, None, 0, kept=True, log_bytes=10_000, kept_bytes=1024)
    assert attempt.dropped_bytes == 8976 and attempt.describe() == "1 (kept, exit code 0)"


def test_a_served_tfjob_s_pods_keep_their_logs_and_say_whose_they_are() -> None:
    container = {"name": "tensorflow", "image": "trainer"}
    tfjob = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mnist", "namespace": "team", "uid": "tf-uid"},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [container]}}}}},
    }
    job = DistTrainJob.model_validate(served.job_manifest(tfjob))
    manifest = pod(job, ReplicaType.WORKER, 0, BuildSettings())
    manifest["metadata"]["uid"] = POD_UID
    manifest["status"] = {"phase": "Failed", "containerStatuses": [{"name": "tensorflow", "state": {"terminated": {}}}]}
    assert "finalizers" not in manifest["metadata"] and kept_logs.log_due(manifest)
    kept = kept_logs.kept_log(manifest, kept_logs.LogTail(b"x\n", 2), NOW, job_present=True)
    assert kept is not None and kept["metadata"]["labels"][kept_logs.JOB_KIND_LABEL] == "TFJob"


@pytest.mark.parametrize("forged", ["-1", "0", "1023", "999999999999", "1e3", "lots", ""])
def test_a_forged_byte_bound_on_a_pod_keeps_its_log_within_the_spec_s_bounds(forged: str) -> None:
    pod_body = _pod(_job(), "Failed")
    pod_body["metadata"]["annotations"][LOG_MAX_BYTES] = forged
    api = _LogApi(pod_body, [b"x" * 100 + b"\n"] * 10_000)
    _keep(api, {JOB_UID})  # an endless loop here once held a keeper thread for ever
    assert len(api.created[0]["data"]["log"].encode()) <= DEFAULT_LOG_BYTES


def test_a_template_cannot_give_its_pods_a_log_ttl_the_spec_did_not() -> None:
    job = _job()
    template = job.spec.replica_specs[ReplicaType.WORKER].template
    forged = {LOG_TTL: "2147483647000", LOG_MAX_BYTES: "-1", ATTEMPT: "2147483647", "team": "a"}
    template["metadata"] = {"annotations": forged}
    annotations = pod(job, ReplicaType.WORKER, 0, BuildSettings())["metadata"]["annotations"]
    assert annotations == {LOG_MAX_BYTES: str(DEFAULT_LOG_BYTES), ATTEMPT: "1", "team": "a"}


def test_forged_kept_logs_are_swept_by_their_own_bounded_notes() -> None:
    huge_ttl = _kept("a", "2026-11-25T11:00:00Z", ttl="99999999999999999999999")  # out of bounds: no TTL
    far_future = _kept("b", "9999-12-31T23:59:59Z", ttl="7776000")  # gone since now, at the latest
    zoneless = _kept("c", "2026-11-25T11:00:00", ttl="60")  # read as UTC
    garbage = _kept("d", "yesterday", ttl="-5")
    found = kept_logs.sweep([huge_ttl, far_future, zoneless, garbage], set(), NOW)
    assert (found.mark, found.unmark, found.delete) == ([garbage], [], [huge_ttl, zoneless])


class _SweepApi:
    def __init__(self, pages: list[list[dict[str, Any]] | Exception]) -> None:
        self.pages = pages
        self.deleted: list[str] = []
        self.swept = threading.Event()

    def list_metadata(self, path: str, query: dict[str, str]) -> list[dict[str, Any]]:
        page = self.pages.pop(0) if len(self.pages) > 1 else self.pages[0]
        if isinstance(page, Exception):
            raise page
        return page

    def merge_patch(self, manifest: Mapping[str, Any], patch: dict[str, Any]) -> bool:
        raise TransientApiError(500, "etcd is away")

    def delete_object(self, manifest: Mapping[str, Any]) -> bool:
        self.deleted.append(manifest["metadata"]["name"])
        self.swept.set()
        return True


def test_the_sweeper_outlives_a_failing_sweep_and_a_failing_item() -> None:
    expired = _kept("gone", "2026-11-25T11:00:00Z")
    expired["metadata"]["namespace"] = "team"
    marked = _kept("new")
    marked["metadata"]["namespace"] = "team"
    api = _SweepApi([OverflowError("a bug on one sweep"), [marked, expired]])
    ready = threading.Event()
    ready.set()
    sweeper = KeptLogSweeper(api, set, lambda: NOW, [WatchScope(None)], ready=ready, interval=0.01)
    sweeper.start()
    try:
        assert api.swept.wait(timeout=10)  # swept after the failed sweep, past the mark that failed
    finally:
        sweeper.stop()
        sweeper.join(timeout=10)
    assert api.deleted[0] == "gone"


class _BuggyLogApi(_LogApi):
    """Reading the pod fails on a bug, for the first `bugs` reads."""

    def __init__(self, found: dict[str, Any], bugs: int) -> None:
        super().__init__(found, [b"log\n"])
        self.bugs = bugs

    def read(self, path: str, params: dict[str, str]) -> dict[str, Any] | None:
        if self.bugs:
            self.bugs -= 1
            raise KeyError("metadata")
        return super().read(path, params)


def test_a_bug_on_one_pod_is_retried_and_never_ends_the_keeper() -> None:
    api = _BuggyLogApi(_pod(_job(), "Failed"), bugs=2)
    _keep(api, {JOB_UID})
    assert [item["data"]["log"] for item in api.created] == ["log\n"]


class _CountingLogApi(_LogApi):
    """Counts reads of the pod; its first `conflicts` releases fail their tests (the pod changed meanwhile)."""

    def __init__(self, found: dict[str, Any], conflicts: int) -> None:
        super().__init__(found, [b"log\n"])
        self.reads = 0
        self.conflicts = conflicts

    def read(self, path: str, params: dict[str, str]) -> dict[str, Any] | None:
        self.reads += 1
        return super().read(path, params)

    def patch_pod(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> bool:
        if self.conflicts:
            self.conflicts -= 1
            self.patches.append(patch)
            return False
        return super().patch_pod(namespace, name, patch)


@pytest.mark.parametrize(("conflicts", "reads"), [(0, 0), (1, 2)])
def test_the_keeper_starts_from_the_pod_as_watched_and_reads_it_only_to_try_again(conflicts: int, reads: int) -> None:
    """An earlier version's pod, held by its finalizer: a release refused as stale reads the pod afresh (once to
    see it is still there, once to try again) and the log is kept once."""
    watched = _pod(_job(), "Failed", finalizers=[LEGACY_LOG_FINALIZER])
    api = _CountingLogApi(watched, conflicts)
    keeper = KeptLogKeeper(api, lambda key: {JOB_UID}, clock=lambda: NOW, threads=1, retry_seconds=0.01)
    keeper.start()
    keeper.offer(("team", "mnist"), "team", "mnist-worker-1", POD_UID, watched)
    assert api.released.wait(timeout=10)
    keeper.stop()
    keeper.join(timeout=10)
    assert (api.reads, len(api.patches), [item["data"]["log"] for item in api.created]) == (
        reads,
        conflicts + 1,
        ["log\n"],
    )


def test_a_replica_keeps_its_first_and_latest_attempts_numbered_as_they_ran() -> None:
    job = _job()
    api = _LogApi(None, [b"log\n"])
    for attempt in range(1, 7):
        uid = f"{attempt:08d}-5b7d-4c2a-9e8f-123456789abc"
        api.found = _pod(job, "Failed", uid=uid)
        api.found["metadata"]["annotations"][ATTEMPT] = str(attempt)
        api.log = [f"attempt {attempt}\n".encode()]
        keeper = _keep(api, {JOB_UID}, uid)
        assert keeper.unkept(JOB_UID) == []
    kept = kept_logs.in_order(api.created)
    assert len(kept) == KEPT_ATTEMPTS_PER_REPLICA
    assert kept_logs.attempt_numbers(kept) == [1, 4, 5, 6]
    assert [item["data"]["log"] for item in kept] == [f"attempt {n}\n" for n in (1, 4, 5, 6)]


def test_attempts_that_went_unkept_are_reported_when_a_later_one_is_kept() -> None:
    job = _job()
    api = _LogApi(None, [b"log\n"])
    reported: list[list[UnkeptLogs]] = []
    for attempt in (2, 3, 6):  # the first went while no operator ran; so did the fourth and fifth
        uid = f"{attempt:08d}-5b7d-4c2a-9e8f-123456789abc"
        api.found = _pod(job, "Failed", uid=uid)
        api.found["metadata"]["annotations"][ATTEMPT] = str(attempt)
        reported.append(_keep(api, {JOB_UID}, uid).unkept(JOB_UID))
    gap = [UnkeptLogs(replica="worker-1", first_attempt=1, last_attempt=1, reason=UNKEPT)]
    later = [UnkeptLogs(replica="worker-1", first_attempt=4, last_attempt=5, reason=UNKEPT)]
    assert reported == [gap, [], later]
    assert kept_logs.attempt_numbers(api.created) == [2, 3, 6]


def test_a_pod_of_an_earlier_version_is_numbered_after_its_replica_s_kept_logs() -> None:
    unnumbered = _pod(_job(), "Failed")
    del unnumbered["metadata"]["annotations"][ATTEMPT]
    kept = [{"metadata": {"name": "a", "annotations": {ATTEMPT: "3"}}}]
    assert kept_logs.pod_attempt(unnumbered, kept) == 4 and kept_logs.pod_attempt(_pod(_job(), "Failed"), kept) == 1


_until = partial(wait_for, timeout=10, interval=0.01)  # the keeper's threads get there in milliseconds


class _FollowedLogApi(_LogApi):
    """Logs of pods being deleted arrive once `stopped` is set, as a container's does until it ends."""

    def __init__(self, pods: dict[str, dict[str, Any]]) -> None:
        super().__init__(None, [b"log\n"])
        self.pods = pods
        self.stopped = threading.Event()
        self.follows: list[str] = []

    def read(self, path: str, params: dict[str, str]) -> dict[str, Any] | None:
        return self.pods.get(params["name"])

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
        if follow:
            self.follows.append(name)
            assert namespace != "team" or self.stopped.wait(timeout=10)  # the others' containers stop at once
        return iter([f"{name} to its end\n".encode()])


def _deleting_pods(count: int, namespace: str = "team") -> dict[str, dict[str, Any]]:
    job = _job(workers=count)
    found = {}
    for index in range(count):
        body = _pod(
            job, uid=f"{namespace[:4]}000{index}-0000-0000-0000-000000000000", deletionTimestamp="2026-11-25T12:00:00Z"
        )
        body["metadata"].update(name=f"mnist-worker-{index}", namespace=namespace)
        body["metadata"]["labels"]["disttrain.io/replica-index"] = str(index)
        found[body["metadata"]["name"]] = body
    return found


def test_a_pod_deleted_while_it_runs_is_followed_and_one_that_ended_never_waits_for_follows() -> None:
    job = _job(workers=4)
    deleting = _deleting_pods(3)
    ended = _pod(job, "Failed", name="mnist-worker-3", uid="00000003-0000-0000-0000-000000000000")
    ended["metadata"]["labels"]["disttrain.io/replica-index"] = "3"
    api = _FollowedLogApi({**deleting, "mnist-worker-3": ended})
    keeper = KeptLogKeeper(  # no watch offers how these pods ended: they are kept as read
        api, lambda key: {JOB_UID}, clock=lambda: NOW, threads=3, max_follows=2, end_seconds=0
    )
    keeper.start()
    try:
        for name, body in [*deleting.items(), ("mnist-worker-3", ended)]:
            keeper.offer(("team", "mnist"), "team", name, body["metadata"]["uid"], body)
        # the pod that ended is kept while two follows hold their threads and the third waits for one
        _until(
            "the ended pod kept and two follows running",
            lambda: keeper.log_done(ended["metadata"]["uid"]) and len(api.follows) == 2,
        )
        assert not any(keeper.log_done(body["metadata"]["uid"]) for body in deleting.values())
        api.stopped.set()
        _until(
            "every deleted pod's log kept",
            lambda: all(keeper.log_done(body["metadata"]["uid"]) for body in deleting.values()),
        )
    finally:
        keeper.stop()
        keeper.join(timeout=10)
    assert sorted(api.follows) == sorted(deleting)
    assert sorted(item["data"]["log"] for item in api.created) == sorted(
        f"{name} to its end\n" for name in [*deleting, "mnist-worker-3"]
    )


def test_a_followed_log_is_kept_with_how_its_pod_ended_as_the_watch_shows_it() -> None:
    """A followed log's stream ends a moment before the node reports how its container ended: the keeper
    takes the exit code from the pod the watch offers then, and a pod gone meanwhile ends its wait."""
    job = _job()
    deleting = _pod(job, deletionTimestamp="2026-11-25T12:00:00Z")
    ended = _pod(job, "Succeeded", deletionTimestamp="2026-11-25T12:00:00Z")
    gone = _pod(job, uid="00000000-0000-0000-0000-000000000000", deletionTimestamp="2026-11-25T12:00:00Z")
    gone["metadata"]["name"] = "mnist-worker-0"
    gone["metadata"]["labels"]["disttrain.io/replica-index"] = "0"
    api = _FollowedLogApi({})  # read after the stream ended, each pod is gone
    keeper = KeptLogKeeper(api, lambda key: {JOB_UID}, clock=lambda: NOW, end_seconds=60)
    keeper.start()
    try:
        for body in (deleting, gone):
            keeper.offer(("team", "mnist"), "team", body["metadata"]["name"], body["metadata"]["uid"], body)
        _until("both followed", lambda: len(api.follows) == 2)
        api.stopped.set()
        keeper.offer(("team", "mnist"), "team", "mnist-worker-1", POD_UID, ended)
        keeper.forget(gone["metadata"]["uid"])
        _until("both kept", lambda: keeper.log_done(POD_UID) and keeper.log_done(gone["metadata"]["uid"]))
    finally:
        keeper.stop()
        keeper.join(timeout=10)
    notes = [item["metadata"]["annotations"] for item in api.created]
    exit_codes = {note[kept_logs.POD_UID]: note.get(kept_logs.EXIT_CODE) for note in notes}
    assert exit_codes == {POD_UID: "137", gone["metadata"]["uid"]: None}


def test_a_job_of_many_pods_keeps_less_of_each_so_that_it_stays_within_its_budget() -> None:
    few = pod(_job(), ReplicaType.WORKER, 0, BuildSettings())
    assert few["metadata"]["annotations"][LOG_MAX_BYTES] == str(DEFAULT_LOG_BYTES)
    share = int(
        pod(_job(workers=1000), ReplicaType.WORKER, 0, BuildSettings())["metadata"]["annotations"][LOG_MAX_BYTES]
    )
    assert share * KEPT_ATTEMPTS_PER_REPLICA * 1000 <= KEPT_BYTES_PER_JOB


def test_an_owner_written_by_hand_selects_no_other_kept_logs() -> None:
    forged = _pod(_job(), "Failed")
    forged["metadata"]["ownerReferences"][0]["uid"] = f"{JOB_UID},disttrain.io/kept-log-of"
    assert kept_logs.kept_log_selector(forged) is None
    assert (
        kept_logs.kept_log_selector(_pod(_job(), "Failed"))
        == f"{kept_logs.JOB_UID_LABEL}={JOB_UID},{kept_logs.KEPT_LOG_LABEL}=worker-1"
    )


def test_one_namespace_s_slow_pods_hold_no_follow_another_namespace_needs() -> None:
    """A tenant whose deleted pods take their time to stop (a long grace period it chose) holds at most its
    namespace's share of the follows: another namespace's pod deleted meanwhile is followed and kept."""
    job = _job(workers=4)
    slow = _deleting_pods(3)
    other = _pod(job, uid="00000009-0000-0000-0000-000000000000", deletionTimestamp="2026-11-25T12:00:00Z")
    other["metadata"].update(name="other-worker-1", namespace="other-team")
    api = _FollowedLogApi({**slow, "other-worker-1": other})
    keeper = KeptLogKeeper(
        api,
        lambda key: {JOB_UID},
        clock=lambda: NOW,
        threads=4,
        max_follows=3,
        max_follows_per_namespace=2,
        end_seconds=0,
    )
    keeper.start()
    try:
        for name, body in slow.items():
            keeper.offer(("team", "mnist"), "team", name, body["metadata"]["uid"], body)
        _until("the namespace's share of follows", lambda: len(api.follows) == 2)  # its third waits
        keeper.offer(("other-team", "mnist"), "other-team", "other-worker-1", other["metadata"]["uid"], other)
        _until("the other namespace's pod kept", lambda: keeper.log_done(other["metadata"]["uid"]))
        assert len([name for name in api.follows if name.startswith("mnist")]) == 2
        api.stopped.set()
        _until(
            "every slow pod's log kept", lambda: all(keeper.log_done(body["metadata"]["uid"]) for body in slow.values())
        )
    finally:
        keeper.stop()
        keeper.join(timeout=10)


def _padded(body: dict[str, Any]) -> dict[str, Any]:
    """The body with about a megabyte of a tenant's own labels and annotations."""
    padded = copy.deepcopy(body)
    padded["metadata"]["labels"].update({f"pad.example/l{n}": "x" * 63 for n in range(6000)})
    padded["metadata"]["annotations"].update({f"pad.example/a{n}": "y" * 100 for n in range(3000)})
    return padded


def test_what_is_held_of_a_pod_or_a_kept_log_does_not_grow_with_a_tenant_s_labels() -> None:
    """An ended pod waiting for its log and a replica's kept logs are held as their essentials: the same
    kept log is built from them, and they are a few kilobytes however large the tenant made the object."""
    job = _job()
    owner = {"controller": True, "uid": JOB_UID, "kind": "DistTrainJob", "apiVersion": API_VERSION, "name": "mnist"}
    pod_body = _padded(_pod(job, "Failed", ownerReferences=[owner]))
    assert len(json.dumps(pod_body)) > 800_000
    view = pod_view(pod_body)
    assert view is not None and view.log_due_body is not None
    assert len(json.dumps(view.log_due_body)) < 4096
    tail = kept_logs.log_tail(iter([b"the log\n"]), 1024)
    kept = kept_logs.kept_log(pod_body, tail, NOW, job_present=True)
    assert kept is not None and kept == kept_logs.kept_log(view.log_due_body, tail, NOW, job_present=True)
    config_map = _padded(kept)
    slim = kept_logs.essentials(config_map)
    assert len(json.dumps(slim)) < 4096
    whole = kept_logs.sweep([config_map], set(), NOW)
    slimmed: list[list[Body]] = [
        [kept_logs.essentials(item) for item in found] for found in (whole.mark, whole.unmark, whole.delete)
    ]
    assert kept_logs.sweep([slim], set(), NOW) == kept_logs.Sweep(*slimmed)
    assert kept_logs.attempt_numbers([slim]) == kept_logs.attempt_numbers([config_map])


class _EndlessLogApi(_FollowedLogApi):
    """Pods of `team` whose deleted containers print forever (a grace period and a loop of the tenant's own),
    as fast as a test allows or with `pause` between lines; the others' end at once."""

    def __init__(self, pods: dict[str, dict[str, Any]], pause: float = 0.0) -> None:
        super().__init__(pods)
        self.pause = pause

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
        if follow:
            self.follows.append(name)
        if namespace != "team":
            return iter([f"{name} to its end\n".encode()])
        return self._forever()

    def _forever(self) -> Iterator[bytes]:
        while not self.stopped.is_set():
            yield b"x" * 1023 + b"\n"
            time.sleep(self.pause)


def test_a_follow_is_bounded_in_time_and_the_namespaces_share_the_follows() -> None:
    """A tenant whose deleted pods print for ever takes every follow while it is alone; each is cut at its bound
    and kept with what was read, and a namespace that comes meanwhile gets its share at once."""
    endless = _deleting_pods(4)
    other = _deleting_pods(1, "other-team")["mnist-worker-0"]
    api = _EndlessLogApi({**endless}, pause=0.01)
    keeper = KeptLogKeeper(
        api,
        lambda key: {JOB_UID},
        clock=lambda: NOW,
        threads=6,
        max_follows=4,
        max_follows_per_namespace=4,
        end_seconds=0,
        follow_seconds=2.0,
    )
    keeper.start()
    try:
        for name, body in endless.items():
            keeper.offer(("team", "mnist"), "team", name, body["metadata"]["uid"], body)
        _until("the tenant alone holds every follow", lambda: len(api.follows) == 4)
        keeper.offer(("other-team", "mnist"), "other-team", "mnist-worker-0", other["metadata"]["uid"], other)
        _until("the other namespace's pod kept", lambda: keeper.log_done(other["metadata"]["uid"]))
        _until(
            "each endless log kept as far as it was read",
            lambda: all(keeper.log_done(b["metadata"]["uid"]) for b in endless.values()),
        )
    finally:
        api.stopped.set()
        keeper.stop()
        keeper.join(timeout=10)
    kept = {item["metadata"]["annotations"][kept_logs.POD_UID]: item for item in api.created}
    assert all(kept[body["metadata"]["uid"]]["data"]["log"].startswith("x") for body in endless.values())


def test_a_follow_ends_within_its_bound_when_its_stream_goes_silent_after_a_late_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chunks every 0.3 of the bound, then silence until the read gives up (on a clock the stream advances): the
    follow is over within its bound, where it once waited a whole bound more for the silent read."""
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])  # the module the keeper reads its deadlines from
    follow_seconds, spans = 10.0, []

    class _LateThenSilent(_EndlessLogApi):
        def pod_log_chunks(self, *args: Any, read_timeout: float | None = None, **options: Any) -> Iterator[bytes]:
            started = clock[0]
            try:
                for _ in range(3):
                    clock[0] += 0.3 * follow_seconds
                    yield b"x\n"
                clock[0] += read_timeout or 0.0
                raise TransientApiError(0, "read timed out")
            finally:
                spans.append(clock[0] - started)

    endless = _deleting_pods(1)
    _follow_one(_LateThenSilent(endless), endless, follow_seconds)
    assert spans and max(spans) <= follow_seconds


def test_a_follow_is_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kept_log_keeper, "FOLLOW_BYTES", 4 << 20)
    endless = _deleting_pods(1)
    api = _EndlessLogApi(endless)
    _follow_one(api, endless, follow_seconds=600)
    assert int(api.created[0]["metadata"]["annotations"][kept_logs.LOG_BYTES]) == 4 << 20


def _follow_one(api: _FollowedLogApi, pods: dict[str, dict[str, Any]], follow_seconds: float) -> None:
    """A keeper over `api` until the log of the one deleted pod of `pods` is kept."""
    keeper = KeptLogKeeper(api, lambda key: {JOB_UID}, clock=lambda: NOW, end_seconds=0, follow_seconds=follow_seconds)
    keeper.start()
    try:
        ((name, body),) = pods.items()
        keeper.offer(("team", "mnist"), "team", name, body["metadata"]["uid"], body)
        _until("the log kept", lambda: keeper.log_done(body["metadata"]["uid"]))
    finally:
        api.stopped.set()
        keeper.stop()
        keeper.join(timeout=10)


def _restarted_in_place(runs: int, attempt: int = 2) -> dict[str, Any]:
    """Worker 1 of a job that restarts in place, made as `attempt` and restarted in place `runs` times."""
    found = _pod(_job())
    found["metadata"]["annotations"] |= {ATTEMPT: str(attempt), RUNS_COUNTED: str(runs)}
    last = {"exitCode": 137, "startedAt": "2026-11-25T11:10:00Z", "finishedAt": "2026-11-25T11:20:00Z"}
    found["status"]["containerStatuses"][0] |= {"restartCount": runs, "lastState": {"terminated": last}}
    return found


def test_each_run_restarted_in_place_is_an_attempt_whose_log_is_kept_from_the_run_before_the_current() -> None:
    """The kubelet keeps the log of the run before the current one: the keeper reads it (`previous`) and keeps it
    as its own attempt, numbered on from the pod's; a later run is dated from its container's start, and named
    apart."""
    found = _restarted_in_place(runs=1)
    view = pod_view(found)
    assert view is not None and (view.run_log_due, view.log_due, view.attempt) == (1, False, 3)
    reads: list[dict[str, str] | None] = []

    class _PreviousLogApi(_LogApi):
        def pod_log_chunks(self, *args: Any, query: dict[str, str] | None = None, **kwargs: Any) -> Iterator[bytes]:
            reads.append(query)
            return super().pod_log_chunks(*args, **kwargs)

    api = _PreviousLogApi(found, [b"the first run\n"])
    settled = threading.Event()
    keeper = KeptLogKeeper(api, lambda key: {JOB_UID}, wake=lambda key: settled.set(), clock=lambda: NOW, threads=2)
    keeper.start()
    assert keeper.offer(("team", "mnist"), "team", "mnist-worker-1", POD_UID, view.log_due_body, run=1)
    assert settled.wait(timeout=10)
    assert not keeper.offer(("team", "mnist"), "team", "mnist-worker-1", POD_UID, view.log_due_body, run=1)
    keeper.stop()
    keeper.join(timeout=10)
    assert reads == [{"previous": "true"}]
    [kept] = api.created
    notes = kept["metadata"]["annotations"]
    assert kept["metadata"]["name"] == "mnist-worker-1-log-0f3c9a1e"  # the pod's first run: named as any pod's
    started = "2026-11-25T11:00:00Z"  # the first run started with its pod
    assert (notes[ATTEMPT], notes[kept_logs.EXIT_CODE], notes[kept_logs.STARTED]) == ("2", "137", started)
    assert kept["data"]["log"] == "the first run\n"
    run_2 = kept_logs.previous_run(_restarted_in_place(runs=2), 2)
    tail = kept_logs.LogTail(b"", 0)
    second = kept_logs.kept_log(run_2, tail, NOW, job_present=True, attempt=kept_logs.pod_attempt(run_2, []))
    assert second is not None and second["metadata"]["name"] == "mnist-worker-1-log-0f3c9a1e-run1"
    assert second["metadata"]["annotations"][ATTEMPT] == "3"
    assert second["metadata"]["annotations"][kept_logs.STARTED] == "2026-11-25T11:10:00Z"  # with its container


def test_a_run_whose_log_the_kubelet_no_longer_keeps_is_given_up_for_the_gap_it_leaves() -> None:
    """Offered for run 1, the pod read shows run 2 ended already: run 1's log is gone with it, nothing is kept
    under its name, and the run is settled (its replica's next kept log shows the gap)."""
    view = pod_view(_restarted_in_place(runs=1))
    assert view is not None
    api = _LogApi(_restarted_in_place(runs=2), [b"run 2's log\n"])
    keeper = KeptLogKeeper(api, lambda key: {JOB_UID}, clock=lambda: NOW, threads=2)
    keeper.start()
    keeper.offer(("team", "mnist"), "team", "mnist-worker-1", POD_UID, None, run=1)
    wait_for(
        "run 1 settled", lambda: not keeper.offer(("team", "mnist"), "team", "mnist-worker-1", POD_UID, None, run=1)
    )
    keeper.stop()
    keeper.join(timeout=10)
    assert api.created == [] and api.log_reads == 0
