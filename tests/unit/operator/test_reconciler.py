"""The reconciler: a child it created is not created again while the indexes have yet to show it, changes
nobody waits on (counts, a new job's Created) are batched into one status write, restarts wait for their
pods, and jobs it must not act on (another manager's, a refused write) are left or failed once."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.status import DistTrainJobStatus, UnkeptLogs
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.kueue import MULTIKUEUE, QUEUE_LABEL, workload, workload_view
from disttrain_core.naming import replica_labels
from disttrain_core.observed import PodPhase, PodView, Runs, Unschedulable, after_removal, pod_view
from disttrain_core.types import ObjectRef, Verdict
from disttrain_kube.api_errors import HTTP_CONFLICT, ConflictError, RefusedError
from disttrain_operator.expectations import EXPECTATION
from disttrain_operator.job_memory import JobMemory
from disttrain_operator.reconciler import UNWATCHED_RECHECK, Reconciler
from disttrain_operator.status_writer import RESTART_HOLD, STATUS_BATCH, StatusWriter
from support.fakes import QueueingApi, RecordingApi
from support.repository import EXAMPLES, load_one

START = datetime(2026, 1, 1, tzinfo=UTC)


class _Setup:
    def __init__(self, kube: RecordingApi | None = None) -> None:
        self.now = START
        self.kube = kube or RecordingApi()
        self.wakes: list[datetime] = []
        self.reconciler = Reconciler(
            self.kube,
            BuildSettings(),
            lambda *_, **__: None,
            clock=lambda: self.now,
            wake=lambda _, at: self.wakes.append(at),
        )
        self.job = {**load_one(EXAMPLES[0]), "status": {}}
        self.job["metadata"] = {**self.job["metadata"], "namespace": "default", "uid": "u1", "generation": 1}

    def reconcile(self, pods: list[PodView], children: list[ObjectRef]) -> list[str]:
        """What one reconcile created."""
        before = len(self.kube.created)
        self.reconciler.reconcile(self.job, pods, children)
        return self.kube.created[before:]

    def observed(self, created: list[str], running: int = 0) -> tuple[list[PodView], list[ObjectRef]]:
        """The indexes once they caught up with `created`, the first `running` pods reported Running."""
        pods: list[PodView] = []
        children: list[ObjectRef] = []
        for item in created:
            kind, name = item.split("/")
            if kind == "Pod":
                replica, index = name.rsplit("-", 2)[1:]
                phase = PodPhase.RUNNING if len(pods) < running else PodPhase.PENDING
                ready = phase is PodPhase.RUNNING
                view = PodView(name, _replica(replica), int(index), phase, ready=ready, uid=f"uid-{name}")
                pods.append(view)
            else:
                children.append(ObjectRef(kind, name))
        return pods, children


def _replica(task_type: str) -> ReplicaType:
    return next(kind for kind in ReplicaType if kind.task_type == task_type)


def test_a_stale_view_creates_nothing_twice() -> None:
    setup = _Setup()
    first = setup.reconcile([], [])
    assert any(item.startswith("Pod/") for item in first)
    assert setup.reconcile([], []) == []  # the indexes have not caught up: the same view again
    setup.now, setup.wakes = START + STATUS_BATCH, []  # the wake-up that writes the held-back status
    assert setup.reconcile([], []) == []
    assert setup.wakes == [setup.now + EXPECTATION]  # and a look again, should they never catch up


def test_a_child_that_never_shows_up_is_created_again_after_the_expectation() -> None:
    setup = _Setup()
    first = setup.reconcile([], [])
    setup.now = START + EXPECTATION + timedelta(seconds=1)
    unwatched = [name for name in first if name.startswith("NetworkPolicy/")]  # created once (UNWATCHED_KINDS)
    assert unwatched and setup.reconcile([], []) == [name for name in first if name not in unwatched]


def test_a_pod_made_and_removed_before_any_view_showed_it_is_made_again_once_its_expectation_lapses() -> None:
    """Its creation and its removal (an eviction of a Pending pod, a delete by hand) came within one watch batch:
    the next view lacks it while it is still expected, and nothing else will happen to the job."""
    setup = _Setup()
    first = setup.reconcile([], [])
    pods, children = setup.observed(first)
    setup.now, setup.wakes = START + timedelta(seconds=1), []
    made = setup.reconcile(pods[:-1], children)
    assert made == []  # still expected: not made twice
    for _ in range(3):  # each wake-up the job asks for (the status's batch first), until it is made again
        assert setup.wakes, "no wake-up: the job waits for an event that will not come"
        setup.now, setup.wakes = setup.wakes[-1], []
        made = setup.reconcile(pods[:-1], children)
        if made:
            break
    assert made == [f"Pod/{pods[-1].name}"]
    assert setup.now > START + EXPECTATION


def test_a_child_seen_and_then_lost_is_created_again_at_once() -> None:
    setup = _Setup()
    first = setup.reconcile([], [])
    pods, children = setup.observed(first)
    assert setup.reconcile(pods, children) == []
    lost = pods[-1]
    assert setup.reconcile(pods[:-1], children) == [f"Pod/{lost.name}"]


def test_a_stale_view_deletes_nothing_twice() -> None:
    setup = _Setup()
    pods, children = setup.observed(setup.reconcile([], []), running=99)
    setup.job["spec"] = {**setup.job["spec"], "runPolicy": {**setup.job["spec"].get("runPolicy", {}), "suspend": True}}
    setup.job["metadata"]["generation"] = 2
    setup.reconcile(pods, children)
    assert sorted(setup.kube.deleted) == sorted(pod.name for pod in pods)
    setup.reconcile(pods, children)  # the index has yet to show the pods terminating
    assert len(setup.kube.deleted) == len(pods)


def test_counts_alone_are_written_at_most_once_per_batch_interval() -> None:
    setup = _Setup()
    created = setup.reconcile([], [])
    written = len(setup.kube.statuses)
    setup.now = START + STATUS_BATCH / 4
    setup.wakes.clear()
    setup.reconcile(*setup.observed(created, running=1))
    assert len(setup.kube.statuses) == written  # one pod more running: waits for the batch
    assert setup.wakes == [START + STATUS_BATCH]
    setup.now = START + STATUS_BATCH
    setup.reconcile(*setup.observed(created, running=1))  # the wake-up: written now
    assert len(setup.kube.statuses) == written + 1
    assert setup.kube.statuses[-1]["ready"].startswith("1/")


def test_a_new_phase_is_written_at_once() -> None:
    setup = _Setup()
    created = setup.reconcile([], [])
    pods, children = setup.observed(created, running=len(created))
    setup.now = START + STATUS_BATCH / 4
    setup.reconcile(pods, children)
    assert setup.kube.statuses[-1]["phase"] == "Running"


def _a_restart_made_way_for(setup: _Setup) -> tuple[list[PodView], list[ObjectRef], PodView]:
    """A running job whose first pod failed with a code its replica restarts on, reconciled once: the pod is
    deleted; its replacement waits for it to be gone."""
    pods, children = setup.observed(setup.reconcile([], []), running=99)
    setup.reconcile(pods, children)
    failed = replace(pods[0], phase=PodPhase.FAILED, exit_code=137)
    setup.now, setup.wakes = START + timedelta(seconds=10), []
    writes = len(setup.kube.statuses)
    assert setup.reconcile([failed, *pods[1:]], children) == []
    assert failed.name in setup.kube.deleted
    assert len(setup.kube.statuses) == writes  # the restart's status waits for the replacement
    assert setup.wakes == [setup.now + RESTART_HOLD]
    return pods, children, failed


def test_a_restarts_status_goes_out_after_the_replacement_is_created_not_between() -> None:
    setup = _Setup()
    pods, children, failed = _a_restart_made_way_for(setup)
    writes = len(setup.kube.statuses)
    terminating = replace(failed, deleting=True)
    setup.reconcile([terminating, *pods[1:]], children)  # the pod's deletion seen: no replacement yet
    assert len(setup.kube.statuses) == writes
    before = len(setup.kube.calls)
    assert setup.reconcile(pods[1:], children) == [f"Pod/{failed.name}"]  # gone: replaced, then written
    assert setup.kube.calls[before:] == ["create", "status"]
    assert setup.kube.statuses[-1]["phase"] == "Restarting"
    assert setup.kube.statuses[-1]["restartCount"] == 1
    writes, setup.wakes = len(setup.kube.statuses), []
    replacement = replace(failed, phase=PodPhase.PENDING, ready=False, exit_code=None, uid="uid-2", attempt=2)
    setup.reconcile([replacement, *pods[1:]], children)  # its first sight, as it was counted: no write
    assert len(setup.kube.statuses) == writes
    assert setup.wakes == []


def test_a_restarts_status_is_written_by_the_wake_when_its_pods_are_slow_to_go() -> None:
    setup = _Setup()
    pods, children, failed = _a_restart_made_way_for(setup)
    writes = len(setup.kube.statuses)
    setup.now += RESTART_HOLD
    setup.reconcile([replace(failed, deleting=True), *pods[1:]], children)
    assert len(setup.kube.statuses) == writes + 1
    assert setup.kube.statuses[-1]["phase"] == "Restarting"


def test_a_pod_gone_before_a_reconcile_saw_it_go_restarts_the_job_as_the_disruption_it_was() -> None:
    """kwok, or a deletion with no grace, removes an evicted pod at once. Its remains stand for it until the
    restart is recorded (not counted: it was taken away), then give up its name to the replacement, which
    waits for its peers to go as after any restart."""
    setup = _Setup()
    pods, children = setup.observed(setup.reconcile([], []), running=99)
    setup.reconcile(pods, children)
    evicted = after_removal(replace(pods[1], deleting=True, disruption="EvictionByEvictionAPI"))
    assert evicted is not None
    peers = [pod for pod in pods if pod is not pods[1]]
    setup.now, setup.wakes = START + timedelta(seconds=10), []
    assert setup.reconcile([*peers, evicted], children) == []
    assert sorted(setup.kube.deleted) == sorted(pod.name for pod in peers)  # not the pod already gone
    assert min(setup.wakes) == setup.now  # once recorded, its name is free: look again at once
    assert evicted.uid in setup.reconciler.handled(setup.job)
    going = [replace(pod, deleting=True) for pod in peers]
    assert setup.reconcile([*going, evicted], children) == []
    assert sorted(setup.reconcile([evicted], children)) == sorted(f"Pod/{pod.name}" for pod in pods)
    status = setup.kube.statuses[-1]
    assert (status["restartCount"], status["disruptions"]) == (0, 1)
    assert status["lastDisruption"]["reason"] == "EvictionByEvictionAPI"


def test_what_was_acted_on_of_a_pod_is_forgotten_once_the_pod_is_gone_from_the_view() -> None:
    """A job whose worker is evicted again and again (an uncounted restart each time): each restart's pods are
    handled while they, or their remains, are in the view, and forgotten once they are gone, so that what the
    operator remembers of the job stays as large as its pods, whatever the rate."""
    setup = _Setup()
    pods, children = setup.observed(setup.reconcile([], []), running=99)
    setup.reconcile(pods, children)
    for cycle in range(5):
        evicted = after_removal(replace(pods[1], deleting=True, disruption="EvictionByEvictionAPI"))
        assert evicted is not None
        peers = [pod for pod in pods if pod is not pods[1]]
        setup.now += timedelta(minutes=11)  # past the pause quick restarts earn
        setup.reconcile([*peers, evicted], children)
        assert setup.reconciler.handled(setup.job) == {pod.uid for pod in pods}  # the evicted pod and its peers
        setup.reconcile([replace(pod, deleting=True) for pod in peers] + [evicted], children)
        made, _ = setup.observed(setup.reconcile([evicted], children), running=99)
        pods = [replace(pod, uid=f"{pod.uid}-{cycle}") for pod in made]
        setup.reconcile(pods, children)
        assert setup.reconciler.handled(setup.job) == set()
    assert setup.kube.statuses[-1]["disruptions"] == 5


def _suspended(setup: _Setup, suspend: bool, generation: int) -> None:
    run_policy = {**setup.job["spec"].get("runPolicy", {}), "suspend": suspend}
    setup.job["spec"] = {**setup.job["spec"], "runPolicy": run_policy}
    setup.job["metadata"]["generation"] = generation


def test_pods_gone_while_the_job_is_suspended_call_for_no_restart_once_it_resumes() -> None:
    """An operator that took over from another sees the pods its predecessor stopped for a suspend go: what
    remains of them is a loss that calls for nothing, then or when the job resumes."""
    first = _Setup()
    pods, children = first.observed(first.reconcile([], []), running=99)
    first.reconcile(pods, children)
    _suspended(first, True, 2)
    first.reconcile(pods, children)
    taken_over = _Setup()
    taken_over.job = first.job
    left = [after_removal(replace(pod, deleting=True)) for pod in pods]
    gone = [pod for pod in left if pod is not None]
    taken_over.reconcile(gone, children)
    _suspended(taken_over, False, 3)
    created = taken_over.reconcile(gone, children)
    assert sorted(created) == sorted(f"Pod/{pod.name}" for pod in pods)
    status = taken_over.kube.statuses[-1]
    assert (status.get("restartCount", 0), status.get("disruptions", 0)) == (0, 0)


class _ChangedOnce(RecordingApi):
    """Refuses the first deletion of one pod, as the API server does a pod that changed since it was seen."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.changed = name
        self.versions: list[tuple[str, str | None]] = []  # each deletion asked for: the pod and its version

    def delete_pod(self, namespace: str, name: str, force: bool = False, resource_version: str | None = None) -> bool:
        self.versions.append((name, resource_version))
        if name == self.changed:
            self.changed = ""
            raise ConflictError(HTTP_CONFLICT, "Precondition failed: ResourceVersion in precondition: 7")
        return super().delete_pod(namespace, name, force, resource_version)


