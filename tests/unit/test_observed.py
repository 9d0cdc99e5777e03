"""Pod views: what the operator keeps of each pod."""

from __future__ import annotations

from typing import Any

from disttrain_operator.api.spec import ReplicaType
from disttrain_operator.core.observed import PodPhase, pod_view

LABELS = {"disttrain.io/job-name": "j", "disttrain.io/replica-type": "ps", "disttrain.io/replica-index": "1"}


def _pod(status: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j-ps-1", "uid": "u", "labels": LABELS, **metadata}, "status": status}


def test_running_and_ready() -> None:
    view = pod_view(_pod({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}))
    assert view is not None
    assert (view.replica_type, view.index, view.phase, view.ready, view.active) == (
        ReplicaType.PS,
        1,
        PodPhase.RUNNING,
        True,
        True,
    )


def test_failed_with_exit_code_of_the_tensorflow_container() -> None:
    status = {
        "phase": "Failed",
        "containerStatuses": [
            {"name": "sidecar", "restartCount": 1, "state": {"terminated": {"exitCode": 0}}},
            {
                "name": "tensorflow",
                "restartCount": 2,
                "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
            },
        ],
    }
    view = pod_view(_pod(status))
    assert view is not None
    assert (view.exit_code, view.reason, view.restarts, view.active) == (137, "OOMKilled", 3, False)


def test_evicted_pod_has_no_exit_code() -> None:
    view = pod_view(_pod({"phase": "Failed", "reason": "Evicted"}))
    assert view is not None
    assert (view.exit_code, view.reason) == (None, "Evicted")


def test_deleting_pod_is_not_active() -> None:
    view = pod_view(_pod({"phase": "Running"}, deletionTimestamp="2026-01-01T00:00:00Z"))
    assert view is not None
    assert view.deleting and not view.active


def test_foreign_labels_are_ignored() -> None:
    assert pod_view({"metadata": {"name": "x", "labels": {"disttrain.io/job-name": "j"}}}) is None
    bad_index = {**LABELS, "disttrain.io/replica-index": "one"}
    assert pod_view({"metadata": {"name": "x", "labels": bad_index}}) is None
