"""What a pod carries so that its log is kept, and when keeping it is due."""

from __future__ import annotations

from typing import Any

from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.tenant_input import ATTEMPT, LOG_MAX_BYTES, LOG_TTL, RUNS_COUNTED
from disttrain_core.kept_logs.names import LEGACY_LOG_FINALIZER
from disttrain_core.kept_logs.pods import log_due, pod_annotations, previous_run_due, release_patch, to_follow
from support.job_builder import JobBuilder

KEEPS = {LOG_MAX_BYTES: "65536"}


def _pod(
    annotations: dict[str, str], *, phase: str = "Running", deleting: bool = False, **status: Any
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "uid": "u", "annotations": annotations}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "status": {"phase": phase, **status}}


def test_the_operator_s_annotations_stand_over_a_template_s_and_bound_the_log() -> None:
    job = JobBuilder().counts({"Worker": 2}).spec(logs={"maxBytesPerAttempt": 65536, "ttlSecondsAfterJobDeleted": 60})
    template = {ATTEMPT: "99", LOG_MAX_BYTES: "999999999", "team": "a"}
    annotations = pod_annotations(job.job(), ReplicaType.WORKER, 0, template)
    assert annotations == {"team": "a", ATTEMPT: "1", LOG_MAX_BYTES: "65536", LOG_TTL: "60"}
    unkept = JobBuilder().counts({"Worker": 2}).spec(logs={"keep": False}).job()
    assert pod_annotations(unkept, ReplicaType.WORKER, 0, template) == {"team": "a", ATTEMPT: "1"}


def test_a_log_is_due_once_its_pod_ended_or_is_being_deleted_and_only_where_it_is_kept() -> None:
    assert not log_due(_pod(KEEPS))
    assert log_due(_pod(KEEPS, phase="Failed")) and log_due(_pod(KEEPS, deleting=True))
    assert not log_due(_pod({}, phase="Failed"))
    legacy = _pod({}, phase="Succeeded")
    legacy["metadata"]["finalizers"] = [LEGACY_LOG_FINALIZER]
    assert log_due(legacy)


def test_a_log_is_followed_to_its_end_only_while_its_pod_is_deleted_before_it_ended() -> None:
    assert to_follow(_pod(KEEPS, deleting=True))
    assert not to_follow(_pod(KEEPS, phase="Failed", deleting=True)) and not to_follow(_pod(KEEPS))


def test_a_run_restarted_in_place_is_due_once_the_next_one_runs() -> None:
    def restarted(state: dict[str, Any]) -> dict[str, Any]:
        container = {
            "name": "tensorflow",
            "restartCount": 2,
            "state": state,
            "lastState": {"terminated": {"exitCode": 137}},
        }
        return _pod({**KEEPS, RUNS_COUNTED: "2"}, containerStatuses=[container])

    assert previous_run_due(restarted({"running": {}})) == 2
    assert previous_run_due(restarted({"waiting": {}})) is None  # the next run has not started
    assert previous_run_due(_pod(KEEPS)) is None  # no restart in place


def test_the_legacy_finalizer_goes_alone_and_only_from_the_pod_and_the_place_it_was_read() -> None:
    pod = _pod({})
    pod["metadata"]["finalizers"] = ["other/keep", LEGACY_LOG_FINALIZER, "other/last"]
    assert release_patch(pod) == [
        {"op": "test", "path": "/metadata/uid", "value": "u"},
        {"op": "test", "path": "/metadata/finalizers/1", "value": LEGACY_LOG_FINALIZER},
        {"op": "remove", "path": "/metadata/finalizers/1"},
    ]
