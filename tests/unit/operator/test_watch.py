"""The operator's own watches: listing, events, relisting, kinds not served, and what they tell of each job."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from disttrain_core.backoff import Backoff
from disttrain_core.observed import PodPhase, PodView, after_removal
from disttrain_core.types import JobKey, ObjectRef
from disttrain_dev.polling import wait_for
from disttrain_kube.api_errors import NotServedError, ResourceExpiredError, TransientApiError
from disttrain_operator.watch import (
    Listings,
    ObjectStore,
    ObjectWatch,
    Reconnects,
    WatchedResource,
    WatchScope,
    scopes,
)
from disttrain_operator.watched import DISTTRAIN_JOBS, PODS, SERVICES, WORKLOADS


def _pod(name: str, uid: str, *, job: str = "j", namespace: str = "ns", phase: str = "Running") -> dict[str, Any]:
    replica_type, index = name.rsplit("-", 2)[-2:]
    labels = {
        "disttrain.io/job-name": job,
        "disttrain.io/replica-type": replica_type,
        "disttrain.io/replica-index": index,
    }
    metadata = {"name": name, "namespace": namespace, "uid": uid, "labels": labels, "resourceVersion": uid}
    return {"metadata": metadata, "status": {"phase": phase}}


class _FakeKube:
    """Pages of a listing, then the lines of one watch; `unserved`: every listing answers 404. `refusals`:
    errors raised, in turn, by the next requests, listings and watches alike."""

    def __init__(self, pages: list[list[dict[str, Any]]], events: list[dict[str, Any]] | None = None) -> None:
        self.pages = pages
        self.events = events or []
        self.queries: list[dict[str, str]] = []
        self.read_timeouts: list[float] = []
        self.unserved = False
        self.refusals: list[Exception | None] = []

    def _refuse(self) -> None:
        refusal = self.refusals.pop(0) if self.refusals else None
        if refusal is not None:
            raise refusal

    def list_page(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        self.queries.append(query)
        if self.unserved:
            raise NotServedError(404, f"the server could not find the requested resource ({path})")
        self._refuse()
        number = int(query.get("continue", "0"))
        more = {"continue": str(number + 1)} if number + 1 < len(self.pages) else {}
        return {"items": self.pages[number], "metadata": {"resourceVersion": "10", **more}}

    def stream_lines(self, path: str, query: dict[str, str], read_timeout: float) -> Iterator[bytes]:
        self.queries.append(query)
        self.read_timeouts.append(read_timeout)
        self._refuse()
        for event in self.events:
            yield json.dumps(event).encode()


NAMESPACE = WatchScope("ns")
Told = list[tuple[JobKey, Any, bool]]


def _watch(
    kube: _FakeKube, store: ObjectStore[Any], resource: WatchedResource[Any] = PODS, listings: Listings | None = None
) -> tuple[ObjectWatch[Any], Told]:
    told: Told = []

    def changed(key: JobKey, view: Any, present: bool) -> None:
        told.append((key, view, present))

    listings = listings or Listings()
    reconnects = Reconnects(Backoff(0.01, 0.01))
    watch = ObjectWatch(kube, resource, store, [NAMESPACE], changed, listings=listings, reconnects=reconnects)
    return watch, told


def _keys(told: Told) -> list[JobKey]:
    return [key for key, _, _ in told]


def test_a_paged_listing_fills_the_store_and_ends_the_wait_for_it() -> None:
    store: ObjectStore[PodView] = ObjectStore()
    listings = Listings()
    kube = _FakeKube([[_pod("j-chief-0", "u1")], [_pod("j-worker-0", "u2"), _pod("k-worker-0", "u3", job="k")]])
    watch, told = _watch(kube, store, listings=listings)
    assert not listings.done.is_set()
    assert watch._list(NAMESPACE) == "10"
    assert listings.done.is_set()
    assert sorted(pod.name for pod in store.views(("ns", "j"))) == ["j-chief-0", "j-worker-0"]
    assert sorted(_keys(told)) == [("ns", "j"), ("ns", "j"), ("ns", "k")]
    assert kube.queries[0]["labelSelector"] == "disttrain.io/job-name"
    assert kube.queries[1]["continue"] == "1"


def test_the_wait_ends_once_every_kind_was_listed() -> None:
    listings = Listings()
    pods, _ = _watch(_FakeKube([[]]), ObjectStore(), PODS, listings)
    services, _ = _watch(_FakeKube([[]]), ObjectStore(), SERVICES, listings)
    pods._list(NAMESPACE)
    pods._list(NAMESPACE)  # a relisting counts once
    assert not listings.done.is_set()
    services._list(NAMESPACE)
    assert listings.done.is_set()


def test_events_that_change_nothing_the_planner_reads_tell_nobody_and_keep_the_version_current() -> None:
    store: ObjectStore[PodView] = ObjectStore()
    running = _pod("j-chief-0", "u1")
    bound = {**running, "metadata": {**running["metadata"], "resourceVersion": "11"}, "spec": {"nodeName": "node-1"}}
    failed = _pod("j-chief-0", "u1", phase="Failed")
    watch, told = _watch(_FakeKube([[running]], [{"type": "MODIFIED", "object": bound}]), store)
    watch._list(NAMESPACE)
    told.clear()
    watch._watch(NAMESPACE, "10")
    assert told == []
    assert [pod.resource_version for pod in store.views(("ns", "j"))] == ["11"]  # what a deletion must name
    watch, told = _watch(_FakeKube([[]], [{"type": "MODIFIED", "object": failed}]), store)
    watch._watch(NAMESPACE, "11")
    assert _keys(told) == [("ns", "j")]
    assert [pod.phase for pod in store.views(("ns", "j"))] == [PodPhase.FAILED]


def test_deletion_tells_the_last_view_and_a_gone_version_asks_for_a_relisting() -> None:
    store: ObjectStore[PodView] = ObjectStore()
    pod = _pod("j-chief-0", "u1")
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    watch, told = _watch(_FakeKube([[pod]], [{"type": "DELETED", "object": pod}, gone]), store)
    watch._list(NAMESPACE)
    told.clear()
    with pytest.raises(ResourceExpiredError):
        watch._watch(NAMESPACE, "10")
    assert store.views(("ns", "j")) == []
    assert [(key, view.uid, present) for key, view, present in told] == [(("ns", "j"), "u1", False)]


def test_a_pod_deleted_before_it_succeeded_remains_until_buried() -> None:
    """An evicted pod removed at once stays in sight, as its deletion showed it, until a reconcile acted on
    its loss; a relisting leaves its remains alone; a succeeded pod or one no longer the job's leaves none."""
    store: ObjectStore[PodView] = ObjectStore(after_removal)
    evicted = _pod("j-worker-1", "u2")
    evicted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    disruption = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    evicted["status"]["conditions"] = [disruption]
    unlabelled = _pod("j-worker-2", "u3")
    unlabelled["metadata"]["labels"] = {}
    events = [
        {"type": "DELETED", "object": evicted},
        {"type": "DELETED", "object": _pod("j-chief-0", "u1", phase="Succeeded")},
        {"type": "MODIFIED", "object": unlabelled},
    ]
    pods = [_pod("j-chief-0", "u1"), _pod("j-worker-1", "u2"), _pod("j-worker-2", "u3")]
    kube = _FakeKube([pods], events)
    watch, told = _watch(kube, store)
    watch._list(NAMESPACE)
    told.clear()
    watch._watch(NAMESPACE, "10")
    [left] = store.views(("ns", "j"))
    assert (left.uid, left.gone, left.disruption) == ("u2", True, "EvictionByEvictionAPI")
    assert [(view.uid, present) for _, view, present in told] == [("u2", False), ("u1", False), ("u3", False)]
    assert told[0][1] == left
    kube.pages = [[]]
    watch._list(NAMESPACE)
    assert store.views(("ns", "j")) == [left]
    store.bury(("ns", "j"), {"u9"})
    assert store.views(("ns", "j")) == [left]
    store.bury(("ns", "j"), {"u2"})
    assert (store.views(("ns", "j")), store.job_keys()) == ([], [])


