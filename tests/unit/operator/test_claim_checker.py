"""The claim checker: which claims it asks about and how often, what it keeps of the answers and whom it wakes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from disttrain_core.api.spec import ReplicaType
from disttrain_core.claims import UNBOUND_AFTER, ClaimView
from disttrain_core.observed import PodPhase, PodView
from disttrain_core.types import JobKey
from disttrain_kube.api_errors import TransientApiError
from disttrain_operator.claim_checker import ASKED_AGAIN, ClaimChecker
from support.job_builder import make_pod

T0 = datetime(2026, 1, 1, tzinfo=UTC)
KEY: JobKey = ("team", "job")
PENDING = ClaimView("job-checkpoint", "u1", T0)


class Events:
    """A namespace's Events as the API server lists them, and the queries asked of it."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.asked: list[tuple[str, dict[str, str]]] = []
        self.failing = False

    def list_page(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        self.asked.append((path, query))
        if self.failing:
            raise TransientApiError(503, "the API server is busy")
        return {"items": self.items}


def _checker(
    events: Events, claims: list[ClaimView], pods: Sequence[PodView], now: list[datetime], woken: list[JobKey]
) -> ClaimChecker:
    return ClaimChecker(events, lambda: [(KEY, claims)], lambda key: pods, woken.append, 10, clock=lambda: now[0])


def test_a_claim_pending_beside_its_pods_is_asked_about_and_its_words_wake_the_job_once() -> None:
    events, claims, woken = Events(), [PENDING], list[JobKey]()
    now = [T0 + UNBOUND_AFTER - timedelta(seconds=1)]
    checker = _checker(events, claims, [make_pod(ReplicaType.WORKER, 0, PodPhase.PENDING)], now, woken)
    checker.check()
    assert events.asked == [] and woken == []  # too soon
    now[0] = T0 + UNBOUND_AFTER
    events.items = [{"type": "Warning", "reason": "ProvisioningFailed", "message": "no such class"}]
    checker.check()
    assert events.asked == [
        ("/api/v1/namespaces/team/events", {"fieldSelector": "involvedObject.uid=u1,type=Warning", "limit": "10"})
    ]
    assert woken == [KEY] and checker.unbound(KEY, claims) == {"job-checkpoint": "ProvisioningFailed: no such class"}
    now[0] += timedelta(seconds=ASKED_AGAIN.delay(1) - 1)
    checker.check()
    assert len(events.asked) == 1  # not due again yet
    now[0] += timedelta(seconds=1)
    checker.check()
    assert len(events.asked) == 2 and woken == [KEY]  # the same words: no wake
    now[0] += timedelta(seconds=ASKED_AGAIN.delay(2))
    events.failing = True
    checker.check()
    assert len(events.asked) == 3
    assert woken == [KEY] and checker.unbound(KEY, claims) == {"job-checkpoint": "ProvisioningFailed: no such class"}
    bound = [ClaimView("job-checkpoint", "u1", None)]
    assert checker.unbound(KEY, bound) == {}  # bound since: its words are not the job's


def test_a_claim_of_a_job_without_pods_is_not_asked_about_and_its_words_go() -> None:
    events, woken = Events(), list[JobKey]()
    events.items = [{"type": "Warning", "reason": "ProvisioningFailed", "message": "no such class"}]
    pods: list[PodView] = [make_pod(ReplicaType.WORKER, 0, PodPhase.PENDING)]
    checker = _checker(events, [PENDING], pods, [T0 + UNBOUND_AFTER], woken)
    checker.check()
    assert woken == [KEY]
    pods.clear()  # suspended: a claim that binds on its first consumer waits for none
    checker.check()
    assert len(events.asked) == 1 and woken == [KEY, KEY] and checker.unbound(KEY, [PENDING]) == {}


def test_the_words_of_a_job_whose_claims_went_are_forgotten() -> None:
    events, woken, claims = Events(), list[JobKey](), [(KEY, [PENDING])]
    events.items = [{"type": "Warning", "reason": "ProvisioningFailed", "message": "no such class"}]
    pods = [make_pod(ReplicaType.WORKER, 0, PodPhase.PENDING)]
    checker = ClaimChecker(events, lambda: claims, lambda key: pods, woken.append, 10, clock=lambda: T0 + UNBOUND_AFTER)
    checker.check()
    assert checker.unbound(KEY, [PENDING]) == {"job-checkpoint": "ProvisioningFailed: no such class"}
    claims.clear()  # the job and its claim were deleted
    checker.check()
    assert checker.unbound(KEY, [PENDING]) == {}
