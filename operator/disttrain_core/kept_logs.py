"""Logs that outlive their pods: each attempt's log kept in a ConfigMap once its container ended.

No finalizer holds a pod for its log, so nothing stays Terminating when the operator is gone
(docs/architecture.md weighs the choice). The operator keeps the log of a pod that ended before it
deletes the pod itself (a restart, a cleanup: core/planner.py waits for it), and follows to its end the
log of a pod deleted while it runs (a restart's peers, an eviction, the job's deletion). A pod carries
which attempt of its replica it is and what to keep (`LOG_MAX_BYTES`, `LOG_TTL`), so a pod whose job is
already gone is still handled as asked, and an attempt that went unkept (the operator was not running,
or the pod was gone before its log could be read) shows as a gap in its replica's numbers
(`unkept_before`), which the job's status names.

A ConfigMap is owned by the job, and goes with it, unless `logs.ttlSecondsAfterJobDeleted` asks to keep
it longer: then it is owned by nothing, and once its job is gone, `sweep` marks when that was first seen
and deletes it after the TTL. Pods made by earlier versions hold `LEGACY_LOG_FINALIZER`: their log is
kept as any other, then `release_patch` lets them go.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from disttrain_contract.timestamps import format_micro_time, format_time
from disttrain_contract.volume_logs import from_a_line
from disttrain_core.api.job import GROUP
from disttrain_core.api.spec import LABEL_NAME_PATTERN, ReplicaType
from disttrain_core.api.tenant_input import (
    ATTEMPT,
    JOB_GONE_SINCE,
    LOG_MAX_BYTES,
    LOG_TTL,
    KeptLogNotes,
    PodLogNotes,
)
from disttrain_core.builders import naming
from disttrain_core.builders.log_keeping import KEPT_ATTEMPTS_PER_REPLICA, LEGACY_LOG_FINALIZER
from disttrain_core.builders.naming import tensorflow_container
from disttrain_core.types import Body, Manifest

KEPT_LOG_LABEL = f"{GROUP}/kept-log-of"  # the replica, `worker-1`: what selects a job's kept logs
JOB_UID_LABEL = f"{GROUP}/job-uid"
JOB_KIND_LABEL = f"{GROUP}/job-kind"
OUTLIVES_JOB_LABEL = f"{GROUP}/kept-past-job"  # on those with a TTL, which `sweep` looks after
POD_UID = f"{GROUP}/pod-uid"
STARTED = f"{GROUP}/started"
ENDED = f"{GROUP}/ended"
EXIT_CODE = f"{GROUP}/exit-code"
LOG_BYTES = f"{GROUP}/log-bytes"  # how long the log was; the ConfigMap keeps its last max-bytes
KEPT_AT = f"{GROUP}/kept-at"  # microseconds: two attempts can end within one second
LOG_KEY = "log"
_LABEL_VALUE = re.compile(LABEL_NAME_PATTERN)


def held(metadata: Mapping[str, Any]) -> bool:
    """An earlier version's pod, held by its finalizer until its log is kept."""
    return LEGACY_LOG_FINALIZER in (metadata.get("finalizers") or ())


def keeps_log(metadata: Mapping[str, Any]) -> bool:
    """Its job keeps its pods' logs in ConfigMaps."""
    annotations = metadata.get("annotations")
    return (isinstance(annotations, Mapping) and LOG_MAX_BYTES in annotations) or held(metadata)


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


def kept_log_name(pod: Body) -> str:
    metadata = pod["metadata"]
    return f"{metadata['name']}-log-{str(metadata['uid'])[:8]}"


@dataclass(frozen=True)
class LogTail:
    """The end of a log: at most `limit` bytes of it, cut at a line where it can be, and its whole length."""

    data: bytes
    total: int

    @property
    def dropped(self) -> int:
        return self.total - len(self.data)


def log_tail(chunks: Iterable[bytes], limit: int) -> LogTail:
    """The last `limit` bytes of a log read in chunks (memory stays near `limit` however long it is), starting
    after a line break when one lies within them."""
    kept, total = bytearray(), 0
    for chunk in chunks:
        total += len(chunk)
        kept += chunk
        if len(kept) > 2 * limit:
            del kept[: len(kept) - limit]
    data = bytes(kept[-limit:]) if len(kept) > limit else bytes(kept)
    return LogTail(from_a_line(data) if len(data) < total else data, total)