def test_a_peer_that_changed_before_its_deletion_is_deleted_from_the_newer_view_and_the_restart_counts_once() -> None:
    """Deleting a pod that has just ended would remove it at once, log and all: each deletion names the
    version seen, and a refused one is finished by the next plan, the restart already counted."""
    kube = _ChangedOnce("digits-mwms-worker-1")
    setup = _Setup(kube)
    pods, children = setup.observed(setup.reconcile([], []), running=99)
    pods = [replace(pod, resource_version="7") for pod in pods]
    setup.reconcile(pods, children)
    failed, peer = replace(pods[0], phase=PodPhase.FAILED, exit_code=137), pods[1]
    with pytest.raises(ConflictError):  # the retry the reconcile asks for
        setup.reconcile([failed, peer], children)
    assert setup.kube.deleted == [failed.name]
    assert kube.versions == [(failed.name, "7"), (peer.name, "7")]
    ended = replace(peer, phase=PodPhase.FAILED, exit_code=137, resource_version="8")  # it had ended: its log is kept
    assert setup.reconcile([replace(failed, deleting=True), ended], children) == []
    assert setup.kube.deleted == [failed.name, peer.name]
    assert kube.versions[-1] == (peer.name, "8")
    assert sorted(setup.reconcile([], children)) == [f"Pod/{failed.name}", f"Pod/{peer.name}"]
    assert setup.kube.statuses[-1]["restartCount"] == 1


