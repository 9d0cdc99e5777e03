"""Who the dashboard answers, without a cluster (the browser test proves the same against one): a viewer
named by a token the TokenReview accepts, and only for the hosts and namespace it serves; its event streams
are bounded."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from starlette.testclient import TestClient

from disttrain import Client, JobNotFoundError
from disttrain.client import Identity
from disttrain_dashboard.app import MAX_BODY, Pages, _attempt, create_app
from disttrain_dashboard.feed import QUEUE_LIMIT, Change, JobFeed
from disttrain_dashboard.shares import UNREADABLE, Limits, Shares
from disttrain_dashboard.viewers import (
    FEED_LIMITS,
    MAX_FEEDS_PER_VIEWER,
    TOKEN_COOKIE,
    Feeds,
    TooManyFeedsError,
    Viewer,
)

GOOD = "a-token-the-cluster-knows"
FORM = "application/x-www-form-urlencoded"


class _Cluster:
    """What the dashboard asks of its client: whom a token names, and reads as that token (none here)."""

    namespace = "default"
    readable: tuple[str, ...] | None = None  # the namespaces a viewer may list jobs in; None: every one

    def __init__(self, token: str | None = None) -> None:
        self.token = token
        self.bearers: list[str] = []

    def review_token(self, token: str) -> Identity | None:
        return Identity("system:serviceaccount:team-a:viewer", ("system:serviceaccounts",)) if token == GOOD else None

    def as_bearer(self, token: str, namespace: str | None = None) -> _Cluster:
        self.bearers.append(token)
        return _Cluster(token)

    def watch(self, *, stop: threading.Event, on_listed: Callable[[], None], **_: Any) -> Iterator[Any]:
        on_listed()  # no jobs here
        stop.wait(10)
        return iter(())

    def get(self, name: str, **_: Any) -> Any:
        raise JobNotFoundError(f"DistTrainJob {name}: not found")

    def may_list(self, kind: str = "DistTrainJob", *, namespace: str | None = None) -> bool:
        return self.readable is None or namespace in self.readable

    def namespace_names(self) -> list[str]:
        return ["kube-system", "team-a", "team-b", "team-c"]


def _client(namespace: str | None = None, *, authenticate: bool = True) -> tuple[TestClient, _Cluster]:
    cluster = _Cluster()
    app = create_app(cast(Client, cluster), namespace, authenticate=authenticate, allowed_hosts=("testserver",))
    return TestClient(app, follow_redirects=False), cluster


def test_without_a_token_the_dashboard_says_how_to_get_one() -> None:
    client, cluster = _client()
    with client:
        for address in ("/", "/jobs/DistTrainJob/team-a/mnist", "/changes"):
            answer = client.get(address)
            assert (answer.status_code, "kubectl create token" in answer.text) == (401, True), address
        assert client.get("/", headers={"Authorization": "Bearer forged"}).status_code == 401
        assert client.get("/", headers={"Authorization": f"Bearer {GOOD}"}).status_code == 200
    assert cluster.bearers == [GOOD]  # the page was read as the viewer


def test_a_viewer_signs_in_once_and_the_cookie_stays_on_this_site() -> None:
    client, _ = _client()
    with client:
        refused = client.post("/signin", data={"token": "forged"})
        assert refused.status_code == 401 and TOKEN_COOKIE not in refused.cookies
        signed_in = client.post("/signin", data={"token": GOOD})
        assert signed_in.status_code == 303
        cookie = signed_in.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert client.get("/").status_code == 200  # the cookie now names the viewer


def test_a_request_for_another_host_is_refused_but_probes_are_answered() -> None:
    client, _ = _client(authenticate=False)
    with client:
        assert client.get("/", headers={"Host": "attacker.example"}).status_code == 400
        assert client.get("/healthz", headers={"Host": "10.0.0.7:8080"}).status_code == 200
        assert client.get("/").status_code == 200


def test_a_dashboard_of_one_namespace_serves_no_page_of_another() -> None:
    client, _ = _client("team-a", authenticate=False)
    with client:
        for address in ("/jobs/DistTrainJob/team-b/x", "/jobs/DistTrainJob/team-b/x/logs/worker-0", "/jobs/TFJob/b/x"):
            assert client.get(address).status_code == 404, address
        assert client.get("/jobs/DistTrainJob/team-a/x").status_code == 404  # asked: it does not exist


@pytest.mark.parametrize(("text", "attempt"), [("2", 2), ("\u00b2", None), ("9" * 30, None), ("-1", None), ("", None)])
def test_an_attempt_is_a_bounded_number_or_the_latest(text: str, attempt: int | None) -> None:
    assert _attempt(text) == attempt


def test_event_streams_are_bounded_in_number_and_in_what_one_may_lag() -> None:
    streams = Shares(Limits(total=5, per_namespace=3, per_viewer=2))
    assert streams.take("a", "team-a") is None and streams.take("a", "team-b") is None
    assert streams.take("a", "team-c") == "you hold 2 already"  # one viewer's share, in every namespace
    assert streams.take("b", "team-a") is None and streams.take("b", "team-a") is None
    assert streams.take("c", "team-a") == "viewers of team-a hold 3 already"  # one namespace's
    assert streams.take("c", "team-c") is None and streams.take("d", "team-d") == "the dashboard holds 5 already"
    streams.give_back("a", "team-b")
    assert streams.take("d", "team-d") is None and streams.take("a", "team-b") is not None

    async def lagging() -> list[Change | None]:
        feed = JobFeed(cast(Client, _Cluster()), "team-a")
        queue = feed.subscribe()
        change = Change("MODIFIED", cast(Any, None))
        for _ in range(QUEUE_LIMIT + 5):
            feed._offer(queue, change)
        return [queue.get_nowait() for _ in range(queue.qsize())]

    received = asyncio.run(lagging())
    assert len(received) == QUEUE_LIMIT + 1 and received[-1] is None  # the end of a page that fell behind


def test_a_request_body_is_bounded_before_it_is_read_whole() -> None:
    """An unauthenticated sign-in with a huge form (of empty fields) is refused at once, whether it says its
    length or streams in chunks."""
    client, _ = _client()
    with client:
        huge = b"&" * (MAX_BODY + 1)
        assert client.post("/signin", content=huge, headers={"Content-Type": FORM}).status_code == 413

        def chunks() -> Iterator[bytes]:
            for _ in range(64):
                yield b"&" * 65536

        assert client.post("/signin", content=chunks(), headers={"Content-Type": FORM}).status_code == 413
        assert client.post("/signin", data={"token": GOOD}).status_code == 303


def test_a_sign_in_from_another_site_is_refused_and_the_cookie_is_secure_over_https_or_behind_a_tls_proxy() -> None:
    client, _ = _client()
    with client:
        forged = client.post("/signin", data={"token": GOOD}, headers={"Origin": "https://attacker.example"})
        assert forged.status_code == 403
        for site in ("cross-site", "same-site"):
            refused = client.post("/signin", data={"token": GOOD}, headers={"Sec-Fetch-Site": site, "Origin": "null"})
            assert refused.status_code == 403
        assert client.post("/signin", data={"token": GOOD}, headers={"Origin": "null"}).status_code == 403
        browser = {"Sec-Fetch-Site": "same-origin", "Origin": "null"}  # its own form, under no-referrer
        assert client.post("/signin", data={"token": GOOD}, headers=browser).status_code == 303
        same = client.post("/signin", data={"token": GOOD}, headers={"Origin": "http://testserver"})
        assert same.status_code == 303 and "secure" not in same.headers["set-cookie"].lower()
        for proxied in (
            {"Origin": "https://testserver"},
            {"X-Forwarded-Proto": "https", **browser},
        ):  # TLS ended before
            behind = client.post("/signin", data={"token": GOOD}, headers=proxied)
            assert behind.status_code == 303 and "secure" in behind.headers["set-cookie"].lower(), proxied
    secure = TestClient(
        create_app(cast(Client, _Cluster()), None, authenticate=True, allowed_hosts=("testserver",)),
        base_url="https://testserver",
        follow_redirects=False,
    )
    with secure:
        assert "secure" in secure.post("/signin", data={"token": GOOD}).headers["set-cookie"].lower()


def test_one_viewer_holds_a_bounded_number_of_feeds() -> None:
    """Each namespace a viewer opens is a watch as that viewer: idle ones give way, open ones are kept."""
    feeds = Feeds(None)
    viewer = Viewer("a", "a", cast(Client, _Cluster()))

    async def open_many() -> None:
        loop = asyncio.get_running_loop()
        held = [feeds.of(viewer, f"team-{n}", f"team-{n}", loop) for n in range(MAX_FEEDS_PER_VIEWER)]
        feeds.of(viewer, "one-more", "one-more", loop)  # the oldest idle one stops for it
        for feed in [*held[1:], feeds.of(viewer, "one-more", "one-more", loop)]:
            feeds.opened(feed)
        with pytest.raises(TooManyFeedsError, match="you hold 4 already"):
            feeds.of(viewer, "yet-another", "yet-another", loop)
        other = Viewer("b", "b", cast(Client, _Cluster()))
        assert feeds.of(other, "team-0", "team-0", loop) is not None  # another viewer's are their own
        feeds.stop()

    asyncio.run(open_many())


@pytest.mark.parametrize(
    ("readable", "answer"),
    [
        (("team-b",), (303, "/?namespace=team-b")),
        (("team-a", "team-c"), (200, "You may read the jobs of 2 namespaces")),
        ((), (200, "You may not list jobs in any namespace")),
    ],
)
def test_a_viewer_who_may_not_list_every_namespace_lands_on_those_they_may_read(
    readable: tuple[str, ...], answer: tuple[int, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_Cluster, "readable", readable)
    client, _ = _client()
    with client:
        page = client.get("/", headers={"Authorization": f"Bearer {GOOD}"})
        said = page.headers.get("location", "") if page.status_code == 303 else page.text
        assert (page.status_code, answer[1] in said) == (answer[0], True)
        for name in {"team-a", "team-b", "team-c"} - set(readable):
            assert f'value="{name}"' not in page.text
        if page.status_code == 200:
            assert all(f'<a href="/?namespace={name}">{name}</a>' in page.text for name in readable)


class _ReaderOf(_Cluster):
    """A viewer's reads, who may list jobs in one namespace only."""

    def __init__(self, namespace: str) -> None:
        super().__init__()
        self.readable = (namespace,)


