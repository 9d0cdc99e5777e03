"""Who is looking: each request's viewer, and the jobs that viewer may see.

Without `--authenticate` the dashboard is one person's (`disttrain dashboard` on their machine, with
their kubeconfig) and every request is theirs. With it, as in a cluster, each request carries a bearer
token (the `Authorization` header, or the cookie the sign-in form sets), which the API server's
TokenReview names; the dashboard then reads as that token, so a viewer sees exactly what their own RBAC
allows, as Headlamp and the Kubernetes Dashboard do, and the dashboard's own ServiceAccount needs no
right to read anything. Reviews are remembered for `REVIEW_SECONDS`, by the token's hash.

Each viewer's open pages share one `JobFeed` (a watch per kind of job, as that viewer); it stops
`LINGER_SECONDS` after that viewer's last page closed.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from starlette.requests import Request

from disttrain import Client, DisttrainError
from disttrain.client import Identity
from disttrain_dashboard.feed import JobFeed

REVIEW_SECONDS = 60.0
REVIEWS_KEPT = 1000
LINGER_SECONDS = 60.0
TOKEN_COOKIE = "disttrain-token"
MAX_TOKEN = 16 * 1024  # a ServiceAccount token is about 1 KB; an OIDC one a few
MAX_FEEDS_PER_VIEWER = 4  # feeds (a watch per kind of job each) one viewer holds at once
MAX_NAMESPACES_ASKED = 200  # namespaces asked about for one viewer who may not list jobs in every one
ASKING_THREADS = 8
T = TypeVar("T")


class TooManyFeedsError(Exception):
    """A viewer asked for another feed while holding MAX_FEEDS_PER_VIEWER with pages open on each."""


@dataclass(frozen=True)
class Viewer:
    """`key` tells viewers apart (their identity); `client` reads with their rights."""

    key: str
    name: str
    client: Client


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    found = token.strip() if scheme.lower() == "bearer" else request.cookies.get(TOKEN_COOKIE, "")
    return found if found and len(found) <= MAX_TOKEN and found.isascii() and found.isprintable() else None


class _Remembered(Generic[T]):
    """Answers the API server gave, by key, for REVIEW_SECONDS; at most REVIEWS_KEPT, the oldest going first."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._answers: OrderedDict[str, tuple[float, T]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, ask: Callable[[], T]) -> T:
        """The answer remembered for `key`, else what `ask` answers now (asked outside the lock)."""
        now = self._clock()
        with self._lock:
            known = self._answers.get(key)
            if known is not None and now - known[0] < REVIEW_SECONDS:
                return known[1]
        answer = ask()
        with self._lock:
            self._answers[key] = (now, answer)
            self._answers.move_to_end(key)
            while len(self._answers) > REVIEWS_KEPT:
                self._answers.popitem(last=False)
        return answer


class Viewers:
    def __init__(self, client: Client, *, authenticate: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self.authenticate = authenticate
        self._reviews: _Remembered[Identity | None] = _Remembered(clock)
        self._owner = Viewer("", "", client)
        self._readable: _Remembered[list[str] | None] = _Remembered(clock)

    def readable_namespaces(self, viewer: Viewer) -> list[str] | None:
        """The namespaces whose jobs the viewer may list, or None where they may list them in every one. The
        names asked about are the cluster's, as the dashboard's own account lists them where viewers sign in
        (or as the viewer may list them), else the viewer's own kubeconfig's; at most MAX_NAMESPACES_ASKED,
        each a SelfSubjectAccessReview as the viewer. Remembered for REVIEW_SECONDS."""
        return self._readable.get(viewer.key, lambda: None if viewer.client.may_list() else self._ask(viewer))

    def _ask(self, viewer: Viewer) -> list[str]:
        try:
            names = (self._client if self.authenticate else viewer.client).namespace_names()
        except DisttrainError:
            names = [viewer.client.namespace]
        names = names[:MAX_NAMESPACES_ASKED]
        with ThreadPoolExecutor(ASKING_THREADS) as pool:
            allowed = list(pool.map(lambda name: viewer.client.may_list(namespace=name), names))
        return [name for name, may in zip(names, allowed, strict=True) if may]

    def of(self, request: Request) -> Viewer | None:
        """The request's viewer; None when it must authenticate and its token names nobody (or it has none).
        A failed TokenReview raises the client's error: the page says so."""
        if not self.authenticate:
            return self._owner
        token = bearer_token(request)
        if token is None:
            return None
        identity = self._identity(token)
        if identity is None:
            return None
        key = "\n".join((identity.username, *sorted(identity.groups)))
        return Viewer(key, identity.username, self._client.as_bearer(token))

    def _identity(self, token: str) -> Identity | None:
        digest = hashlib.sha256(token.encode()).hexdigest()
        return self._reviews.get(digest, lambda: self._client.review_token(token))


@dataclass
class _Held:
    feed: JobFeed
    pages: int = 0
    idle_since: float = field(default_factory=time.monotonic)


class Feeds:
    """One `JobFeed` per viewer and namespace (or all), shared by their pages."""

    def __init__(self, namespace: str | None, clock: Callable[[], float] = time.monotonic) -> None:
        self._namespace = namespace
        self._clock = clock
        self._held: dict[tuple[str, str | None], _Held] = {}
        self._lock = threading.Lock()

    def of(self, viewer: Viewer, namespace: str | None, loop: asyncio.AbstractEventLoop) -> JobFeed:
        """The viewer's feed of one namespace or (None) all, started if it was not; feeds idle past
        LINGER_SECONDS are stopped meanwhile. A dashboard of one namespace feeds that one only. A viewer
        holds at most MAX_FEEDS_PER_VIEWER: for another, their idle ones stop first, the oldest first, and
        with none idle TooManyFeedsError says so."""
        key = (viewer.key, self._namespace or namespace)
        with self._lock:
            self._stop_idle()
            held = self._held.get(key)
            if held is None:
                self._make_room(viewer.key)
                held = self._held[key] = _Held(JobFeed(viewer.client, key[1]))
                held.feed.start(loop)
            held.idle_since = self._clock()
            return held.feed

    def opened(self, feed: JobFeed) -> None:
        with self._lock:
            held = self._holding(feed)
            if held is not None:
                held.pages += 1

    def closed(self, feed: JobFeed) -> None:
        """A page of the feed closed; once the dashboard stopped (`stop`), there is nothing left to count."""
        with self._lock:
            held = self._holding(feed)
            if held is not None:
                held.pages -= 1
                held.idle_since = self._clock()

    def _holding(self, feed: JobFeed) -> _Held | None:
        return next((held for held in self._held.values() if held.feed is feed), None)

    def stop(self) -> None:
        with self._lock:
            for held in self._held.values():
                held.feed.stop()
            self._held.clear()

    def _make_room(self, viewer: str) -> None:
        mine = sorted(
            ((held.idle_since, key) for key, held in self._held.items() if key[0] == viewer and held.pages == 0)
        )
        count = sum(1 for key in self._held if key[0] == viewer)
        for _, key in mine[: max(0, count - MAX_FEEDS_PER_VIEWER + 1)]:
            self._held.pop(key).feed.stop()
            count -= 1
        if count >= MAX_FEEDS_PER_VIEWER:
            raise TooManyFeedsError(f"{MAX_FEEDS_PER_VIEWER} namespaces are open in your pages: close one first")

    def _stop_idle(self) -> None:
        now = self._clock()
        for key, held in list(self._held.items()):
            if held.pages == 0 and now - held.idle_since > LINGER_SECONDS:
                held.feed.stop()
                del self._held[key]
