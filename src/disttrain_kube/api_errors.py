"""What a request to the API server can come to, in one vocabulary for every caller.

Two questions decide what a caller does with a failure: can the same request pass later (retry it),
or never (say so and stop asking)? `TransientApiError` and `RefusedError` answer them; the narrower
classes say why, for callers that act on it (a 404 read as "not there", a 409 as "taken", a 410 as
"list again"). Only the API server's answers and network failures become these errors: anything else
raised while sending is a bug and surfaces as itself, with its traceback.
"""

from __future__ import annotations

import json

from urllib3.exceptions import HTTPError

HTTP_BAD_REQUEST = 400
HTTP_FORBIDDEN = 403
HTTP_NOT_FOUND = 404
HTTP_CONFLICT = 409
HTTP_GONE = 410
HTTP_UNPROCESSABLE = 422
NO_ANSWER = 0  # the status of a request that got no answer: refused, reset, timed out, TLS

# Connection refused or reset, timeouts, TLS, a broken response: urllib3's errors and the OS's.
NETWORK_ERRORS = (HTTPError, OSError)


class KubeApiError(Exception):
    """A request the API server answered with an error, or that got no answer (`status` 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.reason = message


class TransientApiError(KubeApiError):
    """The request may pass later: no answer, 429, 5xx, rights or an API not granted or served yet."""


class NotFoundError(TransientApiError):
    """404: the object (or its namespace) is not there, which a later request may find otherwise."""


class ConflictError(TransientApiError):
    """409: the name is taken, or the object changed since it was read."""


class NotServedError(TransientApiError):
    """A listing the API server does not serve, or not to this caller (404, 403): a CRD not installed
    yet, or rights not granted yet."""


class ResourceExpiredError(TransientApiError):
    """410 Gone: the resourceVersion or continue token asked for is compacted away; a watch lists again."""


class RefusedError(KubeApiError):
    """The API server refuses the request as it is (400, 422, an admission policy, an API it does not
    serve): sending it again cannot help; what it sends must change."""


class LogUnreadableError(KubeApiError):
    """A log request answered with an error: no container to read, or a node that cannot serve it."""


def error_for(status: int, text: str, what: str = "") -> KubeApiError:
    """The error an answer with `status` and body `text` means, its message the API server's own,
    after `what` (the request, as the caller names it)."""
    message = f"{what}: {server_message(text)}" if what else server_message(text)
    if status in (HTTP_BAD_REQUEST, HTTP_UNPROCESSABLE):
        return RefusedError(status, message)
    if status == HTTP_NOT_FOUND:
        return NotFoundError(status, message)
    if status == HTTP_CONFLICT:
        return ConflictError(status, message)
    if status == HTTP_GONE:
        return ResourceExpiredError(status, message)
    return TransientApiError(status, message)


def watch_error(status: int, message: str) -> TransientApiError:
    """What a watch answered with `status` means: list again after a 410, else watch again later."""
    return (ResourceExpiredError if status == HTTP_GONE else TransientApiError)(status, message)


def server_message(text: str) -> str:
    """The API server's own message from a Status body, else the raw text, within 500 characters."""
    try:
        message = str(json.loads(text).get("message", text))
    except (ValueError, AttributeError):
        message = text
    return message.strip()[:500]
