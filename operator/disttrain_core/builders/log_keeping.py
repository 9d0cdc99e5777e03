"""What a pod carries so that its log outlives it, wherever `spec.logs.destination` keeps it.

Every pod: which attempt of its replica it is, so a kept log is numbered as its pod was made, and an
attempt whose log is missing shows. In ConfigMaps (core/kept_logs.py keeps them): how much to keep and
for how long, readable even once its job is gone; no finalizer, so nothing of disttrain ever holds a
pod (docs/architecture.md says how the logs are kept without one). On the checkpoint volume
(disttrain_contract.volume_logs): the folder, bound and pod uid the trainer names its copy by."""

from __future__ import annotations

from collections.abc import Mapping

from disttrain_contract.volume_logs import LOG_DIR_ENV, LOG_MAX_BYTES_ENV, LOGS_FOLDER, POD_UID_ENV
from disttrain_core.api.job import GROUP, DistTrainJob
from disttrain_core.api.spec import MIN_LOG_BYTES, ReplicaType
from disttrain_core.api.tenant_input import ATTEMPT, LOG_MAX_BYTES, LOG_TTL, OPERATOR_POD_ANNOTATIONS
from disttrain_core.types import Manifest

# Pods that earlier versions made carry it until their log is kept (core/kept_logs.py lets them go).
LEGACY_LOG_FINALIZER = f"{GROUP}/keep-log"


# What one job may keep in ConfigMaps: each replica's first attempt and its latest ones, and in all at most
# KEPT_BYTES_PER_JOB, which caps each attempt's share for jobs of many pods.
KEPT_ATTEMPTS_PER_REPLICA = 4
KEPT_BYTES_PER_JOB = 64 * 1024 * 1024


def kept_bytes_per_attempt(job: DistTrainJob) -> int:
    """`logs.maxBytesPerAttempt`, or less where the job's pods would keep more than KEPT_BYTES_PER_JOB in all."""
    share = KEPT_BYTES_PER_JOB // (KEPT_ATTEMPTS_PER_REPLICA * max(job.spec.total_replicas, 1))
    return max(MIN_LOG_BYTES, min(job.spec.logs.max_bytes_per_attempt, share))


def attempt(job: DistTrainJob, replica_type: ReplicaType, index: int) -> int:
    """The attempt a new pod of the replica is: one more than its latest pod's (`status...attempts`)."""
    status = job.status.replica_statuses.get(replica_type)
    made = status.attempts if status is not None else []
    return (made[index] if index < len(made) else 0) + 1


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


def volume_log_dir(job: DistTrainJob, replica: str) -> str | None:
    """The folder of one replica's (`worker-1`) attempts on the checkpoint volume; a job of the same name
    made later writes elsewhere (its uid differs). None unless the job keeps its logs there."""
    checkpoint = job.spec.checkpoint
    if not job.spec.logs.on_volume or checkpoint is None:
        return None
    uid = job.metadata.uid
    of_job = f"{job.metadata.name}-{uid[:8]}" if uid else job.metadata.name
    return f"{checkpoint.mount_path}/{LOGS_FOLDER}/{of_job}/{replica}"


def trainer_env(job: DistTrainJob, replica_type: ReplicaType, index: int) -> list[Manifest]:
    folder = volume_log_dir(job, f"{replica_type.task_type}-{index}")
    if folder is None:
        return []
    return [
        {"name": LOG_DIR_ENV, "value": folder},
        {"name": LOG_MAX_BYTES_ENV, "value": str(job.spec.logs.max_bytes_per_attempt)},
        {"name": POD_UID_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
    ]
