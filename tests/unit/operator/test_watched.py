"""What the operator watches and keeps of each object: a job's readable parts, and each child found under the job
its label names."""

from __future__ import annotations

from typing import Any

from disttrain_core.api.spec import ReplicaType
from disttrain_core.kueue import PREBUILT_WORKLOAD, QUEUE_LABEL
from disttrain_core.naming import JOB_NAME_LABEL, REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL
from disttrain_core.types import ObjectRef
from disttrain_operator.watched import DISTTRAIN_JOBS, PODS, SERVED_TFJOBS, SERVICES, job_body, job_path


def _labelled(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}", "labels": labels}}


def test_a_job_keeps_what_the_operator_reads_and_none_of_what_changes_on_every_write_or_a_tenant_pads() -> None:
    body: dict[str, Any] = {
        "apiVersion": "disttrain.io/v1alpha1",
        "kind": "DistTrainJob",
        "metadata": {
            "name": "train",
            "namespace": "team",
            "uid": "u",
            "generation": 2,
            "resourceVersion": "981",
            "managedFields": [{"manager": "kubectl"}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", PREBUILT_WORKLOAD: "w"},
            "labels": {"team": "a", QUEUE_LABEL: "research"},
        },
        "spec": {"strategy": "Mirrored"},
    }
    kept = job_body(body)
    assert kept["metadata"] == {
        "name": "train",
        "namespace": "team",
        "uid": "u",
        "generation": 2,
        "creationTimestamp": None,
        "labels": {QUEUE_LABEL: "research"},  # Kueue's alone: no other label of a tenant's is read
        "annotations": {PREBUILT_WORKLOAD: "w"},
    }
    assert (kept["spec"], kept["status"]) == ({"strategy": "Mirrored"}, {})
    padded = job_body({**body, "metadata": {**body["metadata"], "annotations": {PREBUILT_WORKLOAD: "w" * 254}}})
    assert padded["metadata"]["annotations"] == {}  # longer than any object's name: read as absent
    deleted = job_body({**body, "metadata": {**body["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert deleted["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"


def test_a_child_is_found_under_the_job_its_label_names_and_without_it_not_at_all() -> None:
    service = _labelled("train", **{JOB_NAME_LABEL: "train"})
    assert SERVICES.view(service) == (("team", "train"), "uid-train", ObjectRef("Service", "train"))
    assert SERVICES.view(_labelled("train")) is None
    pod = _labelled(
        "train-worker-0", **{JOB_NAME_LABEL: "train", REPLICA_TYPE_LABEL: "worker", REPLICA_INDEX_LABEL: "0"}
    )
    found = PODS.view(pod)
    assert found is not None and found[:2] == (("team", "train"), "uid-train-worker-0")
    assert (found[2].replica_type, found[2].index) == (ReplicaType.WORKER, 0)
    assert PODS.view({**pod, "metadata": {**pod["metadata"], "uid": ""}}) is None  # not made yet


def test_each_kind_is_watched_where_it_is_served_and_only_the_operator_s_children() -> None:
    assert DISTTRAIN_JOBS.path("team") == "/apis/disttrain.io/v1alpha1/namespaces/team/disttrainjobs"
    assert SERVED_TFJOBS.path(None) == "/apis/kubeflow.org/v1/tfjobs"
    assert PODS.path("team") == "/api/v1/namespaces/team/pods"
    assert PODS.selection() == {"labelSelector": JOB_NAME_LABEL}


def test_a_held_job_s_path_names_its_kind_s_collection() -> None:
    job = {"apiVersion": "disttrain.io/v1alpha1", "kind": "DistTrainJob", "metadata": {"namespace": "a", "name": "b"}}
    assert job_path(job) == "/apis/disttrain.io/v1alpha1/namespaces/a/disttrainjobs/b"
    tfjob = {**job, "apiVersion": "kubeflow.org/v1", "kind": "TFJob"}
    assert job_path(tfjob) == "/apis/kubeflow.org/v1/namespaces/a/tfjobs/b"
