"""The dashboard's pages, on Starlette: every job, one job, a replica's log, and their live updates.

Only GET routes exist, and every API call is a read through the client, so nothing a viewer does here
can change the cluster. Pages are Jinja2 templates with autoescaping, and the scripts write text
nodes only: a job's name or message is always shown as text. Updates reach an open page as
server-sent events from the shared watch (`feed.JobFeed`); no page polls the API.
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

from disttrain import Client, DisttrainError, DistTrainJob, JobEvent
from disttrain.errors import ApiError, JobNotFoundError, LogsUnavailableError
from disttrain.logs import replicas
from disttrain.resources import RESOURCES, JobKind
from disttrain.summary import age, evaluation_text, pod_state, progress_text, replicas_text
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from disttrain_operator.api.status import JobPhase
from disttrain_operator.core.kueue import queue_name
from disttrain_operator.dashboard.curves import curves
from disttrain_operator.dashboard.feed import Change, JobFeed

LOG_LINES = 2000  # a log page shows the last lines; `disttrain jobs logs` reads the whole of it
HTTP_FORBIDDEN = 403
PHASES = [phase.value for phase in JobPhase]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_HERE = files("disttrain_operator.dashboard")
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
        "phase": phase_of(job),
        "ready": job.status.ready or "-",
        "restarts": str(job.status.restart_count),
        "progress": progress_text(job),
        "age": age(job.metadata.creation_timestamp, now),
        "queue": queue_name(job) or "-",
    }


def _now() -> datetime:
    return datetime.now(UTC)


def phase_of(job: DistTrainJob) -> str:
    """The phase the operator wrote; Pending for a job it has not written yet."""
    return job.status.phase.value if job.status.phase else JobPhase.PENDING.value


def _shown(job: DistTrainJob, namespace: str, phase: str) -> bool:
    return (not namespace or job.metadata.namespace == namespace) and (not phase or phase_of(job) == phase)


def create_app(client: Client, namespace: str | None) -> Starlette:
    """The dashboard over `client`'s rights, for one namespace or (None) all of them."""
    feed = JobFeed(client, namespace)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        feed.start(asyncio.get_running_loop())
        yield
        feed.stop()

    async def job_list(request: Request) -> Response:
        chosen_namespace = request.query_params.get("namespace", "")
        chosen_phase = request.query_params.get("phase", "")
        jobs = feed.snapshot()
        now = _now()
        rows = [
            row(job, now)
            for job in sorted(jobs, key=lambda job: (job.metadata.namespace, job.metadata.name, job.kind))
            if _shown(job, chosen_namespace, chosen_phase)
        ]
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
            "scope": f"namespace {namespace}" if namespace else "every namespace",
            "listed": feed.listed(),
        }
        return templates.TemplateResponse(request, "jobs.html", context)

    async def list_changes(request: Request) -> EventSourceResponse:
        chosen_namespace = request.query_params.get("namespace", "")
        chosen_phase = request.query_params.get("phase", "")

        def message(change: Change) -> dict[str, str] | None:
            if chosen_namespace and change.job.metadata.namespace != chosen_namespace:
                return None
            gone = change.type == "DELETED" or not _shown(change.job, chosen_namespace, chosen_phase)
            shown = row(change.job, _now())
            return {"event": "removed" if gone else "job", "data": json.dumps(shown)}

        return EventSourceResponse(_changes(feed, message))

    async def job_page(request: Request) -> Response:
        return await _job_view(request, "job.html")

    async def job_panel(request: Request) -> Response:
        return await _job_view(request, "job_panel.html")

    async def _job_view(request: Request, template: str) -> Response:
        path = _job_path(request)
        try:
            context = await asyncio.to_thread(_job_context, client, path)
        except DisttrainError as error:
            return _refusal(request, error, str(path))
        return templates.TemplateResponse(request, template, context)

    async def job_changes(request: Request) -> EventSourceResponse:
        path = _job_path(request)

        def message(change: Change) -> dict[str, str] | None:
            job = change.job
            if JobPath(job.kind, job.metadata.namespace, job.metadata.name) != path:
                return None
            return {"event": "deleted" if change.type == "DELETED" else "changed", "data": job.metadata.name}

        return EventSourceResponse(_changes(feed, message))

    async def replica_log(request: Request) -> Response:
        path = _job_path(request)
        replica = request.path_params["replica"]
        attempt_text = request.query_params.get("attempt", "")
        attempt = int(attempt_text) if attempt_text.isdigit() else None
        try:
            context = await asyncio.to_thread(_log_context, client, path, replica, attempt)
        except DisttrainError as error:
            return _refusal(request, error, f"the log of {replica} of {path}")
        return templates.TemplateResponse(request, "log.html", context)

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    job_path = "/jobs/{kind}/{namespace}/{name}"
    routes = [
        Route("/", job_list),
        Route("/changes", list_changes),
        Route(job_path, job_page),
        Route(f"{job_path}/panel", job_panel),
        Route(f"{job_path}/changes", job_changes),
        Route(f"{job_path}/logs/{{replica}}", replica_log),
        Route("/healthz", healthz),
        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(SecurityHeaders)
    return app


@dataclass(frozen=True)
class JobPath:
    """The job a page is about, from its address."""

    kind: JobKind
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def _job_path(request: Request) -> JobPath:
    kind = request.path_params["kind"]
    if kind not in RESOURCES:
        raise HTTPException(404, f"{kind} is not a kind of job: DistTrainJob or TFJob")
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
        while True:
            found = message(await queue.get())
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
    name, namespace = job.metadata.name, job.metadata.namespace
    return {
        "job": job,
        "phase": phase_of(job),
        "replicas": replicas_text(job),
        "progress": progress_text(job),
        "evaluation": evaluation_text(job),
        "queue": queue_name(job) or "-",
        "age": age(job.metadata.creation_timestamp, now),
        "curves": curves(status.progress_history),
        "pods": [
            {"name": pod["metadata"]["name"], "state": pod_state(pod), "node": pod["spec"].get("nodeName", "-")}
            for pod in sorted(pods, key=lambda pod: str(pod["metadata"]["name"]))
        ],
        "events": sorted(events, key=lambda event: event.time or _EPOCH, reverse=True),  # the newest first
        "log_replicas": replicas(job),
        "tensorboard_command": f"disttrain jobs tensorboard {name} -n {namespace}"
        + (" --kind TFJob" if job.kind == "TFJob" else ""),
    }


def _log_context(client: Client, path: JobPath, replica: str, attempt: int | None) -> dict[str, Any]:
    name, namespace, kind = path.name, path.namespace, path.kind
    attempts = client.attempts(name, replica, namespace=namespace, kind=kind)
    try:
        lines = list(client.logs(name, replica, attempt=attempt, namespace=namespace, tail=LOG_LINES, kind=kind))
        note = ""
    except LogsUnavailableError as error:  # a replica that has not started yet
        lines, note = [], str(error)
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
