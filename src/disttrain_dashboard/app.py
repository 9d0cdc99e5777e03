"""The dashboard's pages, on Starlette: every job, one job, a replica's log, and their live updates.

Every API call is a read through the client, as the viewer (viewers.py), so nothing a viewer does here
can change the cluster; the only POSTs sign a viewer in and out. A GET starts nothing either: logs kept on
a checkpoint volume, which take a pod to read, are left to `disttrain jobs logs`. Pages are Jinja2
templates with autoescaping, and the scripts write text nodes only: a job's name or message is always
shown as text. Updates reach an open page as server-sent events from its viewer's shared watch
(`feed.JobFeed`); no page polls the API.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.resources import files
from typing import Any

from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from disttrain import Client, DisttrainError, DistTrainJob, JobEvent
from disttrain.errors import ApiError, JobNotFoundError, LogsUnavailableError
from disttrain.job_kinds import RESOURCES, JobKind
from disttrain.logs import replicas
from disttrain_core.api.status import JobPhase
from disttrain_core.summary import (
    age,
    checkpoint_text,
    eta_text,
    evaluation_text,
    phase_text,
    pod_state,
    progress_text,
    queue_text,
    ready_text,
    replicas_text,
    restarts_text,
    tensorboard_command,
)
from disttrain_dashboard.curves import curves
from disttrain_dashboard.feed import Change, JobFeed
from disttrain_dashboard.shares import Limits, Shares
from disttrain_dashboard.viewers import MAX_TOKEN, TOKEN_COOKIE, Feeds, TooManyFeedsError, Viewer, Viewers

LOG_LINES = 2000  # a log page shows the last lines; `disttrain jobs logs` reads the whole of it
# Event streams (open pages) at once: in all, for one namespace viewed, and one viewer's (a token of any pod's
# ServiceAccount names a viewer, and a tenant makes as many as they like: `shares`).
STREAM_LIMITS = Limits(total=200, per_namespace=50, per_viewer=16)
MAX_BODY = 2 * MAX_TOKEN  # bytes of a request's body: the sign-in form, a token and its name
SEND_TIMEOUT = 10.0  # seconds a page may take to accept one event
FIRST_LISTING_SECONDS = 5.0  # a list page waits this long at most for its viewer's feed to list
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")
HTTP_OK = 200
HTTP_SEE_OTHER = 303
HTTP_BAD_REQUEST = 400
HTTP_UNAUTHORIZED = 401
HTTP_FORBIDDEN = 403
HTTP_NOT_FOUND = 404
HTTP_TOO_LARGE = 413
HTTP_UNAVAILABLE = 503
PHASES = [phase.value for phase in JobPhase]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_HERE = files("disttrain_dashboard")
templates = Jinja2Templates(directory=str(_HERE / "templates"))

# No inline script or style runs: what a hostile string might smuggle into the page would not execute.
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; object-src 'none'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class SecurityHeaders:
    """ASGI middleware: the headers above on every response, streamed ones included."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers if scope["type"] == "http" else send)


def row(job: DistTrainJob, now: datetime) -> dict[str, str]:
    """A job's line on the list page, as text (the page's script puts each value in a text node)."""
    return {
        "key": f"{job.kind}/{job.metadata.namespace}/{job.metadata.name}",
        "href": f"/jobs/{job.kind}/{job.metadata.namespace}/{job.metadata.name}",
        "kind": job.kind,
        "namespace": job.metadata.namespace,
        "name": job.metadata.name,
        "phase": phase_text(job),
        "ready": ready_text(job),
        "restarts": restarts_text(job),
        "progress": progress_text(job),
        "age": age(job.metadata.creation_timestamp, now),
        "queue": queue_text(job),
    }


def _now() -> datetime:
    return datetime.now(UTC)


def _shown(job: DistTrainJob, namespace: str, phase: str) -> bool:
    return (not namespace or job.metadata.namespace == namespace) and (not phase or phase_text(job) == phase)


