"""What the client raises: one class per answer a script acts on, each carrying the cluster's own words."""

from __future__ import annotations

from disttrain_core.api.job import DistTrainJob
from disttrain_kube import api_errors


class DisttrainError(Exception):
    """Every error the client raises."""


class ApiError(DisttrainError, api_errors.KubeApiError):
    """The API server refused the request, or could not be reached (`status` 0): `disttrain_kube`'s error,
    as the client raises it."""


class PodGoneError(ApiError):
    """The pod went between its read and its log's (the job's cleanup took it, say): the log may be kept by
    now, so `Client.logs` reads the replica again rather than raise it."""


class InvalidJobError(DisttrainError, ValueError):
    """The manifest is not a job the cluster accepts: the API server's (or the models') message says why."""


class JobExistsError(DisttrainError):
    """A job of that name already exists in the namespace."""


class JobNotFoundError(DisttrainError, LookupError):
    """No job of that name in the namespace (or it was deleted while the client waited on it)."""


class ReplicaNotFoundError(DisttrainError, LookupError):
    """The job has no such replica; the message lists those it has."""


class AttemptNotFoundError(DisttrainError, LookupError):
    """The replica has no such attempt; the message lists those it has."""


class TensorBoardUnavailableError(DisttrainError):
    """The job runs no TensorBoard (no `spec.tensorboard`), or it is not ready: the message says which and why."""


class LogsUnavailableError(DisttrainError):
    """The replica has no log to read now (no pod, or its container has not started); `follow=True` waits."""


class JobFailedError(DisttrainError):
    """The job failed while the client waited for another condition; `job` is the job as it failed."""

    def __init__(self, job: DistTrainJob, message: str) -> None:
        super().__init__(message)
        self.job = job


class WaitTimeoutError(DisttrainError, TimeoutError):
    """The condition did not hold within the timeout; `job` is the job as last seen."""

    def __init__(self, job: DistTrainJob, message: str) -> None:
        super().__init__(message)
        self.job = job
