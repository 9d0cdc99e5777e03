"""What a job may keep, and for how long: each replica's first attempt and its latest ones within a budget
of bytes per job, and, for kept logs that outlive their job (`logs.ttlSecondsAfterJobDeleted`), the
sweep that deletes them once their TTL has run out after the job went."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from disttrain_contract.timestamps import format_time
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import MIN_LOG_BYTES
from disttrain_core.api.tenant_input import JOB_GONE_SINCE, KeptLogNotes
from disttrain_core.kept_logs.names import JOB_UID_LABEL
from disttrain_core.types import Body

# What one job may keep in ConfigMaps: each replica's first attempt and its latest ones, and in all at most
# KEPT_BYTES_PER_JOB, which caps each attempt's share for jobs of many pods.
KEPT_ATTEMPTS_PER_REPLICA = 4
KEPT_BYTES_PER_JOB = 64 * 1024 * 1024


def kept_bytes_per_attempt(job: DistTrainJob) -> int:
    """`logs.maxBytesPerAttempt`, or less where the job's pods would keep more than KEPT_BYTES_PER_JOB in all."""
    share = KEPT_BYTES_PER_JOB // (KEPT_ATTEMPTS_PER_REPLICA * max(job.spec.total_replicas, 1))
    return max(MIN_LOG_BYTES, min(job.spec.logs.max_bytes_per_attempt, share))


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