class Pages:
    """The dashboard's handlers, over its viewers and their feeds."""

    def __init__(self, client: Client, namespace: str | None, *, authenticate: bool) -> None:
        self.namespace = namespace
        self.authenticate = authenticate
        self.viewers = Viewers(client, authenticate=authenticate)
        self.feeds = Feeds(namespace)
        self.streams = Shares(STREAM_LIMITS)
        self.scope = f"namespace {namespace}" if namespace else "every namespace"

    def viewer_of(self, request: Request) -> Viewer:
        """The request's viewer; HTTPException 401 (the sign-in page) for a request that names nobody."""
        viewer = self.viewers.of(request)
        if viewer is None:
            raise HTTPException(HTTP_UNAUTHORIZED, "sign in")
        return viewer

    async def job_list(self, request: Request) -> Response:
        viewer = await asyncio.to_thread(self.viewer_of, request)
        chosen_namespace = request.query_params.get("namespace", "")
        chosen_phase = request.query_params.get("phase", "")
        readable = None
        if not chosen_namespace and not self.namespace:
            readable = await asyncio.to_thread(self.viewers.readable_namespaces, viewer)
            if readable is not None and len(readable) == 1:  # the one namespace the viewer may read
                return RedirectResponse(f"/?namespace={readable[0]}", status_code=HTTP_SEE_OTHER)
            if readable is not None:
                return self._choose_namespace(request, viewer, readable)
        share = await asyncio.to_thread(self.viewers.share_of, viewer, chosen_namespace or self.namespace)
        try:
            feed = self.feeds.of(viewer, chosen_namespace or None, share, asyncio.get_running_loop())
        except TooManyFeedsError as error:
            return PlainTextResponse(str(error), status_code=HTTP_UNAVAILABLE)
        await asyncio.to_thread(feed.wait_listed, FIRST_LISTING_SECONDS)
        jobs = feed.snapshot()
        now = _now()
        rows = [
            row(job, now)
            for job in sorted(jobs, key=lambda job: (job.metadata.namespace, job.metadata.name, job.kind))
            if _shown(job, chosen_namespace, chosen_phase)
        ]
        namespace = self.namespace
        namespaces = sorted({job.metadata.namespace for job in jobs} | ({namespace} if namespace else set()))
        notice = ""
        if namespace and chosen_namespace and chosen_namespace != namespace:
            notice = f"This dashboard shows namespace {namespace} only; {chosen_namespace} is not watched."
        context = {
            "rows": rows,
            "namespaces": namespaces,
            "phases": PHASES,
            "chosen_namespace": chosen_namespace,
            "chosen_phase": chosen_phase,
            "problems": sorted(feed.problems().values()),
            "notice": notice,
            "scope": f"namespace {chosen_namespace}" if chosen_namespace and not namespace else self.scope,
            "viewer": viewer.name,
            "listed": feed.listed(),
        }
        return templates.TemplateResponse(request, "jobs.html", context)

    def _choose_namespace(self, request: Request, viewer: Viewer, readable: list[str]) -> Response:
        """The list page of a viewer who may not list jobs in every namespace: the ones they may, to choose."""
        notice = (
            f"You may read the jobs of {len(readable)} namespaces: choose one."
            if readable
            else "You may not list jobs in any namespace: ask for the disttrain-viewer role in yours."
        )
        context = {
            "rows": [],
            "namespaces": readable,
            "phases": PHASES,
            "chosen_namespace": "",
            "chosen_phase": "",
            "problems": [],
            "notice": notice,
            "scope": "the namespaces you may read",
            "viewer": viewer.name,
            "listed": True,
            "choices": readable,
        }
        return templates.TemplateResponse(request, "jobs.html", context)

    async def stream(
        self, request: Request, namespace: str, message: Callable[[Change], dict[str, str] | None]
    ) -> Response:
        """Server-sent events of the viewer's feed of `namespace` (or all), while the page is open: within
        STREAM_LIMITS, in the share of the namespace viewed (`Viewers.share_of`), and a page that does not take
        an event within SEND_TIMEOUT is let go."""
        viewer = await asyncio.to_thread(self.viewer_of, request)
        share = await asyncio.to_thread(self.viewers.share_of, viewer, namespace or self.namespace)
        refused = self.streams.take(viewer.key, share)
        if refused is not None:
            message_text = f"too many open pages ({refused}): try again later"
            return PlainTextResponse(message_text, status_code=HTTP_UNAVAILABLE)
        try:
            feed = self.feeds.of(viewer, namespace or None, share, asyncio.get_running_loop())
        except TooManyFeedsError as error:
            self.streams.give_back(viewer.key, share)
            return PlainTextResponse(str(error), status_code=HTTP_UNAVAILABLE)
        self.feeds.opened(feed)

        async def changes() -> AsyncIterator[dict[str, str]]:
            try:
                async for found in _changes(feed, message):
                    yield found
            finally:
                self.feeds.closed(feed)
                self.streams.give_back(viewer.key, share)

        return EventSourceResponse(changes(), send_timeout=SEND_TIMEOUT)

    async def list_changes(self, request: Request) -> Response:
        chosen_namespace = request.query_params.get("namespace", "")
        chosen_phase = request.query_params.get("phase", "")

        def message(change: Change) -> dict[str, str] | None:
            if chosen_namespace and change.job.metadata.namespace != chosen_namespace:
                return None
            gone = change.type == "DELETED" or not _shown(change.job, chosen_namespace, chosen_phase)
            shown = row(change.job, _now())
            return {"event": "removed" if gone else "job", "data": json.dumps(shown)}

        return await self.stream(request, chosen_namespace, message)

    async def job_page(self, request: Request) -> Response:
        return await self._job_view(request, "job.html")

    async def job_panel(self, request: Request) -> Response:
        return await self._job_view(request, "job_panel.html")

    async def _job_view(self, request: Request, template: str) -> Response:
        path = _job_path(request, self.namespace)
        viewer = await asyncio.to_thread(self.viewer_of, request)
        try:
            context = await asyncio.to_thread(_job_context, viewer.client, path)
        except DisttrainError as error:
            return _refusal(request, error, str(path))
        return templates.TemplateResponse(request, template, {**context, "scope": self.scope})

    async def job_changes(self, request: Request) -> Response:
        path = _job_path(request, self.namespace)

        def message(change: Change) -> dict[str, str] | None:
            job = change.job
            if JobPath(job.kind, job.metadata.namespace, job.metadata.name) != path:
                return None
            return {"event": "deleted" if change.type == "DELETED" else "changed", "data": job.metadata.name}

        return await self.stream(request, path.namespace, message)

    async def replica_log(self, request: Request) -> Response:
        path = _job_path(request, self.namespace)
        replica = request.path_params["replica"]
        attempt = _attempt(request.query_params.get("attempt", ""))
        viewer = await asyncio.to_thread(self.viewer_of, request)
        try:
            context = await asyncio.to_thread(_log_context, viewer.client, path, replica, attempt)
        except DisttrainError as error:
            return _refusal(request, error, f"the log of {replica} of {path}")
        return templates.TemplateResponse(request, "log.html", {**context, "scope": self.scope})

    async def sign_in_page(self, request: Request) -> Response:
        return _sign_in(request, "", HTTP_OK)

    async def sign_in(self, request: Request) -> Response:
        """The token a viewer pasted, checked with a TokenReview, kept in a cookie of this site (sent over
        HTTPS only, where the page came over HTTPS: `_over_https`)."""
        form = await request.form(max_files=0, max_fields=1, max_part_size=MAX_TOKEN)
        token = str(form.get("token") or "").strip()
        signed_in = None
        if token:
            probe = Request({"type": "http", "headers": [(b"authorization", f"Bearer {token}".encode())]})
            signed_in = await asyncio.to_thread(self.viewers.of, probe)
        if signed_in is None:
            return _sign_in(request, "That token names nobody the cluster knows.", HTTP_UNAUTHORIZED)
        answer = RedirectResponse("/", status_code=HTTP_SEE_OTHER)
        answer.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict", path="/", secure=_over_https(request))
        return answer

    async def sign_out(self, request: Request) -> Response:
        answer = RedirectResponse("/signin" if self.authenticate else "/", status_code=HTTP_SEE_OTHER)
        answer.delete_cookie(TOKEN_COOKIE, path="/")
        return answer

    async def unauthorized(self, request: Request, error: Exception) -> Response:
        return _sign_in(request, "", HTTP_UNAUTHORIZED)


