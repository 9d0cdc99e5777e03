"""One way to send a request with the `kubernetes` client and say what its failure means, in the client's errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from disttrain.errors import ApiError, DisttrainError, InvalidJobError, JobExistsError, JobNotFoundError

NETWORK_ERRORS = (HTTPError, OSError)
HTTP_NOT_FOUND = 404
HTTP_CONFLICT = 409
HTTP_GONE = 410
_REFUSED = (400, 422)


def call(request: Callable[[], Any], *, what: str) -> Any:
    """The request's answer; its failure as the client's error, named by `what`."""
    try:
        return request()
    except ApiException as error:
        raise api_error(error, what) from error
    except NETWORK_ERRORS as error:
        raise ApiError(0, f"{what}: {error}") from error


def read_json(request: Callable[[], Any], *, what: str) -> dict[str, Any]:
    """A request sent with `_preload_content=False`, its answer read as the API server wrote it (camelCase kept)."""
    answer: dict[str, Any] = json.loads(call(request, what=what).data)
    return answer


def api_error(error: ApiException, what: str) -> DisttrainError:
    message = status_message(error)
    if error.status == HTTP_NOT_FOUND:
        return JobNotFoundError(f"{what}: not found")
    if error.status == HTTP_CONFLICT:
        return JobExistsError(f"{what}: {message}")
    if error.status in _REFUSED:
        return InvalidJobError(f"{what}: {message}")
    return ApiError(error.status or 0, f"{what}: {message}")


def status_message(error: ApiException) -> str:
    """The API server's own words from its Status body, else the HTTP reason."""
    try:
        return str(json.loads(error.body or "").get("message") or error.reason)
    except (ValueError, AttributeError):
        return str(error.reason)
