"""The client's reader of kept logs: a replica's attempts, the kept ones first, numbered from 1 as their pods
were made (a number stays when older attempts are dropped for the job's budget, and one whose log went
unkept leaves a gap), then the pod there is now if its log is not kept yet. Kept logs outlive the pods,
and (with `logs.ttlSecondsAfterJobDeleted`) the job. disttrain_core.kept_logs says what a record holds.

In ConfigMaps they are listed by label. On the checkpoint volume (`logs.destination: CheckpointVolume`)
they are read through a short-lived pod (disttrain_core.builders.log_reader_pod) that mounts the claim
read-only, since nothing else can read a claim: the client creates it, waits for it to end, reads its log
and deletes it. That needs the right to create and delete pods in the job's namespace, and a job that
still exists (the pod is built from its spec); once the job is gone, its logs stay on the volume for any
pod that mounts the claim."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from disttrain.calls import call
from disttrain.errors import LogsUnavailableError
from disttrain.pod_reads import read_pod, wait_for_pod_change
from disttrain_contract.kept_logs import parse_attempt_file_name
from disttrain_contract.timestamps import parse_time
from disttrain_core import kept_logs
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.tenant_input import PodLogNotes
from disttrain_core.builders.log_reader_pod import reader_pod
from disttrain_core.naming import JOB_NAME_LABEL
from disttrain_kube.rest import PODS_PATH, Kube

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


KEEPER_GRACE = 20.0  # seconds a read waits for the operator to keep the log of a pod its ended job took
_KEEPER_POLL = 0.5


def kept_logs_after_keeper(
    kube: Kube, job: DistTrainJob, task: tuple[ReplicaType, int], replica: str, *, due: bool
) -> list[KeptLog]:
    """A replica's kept logs in ConfigMaps; when `due` (its job ended and took its pod), read again for up to
    `KEEPER_GRACE` seconds while its latest pod's log is not among them, as the operator keeps it just after."""
    namespace, name = job.metadata.namespace, job.metadata.name
    deadline = time.monotonic() + KEEPER_GRACE
    while True:
        kept = kept_logs_of(kube, namespace, name, job.kind, job_uid=job.metadata.uid, replica=replica)
        numbers = [log.attempt.number for log in kept]
        if not (due and kept_logs.latest_unkept(job, *task, numbers)) or time.monotonic() >= deadline:
            return kept
        time.sleep(_KEEPER_POLL)


def kept_replicas(kube: Kube, namespace: str, job: str, kind: str) -> list[str]:
    """The replicas with a kept log, of the last job of that name."""
    items = _of_job(_kept_items(kube, namespace, job, kind), None)
    return sorted({_labels(item).get(kept_logs.KEPT_LOG_LABEL, "") for item in items})


def _labels(item: dict[str, Any]) -> dict[str, str]:
    return dict(item.get("metadata", {}).get("labels") or {})


def _annotations(item: Mapping[str, Any]) -> dict[str, str]:
    return dict(item.get("metadata", {}).get("annotations") or {})


def _kept(number: int, item: Mapping[str, Any]) -> KeptLog:
    record = kept_logs.KeptLogRecord.of(item)
    attempt = Attempt(
        number=number,
        pod_uid=record.pod_uid,
        started=record.started,
        ended=record.ended,
        exit_code=record.exit_code,
        kept=True,
        log_bytes=record.log_bytes,
        kept_bytes=len(record.text.encode()),
    )
    return KeptLog(attempt, record.text)


def live_attempt(pod: dict[str, Any] | None, kept: list[KeptLog]) -> Attempt | None:
    """The started pod there is now as the attempt after the kept ones; None without one, or once it is kept. A
    pod that restarted in place (`disttrain_core.restarts.in_place`) runs its attempt numbered on from its earlier
    runs', started with its container."""
    if pod is None:
        return None
    metadata, run = pod["metadata"], kept_logs.run_index(pod)
    ours = [log.attempt for log in kept if log.attempt.pod_uid == metadata["uid"]]
    if ours and not run:
        return None
    number = max((log.attempt.number for log in kept), default=0) + 1
    if run:
        made = PodLogNotes.of(metadata).attempt
        number = made + run if made is not None else number
        if any(attempt.number == number for attempt in ours):
            return None
    state = kept_logs.container_status(pod).get("state") or {}
    started = (state.get("running") or state.get("terminated") or {}).get("startedAt") if run else None
    when = parse_time(started or metadata.get("creationTimestamp"))
    return Attempt(number, metadata["uid"], when, None, None, False)