def test_a_new_jobs_created_status_waits_and_goes_out_with_its_running_pods() -> None:
    setup = _Setup()
    created = setup.reconcile([], [])
    assert setup.kube.statuses == []  # Pending with its children created: held back
    assert setup.wakes == [START + STATUS_BATCH]
    setup.now = START + STATUS_BATCH / 2
    setup.reconcile(*setup.observed(created, running=len(created)))
    [written] = setup.kube.statuses  # one write says both
    assert written["phase"] == "Running"
    conditions = {condition["type"]: condition for condition in written["conditions"]}
    assert conditions["Created"]["lastTransitionTime"] == written["startTime"] == "2026-01-01T00:00:00Z"


def test_a_new_jobs_created_status_is_written_when_due() -> None:
    setup = _Setup()
    created = setup.reconcile([], [])
    setup.now = START + STATUS_BATCH
    setup.reconcile(*setup.observed(created))
    [written] = setup.kube.statuses
    assert written["phase"] == "Pending"
    assert [condition["type"] for condition in written["conditions"]] == ["Created"]


def test_the_phase_gauges_follow_a_job_from_its_phase_to_its_deletion() -> None:
    setup = _Setup()
    setup.job["metadata"]["namespace"] = "gauges"
    created = setup.reconcile([], [])
    pods, children = setup.observed(created, running=len(created))
    setup.now = START + STATUS_BATCH / 4
    setup.reconcile(pods, children)
    value = REGISTRY.get_sample_value
    assert value("disttrain_jobs", {"namespace": "gauges", "phase": "Running"}) == 1
    assert value("disttrain_jobs_active", {"namespace": "gauges"}) == 1
    setup.reconciler.forget("u1")
    assert value("disttrain_jobs", {"namespace": "gauges", "phase": "Running"}) == 0
    assert value("disttrain_jobs_active", {"namespace": "gauges"}) == 0


