"""Deterministic names and labels of everything a job owns.

Deterministic names are what make creation idempotent: a retried create answers 409 instead of
making a duplicate.
"""

from __future__ import annotations

from disttrain_operator.api.job import GROUP
from disttrain_operator.api.spec import ReplicaType

JOB_NAME_LABEL = f"{GROUP}/job-name"
REPLICA_TYPE_LABEL = f"{GROUP}/replica-type"
REPLICA_INDEX_LABEL = f"{GROUP}/replica-index"
TF_PORT_NAME = "tf-port"
PROGRESS_PORT_NAME = "progress"
CHECKPOINT_VOLUME = "disttrain-checkpoint"


def pod_name(job_name: str, replica_type: ReplicaType, index: int) -> str:
    return f"{job_name}-{replica_type.task_type}-{index}"


def service_name(job_name: str) -> str:
    """One headless Service per job; it is also every pod's `subdomain`."""
    return job_name


def checkpoint_claim_name(job_name: str) -> str:
    return f"{job_name}-checkpoint"


def job_labels(job_name: str) -> dict[str, str]:
    return {JOB_NAME_LABEL: job_name}


def replica_labels(job_name: str, replica_type: ReplicaType, index: int) -> dict[str, str]:
    return {
        **job_labels(job_name),
        REPLICA_TYPE_LABEL: replica_type.task_type,
        REPLICA_INDEX_LABEL: str(index),
    }