def test_a_relisting_leaves_remains_of_pods_that_went_while_unwatched() -> None:
    store: ObjectStore[PodView] = ObjectStore(after_removal)
    kube = _FakeKube([[_pod("j-chief-0", "u1"), _pod("j-worker-0", "u2")]])
    watch, _ = _watch(kube, store)
    watch._list(NAMESPACE)
    kube.pages = [[_pod("j-chief-0", "u1")]]
    watch._list(NAMESPACE)
    gone = {view.uid: view.gone for view in store.views(("ns", "j"))}
    assert gone == {"u1": False, "u2": True}
    store.bury(("ns", "j"))
    assert [view.uid for view in store.views(("ns", "j"))] == ["u1"]


def test_a_version_gone_before_the_stream_starts_lists_again() -> None:
    """The API server may refuse an expired resourceVersion as the response's status (410), not only as an
    ERROR event in the stream: either way the watch lists again rather than asking for the same version."""
    store: ObjectStore[PodView] = ObjectStore()
    kube = _FakeKube([[_pod("j-chief-0", "u1")]])
    kube.refusals = [None, ResourceExpiredError(410, "too old resource version")]
    watch, _ = _watch(kube, store)
    watch.start()
    wait_for("a second listing", lambda: sum("watch" not in query for query in kube.queries) >= 2)
    watch.stop()
    assert [query.get("resourceVersion") for query in kube.queries[:3]] == [None, "10", None]