class _StrictApi(RecordingApi):
    """Refuses a status as the API server does what is no JSON (NaN) or, once, anything (a webhook)."""

    def __init__(self, refuse_once: bool = False) -> None:
        super().__init__()
        self.refuse_once = refuse_once

    def patch_job_status(self, job: Mapping[str, Any], status: dict[str, Any]) -> None:
        try:
            json.dumps(status, allow_nan=False)
        except ValueError as error:
            raise RefusedError(400, f"{error}") from error
        if self.refuse_once:
            self.refuse_once = False
            raise RefusedError(422, "status.progress: Invalid value")
        super().patch_job_status(job, status)


def _evaluator(message: str) -> PodView | None:
    terminated = {"exitCode": 0, "message": message, "finishedAt": "2026-01-01T00:00:00Z"}
    return pod_view(
        {
            "metadata": {"name": "x-evaluator-0", "uid": "e", "labels": replica_labels("x", ReplicaType.EVALUATOR, 0)},
            "status": {
                "phase": "Succeeded",
                "containerStatuses": [{"name": "tensorflow", "state": {"terminated": terminated}}],
            },
        }
    )


def test_a_diverged_score_is_left_out_and_the_rest_reaches_the_status() -> None:
    view = _evaluator('{"evaluation": {"step": 9, "metrics": {"loss": NaN, "auc": -Infinity, "accuracy": 0.5}}}')
    assert view is not None and view.evaluation is not None
    api = _StrictApi()
    status = DistTrainJobStatus(evaluation=view.evaluation)
    StatusWriter(api, lambda *_, **__: None, lambda: START).write(
        {"metadata": {"namespace": "a", "name": "x"}}, JobMemory(), status
    )
    assert api.statuses[-1]["evaluation"] == {"step": 9, "metrics": {"accuracy": 0.5}, "final": False}


