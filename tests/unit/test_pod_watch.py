"""The operator's own pod watch: listing, events, relisting, and what it tells of each job."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from disttrain_operator.core.observed import PodPhase
from disttrain_operator.runtime.pod_watch import PodStore, PodWatch, Scope, _key_and_view, scopes


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
    """Pages of a listing, then the lines of one watch."""

    def __init__(self, pages: list[list[dict[str, Any]]], events: list[dict[str, Any]] | None = None) -> None:
        self.pages = pages
        self.events = events or []
        self.queries: list[dict[str, str]] = []

    def list_page(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        self.queries.append(query)
        number = int(query.get("continue", "0"))
        more = {"continue": str(number + 1)} if number + 1 < len(self.pages) else {}
        return {"items": self.pages[number], "metadata": {"resourceVersion": "10", **more}}

    def stream_lines(self, path: str, query: dict[str, str], read_timeout: float) -> Iterator[bytes]:
        self.queries.append(query)
        for event in self.events:
            yield json.dumps(event).encode()


NAMESPACE = Scope("ns")


def _watch(kube: _FakeKube, store: PodStore) -> tuple[PodWatch, list[tuple[str, str]]]:
    changed: list[tuple[str, str]] = []
    return PodWatch(kube, store, [NAMESPACE], changed.append, retry_seconds=0.01), changed


def test_a_paged_listing_fills_the_store_and_completes_it() -> None:
    store = PodStore()
    kube = _FakeKube([[_pod("j-chief-0", "u1")], [_pod("j-worker-0", "u2"), _pod("k-worker-0", "u3", job="k")]])
    watch, changed = _watch(kube, store)
    assert watch._list(NAMESPACE) == "10"
    assert store.complete.is_set()
    assert sorted(pod.name for pod in store.pods(("ns", "j"))) == ["j-chief-0", "j-worker-0"]
    assert sorted(changed) == [("ns", "j"), ("ns", "k")]
    assert kube.queries[1]["continue"] == "1"


def test_events_that_change_nothing_the_planner_reads_tell_nobody() -> None:
    store = PodStore()
    running = _pod("j-chief-0", "u1")
    bound = {**running, "spec": {"nodeName": "node-1"}}
    failed = _pod("j-chief-0", "u1", phase="Failed")
    events = [{"type": "MODIFIED", "object": bound}, {"type": "MODIFIED", "object": failed}]
    watch, changed = _watch(_FakeKube([[running]], events), store)
    watch._list(NAMESPACE)
    changed.clear()
    watch._watch(NAMESPACE, "10")
    assert changed == [("ns", "j")]
    assert [pod.phase for pod in store.pods(("ns", "j"))] == [PodPhase.FAILED]


def test_deletion_forgets_the_pod_and_a_gone_version_asks_for_a_relisting() -> None:
    store = PodStore()
    pod = _pod("j-chief-0", "u1")
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    watch, changed = _watch(_FakeKube([[pod]], [{"type": "DELETED", "object": pod}, gone]), store)
    watch._list(NAMESPACE)
    changed.clear()
    assert watch._watch(NAMESPACE, "10") is None
    assert (store.pods(("ns", "j")), changed) == ([], [("ns", "j")])


def test_a_relisting_drops_pods_that_went_while_unwatched() -> None:
    store = PodStore()
    kube = _FakeKube([[_pod("j-chief-0", "u1"), _pod("k-chief-0", "u2", job="k")]])
    watch, changed = _watch(kube, store)
    watch._list(NAMESPACE)
    kube.pages = [[_pod("j-chief-0", "u1")]]
    changed.clear()
    watch._list(NAMESPACE)
    assert changed == [("ns", "k")]
    assert store.pods(("ns", "k")) == []


def test_a_bookmark_moves_the_version_on() -> None:
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "42"}}}
    watch, changed = _watch(_FakeKube([[]], [bookmark]), PodStore())
    assert watch._watch(NAMESPACE, "10") == "42"
    assert changed == []


def test_a_pod_relabelled_to_another_job_moves() -> None:
    store = PodStore()
    assert store.put(("ns", "j"), _view("j-chief-0", "u1"))
    assert store.put(("ns", "k"), _view("j-chief-0", "u1"))
    assert (store.pods(("ns", "j")), len(store.pods(("ns", "k")))) == ([], 1)


def _view(name: str, uid: str) -> Any:
    found = _key_and_view(_pod(name, uid))
    assert found is not None
    return found[1]


def test_scopes_follow_the_operators_namespaces() -> None:
    assert scopes([]) == [Scope(None)]
    assert scopes(["a", "b", "a"]) == [Scope("a"), Scope("b")]
    assert [scope.path for scope in scopes(["a"])] == ["/api/v1/namespaces/a/pods"]
    pattern = scopes(["team-*", "!team-x"])
    assert pattern == [Scope(None, ("team-*", "!team-x"))]
    assert [pattern[0].accepts(name) for name in ("team-a", "team-x", "other")] == [True, False, False]