def test_an_expired_continue_token_starts_the_listing_over() -> None:
    store: ObjectStore[PodView] = ObjectStore()
    kube = _FakeKube([[_pod("j-chief-0", "u1")], [_pod("j-worker-0", "u2")]])
    kube.refusals = [None, ResourceExpiredError(410, "the provided continue parameter is too old")]
    watch, _ = _watch(kube, store)
    assert watch._list(NAMESPACE) == "10"
    assert [query.get("continue") for query in kube.queries] == [None, "1", None, "1"]
    assert sorted(pod.name for pod in store.views(("ns", "j"))) == ["j-chief-0", "j-worker-0"]


def test_a_listing_broken_off_still_tells_what_it_changed() -> None:
    """The next listing finds those objects unchanged and would tell nobody."""
    store: ObjectStore[PodView] = ObjectStore()
    kube = _FakeKube([[_pod("j-chief-0", "u1")], [_pod("k-chief-0", "u2", job="k")]])
    kube.refusals = [None, TransientApiError(503, "the API server is shutting down")]
    watch, told = _watch(kube, store)
    with pytest.raises(TransientApiError):
        watch._list(NAMESPACE)
    assert _keys(told) == [("ns", "j")]


def test_a_watch_asks_the_api_server_to_end_it_and_gives_up_on_a_silent_stream_soon_after() -> None:
    kube = _FakeKube([[]])
    watch, _ = _watch(kube, ObjectStore())
    watch._watch(NAMESPACE, "10")
    assert (kube.queries[-1]["timeoutSeconds"], kube.read_timeouts) == ("60", [70])


def test_reconnects_lengthen_for_every_watch_and_shorten_on_any_success() -> None:
    reconnects = Reconnects(Backoff(1, 30))
    assert [reconnects.failed() for _ in range(4)] == [1, 2, 4, 8]  # four watches failing at once
    reconnects.succeeded()
    assert reconnects.failed() == 1


def _pausing(reconnects: Reconnects, seconds: float, stopped: threading.Event) -> threading.Thread:
    pausing = threading.Thread(target=reconnects.pause, args=(seconds, stopped), daemon=True)
    pausing.start()
    return pausing


