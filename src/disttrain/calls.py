"""What the API server's answer means to a script: the errors of `disttrain_kube` as the client's own, each
naming what was asked."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from disttrain.errors import ApiError, DisttrainError, InvalidJobError, JobExistsError, JobNotFoundError
from disttrain_kube import api_errors

Answer = TypeVar("Answer")


def call(request: Callable[[], Answer], *, what: str) -> Answer:
    """The request's answer; its failure as the client's error, named by `what`."""
    try:
        return request()
    except api_errors.KubeApiError as error:
        raise client_error(error, what) from error


def client_error(error: api_errors.KubeApiError, what: str) -> DisttrainError:
    if isinstance(error, api_errors.NotFoundError):
        return JobNotFoundError(f"{what}: not found")
    if isinstance(error, api_errors.ConflictError):
        return JobExistsError(f"{what}: {error.reason}")
    if isinstance(error, api_errors.RefusedError):
        return InvalidJobError(f"{what}: {error.reason}")
    return ApiError(error.status, f"{what}: {error.reason}")