def test_a_status_the_api_server_refuses_fails_the_job_once_and_is_not_retried() -> None:
    setup, events = _Setup(), []
    setup.kube = api = _StrictApi(refuse_once=True)
    setup.reconciler = Reconciler(api, BuildSettings(), lambda *_, **event: events.append(event), clock=lambda: START)
    setup.reconcile([], [])
    (written,) = api.statuses
    assert written["phase"] == "Failed"
    assert [(c["type"], c["reason"]) for c in written["conditions"]] == [("Failed", "StatusRefused")]
    assert [event["reason"] for event in events if event["type"] == "Warning"] == ["StatusRefused"]
    for _ in range(3):  # the job as it is now: it stays failed, and once its counts are written, nothing more
        setup.reconcile(*setup.observed(api.created))
    assert len(api.statuses) <= 2
    assert {(status["phase"], status["conditions"][0]["reason"]) for status in api.statuses} == {
        ("Failed", "StatusRefused")
    }


def test_a_deleted_pod_group_is_made_again_while_the_scheduler_cannot_place_the_job() -> None:
    setup = _Setup()
    setup.job["spec"] = {**setup.job["spec"], "runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}
    created = setup.reconcile([], [])
    assert any(item.startswith("PodGroup/") for item in created)
    pods, watched = setup.observed(created)
    children = [child for child in watched if child.kind != "PodGroup"]  # no watch sees a PodGroup
    waiting = Unschedulable(START, "0/3 nodes are available: pod group not found")
    unplaced = [replace(pod, unschedulable=waiting) for pod in pods]
    assert not any(item.startswith("PodGroup/") for item in setup.reconcile(unplaced, children))  # not yet
    setup.now = START + UNWATCHED_RECHECK
    assert any(item.startswith("PodGroup/") for item in setup.reconcile(unplaced, children))
    setup.now = START + 3 * UNWATCHED_RECHECK
    assert not any(item.startswith("PodGroup/") for item in setup.reconcile(pods, children))  # placed: no need


class _RefusingPatches(RecordingApi):
    def patch_job(self, job: Mapping[str, Any], patch: dict[str, Any]) -> None:
        raise RefusedError(422, 'DistTrainJob "x" is invalid: spec.runPolicy.suspend: Invalid value')


def test_a_write_of_the_job_the_api_server_refuses_fails_it_once_instead_of_a_retry_for_ever() -> None:
    setup, events = _Setup(), []
    setup.kube = api = _RefusingPatches()
    setup.reconciler = Reconciler(api, BuildSettings(), lambda *_, **event: events.append(event), clock=lambda: START)
    setup.job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "research"}  # Kueue suspends it first
    setup.reconcile([], [])
    (written,) = api.statuses
    assert written["phase"] == "Failed" and written["conditions"][-1]["reason"] == "WriteRefused"
    assert [event["reason"] for event in events if event["type"] == "Warning"] == ["WriteRefused"]