def replica_label(replica: str) -> str:
    """`worker-1` as it is, `chief` as `chief-0`: a replica as its kept logs are labelled."""
    task_type, _, index = replica.lower().partition("-")
    return f"{task_type}-{index or 0}"


READER_TIMEOUT = 180.0  # seconds for the reader pod to be scheduled, pull its image and end
_ENDED = ("Succeeded", "Failed")
_WATCH_SECONDS = 10


def kept_logs_on_volume(kube: Kube, job: DistTrainJob, replica: str, *, live_uid: str | None) -> list[KeptLog]:
    """Every attempt of one replica (`worker-1`) the volume holds, the first first, but that of the pod `live_uid`,
    whose log its node serves."""
    namespace = job.metadata.namespace
    manifest = reader_pod(job, replica, f"{job.metadata.name}-read-logs-{secrets.token_hex(3)}")
    name, container = manifest["metadata"]["name"], manifest["spec"]["containers"][0]["name"]
    what = f"the pod {namespace}/{name} that reads the logs of {replica} on the checkpoint volume"
    call(lambda: kube.json_request("POST", PODS_PATH, {"namespace": namespace}, manifest), what=f"creating {what}")
    try:
        pod = _ended(kube, namespace, name, what)
        output = b"".join(call(lambda: list(kube.pod_log_chunks(namespace, name, container)), what=what))
    finally:
        call(lambda: kube.delete_pod(namespace, name, force=True), what=f"deleting {what}")  # gone already is fine
    if pod["status"]["phase"] != "Succeeded":
        raise LogsUnavailableError(f"{what} failed: {output.decode(errors='replace')[-2000:]}")
    files = [json.loads(line) for line in output.decode().splitlines() if line.startswith("{")]
    named = [(found, file) for file in files if (found := parse_attempt_file_name(str(file["file"]))) is not None]
    return [_kept_on_volume(*found, file) for found, file in named if found[1] != live_uid and "text" in file]


def _kept_on_volume(started: datetime, pod_uid: str, file: dict[str, Any]) -> KeptLog:
    """An attempt the reader printed whole; its number counts the attempts it only named."""
    text = str(file["text"])
    ended = datetime.fromtimestamp(float(file["modified"]), UTC)
    attempt = Attempt(int(file["number"]), pod_uid, started, ended, None, kept=True, kept_bytes=len(text.encode()))
    return KeptLog(attempt, text)


def _ended(kube: Kube, namespace: str, name: str, what: str) -> dict[str, Any]:
    """The reader pod once it ended; LogsUnavailableError with what holds it up after `READER_TIMEOUT`."""
    deadline = time.monotonic() + READER_TIMEOUT
    while True:
        pod, version = read_pod(kube, namespace, name, what=what)
        if pod is None:
            raise LogsUnavailableError(f"{what} was deleted before it ended")
        if pod.get("status", {}).get("phase") in _ENDED:
            return pod
        left = deadline - time.monotonic()
        if left <= 0:
            raise LogsUnavailableError(f"{what} did not end within {READER_TIMEOUT:.0f} s: {_held_up(pod)}")
        wait_for_pod_change(kube, namespace, name, version, int(min(left, _WATCH_SECONDS)) + 1)


def _held_up(pod: dict[str, Any]) -> str:
    """What keeps a pod from running, in the cluster's words."""
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting:
            return f"{waiting.get('reason')}: {waiting.get('message', '')}".rstrip(": ")
    for condition in status.get("conditions") or []:
        if condition.get("status") == "False" and condition.get("message"):
            return f"{condition.get('reason')}: {condition['message']}"
    return f"it is {status.get('phase', 'Pending')}"
