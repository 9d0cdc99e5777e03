"""Kept logs on the checkpoint volume (`logs.destination: CheckpointVolume`): the folder of each replica's
attempts, and what its trainer is told to copy its log there (disttrain_contract.kept_logs says how);
`builders.log_reader_pod` reads them back."""

from __future__ import annotations

from disttrain_contract.kept_logs import LOG_DIR_ENV, LOG_MAX_BYTES_ENV, LOGS_FOLDER, POD_UID_ENV
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.types import Manifest


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
