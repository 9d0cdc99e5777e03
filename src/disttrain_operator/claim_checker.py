"""Ask why a job's claim stays Pending: one thread reads the Warning Events of each claim Pending for
`UNBOUND_AFTER` whose job has pods waiting for it, and names the job to the queue when the StorageClass's
words change (`disttrain_core.claims`). A claim is asked again after `ASKED_AGAIN` (10 s, doubling to
2 minutes): one that never binds costs a list now and then. The watch of the claims shows when one binds;
the words of a claim no longer Pending are dropped then."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from disttrain_core.backoff import Backoff
from disttrain_core.claims import ClaimView, storage_words, to_ask
from disttrain_core.observed import PodView
from disttrain_core.types import JobKey
from disttrain_kube.api_errors import TransientApiError
from disttrain_operator.workers import Workers

logger = logging.getLogger(__name__)

CHECK_SECONDS = 10.0  # with UNBOUND_AFTER, a claim that cannot bind is in its job's status within 30 s
ASKED_AGAIN = Backoff(first=CHECK_SECONDS, longest=120)
EVENTS_ASKED = "10"  # a claim's Events listed at once: its StorageClass's come aggregated, one per reason


class EventLister(Protocol):
    def list_page(self, path: str, query: dict[str, str]) -> dict[str, Any]: ...


class ClaimChecker(Workers):
    def __init__(
        self,
        kube: EventLister,
        claims: Callable[[], Sequence[tuple[JobKey, Sequence[ClaimView]]]],
        pods: Callable[[JobKey], Sequence[PodView]],
        on_change: Callable[[JobKey], None],
        interval: float,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__("disttrain-claim-checker")
        self._kube = kube
        self._claims = claims
        self._pods = pods
        self._on_change = on_change
        self._interval = interval
        self._clock = clock
        self._words: dict[JobKey, dict[str, str]] = {}  # by job: claim name -> its StorageClass's words
        self._asked: dict[str, tuple[int, datetime]] = {}  # by claim uid: times asked, when it is due again

    def unbound(self, key: JobKey, claims: Sequence[ClaimView]) -> dict[str, str]:
        """The words said of the job's `claims` still Pending."""
        with self._condition:
            said = self._words.get(key, {})
            return {claim.name: said[claim.name] for claim in claims if claim.pending_since and claim.name in said}

    def check(self) -> None:
        """Ask about every claim due once; a job whose words changed is named to the queue."""
        now, changed, pending, seen = self._clock(), list[JobKey](), set[str](), set[JobKey]()
        for key, claims in self._claims():
            seen.add(key)
            asked = to_ask(claims, now) if any(not pod.gone for pod in self._pods(key)) else []
            pending.update(claim.uid for claim in asked)
            with self._condition:
                before = dict(self._words.get(key, {}))
            words = {
                claim.name: said for claim in asked if (said := self._said(key[0], claim, before, now)) is not None
            }
            with self._condition:
                if self._words.get(key, {}) != words:
                    changed.append(key)
                if words:
                    self._words[key] = words
                else:
                    self._words.pop(key, None)
        self._asked = {uid: asked for uid, asked in self._asked.items() if uid in pending}
        with self._condition:  # a job whose claims went (deleted with it) keeps nothing here
            self._words = {key: words for key, words in self._words.items() if key in seen}
        for key in changed:
            self._on_change(key)

    def _said(self, namespace: str, claim: ClaimView, before: dict[str, str], now: datetime) -> str | None:
        """The newest Warning's words; what was said before when the claim is not due or its Events cannot be
        read now."""
        times, due = self._asked.get(claim.uid, (0, now))
        if due > now:
            return before.get(claim.name)
        self._asked[claim.uid] = (times + 1, now + timedelta(seconds=ASKED_AGAIN.delay(times + 1)))
        query = {"fieldSelector": f"involvedObject.uid={claim.uid},type=Warning", "limit": EVENTS_ASKED}
        try:
            page = self._kube.list_page(f"/api/v1/namespaces/{namespace}/events", query)
        except TransientApiError as error:
            logger.info("the Events of the claim %s/%s are not read now: %s", namespace, claim.name, error)
            return before.get(claim.name)
        return storage_words(page.get("items"))

    def _work(self) -> None:
        self.repeat(self.check, self._interval, "claim-checker")