async def healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


def create_app(
    client: Client,
    namespace: str | None,
    *,
    authenticate: bool = False,
    allowed_hosts: Sequence[str] = LOCAL_HOSTS,
) -> Starlette:
    """The dashboard over `client`'s rights (or, with `authenticate`, each viewer's own), for one namespace or
    (None) all of them, answering only requests addressed to `allowed_hosts` ("*": any)."""
    pages = Pages(client, namespace, authenticate=authenticate)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        pages.feeds.stop()

    job_path = "/jobs/{kind}/{namespace}/{name}"
    routes = [
        Route("/", pages.job_list),
        Route("/changes", pages.list_changes),
        Route(job_path, pages.job_page),
        Route(f"{job_path}/panel", pages.job_panel),
        Route(f"{job_path}/changes", pages.job_changes),
        Route(f"{job_path}/logs/{{replica}}", pages.replica_log),
        Route("/signin", pages.sign_in_page, methods=["GET"]),
        Route("/signin", pages.sign_in, methods=["POST"]),
        Route("/signout", pages.sign_out, methods=["POST"]),
        Route("/healthz", healthz),
        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTP_UNAUTHORIZED: pages.unauthorized})
    app.add_middleware(SecurityHeaders)
    app.add_middleware(BodyLimit, limit=MAX_BODY)
    app.add_middleware(SameOrigin)
    app.add_middleware(HostCheck, allowed=tuple(allowed_hosts))
    return app