def _text(tail: LogTail, limit: int) -> str:
    """The tail as text within `limit` bytes of UTF-8 (a byte that is no UTF-8 becomes a 3-byte U+FFFD)."""
    text = tail.data.decode(errors="replace")
    while len(text.encode()) > limit:
        text = text[len(text) // 8 or 1 :]
    return text


def logged_container(pod: Body) -> str:
    """The container whose log is kept: the TensorFlow one."""
    return str(tensorflow_container(pod["spec"]["containers"])["name"])


def _container_status(pod: Body) -> Mapping[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((entry for entry in statuses if entry.get("name") == logged_container(pod)), {})


def started(pod: Body) -> bool:
    """Its container ran: a pod that never did has no log to keep."""
    status = _container_status(pod)
    state, last = status.get("state") or {}, status.get("lastState") or {}
    return "running" in state or "terminated" in state or "terminated" in last


def _terminated(pod: Body) -> Mapping[str, Any]:
    return dict((_container_status(pod).get("state") or {}).get("terminated") or {})


def controller(pod: Body) -> Mapping[str, Any] | None:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return next((owner for owner in owners if owner.get("controller")), None)


def replica_of(pod: Body) -> str | None:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    try:
        replica_type = ReplicaType.from_task_type(str(labels[naming.REPLICA_TYPE_LABEL]))
        index = int(labels[naming.REPLICA_INDEX_LABEL])
    except (KeyError, ValueError):
        return None
    return f"{replica_type.task_type}-{index}"


def outlives_job(pod: Body) -> bool:
    """Its kept log stays past its job (`logs.ttlSecondsAfterJobDeleted`)."""
    return PodLogNotes.of(pod.get("metadata")).ttl_seconds > 0


def max_bytes(pod: Body) -> int:
    return PodLogNotes.of(pod.get("metadata")).max_bytes


def kept_log_selector(pod: Body) -> str | None:
    """The label selector of the kept logs of the pod's replica in its job (its namespace's); None for a pod
    that is no replica of a job."""
    owner, replica = controller(pod), replica_of(pod)
    uid = str((owner or {}).get("uid", ""))
    if replica is None or not _LABEL_VALUE.fullmatch(uid):  # an owner written by hand selects nothing else
        return None
    return f"{JOB_UID_LABEL}={uid},{KEPT_LOG_LABEL}={replica}"


def in_order(kept: Iterable[Body]) -> list[Body]:
    """A replica's kept logs, its first attempt first (by number; older ones, without, by when they were kept)."""

    def order(item: Body) -> tuple[int, str, str]:
        metadata = item.get("metadata") or {}
        kept_at = (metadata.get("annotations") or {}).get(KEPT_AT)
        return (
            KeptLogNotes.of(metadata).attempt or 0,
            kept_at if isinstance(kept_at, str) else "",
            metadata.get("name", ""),
        )

    return sorted(kept, key=order)


def attempt_numbers(kept: Iterable[Body]) -> list[int]:
    """The attempt each of a replica's kept logs is (in `in_order`'s order): its own number, else its place."""
    numbers: list[int] = []
    for item in in_order(kept):
        number = KeptLogNotes.of(item.get("metadata")).attempt
        numbers.append(number if number is not None else (numbers[-1] if numbers else 0) + 1)
    return numbers


def next_attempt(kept: Iterable[Body]) -> int:
    """The number of the attempt after a replica's kept ones: numbers stay as they were when older ones go."""
    return max(attempt_numbers(kept), default=0) + 1


def pod_attempt(pod: Body, kept: Iterable[Body]) -> int:
    """The attempt a pod is: the number it was made with, or (a pod of an earlier version) the one after its
    replica's kept logs."""
    return PodLogNotes.of(pod.get("metadata")).attempt or next_attempt(kept)


def unkept_before(kept: Iterable[Body], attempt: int) -> tuple[int, int] | None:
    """The first and last of the attempts between a replica's latest kept log and `attempt` (being kept now),
    which have none: their pods went while no operator ran, or before their log could be read. Only gaps
    above the latest are such: the budget (`surplus`) drops older ones on purpose."""
    latest = max(attempt_numbers(kept), default=0)
    return (latest + 1, attempt - 1) if attempt - 1 > latest else None


def surplus(kept: Iterable[Body], keep: int = KEPT_ATTEMPTS_PER_REPLICA) -> list[Body]:
    """What goes once a replica keeps more than `keep` logs: the oldest after its first attempt, which
    (with the latest) says most of why a job failed."""
    ordered = in_order(kept)
    return ordered[1 : len(ordered) - keep + 1] if len(ordered) > keep else []


def kept_log(pod: Body, tail: LogTail, now: datetime, *, job_present: bool, attempt: int = 1) -> Manifest | None:
    """The ConfigMap that keeps a pod's log; None when nothing should keep it: its job is gone and kept
    nothing past itself, or the pod is no replica of a job."""
    metadata = pod["metadata"]
    notes = PodLogNotes.of(metadata)
    owner, replica = controller(pod), replica_of(pod)
    job_name = (metadata.get("labels") or {}).get(naming.JOB_NAME_LABEL)
    ttl = notes.ttl_seconds
    if owner is None or replica is None or job_name is None or not (job_present or ttl > 0):
        return None
    terminated = _terminated(pod)
    kept_notes = {
        POD_UID: str(metadata["uid"]),
        STARTED: str(metadata.get("creationTimestamp") or ""),
        LOG_BYTES: str(tail.total),
        KEPT_AT: format_micro_time(now),
        ATTEMPT: str(attempt),
        **({ENDED: str(terminated["finishedAt"])} if terminated.get("finishedAt") else {}),
        **({EXIT_CODE: str(terminated["exitCode"])} if "exitCode" in terminated else {}),
        **({LOG_TTL: str(ttl)} if ttl > 0 else {}),
    }
    manifest: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": kept_log_name(pod),
            "namespace": metadata["namespace"],
            "labels": {
                naming.JOB_NAME_LABEL: job_name,
                KEPT_LOG_LABEL: replica,
                JOB_UID_LABEL: str(owner["uid"]),
                JOB_KIND_LABEL: str(owner.get("kind", "")),
            },
            "annotations": kept_notes,
        },
        "data": {LOG_KEY: _text(tail, notes.max_bytes)},
    }
    if ttl > 0:
        manifest["metadata"]["labels"][OUTLIVES_JOB_LABEL] = "true"
    else:
        manifest["metadata"]["ownerReferences"] = [
            {key: owner[key] for key in ("apiVersion", "kind", "name", "uid")} | {"blockOwnerDeletion": False}
        ]
    return manifest


