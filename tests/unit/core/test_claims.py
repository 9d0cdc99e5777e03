"""A claim that does not bind, in the job's status: what is asked about, the words kept, the condition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from disttrain_core.api.status import ConditionStatus, ConditionType
from disttrain_core.claims import MAX_WORDS, UNBOUND_AFTER, ClaimView, claim_view, storage_words, to_ask, with_claims
from disttrain_core.status_from_pods import aggregated
from support.job_builder import JobBuilder

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _claim(phase: str | None) -> dict[str, Any]:
    status = {} if phase is None else {"phase": phase}
    metadata = {"name": "job-checkpoint", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"}
    return {"metadata": metadata, "status": status}


def test_a_claim_is_pending_until_its_phase_says_otherwise_and_asked_about_after_a_while() -> None:
    pending, bound = claim_view(_claim("Pending")), claim_view(_claim("Bound"))
    assert claim_view(_claim(None)) == pending == ClaimView("job-checkpoint", "u1", T0)
    assert bound.pending_since is None and claim_view(_claim("Lost")).pending_since is None
    assert to_ask([pending, bound], T0 + UNBOUND_AFTER - timedelta(seconds=1)) == []
    assert to_ask([pending, bound], T0 + UNBOUND_AFTER) == [pending]


def test_the_newest_warning_speaks_for_the_storage_class_and_normal_events_say_nothing() -> None:
    events = [
        {
            "type": "Normal",
            "reason": "WaitForFirstConsumer",
            "message": "waiting",
            "lastTimestamp": "2026-01-01T00:00:09Z",
        },
        {"type": "Warning", "reason": "ProvisioningFailed", "message": "old", "lastTimestamp": "2026-01-01T00:00:01Z"},
        {
            "type": "Warning",
            "reason": "ProvisioningFailed",
            "message": "new",
            "eventTime": "2026-01-01T00:00:05.000000Z",
        },
    ]
    assert storage_words(events) == "ProvisioningFailed: new"
    assert storage_words(events[:1]) is None and storage_words([]) is None
    assert (
        storage_words([{"type": "Warning", "reason": "R", "message": "x" * 10 * MAX_WORDS}])
        == ("R: " + "x" * MAX_WORDS)[:MAX_WORDS]
    )


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(["type", "reason", "message", "lastTimestamp", "metadata"]), inner, max_size=4
            )
        ),
        max_leaves=12,
    )
)
def test_events_of_any_shape_give_words_or_none(events: Any) -> None:
    words = storage_words(events)
    assert words is None or (isinstance(words, str) and len(words) <= MAX_WORDS)


def test_the_condition_holds_while_a_claim_waits_with_words_and_turns_false_once_none_does() -> None:
    job = JobBuilder().counts({"Worker": 1}).job()
    status = aggregated(job, [], created=True, now=T0).status
    assert with_claims(job, status, {}, T0) == status  # never unbound: no condition at all
    unbound = with_claims(job, status, {"job-checkpoint": "ProvisioningFailed: no class"}, T0)
    held = unbound.condition(ConditionType.VOLUME_UNBOUND)
    assert held is not None and (held.status, held.reason) == (ConditionStatus.TRUE, "ClaimUnbound")
    assert held.message == "the PersistentVolumeClaim job-checkpoint is not bound: ProvisioningFailed: no class"
    later = T0 + timedelta(seconds=30)
    bound = with_claims(job, unbound, {}, later).condition(ConditionType.VOLUME_UNBOUND)
    assert bound is not None and (bound.status, bound.reason, bound.last_transition_time) == (
        ConditionStatus.FALSE,
        "ClaimsBound",
        later,
    )
