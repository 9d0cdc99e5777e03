"""A served TFJob's translation: its status in TFJob's shape and back (so an operator restart reads it), the
fields its CRD must keep, and Kueue's patches in TFJob's names; a DistTrainJob passes untouched."""

from __future__ import annotations

from disttrain_core import served
from disttrain_core.api import crd
from disttrain_core.api.status import DistTrainJobStatus
from support.job_builder import JobBuilder

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
    as_tfjob = served.tfjob_status(STATUS, NAMES, "t2")
    assert [c["reason"] for c in as_tfjob["conditions"]] == ["TFJobCreated", "TFJobRunning"]
    assert as_tfjob["conditions"][1]["message"] == "JobRunning: all run"
    assert as_tfjob["conditions"][1]["lastUpdateTime"] == "t1"
    assert set(as_tfjob["replicaStatuses"]) == {"Master", "ps"}
    assert as_tfjob["lastReconcileTime"] == "t2" and as_tfjob["startTime"] == "t0" and as_tfjob["phase"] == "Running"
    assert served.core_status(as_tfjob) == STATUS


def test_the_tfjob_crd_keeps_every_field_of_the_core_s_status() -> None:
    """The API server prunes what a structural schema lacks: a field of the core's status missing from the
    TFJob CRD would be lost on every write (a restart's back-off, its disruptions), as if never decided.
    A TFJob has no spec.tensorboard, so no status of one."""
    schema = crd.tfjob_resource_definition()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    kept = set(schema["properties"]["status"]["properties"])
    written = set(DistTrainJobStatus.model_json_schema(by_alias=True)["properties"])
    assert written - kept == {"tensorboard"}


def test_kueue_patches_name_the_replica_types_as_the_tfjob_does() -> None:
    patch = {"spec": {"runPolicy": {"suspend": False}, "replicaSpecs": {"Chief": {"template": {}}}}}
    assert served.tfjob_patch(patch, NAMES) == {
        "spec": {"runPolicy": {"suspend": False}, "tfReplicaSpecs": {"Master": {"template": {}}}}
    }


def test_the_job_shape_leaves_a_disttrainjob_alone_and_takes_a_served_tfjobs_status_there_and_back() -> None:
    status = {
        "phase": "Running",
        "replicaStatuses": {"Chief": {"active": 1}, "PS": {"active": 2}},
        "conditions": [{"type": "Running", "status": "True", "reason": "PodsRunning", "message": "all running"}],
    }
    plain = served.JobShape.of({"apiVersion": "disttrain.io/v1alpha1", "kind": "DistTrainJob"})
    assert plain.status_out(status, "now") is status and plain.patch_out(status) is status
    shape = served.JobShape.of(JobBuilder("mnist", "team").replicas("Master", 1).replicas("PS", 2).status().tfjob())
    out = shape.status_out(status, "2026-01-01T00:00:00Z")
    assert set(out["replicaStatuses"]) == {"Master", "PS"} and out["conditions"][0]["reason"] == "TFJobRunning"
    assert shape.status_in(out) == status
    patch = shape.patch_out({"spec": {"replicaSpecs": {"Chief": {"replicas": 1}}}})
    assert patch == {"spec": {"tfReplicaSpecs": {"Master": {"replicas": 1}}}}
