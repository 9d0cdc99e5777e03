"""disttrain's Python client: `from disttrain import Client`.

Installs without kopf or TensorFlow (the base distribution); the operator itself is `disttrain[operator]`.
"""

from disttrain.client import Client, JobEvent, WatchEvent
from disttrain.errors import (
    ApiError,
    DisttrainError,
    InvalidJobError,
    JobExistsError,
    JobFailedError,
    JobNotFoundError,
    LogsUnavailableError,
    ReplicaNotFoundError,
    WaitTimeoutError,
)
from disttrain_operator.api.job import DistTrainJob

__all__ = [
    "ApiError",
    "Client",
    "DistTrainJob",
    "DisttrainError",
    "InvalidJobError",
    "JobEvent",
    "JobExistsError",
    "JobFailedError",
    "JobNotFoundError",
    "LogsUnavailableError",
    "ReplicaNotFoundError",
    "WaitTimeoutError",
    "WatchEvent",
]
