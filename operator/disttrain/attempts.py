"""A replica's attempts: each pod it ran, the kept ones (their logs in ConfigMaps the operator wrote,
core/kept_logs.py) first, numbered from 1 as their pods were made (a number stays when older attempts
are dropped for the job's budget, and one whose log went unkept leaves a gap), then the pod there is
now if its log is not kept yet. Kept logs
outlive the pods, and (with `logs.ttlSecondsAfterJobDeleted`) the job."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from disttrain.calls import call
from disttrain_contract.timestamps import parse_time
from disttrain_core import kept_logs
from disttrain_core.builders.naming import JOB_NAME_LABEL
from disttrain_kube.rest import Kube

_CONFIG_MAPS_PATH = "/api/v1/namespaces/{namespace}/configmaps"


@dataclass(frozen=True)
class Attempt:
    """One pod of a replica. `kept`: its log is kept (`log_bytes` long, of which the last `kept_bytes`);
    else it is the pod there is now, whose log its node serves."""

    number: int
    pod_uid: str
    started: datetime | None
    ended: datetime | None
    exit_code: int | None
    kept: bool
    log_bytes: int | None = None
    kept_bytes: int | None = None

    @property
    def dropped_bytes(self) -> int:
        """How much of the start of the log was not kept."""
        return max(0, (self.log_bytes or 0) - (self.kept_bytes or 0))

    def describe(self) -> str:
        if not self.kept:
            return f"{self.number} (its pod now)"
        ended = f", exit code {self.exit_code}" if self.exit_code is not None else ""
        return f"{self.number} (kept{ended})"


@dataclass(frozen=True)
class KeptLog:
    attempt: Attempt
    text: str

    def lines(self, tail: int | None) -> Iterator[str]:
        lines = self.text.splitlines()
        return iter(lines if tail is None else lines[-tail:] if tail > 0 else [])


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _kept_items(kube: Kube, namespace: str, job: str, kind: str) -> list[dict[str, Any]]:
    """Every kept log of jobs of that name and kind, in the order they were kept."""
    selector = f"{JOB_NAME_LABEL}={job},{kept_logs.JOB_KIND_LABEL}={kind},{kept_logs.KEPT_LOG_LABEL}"
    listing = call(
        lambda: kube.json_request(
            "GET", _CONFIG_MAPS_PATH, {"namespace": namespace}, query={"labelSelector": selector}
        ),
        what=f"the kept logs of {namespace}/{job}",
    )
    return sorted(listing.get("items") or [], key=lambda item: _annotations(item).get(kept_logs.KEPT_AT, ""))


def _of_job(items: list[dict[str, Any]], job_uid: str | None) -> list[dict[str, Any]]:
    """Those of the job `job_uid`; with None (the job is gone), those of the last job of the name."""
    if job_uid is None and items:
        job_uid = _labels(items[-1]).get(kept_logs.JOB_UID_LABEL)
    return [item for item in items if _labels(item).get(kept_logs.JOB_UID_LABEL) == job_uid]


def kept_logs_of(
    kube: Kube, namespace: str, job: str, kind: str, *, job_uid: str | None, replica: str
) -> list[KeptLog]:
    """The kept logs of one replica (`worker-1`) of a job, the first attempt first."""
    items = _of_job(_kept_items(kube, namespace, job, kind), job_uid)
    ours = kept_logs.in_order([item for item in items if _labels(item).get(kept_logs.KEPT_LOG_LABEL) == replica])
    return [_kept(number, item) for number, item in zip(kept_logs.attempt_numbers(ours), ours, strict=True)]


def kept_replicas(kube: Kube, namespace: str, job: str, kind: str) -> list[str]:
    """The replicas with a kept log, of the last job of that name."""
    items = _of_job(_kept_items(kube, namespace, job, kind), None)
    return sorted({_labels(item).get(kept_logs.KEPT_LOG_LABEL, "") for item in items})


def _labels(item: dict[str, Any]) -> dict[str, str]:
    return dict(item.get("metadata", {}).get("labels") or {})


def _annotations(item: Mapping[str, Any]) -> dict[str, str]:
    return dict(item.get("metadata", {}).get("annotations") or {})


def _kept(number: int, item: Mapping[str, Any]) -> KeptLog:
    notes = _annotations(item)
    text = str((item.get("data") or {}).get(kept_logs.LOG_KEY, ""))
    attempt = Attempt(
        number=number,
        pod_uid=notes.get(kept_logs.POD_UID, ""),
        started=parse_time(notes.get(kept_logs.STARTED)),
        ended=parse_time(notes.get(kept_logs.ENDED)),
        exit_code=_int(notes.get(kept_logs.EXIT_CODE)),
        kept=True,
        log_bytes=_int(notes.get(kept_logs.LOG_BYTES)),
        kept_bytes=len(text.encode()),
    )
    return KeptLog(attempt, text)


def live_attempt(pod: dict[str, Any] | None, kept: list[KeptLog]) -> Attempt | None:
    """The started pod there is now as the attempt after the kept ones; None without one, or once it is kept."""
    if pod is None:
        return None
    metadata = pod["metadata"]
    if any(log.attempt.pod_uid == metadata["uid"] for log in kept):
        return None
    number = max((log.attempt.number for log in kept), default=0) + 1
    return Attempt(number, metadata["uid"], parse_time(metadata.get("creationTimestamp")), None, None, False)


def replica_label(replica: str) -> str:
    """`worker-1` as it is, `chief` as `chief-0`: a replica as its kept logs are labelled."""
    task_type, _, index = replica.lower().partition("-")
    return f"{task_type}-{index or 0}"