class _Logs:
    """The kept-log keeper as a reconcile asks it: which pods' logs are kept or given up, which attempts went
    unkept."""

    def __init__(self) -> None:
        self.unsettled: set[str] = set()
        self.reported: list[UnkeptLogs] = []

    def log_done(self, uid: str) -> bool:
        return uid not in self.unsettled

    def unkept(self, job_uid: str) -> list[UnkeptLogs]:
        return list(self.reported)


def test_a_failed_pod_waits_for_its_log_and_an_unkept_attempt_is_said_once_in_status_and_event() -> None:
    setup, events, logs = _Setup(), [], _Logs()
    setup.reconciler = Reconciler(
        setup.kube, BuildSettings(), lambda *_, **event: events.append(event), logs=logs, clock=lambda: START
    )
    pods, children = setup.observed(setup.reconcile([], []), running=99)
    failed = replace(pods[0], phase=PodPhase.FAILED, exit_code=137, log_due=True)
    logs.unsettled.add(failed.uid)
    setup.reconcile([failed, *pods[1:]], children)
    assert setup.kube.deleted == []  # its log is not kept yet, and nothing else holds it
    logs.unsettled.clear()
    logs.reported.append(
        UnkeptLogs(replica="worker-0", first_attempt=1, last_attempt=2, reason="the operator was away")
    )
    setup.reconcile([failed, *pods[1:]], children)
    setup.reconcile([failed, *pods[1:]], children)
    assert failed.name in setup.kube.deleted
    assert setup.kube.statuses[-1]["unkeptLogs"] == [
        {"replica": "worker-0", "firstAttempt": 1, "lastAttempt": 2, "reason": "the operator was away"}
    ]
    warnings = [event["message"] for event in events if event["reason"] == "LogNotKept"]
    assert warnings == ["worker-0, attempt 1 to 2: no log kept; the operator was away"]


def test_a_job_another_manager_runs_is_left_alone_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    """MultiKueue's copy on the manager cluster: no child, no status, no Event; the log says so once. The same
    job named for the operator is run."""
    events: list[Any] = []
    setup = _Setup()
    setup.reconciler = Reconciler(
        setup.kube, BuildSettings(), lambda *a, **k: events.append((a, k)), clock=lambda: START
    )
    setup.job["spec"] = {**setup.job["spec"], "managedBy": "kueue.x-k8s.io/multikueue"}
    with caplog.at_level("INFO", logger="disttrain_operator.reconciler"):
        assert setup.reconcile([], []) == []
        setup.reconciler.refuse(setup.job, Verdict("NameInUse", "a namesake"))
        assert setup.reconcile([], []) == []
    assert (setup.kube.statuses, events) == ([], [])
    said = [record.getMessage() for record in caplog.records if "leaving" in record.getMessage()]
    assert said == ["leaving DistTrainJob default/digits-mwms to kueue.x-k8s.io/multikueue"]

    setup.job["spec"]["managedBy"] = "disttrain.io/operator"
    assert any(item.startswith("Pod/") for item in setup.reconcile([], []))


