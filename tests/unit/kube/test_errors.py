"""One vocabulary for what a request came to: retry it later, or never; and a watch's ERROR event as its error."""

from __future__ import annotations

import json

import pytest

from disttrain import ApiError as ClientApiError
from disttrain import InvalidJobError, JobExistsError, JobNotFoundError
from disttrain.calls import client_error
from disttrain_kube import api_errors
from disttrain_kube.rest import watch_events


def _status(message: str) -> str:
    return json.dumps({"kind": "Status", "message": message})


@pytest.mark.parametrize(
    ("status", "kind", "transient"),
    [
        (400, api_errors.RefusedError, False),
        (422, api_errors.RefusedError, False),
        (404, api_errors.NotFoundError, True),
        (409, api_errors.ConflictError, True),
        (410, api_errors.ResourceExpiredError, True),
        (403, api_errors.TransientApiError, True),  # rights may be granted meanwhile
        (429, api_errors.TransientApiError, True),
        (503, api_errors.TransientApiError, True),
    ],
)
def test_each_answer_is_one_error_that_says_whether_to_retry(
    status: int, kind: type[api_errors.KubeApiError], transient: bool
) -> None:
    error = api_errors.error_for(status, _status("the server's own words"), "GET /api/v1/pods")
    assert type(error) is kind
    assert isinstance(error, api_errors.TransientApiError) is transient
    assert (error.status, str(error)) == (status, f"{status}: GET /api/v1/pods: the server's own words")


def test_the_client_raises_its_own_errors_for_them_naming_what_was_asked() -> None:
    asked = "DistTrainJob team/mnist"
    not_found = client_error(api_errors.error_for(404, _status("gone")), asked)
    assert isinstance(not_found, JobNotFoundError) and str(not_found) == f"{asked}: not found"
    assert isinstance(client_error(api_errors.error_for(409, _status("exists")), asked), JobExistsError)
    assert isinstance(client_error(api_errors.error_for(422, _status("bad")), asked), InvalidJobError)
    unreachable = client_error(api_errors.TransientApiError(0, "GET /x: connection refused"), asked)
    assert isinstance(unreachable, ClientApiError) and isinstance(unreachable, api_errors.KubeApiError)
    assert (unreachable.status, str(unreachable)) == (0, f"{asked}: GET /x: connection refused")


def test_a_watch_error_event_is_the_error_it_means() -> None:
    added = {"type": "ADDED", "object": {"metadata": {"name": "a"}}}
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}
    events = watch_events(json.dumps(event).encode() for event in (added, gone))
    assert next(events) == added
    with pytest.raises(api_errors.ResourceExpiredError, match="410: too old resource version"):
        next(events)
