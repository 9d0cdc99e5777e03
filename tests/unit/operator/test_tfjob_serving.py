"""TFJobs served through the same core: pods as training-operator labelled them, owned by the TFJob,
TF_CONFIG unchanged, and their status written to the TFJob. The translation each way:
tests/unit/core/test_served.py."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from disttrain_core import served
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType, trainer_container
from disttrain_core.api.status import Evaluation
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.objects import desired_objects
from disttrain_core.observed import PodPhase, PodView
from disttrain_operator.handlers import name_in_use
from disttrain_operator.indexed_jobs import IndexedJobs
from disttrain_operator.reconciler import Reconciler
from support.fakes import RecordingApi
from support.job_builder import JobBuilder, make_pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _tfjob(**replicas: int) -> dict[str, Any]:
    builder = JobBuilder("mnist", "team").metadata(uid="u1", generation=1, labels={})
    for kind, count in replicas.items():
        builder.replicas(kind, count)
    return builder.status().tfjob()


def _pods(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    job = DistTrainJob.model_validate(served.job_manifest(body))
    return {item["metadata"]["name"]: item for item in desired_objects(job, BuildSettings()) if item["kind"] == "Pod"}


def test_pods_carry_training_operator_labels_and_belong_to_the_tfjob() -> None:
    pods = _pods(_tfjob(Master=1, Worker=2, PS=1))
    chief = pods["mnist-chief-0"]
    assert (
        chief["metadata"]["labels"].items()
        >= {
            "training.kubeflow.org/job-name": "mnist",
            "training.kubeflow.org/replica-type": "chief",
            "training.kubeflow.org/replica-index": "0",
            "training.kubeflow.org/job-role": "master",
            "training.kubeflow.org/operator-name": "tfjob-controller",
            "disttrain.io/job-name": "mnist",
        }.items()
    )
    assert "training.kubeflow.org/job-role" not in pods["mnist-worker-0"]["metadata"]["labels"]
    owner = chief["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"], owner["uid"]) == ("kubeflow.org/v1", "TFJob", "u1")
    env = {e["name"]: e.get("value") for e in trainer_container(chief["spec"]["containers"])["env"]}
    config = json.loads(env["TF_CONFIG"] or "{}")
    assert config["task"] == {"type": "chief", "index": 0} and config["environment"] == "cloud"


def test_worker_zero_is_the_master_without_a_chief() -> None:
    pods = _pods(_tfjob(Worker=2))
    assert pods["mnist-worker-0"]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert "training.kubeflow.org/job-role" not in pods["mnist-worker-1"]["metadata"]["labels"]


def test_a_served_tfjob_is_reconciled_and_its_status_written_to_the_tfjob() -> None:
    kube = RecordingApi()
    reconciler = Reconciler(kube, BuildSettings(), lambda *_, **__: None, clock=lambda: NOW)
    body = _tfjob(Worker=2)
    reconciler.reconcile(body, [], [])
    assert kube.created == ["Service/mnist", "NetworkPolicy/mnist", "Pod/mnist-worker-0", "Pod/mnist-worker-1"]
    assert kube.status_kinds == ["TFJob"]
    written = kube.statuses[-1]
    assert [(c["type"], c["reason"]) for c in written["conditions"]] == [("Created", "TFJobCreated")]
    assert (
        written["replicaStatuses"]
        == {"Worker": {"active": 0, "ready": 0, "succeeded": 0, "failed": 0, "restarts": 0, "succeededIndexes": []}}
        or "Worker" in written["replicaStatuses"]
    )
    assert "lastReconcileTime" in written
    assert reconciler.is_own_status_write({**body, "status": written})  # its own write comes back: nothing to plan


def test_a_queued_tfjob_is_left_to_kueue_s_own_tfjob_integration_where_the_operator_is_set_so() -> None:
    """By default the operator makes a queued TFJob's Workload, as a DistTrainJob's; with Kueue's own TFJob
    integration (MultiKueue's TFJobs) Kueue makes it and suspends the job, and the operator only runs it."""
    queued = {**_tfjob(Worker=1), "metadata": {**_tfjob()["metadata"], "labels": {"kueue.x-k8s.io/queue-name": "q"}}}
    queued["spec"]["runPolicy"] = {"suspend": True}
    own = RecordingApi()
    Reconciler(own, BuildSettings(), lambda *_, **__: None, clock=lambda: NOW).reconcile(queued, [], [])
    assert "Workload/disttrainjob-mnist" in own.created and not [c for c in own.created if c.startswith("Pod/")]
    left = RecordingApi()
    reconciler = Reconciler(left, BuildSettings(), lambda *_, **__: None, clock=lambda: NOW, kueue_queues_tfjobs=True)
    reconciler.reconcile(queued, [], [])
    assert not [c for c in left.created if c.startswith(("Workload/", "Pod/"))]  # suspended, and no Workload
    resumed = {**queued, "spec": {**queued["spec"], "runPolicy": {"suspend": False}}}
    reconciler.reconcile({**resumed, "metadata": {**resumed["metadata"], "generation": 2}}, [], [])
    assert "Pod/mnist-worker-0" in left.created and "Workload/disttrainjob-mnist" not in left.created


def test_a_tfjob_disttrain_cannot_serve_fails_naming_the_field() -> None:
    kube = RecordingApi()
    reconciler = Reconciler(kube, BuildSettings(), lambda *_, **__: None, clock=lambda: NOW)
    body = _tfjob(Worker=1)
    body["spec"]["enableDynamicWorker"] = True
    reconciler.reconcile(body, [], [])
    assert kube.created == []
    failed = next(c for c in kube.statuses[-1]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "TFJobFailed" and "spec.enableDynamicWorker" in failed["message"]


def test_a_tfjob_named_as_an_older_disttrainjob_fails_once_and_creates_nothing() -> None:
    """Both would name the same pods and Service: the job created first keeps them, the other fails saying so."""
    kube = RecordingApi()
    events: list[tuple[str, str]] = []

    def record(body: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        events.append((type, reason))

    clock = [NOW]
    reconciler = Reconciler(kube, BuildSettings(), record, clock=lambda: clock[0])
    tfjob = _tfjob(Worker=1)
    tfjob["metadata"]["creationTimestamp"] = "2026-01-01T00:00:05Z"
    older = {**served.job_manifest(_tfjob(Worker=1)), "apiVersion": "disttrain.io/v1alpha1", "kind": "DistTrainJob"}
    older["metadata"] = {**older["metadata"], "uid": "u0", "creationTimestamp": "2026-01-01T00:00:00Z"}
    key = ("team", "mnist")
    jobs = IndexedJobs([{key: [older]}, {key: [tfjob]}], kube.read)
    holder, *namesakes = jobs.views(key)
    assert holder is older and namesakes == [tfjob]
    reconciler.refuse(tfjob, name_in_use(holder))
    clock[0] += timedelta(seconds=5)
    reconciler.refuse(tfjob, name_in_use(holder))  # before the index shows the write: no second one
    reconciler.refuse({**tfjob, "status": kube.statuses[-1]}, name_in_use(holder))  # once it shows it: none
    assert kube.created == [] and kube.status_kinds == ["TFJob"]
    failed = next(c for c in kube.statuses[-1]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "TFJobFailed" and failed["message"].startswith("NameInUse: the DistTrainJob mnist")
    assert events == [("Warning", "NameInUse")]
    older["metadata"]["creationTimestamp"] = "2026-01-01T00:00:09Z"  # the TFJob came first: it keeps the names
    assert jobs.views(key)[0] is tfjob


def _pod(kind: ReplicaType, index: int, phase: PodPhase, **fields: Any) -> PodView:
    return make_pod(kind, index, phase, job="mnist", **fields)


def _served(body: dict[str, Any], pods: list[PodView]) -> tuple[RecordingApi, dict[str, Any]]:
    """One reconcile of a served TFJob over these pods: the calls it made, and the last TFJob status written."""
    kube = RecordingApi()
    Reconciler(kube, BuildSettings(), lambda *_, **__: None, clock=lambda: NOW).reconcile(body, pods, [])
    return kube, kube.statuses[-1] if kube.statuses else {}


def _true(status: dict[str, Any]) -> dict[str, str]:
    """The message of each condition that holds: disttrain's own reason, a colon, and its words."""
    return {c["type"]: c["message"] for c in status.get("conditions", []) if c["status"] == "True"}


def test_ps_and_evaluator_of_a_served_tfjob_are_stopped_once_the_chief_succeeds() -> None:
    body = _tfjob(Chief=1, Worker=1, PS=1, Evaluator=1)
    pods = [
        _pod(ReplicaType.CHIEF, 0, PodPhase.SUCCEEDED),
        _pod(ReplicaType.WORKER, 0, PodPhase.SUCCEEDED),
        _pod(ReplicaType.PS, 0, PodPhase.RUNNING, ready=True),
        _pod(ReplicaType.EVALUATOR, 0, PodPhase.RUNNING, ready=True),
    ]
    kube, status = _served(body, pods)
    assert sorted(kube.deleted) == ["mnist-evaluator-0", "mnist-ps-0"]
    assert "Succeeded" in _true(status) and status["completionTime"]


def test_a_served_tfjobs_evaluator_scores_the_final_checkpoint_before_it_succeeds() -> None:
    body = _tfjob(Chief=1, Worker=1, PS=1, Evaluator=1)
    chief_done = [
        _pod(ReplicaType.CHIEF, 0, PodPhase.SUCCEEDED, finished_at=NOW),
        _pod(ReplicaType.WORKER, 0, PodPhase.SUCCEEDED),
        _pod(ReplicaType.PS, 0, PodPhase.RUNNING, ready=True),
    ]
    kube, status = _served(body, [*chief_done, _pod(ReplicaType.EVALUATOR, 0, PodPhase.RUNNING, ready=True)])
    assert not kube.deleted and "Succeeded" not in _true(status)  # the default finalEvaluationSeconds: 600
    assert _true(status)["Running"].startswith("FinalEvaluation: ") and "(for up to 600s)" in _true(status)["Running"]
    scores = Evaluation(step=300, metrics={"accuracy": 0.9}, final=True)
    spoke = _pod(ReplicaType.EVALUATOR, 0, PodPhase.SUCCEEDED, evaluation=scores)
    kube, status = _served({**body, "status": status}, [*chief_done, spoke])
    assert "Succeeded" in _true(status) and kube.deleted == ["mnist-ps-0"]
    assert status["evaluation"] == {"step": 300, "metrics": {"accuracy": 0.9}, "final": True}


def test_a_served_multi_worker_tfjob_restarts_whole_and_counts_it_against_backoff_limit() -> None:
    body = _tfjob(Worker=2)
    body["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] = "OnFailure"
    body["spec"]["runPolicy"] = {"backoffLimit": 1}
    failed = _pod(ReplicaType.WORKER, 1, PodPhase.FAILED, exit_code=1)
    kube, status = _served(body, [_pod(ReplicaType.WORKER, 0, PodPhase.RUNNING, ready=True), failed])
    assert sorted(kube.deleted) == ["mnist-worker-0", "mnist-worker-1"]  # the whole job, not the failed pod alone
    assert _true(status)["Restarting"].endswith("the whole job restarts") and status["restartCount"] == 1
    again = {**body, "status": status}
    second = _pod(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=1, uid="uid-second")
    kube, status = _served(again, [second, _pod(ReplicaType.WORKER, 1, PodPhase.RUNNING, uid="uid-new")])
    assert _true(status)["Failed"].startswith("BackoffLimitExceeded")
    assert status["conditions"][-1]["reason"] == "TFJobFailed"


def test_a_served_tfjob_past_its_deadline_fails_on_time() -> None:
    body = _tfjob(Worker=1)
    body["spec"]["runPolicy"] = {"activeDeadlineSeconds": 60}
    body["status"] = {"startTime": "2025-12-31T23:58:00Z", "conditions": []}
    kube, status = _served(body, [_pod(ReplicaType.WORKER, 0, PodPhase.RUNNING, ready=True)])
    assert kube.deleted == ["mnist-worker-0"] and _true(status)["Failed"].startswith("DeadlineExceeded")
