"""Who is looking: each request's viewer, and the jobs that viewer may see.

Without `--authenticate` the dashboard is one person's (`disttrain dashboard` on their machine, with
their kubeconfig) and every request is theirs. With it, as in a cluster, each request carries a bearer
token (the `Authorization` header, or the cookie the sign-in form sets), which the API server's
TokenReview names; the dashboard then reads as that token, so a viewer sees exactly what their own RBAC
allows, as Headlamp and the Kubernetes Dashboard do, and the dashboard's own ServiceAccount needs no
right to read anything. Reviews are remembered for `REVIEW_SECONDS`, by the token's hash.

Each viewer's open pages share one `JobFeed` (a watch per kind of job, as that viewer); it stops
`LINGER_SECONDS` after that viewer's last page closed. Feeds are held in fair shares (`shares`), by the
namespace viewed as far as the viewer may read it: whether they may is an access review as the viewer,
remembered per viewer and namespace, and asked by a few threads for all viewers together.
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
from disttrain_dashboard.shares import EVERY_NAMESPACE, UNREADABLE, Limits

REVIEW_SECONDS = 60.0
REVIEWS_KEPT = 1000
ACCESS_KEPT = 20_000  # answers of whether a viewer may read a namespace: about 200 bytes each
LINGER_SECONDS = 60.0
TOKEN_COOKIE = "disttrain-token"
MAX_TOKEN = 16 * 1024  # a ServiceAccount token is about 1 KB; an OIDC one a few
MAX_FEEDS_PER_VIEWER = 4  # feeds (a watch per kind of job each) one viewer holds at once
# Feeds held at once (each two threads, two watches and a copy of its namespace's jobs): in all, and for
# one namespace viewed, whoever its viewers are.
FEED_LIMITS = Limits(total=64, per_namespace=16, per_viewer=MAX_FEEDS_PER_VIEWER)
MAX_NAMESPACES_ASKED = 200  # namespaces asked about for one viewer who may not list jobs in every one
ASKING_THREADS = 8
T = TypeVar("T")


class TooManyFeedsError(Exception):
    """A viewer asked for another feed past FEED_LIMITS, with pages open on every feed in the way."""


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
    """Answers the API server gave, by key, for REVIEW_SECONDS; at most `kept`, the oldest going first."""

    def __init__(self, clock: Callable[[], float], kept: int = REVIEWS_KEPT) -> None:
        self._clock, self._kept = clock, kept
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
            while len(self._answers) > self._kept:
                self._answers.popitem(last=False)
        return answer


class Viewers:
    def __init__(self, client: Client, *, authenticate: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self.authenticate = authenticate
        self._reviews: _Remembered[Identity | None] = _Remembered(clock)
        self._owner = Viewer("", "", client)
        self._access: _Remembered[bool] = _Remembered(clock, ACCESS_KEPT)
        self._asking = ThreadPoolExecutor(ASKING_THREADS, thread_name_prefix="access-review")

    def may_read(self, viewer: Viewer, namespace: str | None) -> bool:
        """Whether the viewer may list jobs in `namespace` (None: in every one): a SelfSubjectAccessReview as the
        viewer, remembered for REVIEW_SECONDS per viewer and namespace."""
        key = f"{viewer.key}\n{namespace or ''}"
        return self._access.get(key, lambda: viewer.client.may_list(namespace=namespace))

    def share_of(self, viewer: Viewer, namespace: str | None) -> str:
        """The namespace whose share of what the dashboard holds a page of `namespace` (None: every one) takes:
        every namespace the viewer may not read shares one. The dashboard's owner reads as themselves."""
        if self.authenticate and not self.may_read(viewer, namespace):
            return UNREADABLE
        return namespace or EVERY_NAMESPACE

    def readable_namespaces(self, viewer: Viewer) -> list[str] | None:
        """The namespaces whose jobs the viewer may list, or None where they may list them in every one. The
        names asked about are the cluster's, as the dashboard's own account lists them where viewers sign in
        (or as the viewer may list them), else the viewer's own kubeconfig's; at most MAX_NAMESPACES_ASKED,
        each `may_read`, by ASKING_THREADS threads for all viewers together."""
        if self.may_read(viewer, None):
            return None
        try:
            names = (self._client if self.authenticate else viewer.client).namespace_names()
        except DisttrainError:
            names = [viewer.client.namespace]
        names = names[:MAX_NAMESPACES_ASKED]
        allowed = list(self._asking.map(lambda name: self.may_read(viewer, name), names))
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
    share: str  # the namespace whose share it takes (`Viewers.share_of`)
    pages: int = 0
    idle_since: float = field(default_factory=time.monotonic)


class Feeds:
    """One `JobFeed` per viewer and namespace (or all), shared by their pages."""

    def __init__(self, namespace: str | None, clock: Callable[[], float] = time.monotonic) -> None:
        self._namespace = namespace
        self._clock = clock
        self._held: dict[tuple[str, str | None], _Held] = {}
        self._lock = threading.Lock()

    def of(self, viewer: Viewer, namespace: str | None, share: str, loop: asyncio.AbstractEventLoop) -> JobFeed:
        """The viewer's feed of one namespace or (None) all, started if it was not, in the `share` of its
        namespace (`Viewers.share_of`); feeds idle past LINGER_SECONDS are stopped meanwhile. A dashboard of
        one namespace feeds that one only. Where a new feed would pass FEED_LIMITS, idle feeds in its way
        stop first, the oldest first, and with none idle TooManyFeedsError says which limit stands."""
        key = (viewer.key, self._namespace or namespace)
        with self._lock:
            self._stop_idle()
            held = self._held.get(key)
            if held is None:
                self._make_room(viewer.key, share)
                held = self._held[key] = _Held(JobFeed(viewer.client, key[1]), share)
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

    def _make_room(self, viewer: str, share: str) -> None:
        """Stop idle feeds until one more for `viewer` in `share` passes no limit, or say which limit stands."""
        scopes: list[tuple[Callable[[tuple[str, str | None], _Held], bool], int]] = [
            (lambda key, _: key[0] == viewer, FEED_LIMITS.per_viewer),
            (lambda _, held: held.share == share, FEED_LIMITS.per_namespace),
            (lambda _, __: True, FEED_LIMITS.total),
        ]
        for holds, limit in scopes:
            while len(within := [key for key, held in self._held.items() if holds(key, held)]) >= limit:
                idle = sorted((self._held[key].idle_since, key) for key in within if self._held[key].pages == 0)
                if not idle:
                    raise TooManyFeedsError(f"{self._refusal(viewer, share)} open in pages: close one, or try later")
                self._held.pop(idle[0][1]).feed.stop()

    def _refusal(self, viewer: str, share: str) -> str | None:
        viewers = sum(1 for key in self._held if key[0] == viewer)
        shared = sum(1 for held in self._held.values() if held.share == share)
        return FEED_LIMITS.refusal(len(self._held), shared, viewers, share)

    def _stop_idle(self) -> None:
        now = self._clock()
        for key, held in list(self._held.items()):
            if held.pages == 0 and now - held.idle_since > LINGER_SECONDS:
                held.feed.stop()
                del self._held[key]