def _viewer_of(namespace: str, name: str) -> Viewer:
    return Viewer(name, name, cast(Client, _ReaderOf(namespace)))


def test_many_identities_of_one_namespace_leave_another_namespace_s_viewer_served() -> None:
    """A tenant with `edit` in team-a makes 20 ServiceAccounts and, as each, opens every page the dashboard
    lets it, of team-a and of namespaces it may not read: together they hold team-a's share and the share of
    every unreadable namespace, and a viewer of team-b is still served."""
    pages = Pages(cast(Client, _Cluster()), None, authenticate=True)
    loop = asyncio.new_event_loop()
    held: Counter[str] = Counter()
    try:
        for n in range(20):
            viewer = _viewer_of("team-a", f"system:serviceaccount:team-a:sa-{n}")
            for namespace in ("team-a", "team-b", *(f"made-up-{k}" for k in range(16))):
                share = pages.viewers.share_of(viewer, namespace)
                if pages.streams.take(viewer.key, share) is not None:
                    continue
                try:
                    pages.feeds.opened(pages.feeds.of(viewer, namespace, share, loop))
                except TooManyFeedsError:
                    pages.streams.give_back(viewer.key, share)
                    continue
                held[share] += 1
        assert held == {"team-a": FEED_LIMITS.per_namespace, UNREADABLE: FEED_LIMITS.per_namespace}
        viewer = _viewer_of("team-b", "system:serviceaccount:team-b:viewer")
        share = pages.viewers.share_of(viewer, "team-b")
        assert share == "team-b" and pages.streams.take(viewer.key, share) is None
        assert pages.feeds.of(viewer, "team-b", share, loop) is not None
    finally:
        pages.feeds.stop()
        loop.close()
