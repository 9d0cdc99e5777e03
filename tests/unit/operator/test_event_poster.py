"""The operator's Events: what each one says, and that a reconcile never waits for, or fails on, one."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from disttrain_core.builders.events import COMPONENT, MESSAGE_LIMIT
from disttrain_kube.api_errors import TransientApiError
from disttrain_operator.event_poster import EventBudget, EventPoster

JOB = {
    "apiVersion": "disttrain.io/v1alpha1",
    "kind": "DistTrainJob",
    "metadata": {"name": "mnist", "namespace": "team", "uid": "u1", "generation": 2},
}


class _Api:
    """Takes Events, refusing those whose reason is `refused`."""

    def __init__(self, refused: str = "") -> None:
        self.posted: list[dict[str, Any]] = []
        self.refused = refused

    def create(self, manifest: dict[str, Any]) -> bool:
        if manifest["reason"] == self.refused:
            raise TransientApiError(403, "namespace team is being terminated")
        self.posted.append(manifest)
        return True


def _poster(api: _Api, limit: int = 100) -> EventPoster:
    return EventPoster(api, clock=lambda: datetime(2026, 1, 1, tzinfo=UTC), instance="operator-0", limit=limit)


def _post_all(poster: EventPoster) -> None:
    """What the poster's thread does, here: post what waits, then end (as once stopped)."""
    poster.stop()
    poster._work()


def test_an_event_names_its_job_and_the_operator() -> None:
    api = _Api()
    poster = _poster(api)
    poster(JOB, type="Warning", reason="CreateFailed", message="x" * 5000)
    assert api.posted == []  # handed over, not posted by the caller
    _post_all(poster)
    (event,) = api.posted
    assert event["metadata"] == {"generateName": "mnist.", "namespace": "team"}
    assert event["involvedObject"] == {
        "apiVersion": "disttrain.io/v1alpha1",
        "kind": "DistTrainJob",
        "name": "mnist",
        "namespace": "team",
        "uid": "u1",
    }
    assert (event["type"], event["reason"], len(event["message"])) == ("Warning", "CreateFailed", MESSAGE_LIMIT)
    assert (event["source"], event["reportingComponent"], event["reportingInstance"]) == (
        {"component": COMPONENT},
        COMPONENT,
        "operator-0",
    )
    assert (event["firstTimestamp"], event["lastTimestamp"], event["count"]) == (
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z",
        1,
    )


def test_an_event_not_taken_is_logged_and_the_next_one_still_posted(caplog: pytest.LogCaptureFixture) -> None:
    api = _Api(refused="Created")
    poster = _poster(api)
    poster(JOB, type="Normal", reason="Created", message="created 7 pods")
    poster(JOB, type="Normal", reason="Succeeded", message="done")
    with caplog.at_level(logging.WARNING):
        _post_all(poster)
    assert [event["reason"] for event in api.posted] == ["Succeeded"]
    assert "Event Created of mnist not posted: 403" in caplog.text


def test_past_the_limit_the_oldest_waiting_events_go_first(caplog: pytest.LogCaptureFixture) -> None:
    api = _Api()
    poster = _poster(api, limit=2)
    with caplog.at_level(logging.WARNING):
        for reason in ("First", "Second", "Third"):
            poster(JOB, type="Normal", reason=reason, message="")
    _post_all(poster)
    assert [event["reason"] for event in api.posted] == ["Second", "Third"]
    assert "the oldest, First, is dropped" in caplog.text


def test_a_job_that_restarts_without_end_posts_a_bounded_number_of_events() -> None:
    budget = EventBudget(burst=25, refill=timedelta(minutes=5), tracked=2)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    posted = sum(budget.take("u1", start + timedelta(seconds=second)) for second in range(3600))
    assert posted == 25 + 11  # the burst, then one for each 5 minutes that passed within the hour
    assert budget.take("u2", start)  # another job has a budget of its own
    assert budget.take("u3", start) and budget.take("u1", start + timedelta(hours=2))  # u1 forgotten: a fresh burst