def release_patch(pod: Body) -> list[dict[str, Any]]:
    """A JSON patch that drops an earlier version's log finalizer, refused (422) if the finalizers changed since
    `pod` was read, or the pod of that name is another one."""
    finalizers = list(pod["metadata"].get("finalizers") or [])
    others = [finalizer for finalizer in finalizers if finalizer != LEGACY_LOG_FINALIZER]
    return [
        {"op": "test", "path": "/metadata/uid", "value": pod["metadata"]["uid"]},
        {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
        {"op": "replace", "path": "/metadata/finalizers", "value": others},
    ]


@dataclass(frozen=True)
class Sweep:
    """What to do with the kept logs that may outlive their jobs: mark when their job was first seen gone,
    unmark those whose job is back (the operator's view was not complete), delete those whose TTL ran out."""

    mark: list[Body]
    unmark: list[Body]
    delete: list[Body]


def sweep(kept: Iterable[Body], job_uids: set[str], now: datetime) -> Sweep:
    """Over the kept logs labelled `OUTLIVES_JOB_LABEL`; `job_uids`: the jobs that exist."""
    mark: list[Body] = []
    unmark: list[Body] = []
    delete: list[Body] = []
    for item in kept:
        metadata = item.get("metadata") or {}
        notes = KeptLogNotes.of(metadata)
        gone_since = notes.gone_since(now)
        if (metadata.get("labels") or {}).get(JOB_UID_LABEL) in job_uids:
            if gone_since is not None:
                unmark.append(item)
        elif gone_since is None:
            mark.append(item)
        elif now >= gone_since + timedelta(seconds=notes.ttl_seconds):
            delete.append(item)
    return Sweep(mark, unmark, delete)


def gone_since_patch(now: datetime | None) -> dict[str, Any]:
    """Marks (or, with None, unmarks) when the job of a kept log was first seen gone."""
    return {"metadata": {"annotations": {JOB_GONE_SINCE: None if now is None else format_time(now)}}}