def _sign_in(request: Request, message: str, status: int) -> Response:
    return templates.TemplateResponse(request, "signin.html", {"message": message}, status_code=status)


def _over_https(request: Request) -> bool:
    """The viewer's browser reached the dashboard over HTTPS: directly, or through a proxy that ended TLS, as its
    form's Origin or the proxy's X-Forwarded-Proto says. A forged header only makes the forger's cookie Secure."""
    origin = request.headers.get("origin", "")
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or origin.startswith("https://") or forwarded == "https"


def _attempt(text: str) -> int | None:
    """`?attempt=` as a number of at most 9 ASCII digits; anything else is no attempt (the latest)."""
    return int(text) if len(text) <= 9 and text.isascii() and text.isdigit() else None


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes is refused (413) before it is read whole, whether
    it says its length or streams in chunks; nothing the dashboard accepts (a sign-in) is larger."""

    def __init__(self, app: App, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"0")
        if not length.isdigit() or int(length) > self.limit:
            await PlainTextResponse("request body too large", status_code=HTTP_TOO_LARGE)(scope, receive, send)
            return
        received = 0

        async def bounded() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:
                raise HTTPException(HTTP_TOO_LARGE, "request body too large")
            return message

        await self.app(scope, bounded, send)


class SameOrigin:
    """ASGI middleware: a POST (sign in, sign out) from a page of another site is refused. Browsers say where
    a request comes from in `Sec-Fetch-Site` (`same-origin`, or `none` for the viewer's own typing); one that
    does not says it in `Origin`, which must name the host the request is addressed to (with this site's
    `Referrer-Policy: no-referrer` a browser sends `Origin: null` for its own forms, so that counts only
    beside `Sec-Fetch-Site`). A client that is no browser sends neither, and no page can make it post."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not _same_origin(dict(scope["headers"])):
            refusal = PlainTextResponse("a page of another site may not post here", status_code=HTTP_FORBIDDEN)
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _same_origin(headers: Mapping[bytes, bytes]) -> bool:
    site = headers.get(b"sec-fetch-site")
    if site is not None:
        return site in (b"same-origin", b"none")
    origin = headers.get(b"origin")
    if origin is None:
        return True
    return origin.decode("latin-1").partition("://")[2] == headers.get(b"host", b"").decode("latin-1")


class HostCheck:
    """ASGI middleware: a request addressed to a host outside the allow-list is refused (a page of another
    site must not reach this one by DNS rebinding); the kubelet's probes of /healthz name the pod's IP."""

    def __init__(self, app: App, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] != "/healthz" and "*" not in self.allowed:
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            if _host_name(host) not in self.allowed:
                await PlainTextResponse("this host is not served here", status_code=HTTP_BAD_REQUEST)(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)


def _host_name(host: str) -> str:
    """A Host header without its port (`[::1]:8080` is `[::1]`)."""
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0] if ":" in host else host


