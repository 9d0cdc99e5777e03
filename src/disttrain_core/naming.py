"""Deterministic names and labels of everything a job owns.

Deterministic names are what make creation idempotent: a retried create answers 409 instead of
making a duplicate.
"""

from __future__ import annotations

import hashlib

from disttrain_core.api.job import GROUP, MAX_DNS_LABEL
from disttrain_core.api.spec import ReplicaType

JOB_NAME_LABEL = f"{GROUP}/job-name"
REPLICA_TYPE_LABEL = f"{GROUP}/replica-type"
REPLICA_INDEX_LABEL = f"{GROUP}/replica-index"
TF_PORT_NAME = "tf-port"
PROGRESS_PORT_NAME = "progress"
CHECKPOINT_VOLUME = "disttrain-checkpoint"
# training-operator's labels, which pods of a served TFJob carry too: selectors users wrote keep working.
KUBEFLOW_JOB_NAME_LABEL = "training.kubeflow.org/job-name"
KUBEFLOW_REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
KUBEFLOW_REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
KUBEFLOW_JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
KUBEFLOW_OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
KUBEFLOW_OPERATOR_NAME = "tfjob-controller"


def pod_name(job_name: str, replica_type: ReplicaType, index: int) -> str:
    return f"{job_name}-{replica_type.task_type}-{index}"


def service_name(job_name: str) -> str:
    """One headless Service per job; it is also every pod's `subdomain`."""
    return job_name


def label_name(job_name: str, suffix: str) -> str:
    """`{job}-{suffix}`, as a DNS-1035 label (a Service's name) of at most 63 characters: a job name too long
    for it is cut and followed by a hash of the whole name, so two jobs never share the name."""
    name = f"{job_name}-{suffix}"
    if len(name) <= MAX_DNS_LABEL:
        return name
    digest = hashlib.sha256(job_name.encode()).hexdigest()[:8]
    keep = MAX_DNS_LABEL - len(suffix) - len(digest) - 2
    return f"{job_name[:keep].rstrip('-')}-{digest}-{suffix}"


def trainer_policy_name(job_name: str) -> str:
    """The NetworkPolicy of the job's trainers: named as the job, as its Service is."""
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


def kubeflow_replica_labels(job_name: str, replica_type: ReplicaType, index: int, has_chief: bool) -> dict[str, str]:
    """training-operator's labels of a TFJob's pod: `job-role=master` on the Chief, or worker 0 without one."""
    labels = {
        KUBEFLOW_JOB_NAME_LABEL: job_name,
        KUBEFLOW_REPLICA_TYPE_LABEL: replica_type.task_type,
        KUBEFLOW_REPLICA_INDEX_LABEL: str(index),
        KUBEFLOW_OPERATOR_NAME_LABEL: KUBEFLOW_OPERATOR_NAME,
    }
    if replica_type is ReplicaType.CHIEF or (not has_chief and replica_type is ReplicaType.WORKER and index == 0):
        labels[KUBEFLOW_JOB_ROLE_LABEL] = "master"
    return labels