def test_a_queued_job_releases_its_quota_in_the_reconcile_that_finds_it_ended() -> None:
    """The echo of the operator's own status write calls for no reconcile, and pods left as they ended bring no
    event: the Workload's Finished condition cannot wait for a later reconcile, or the quota is never released."""
    kube = QueueingApi()
    setup = _Setup(kube)
    setup.job["metadata"]["labels"] = {QUEUE_LABEL: "team"}
    job = DistTrainJob.model_validate(setup.job)
    admitted = workload(job, None)
    admitted["status"] = {"conditions": [{"type": "Admitted", "status": "True"}], "admission": {"clusterQueue": "q"}}
    view = workload_view(admitted)
    setup.reconciler.reconcile(setup.job, [], [], workload=view)
    pods, children = setup.observed(kube.created, running=2)
    setup.reconciler.reconcile(setup.job, pods, children, workload=view)
    assert kube.workload_conditions == []

    ended = [replace(pod, phase=PodPhase.SUCCEEDED, ready=False, exit_code=0) for pod in pods]
    setup.now = START + timedelta(seconds=30)
    setup.reconciler.reconcile(setup.job, ended, children, workload=view)
    assert kube.statuses[-1]["phase"] == "Succeeded"
    assert kube.workload_conditions == [(view.name, "Finished", "JobSucceeded")]
    assert setup.reconciler.is_own_status_write({**setup.job, "status": kube.statuses[-1]})  # no reconcile would follow


def test_multikueue_s_queued_copy_gets_its_workload_and_is_resumed_on_admission_and_nothing_else() -> None:
    """On MultiKueue's manager cluster the job's controller does Kueue's part (Workload, suspend, resume) and
    makes no pod, Service or status: a worker cluster runs the job."""
    kube = QueueingApi()
    setup = _Setup(kube)
    setup.job["metadata"]["labels"] = {QUEUE_LABEL: "team"}
    setup.job["spec"] = {**setup.job["spec"], "managedBy": MULTIKUEUE}
    assert setup.reconcile([], []) == [f"Workload/disttrainjob-{setup.job['metadata']['name']}"]
    assert kube.job_patches == [{"spec": {"runPolicy": {"suspend": True}}}]
    setup.job["spec"]["runPolicy"] = {**setup.job["spec"].get("runPolicy", {}), "suspend": True}
    job = DistTrainJob.model_validate(setup.job)
    admitted = dict(kube.manifests[0])
    admitted["status"] = {"conditions": [{"type": "Admitted", "status": "True"}], "admission": {"clusterQueue": "q"}}
    setup.reconciler.reconcile(setup.job, [], [], workload=workload_view(admitted))
    assert kube.job_patches[-1]["spec"]["runPolicy"] == {"suspend": False}
    assert (kube.created[1:], kube.statuses) == ([], [])
    assert workload_view(admitted).name == workload(job, None)["metadata"]["name"]

    del setup.job["metadata"]["labels"]  # a copy that is not queued is left alone, as any other manager's
    other = _Setup(QueueingApi())
    other.job = setup.job
    assert other.reconcile([], []) == []


def test_a_managed_by_no_manager_could_have_is_refused_by_name() -> None:
    """Past an older CRD's schema, `multikueue` (no domain) names no manager: the job fails, saying which field."""
    setup = _Setup()
    setup.job["spec"] = {**setup.job["spec"], "managedBy": "multikueue"}
    assert setup.reconcile([], []) == []
    (failed,) = [c for c in setup.kube.statuses[-1]["conditions"] if c["type"] == "Failed"]
    assert failed["reason"] == "InvalidSpec" and "managedBy" in failed["message"]


