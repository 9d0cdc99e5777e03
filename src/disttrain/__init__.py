"""disttrain's Python client: `from disttrain import Client`.

Installs without kopf or TensorFlow (the base distribution); the operator itself is `disttrain[operator]`.
"""

from disttrain.client import Client, JobEvent, WatchEvent
from disttrain.errors import (
    ApiError,
    AttemptNotFoundError,
    DisttrainError,
    InvalidJobError,
    JobExistsError,
    JobFailedError,
    JobNotFoundError,
    LogsUnavailableError,
    ReplicaNotFoundError,
    TensorBoardUnavailableError,
    WaitTimeoutError,
)
from disttrain.kept_log_reader import Attempt
from disttrain_core.api.job import DistTrainJob

__all__ = [
    "ApiError",
    "Attempt",
    "AttemptNotFoundError",
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
    "TensorBoardUnavailableError",
    "WaitTimeoutError",
    "WatchEvent",
]