@dataclass(frozen=True)
class JobPath:
    """The job a page is about, from its address."""

    kind: JobKind
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def _job_path(request: Request, namespace: str | None) -> JobPath:
    """The page's job; 404 for a kind that is no job, or a namespace outside the dashboard's."""
    kind = request.path_params["kind"]
    if kind not in RESOURCES:
        raise HTTPException(HTTP_NOT_FOUND, f"{kind} is not a kind of job: DistTrainJob or TFJob")
    if namespace and request.path_params["namespace"] != namespace:
        raise HTTPException(HTTP_NOT_FOUND, f"this dashboard shows namespace {namespace} only")
    return JobPath(RESOURCES[kind].kind, request.path_params["namespace"], request.path_params["name"])


async def _changes(feed: JobFeed, message: Callable[[Change], dict[str, str] | None]) -> AsyncIterator[dict[str, str]]:
    """Each change the page asks about, as one server-sent event, for as long as the page is open; first
    each job as it is now, since the page was drawn a moment before it subscribed."""
    queue = feed.subscribe()
    try:
        for job in feed.snapshot():
            found = message(Change("MODIFIED", job))
            if found is not None:
                yield found
        while (change := await queue.get()) is not None:  # None: the page fell behind; it reconnects
            found = message(change)
            if found is not None:
                yield found
    finally:
        feed.unsubscribe(queue)


def _job_context(client: Client, path: JobPath) -> dict[str, Any]:
    job = client.get(path.name, namespace=path.namespace, kind=path.kind)
    return job_page(job, client.pods(job), client.events(job), _now())


def job_page(
    job: DistTrainJob, pods: Sequence[Mapping[str, Any]], events: Sequence[JobEvent], now: datetime
) -> dict[str, Any]:
    """What a job's page shows, from the job, its pods and its Events."""
    status = job.status
    return {
        "job": job,
        "phase": phase_text(job),
        "replicas": replicas_text(job),
        "restarts": restarts_text(job),
        "progress": progress_text(job),
        "eta": eta_text(job),
        "checkpoint": checkpoint_text(job),
        "evaluation": evaluation_text(job),
        "queue": queue_text(job),
        "age": age(job.metadata.creation_timestamp, now),
        "curves": curves(status.progress_history),
        "pods": [
            {"name": pod["metadata"]["name"], "state": pod_state(pod), "node": pod["spec"].get("nodeName", "-")}
            for pod in sorted(pods, key=lambda pod: str(pod["metadata"]["name"]))
        ],
        "events": sorted(events, key=lambda event: event.time or _EPOCH, reverse=True),  # the newest first
        "log_replicas": replicas(job),
        "tensorboard_command": tensorboard_command(job),
    }


def _log_context(client: Client, path: JobPath, replica: str, attempt: int | None) -> dict[str, Any]:
    name, namespace, kind = path.name, path.namespace, path.kind
    try:  # a GET starts no pod: logs kept on a checkpoint volume are left to `disttrain jobs logs`
        attempts = client.attempts(name, replica, namespace=namespace, kind=kind, start_readers=False)
        lines = list(
            client.logs(
                name, replica, attempt=attempt, namespace=namespace, tail=LOG_LINES, kind=kind, start_readers=False
            )
        )
        note = ""
    except LogsUnavailableError as error:  # a replica that has not started yet, or whose logs are on the volume
        attempts, lines, note = [], [], str(error)
    return {
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "replica": replica,
        "attempts": attempts,
        "attempt": attempt,
        "text": "\n".join(lines),
        "note": note,
        "limit": LOG_LINES,
    }


def _refusal(request: Request, error: DisttrainError, what: str) -> Response:
    """The API server's answer in words, in the page's frame: a viewer who may not read a namespace is
    told so, and what to ask for."""
    status = error.status if isinstance(error, ApiError) and error.status else 502
    if isinstance(error, JobNotFoundError):
        status = 404
    advice = (
        "Your account (or the dashboard's) may not read it: ask for a Role with get, list and watch on"
        " DistTrainJobs, TFJobs, pods, pods/log, events and configmaps in that namespace."
        if status == HTTP_FORBIDDEN
        else ""
    )
    context = {"what": what, "message": str(error), "advice": advice}
    return templates.TemplateResponse(request, "refused.html", context, status_code=status)