def test_one_watch_at_a_time_tries_again_soon_and_its_success_cuts_the_others_pauses() -> None:
    reconnects = Reconnects(Backoff(1, 600))
    pausing = [_pausing(reconnects, 600, threading.Event()) for _ in range(2)]
    wait_for("the probe's pause over", lambda: not all(each.is_alive() for each in pausing), timeout=10)
    (other,) = [each for each in pausing if each.is_alive()]  # the other pauses its 600 s, until a success
    reconnects.succeeded()
    other.join(10)
    assert not other.is_alive()


def test_a_pause_ends_once_its_watch_stops() -> None:
    reconnects, stopped = Reconnects(Backoff(600, 600)), threading.Event()
    pausing = _pausing(reconnects, 600, stopped)
    pausing.join(0.2)
    assert pausing.is_alive()
    stopped.set()
    reconnects.wake()
    pausing.join(10)
    assert not pausing.is_alive()


def test_a_relisting_drops_objects_that_went_while_unwatched() -> None:
    store: ObjectStore[PodView] = ObjectStore()
    kube = _FakeKube([[_pod("j-chief-0", "u1"), _pod("k-chief-0", "u2", job="k")]])
    watch, told = _watch(kube, store)
    watch._list(NAMESPACE)
    kube.pages = [[_pod("j-chief-0", "u1")]]
    told.clear()
    watch._list(NAMESPACE)
    assert [(key, present) for key, _, present in told] == [(("ns", "k"), False)]
    assert store.views(("ns", "k")) == []


def test_a_bookmark_moves_the_version_on() -> None:
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "42"}}}
    watch, told = _watch(_FakeKube([[]], [bookmark]), ObjectStore())
    assert watch._watch(NAMESPACE, "10") == "42"
    assert told == []


def test_an_object_relabelled_to_another_job_moves() -> None:
    store: ObjectStore[ObjectRef] = ObjectStore()
    assert store.put(("ns", "j"), "u1", ObjectRef("Service", "j"))
    assert store.put(("ns", "k"), "u1", ObjectRef("Service", "j"))
    assert (store.views(("ns", "j")), store.views(("ns", "k"))) == ([], [ObjectRef("Service", "j")])


def test_a_kind_not_served_counts_as_listed_and_empty() -> None:
    """Kueue installed after the operator, or removed: its Workloads are none until it is served."""
    store: ObjectStore[Any] = ObjectStore()
    workload = {"metadata": {"name": "w", "namespace": "ns", "uid": "w1", "labels": {"disttrain.io/job-name": "j"}}}
    kube = _FakeKube([[workload]])
    listings = Listings()
    watch, told = _watch(kube, store, WORKLOADS, listings)
    assert watch._list(NAMESPACE) == "10"
    assert [view.name for view in store.views(("ns", "j"))] == ["w"]
    kube.unserved = True
    told.clear()
    assert watch._list(NAMESPACE) is None
    assert (store.views(("ns", "j")), _keys(told), listings.done.is_set()) == ([], [("ns", "j")], True)


def test_a_kind_that_must_be_served_is_an_error_until_it_is() -> None:
    kube = _FakeKube([[]])
    kube.unserved = True
    listings = Listings()
    watch, _ = _watch(kube, ObjectStore(), PODS, listings)
    with pytest.raises(NotServedError):
        watch._list(NAMESPACE)
    assert not listings.done.is_set()


def test_scopes_follow_the_operators_namespaces() -> None:
    assert scopes([]) == [WatchScope(None)]
    assert scopes(["a", "b", "a"]) == [WatchScope("a"), WatchScope("b")]
    assert [PODS.path(scope.namespace) for scope in scopes(["a"])] == ["/api/v1/namespaces/a/pods"]
    assert DISTTRAIN_JOBS.path(None) == "/apis/disttrain.io/v1alpha1/disttrainjobs"
    pattern = scopes(["team-*", "!team-x"])
    assert pattern == [WatchScope(None, ("team-*", "!team-x"))]
    assert [pattern[0].accepts(name) for name in ("team-a", "team-x", "other")] == [True, False, False]