def test_an_operator_on_an_unsupported_kubernetes_says_so_once_on_each_job_and_serves_it() -> None:
    events: list[tuple[str, str, str]] = []
    unsupported = "Kubernetes v1.34.4 is outside the versions disttrain supports (v1.35.4, v1.36.3, v1.37.2)"
    kube = RecordingApi()
    reconciler = Reconciler(
        kube,
        BuildSettings(),
        lambda body, **event: events.append((body["metadata"]["uid"], event["type"], event["reason"])),
        clock=lambda: START,
        unsupported=unsupported,
    )
    job = {**load_one(EXAMPLES[0]), "status": {}}
    for uid in ("u1", "u2"):
        body = {**job, "metadata": {**job["metadata"], "namespace": "default", "uid": uid, "generation": 1}}
        reconciler.reconcile(body, [], [])
        reconciler.reconcile(body, [], [])
    warned = [(uid, kind) for uid, kind, reason in events if reason == "UnsupportedKubernetes"]
    assert warned == [("u1", "Warning"), ("u2", "Warning")]
    assert any(item.startswith("Pod/") for item in kube.created)  # served all the same


def _running_in_place() -> tuple[_Setup, list[PodView], list[ObjectRef]]:
    """The example running under restarts in place, each pod's runs counted: none ended yet."""
    setup = _Setup()
    setup.reconciler = Reconciler(
        setup.kube, BuildSettings(restart_in_place=True), lambda *_, **__: None, clock=lambda: setup.now
    )
    pods, children = setup.observed(setup.reconcile([], []), running=99)
    pods = [replace(pod, runs=Runs(ended=0, counted=0)) for pod in pods]
    setup.reconcile(pods, children)
    return setup, pods, children


def test_a_run_that_ended_in_place_is_counted_on_its_pods_and_nothing_is_deleted_or_made() -> None:
    """The example restarts as a whole: its first pod's trainer was killed and its kubelet restarted it in place.
    The restart is counted, each pod is told how many of its runs' ends it covers (the first pod's that came, the
    others' to come), at once and without waiting for replacements: there are none."""
    setup, pods, children = _running_in_place()
    restarted = replace(pods[0], runs=Runs(ended=1, counted=0, exit_code=137, finished_at=START))
    setup.now = START + timedelta(seconds=10)
    assert setup.reconcile([restarted, *pods[1:]], children) == []
    assert setup.kube.deleted == []
    counts = {name: patch[-1]["value"] for name, patch in setup.kube.pod_patches}
    assert counts == {restarted.name: "1", **{pod.name: "1" for pod in pods[1:]}}
    assert setup.kube.pod_patches[0][1][0] == {"op": "test", "path": "/metadata/uid", "value": restarted.uid}
    status = setup.kube.statuses[-1]
    assert (status["restartCount"], status["phase"]) == (1, "Restarting")
    assert "exit code 137" in next(c for c in status["conditions"] if c["type"] == "Restarting")["message"]
    peer = replace(pods[1], runs=Runs(ended=1, counted=0, exit_code=130, finished_at=setup.now))
    setup.reconcile([restarted, peer, *pods[2:]], children)  # its patch not seen yet: the operator knows
    assert setup.kube.statuses[-1]["restartCount"] == 1


def test_a_restart_in_place_says_so_even_where_every_trainer_started_again_before_it_was_seen() -> None:
    setup, pods, children = _running_in_place()
    setup.now = START + timedelta(seconds=10)
    again = [replace(pod, runs=Runs(ended=1, counted=0, exit_code=130, finished_at=START)) for pod in pods]
    setup.reconcile(again, children)
    status = setup.kube.statuses[-1]
    restarting = next(c for c in status["conditions"] if c["type"] == "Restarting")
    assert (status["restartCount"], status["phase"], restarting["status"]) == (1, "Restarting", "True")
    counted = [replace(pod, runs=Runs(ended=1, counted=1, exit_code=130, finished_at=START)) for pod in pods]
    setup.reconcile(counted, children)  # the counts written on the pods seen: they run again
    recovered = next(c for c in setup.kube.statuses[-1]["conditions"] if c["type"] == "Restarting")
    assert (setup.kube.statuses[-1]["phase"], recovered["reason"]) == ("Running", "Recovered")
