"""What a tenant can write that the operator reads back: each value in its bounds, or what the operator writes
when it has nothing to say."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from disttrain_contract.kept_logs import DEFAULT_LOG_BYTES
from disttrain_core.api.spec import MAX_ATTEMPT, MAX_KEPT_LOG_SECONDS, MAX_LOG_BYTES, MIN_LOG_BYTES
from disttrain_core.api.tenant_input import (
    ATTEMPT,
    JOB_GONE_SINCE,
    LOG_MAX_BYTES,
    LOG_TTL,
    RUNS_COUNTED,
    KeptLogNotes,
    PodLogNotes,
    PodRunNotes,
    as_list,
    as_mapping,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _metadata(**annotations: Any) -> dict[str, Any]:
    return {"annotations": annotations}


def test_values_within_their_bounds_are_read_as_written() -> None:
    notes = PodLogNotes.of(_metadata(**{LOG_MAX_BYTES: str(MIN_LOG_BYTES), ATTEMPT: "3", LOG_TTL: "60"}))
    assert (notes.max_bytes, notes.attempt, notes.ttl_seconds) == (MIN_LOG_BYTES, 3, 60)
    assert PodRunNotes.of(_metadata(**{RUNS_COUNTED: "2"})).counted == 2


@pytest.mark.parametrize(
    "forged",
    [str(MAX_LOG_BYTES + 1), str(MIN_LOG_BYTES - 1), "-1", "1e9", "lots", "", None, 10**30, ["65536"], True],
)
def test_a_forged_byte_count_falls_back_to_the_default(forged: object) -> None:
    assert PodLogNotes.of(_metadata(**{LOG_MAX_BYTES: forged})).max_bytes == DEFAULT_LOG_BYTES


def test_an_attempt_ttl_or_count_out_of_bounds_is_what_the_operator_writes_without_one() -> None:
    beyond = {ATTEMPT: str(MAX_ATTEMPT + 1), LOG_TTL: str(MAX_KEPT_LOG_SECONDS + 1), RUNS_COUNTED: "-1"}
    assert (PodLogNotes.of(_metadata(**beyond)).attempt, PodLogNotes.of(_metadata(**beyond)).ttl_seconds) == (None, 0)
    assert PodRunNotes.of(_metadata(**beyond)).counted is None
    assert PodLogNotes.of(_metadata(**{ATTEMPT: "0"})).attempt is None


@pytest.mark.parametrize("metadata", [None, {}, {"annotations": None}, {"annotations": ["a"]}, {"annotations": "x"}])
def test_annotations_of_another_shape_read_as_none(metadata: dict[str, Any] | None) -> None:
    assert PodLogNotes.of(metadata) == PodLogNotes()


def test_a_job_gone_since_ahead_counts_as_now_and_a_bad_one_as_never() -> None:
    ahead = KeptLogNotes.of(_metadata(**{JOB_GONE_SINCE: (NOW + timedelta(days=1)).isoformat()}))
    assert ahead.gone_since(NOW) == NOW
    assert KeptLogNotes.of(_metadata(**{JOB_GONE_SINCE: "yesterday"})).gone_since(NOW) is None


def test_a_field_of_the_wrong_shape_reads_as_empty() -> None:
    assert as_mapping(["a"]) == {} and as_mapping({"a": 1}) == {"a": 1}
    assert as_list({"a": 1}) == [] and as_list([1]) == [1]
