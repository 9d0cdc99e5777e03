"""TFJobs served through the same core: pods as training-operator labelled them, owned by the TFJob,
TF_CONFIG unchanged, status in TFJob's shape (and back, so an operator restart reads it), Kueue's
patches in TFJob's names, and the refusal to serve beside another controller's TFJob CRD."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from fakes import RecordingApi

from disttrain_operator.api import crd
from disttrain_operator.api.job import DistTrainJob
from disttrain_operator.core import served
from disttrain_operator.core.builders.objects import desired_objects, tensorflow_container
from disttrain_operator.core.builders.settings import BuildSettings
from disttrain_operator.runtime.reconciler import Reconciler
from disttrain_operator.runtime.tfjob_ownership import refusal

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _tfjob(**replicas: int) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "tensorflow", "image": "i"}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mnist", "namespace": "team", "uid": "u1", "generation": 1, "labels": {}},
        "spec": {
            "tfReplicaSpecs": {kind: {"replicas": count, "template": template} for kind, count in replicas.items()}
        },
        "status": {},
    }


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
    env = {e["name"]: e.get("value") for e in tensorflow_container(chief["spec"]["containers"])["env"]}
    config = json.loads(env["TF_CONFIG"] or "{}")
    assert config["task"] == {"type": "chief", "index": 0} and config["environment"] == "cloud"


def test_worker_zero_is_the_master_without_a_chief() -> None:
    pods = _pods(_tfjob(Worker=2))
    assert pods["mnist-worker-0"]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert "training.kubeflow.org/job-role" not in pods["mnist-worker-1"]["metadata"]["labels"]


STATUS = {
    "phase": "Running",
    "conditions": [
        {"type": "Created", "status": "True", "reason": "JobCreated", "message": "created", "lastTransitionTime": "t0"},
        {"type": "Running", "status": "True", "reason": "JobRunning", "message": "all run", "lastTransitionTime": "t1"},
    ],
    "replicaStatuses": {"Chief": {"active": 1}, "PS": {"active": 1}},
    "restartCount": 0,
    "startTime": "t0",
}
NAMES = {"Chief": "Master", "PS": "ps"}


def test_status_goes_out_in_tfjob_shape_and_comes_back_unchanged() -> None:
    wired = served.wire_status(STATUS, NAMES, "t2")
    assert [c["reason"] for c in wired["conditions"]] == ["TFJobCreated", "TFJobRunning"]
    assert wired["conditions"][1]["message"] == "JobRunning: all run"
    assert wired["conditions"][1]["lastUpdateTime"] == "t1"
    assert set(wired["replicaStatuses"]) == {"Master", "ps"}
    assert wired["lastReconcileTime"] == "t2" and wired["startTime"] == "t0" and wired["phase"] == "Running"
    assert served.core_status(wired) == STATUS


def test_kueue_patches_name_the_replica_types_as_the_tfjob_does() -> None:
    patch = {"spec": {"runPolicy": {"suspend": False}, "replicaSpecs": {"Chief": {"template": {}}}}}
    assert served.wire_patch(patch, NAMES) == {
        "spec": {"runPolicy": {"suspend": False}, "tfReplicaSpecs": {"Master": {"template": {}}}}
    }


def test_a_served_tfjob_is_reconciled_and_its_status_written_to_the_tfjob() -> None:
    kube = RecordingApi()
    reconciler = Reconciler(kube, BuildSettings(), lambda *_, **__: None, clock=lambda: NOW)
    body = _tfjob(Worker=2)
    reconciler.reconcile(body, [], [])
    assert kube.created == ["Service/mnist", "Pod/mnist-worker-0", "Pod/mnist-worker-1"]
    assert kube.status_kinds == ["TFJob"]
    written = kube.statuses[-1]
    assert [(c["type"], c["reason"]) for c in written["conditions"]] == [("Created", "TFJobCreated")]
    assert (
        written["replicaStatuses"]
        == {"Worker": {"active": 0, "ready": 0, "succeeded": 0, "failed": 0, "restarts": 0, "succeededIndexes": []}}
        or "Worker" in written["replicaStatuses"]
    )
    assert "lastReconcileTime" in written
    assert reconciler.echoes({**body, "status": written})  # its own write comes back: nothing to plan


def test_a_tfjob_disttrain_cannot_serve_fails_naming_the_field() -> None:
    kube = RecordingApi()
    reconciler = Reconciler(kube, BuildSettings(), lambda *_, **__: None, clock=lambda: NOW)
    body = _tfjob(Worker=1)
    body["spec"]["enableDynamicWorker"] = True
    reconciler.reconcile(body, [], [])
    assert kube.created == []
    failed = next(c for c in kube.statuses[-1]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "TFJobFailed" and "spec.enableDynamicWorker" in failed["message"]


def test_tfjobs_are_served_only_with_disttrain_s_own_crd_unless_adopted() -> None:
    ours = crd.tfjob_resource_definition()
    theirs = {"metadata": {"name": "tfjobs.kubeflow.org", "labels": {}}}
    assert refusal(ours, adopt=False) is None
    assert "not disttrain's" in (refusal(theirs, adopt=False) or "")
    assert refusal(theirs, adopt=True) is None
    assert "not installed" in (refusal(None, adopt=True) or "")
