"""A kept log's record, the ConfigMap: built from a pod and the tail of its log (`kept_log`), read back
(`KeptLogRecord.of`), a replica's records put in the order of its attempts, and those that go past the
budget (`surplus`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from disttrain_contract.kept_logs import from_a_line
from disttrain_contract.timestamps import format_micro_time, parse_time
from disttrain_core import naming
from disttrain_core.api.spec import LABEL_NAME_PATTERN, ReplicaType
from disttrain_core.api.tenant_input import ATTEMPT, LOG_TTL, KeptLogNotes, PodLogNotes
from disttrain_core.kept_logs.names import (
    ENDED,
    EXIT_CODE,
    JOB_KIND_LABEL,
    JOB_UID_LABEL,
    KEPT_AT,
    KEPT_LOG_LABEL,
    LOG_BYTES,
    LOG_KEY,
    OUTLIVES_JOB_LABEL,
    POD_UID,
    STARTED,
    container_status,
    kept_log_name,
    run_index,
)
from disttrain_core.kept_logs.policy import KEPT_ATTEMPTS_PER_REPLICA
from disttrain_core.types import Body, Manifest

_LABEL_VALUE = re.compile(LABEL_NAME_PATTERN)


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
    """The attempt a pod's log is: the number it was made with and the runs it restarted in place before this
    one, or (a pod of an earlier version) the one after its replica's kept logs."""
    made = PodLogNotes.of(pod.get("metadata")).attempt
    return made + run_index(pod) if made is not None else next_attempt(kept)


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


def _terminated(pod: Body) -> Mapping[str, Any]:
    """How its container's run ended: its state, or its last state while the next run waits to start."""
    status = container_status(pod)
    state = status.get("state") or {}
    last = (status.get("lastState") or {}).get("terminated") if "waiting" in state else None
    return dict(state.get("terminated") or last or {})


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
    # a run restarted in place started with its container; any other, with its pod
    started = terminated.get("startedAt") if run_index(pod) else metadata.get("creationTimestamp")
    kept_notes = {
        POD_UID: str(metadata["uid"]),
        STARTED: str(started or ""),
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


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class KeptLogRecord:
    """What a kept log's ConfigMap says of its attempt, read back as `kept_log` wrote it (a value that is
    missing or not a number reads as None)."""

    pod_uid: str
    started: datetime | None
    ended: datetime | None
    exit_code: int | None
    log_bytes: int | None  # how long the log was; `text` is its last `logs.maxBytesPerAttempt`
    text: str

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> KeptLogRecord:
        notes = dict((item.get("metadata") or {}).get("annotations") or {})
        return cls(
            pod_uid=str(notes.get(POD_UID, "")),
            started=parse_time(notes.get(STARTED)),
            ended=parse_time(notes.get(ENDED)),
            exit_code=_int(notes.get(EXIT_CODE)),
            log_bytes=_int(notes.get(LOG_BYTES)),
            text=str((item.get("data") or {}).get(LOG_KEY, "")),
        )
