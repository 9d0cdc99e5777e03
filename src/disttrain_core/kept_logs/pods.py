"""What a pod carries so that its log is kept, and when that is due: its attempt and bounds as annotations
the operator writes (`pod_annotations`), the container whose log it is, and whether it ended or is being
deleted. No finalizer holds a pod for its log, so nothing stays Terminating when the operator is gone
(docs/architecture.md weighs the choice); pods of earlier versions still hold `LEGACY_LOG_FINALIZER`
until `release_patch` lets them go."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.tenant_input import ATTEMPT, LOG_MAX_BYTES, LOG_TTL, OPERATOR_POD_ANNOTATIONS, PodLogNotes
from disttrain_core.kept_logs.names import LEGACY_LOG_FINALIZER, container_status, logged_container, run_index
from disttrain_core.kept_logs.policy import kept_bytes_per_attempt
from disttrain_core.types import Body


def attempt(job: DistTrainJob, replica_type: ReplicaType, index: int) -> int:
    """The attempt a new pod of the replica is: one more than its latest pod's (`status...attempts`)."""
    status = job.status.replica_statuses.get(replica_type)
    made = status.attempts if status is not None else []
    return (made[index] if index < len(made) else 0) + 1


def latest_unkept(job: DistTrainJob, replica_type: ReplicaType, index: int, kept: Iterable[int]) -> bool:
    """The replica's latest pod (by the job's status) has no kept log among the attempts `kept`, in a job that
    keeps its logs in ConfigMaps: once that pod is gone, the operator writes it within moments."""
    latest = attempt(job, replica_type, index) - 1
    return job.spec.logs.in_config_maps and latest > max(kept, default=0)


def pod_annotations(
    job: DistTrainJob, replica_type: ReplicaType, index: int, template: Mapping[str, str] | None
) -> dict[str, str]:
    """The template's annotations with the operator's own: the attempt; how much of its log to keep, unless
    the job keeps none in ConfigMaps; no TTL when its logs go with it. A template's value for one of the
    operator's keys is dropped: the spec's bounds hold, whatever the template says."""
    annotations = {key: value for key, value in (template or {}).items() if key not in OPERATOR_POD_ANNOTATIONS}
    annotations[ATTEMPT] = str(attempt(job, replica_type, index))
    logs = job.spec.logs
    if not logs.in_config_maps:
        return annotations
    ttl = logs.ttl_seconds_after_job_deleted
    return {**annotations, LOG_MAX_BYTES: str(kept_bytes_per_attempt(job)), **({LOG_TTL: str(ttl)} if ttl else {})}


def held_by_legacy_finalizer(metadata: Mapping[str, Any]) -> bool:
    """An earlier version's pod, held by its finalizer until its log is kept."""
    return LEGACY_LOG_FINALIZER in (metadata.get("finalizers") or ())


def keeps_log(metadata: Mapping[str, Any]) -> bool:
    """Its job keeps its pods' logs in ConfigMaps."""
    annotations = metadata.get("annotations")
    return (isinstance(annotations, Mapping) and LOG_MAX_BYTES in annotations) or held_by_legacy_finalizer(metadata)


def ended(body: Body) -> bool:
    return (body.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def log_due(body: Body) -> bool:
    """The pod's log is to be kept now: its containers ended, or it is being deleted (its log is followed
    to its end)."""
    metadata = body.get("metadata") or {}
    return keeps_log(metadata) and (ended(body) or metadata.get("deletionTimestamp") is not None)


def to_follow(body: Body) -> bool:
    """Being deleted while its container may still run: its log is complete only once the stream ends."""
    return not ended(body) and (body.get("metadata") or {}).get("deletionTimestamp") is not None


def previous_run_due(body: Body) -> int | None:
    """In a pod that restarts in place and keeps its logs, while its trainer runs again (or once the pod ended,
    which its next run may do before any watch saw it run), the count of its runs before the current: the log
    of the last of them is to be kept now, as the run before the current, which the kubelet keeps; else None."""
    run = run_index(body)
    if not run or not keeps_log(body.get("metadata") or {}):
        return None
    status = container_status(body)
    again = "running" in (status.get("state") or {}) or ended(body)
    return run if again and (status.get("lastState") or {}).get("terminated") else None


def previous_run(body: Body, run: int) -> Body:
    """The pod as it was when its `run`-th run ended (its previous run's state its state, its restarts one
    fewer): what the kept log of that run is built from."""
    statuses = (body.get("status") or {}).get("containerStatuses") or []
    name = logged_container(body)
    ended = [
        {**entry, "state": entry.get("lastState") or {}, "lastState": {}, "restartCount": run - 1}
        if entry.get("name") == name
        else entry
        for entry in statuses
    ]
    return {**body, "status": {**(body.get("status") or {}), "phase": "Failed", "containerStatuses": ended}}


def container_ended(pod: Body) -> bool:
    """Its container's end is reported: its exit code, when it ran."""
    return "terminated" in (container_status(pod).get("state") or {})


def started(pod: Body) -> bool:
    """Its container ran: a pod that never did has no log to keep."""
    status = container_status(pod)
    state, last = status.get("state") or {}, status.get("lastState") or {}
    return "running" in state or "terminated" in state or "terminated" in last


def outlives_job(pod: Body) -> bool:
    """Its kept log stays past its job (`logs.ttlSecondsAfterJobDeleted`)."""
    return PodLogNotes.of(pod.get("metadata")).ttl_seconds > 0


def max_bytes(pod: Body) -> int:
    return PodLogNotes.of(pod.get("metadata")).max_bytes


def release_patch(pod: Body) -> list[dict[str, Any]]:
    """A JSON patch that drops an earlier version's log finalizer from where `pod` showed it (one of its first
    finalizers, all its essentials keep), refused (422) if it is no longer there, or the pod of that name is
    another one; the other finalizers stay as they are."""
    place = f"/metadata/finalizers/{list(pod['metadata'].get('finalizers') or []).index(LEGACY_LOG_FINALIZER)}"
    return [
        {"op": "test", "path": "/metadata/uid", "value": pod["metadata"]["uid"]},
        {"op": "test", "path": place, "value": LEGACY_LOG_FINALIZER},
        {"op": "remove", "path": place},
    ]
