"""A replica's attempts kept on the checkpoint volume (`logs.destination: CheckpointVolume`), read through a
short-lived pod (core/builders/log_reader.py) that mounts the claim read-only, since nothing else can
read a claim: the client creates it, waits for it to end, reads its log and deletes it. This needs the
right to create and delete pods in the job's namespace, and a job that still exists (the pod is built
from its spec); once the job is gone, its logs stay on the volume for any pod that mounts the claim."""

from __future__ import annotations

import json
import secrets
import time
from datetime import UTC, datetime
from typing import Any

from disttrain.attempts import Attempt, KeptLog
from disttrain.calls import call
from disttrain.errors import LogsUnavailableError
from disttrain.pod_reads import read_pod, wait_for_pod_change
from disttrain_contract.volume_logs import parse_attempt_file_name
from disttrain_core.api.job import DistTrainJob
from disttrain_core.builders.log_reader import reader_pod
from disttrain_kube.rest import PODS_PATH, Kube

READER_TIMEOUT = 180.0  # seconds for the reader pod to be scheduled, pull its image and end
_ENDED = ("Succeeded", "Failed")
_WATCH_SECONDS = 10


def volume_logs_of(kube: Kube, job: DistTrainJob, replica: str, *, live_uid: str | None) -> list[KeptLog]:
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
    return [_kept(*found, file) for found, file in named if found[1] != live_uid and "text" in file]


def _kept(started: datetime, pod_uid: str, file: dict[str, Any]) -> KeptLog:
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
