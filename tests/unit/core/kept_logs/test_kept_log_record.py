"""A replica's kept logs as records: the tail of a log, their order and numbers, the gaps, and what goes."""

from __future__ import annotations

from typing import Any

from disttrain_core.api.tenant_input import ATTEMPT
from disttrain_core.kept_logs.names import KEPT_AT
from disttrain_core.kept_logs.record import (
    attempt_numbers,
    in_order,
    log_tail,
    next_attempt,
    surplus,
    unkept_before,
)


def _kept(name: str, attempt: int | None = None, kept_at: str = "") -> dict[str, Any]:
    annotations = {KEPT_AT: kept_at, **({ATTEMPT: str(attempt)} if attempt is not None else {})}
    return {"metadata": {"name": name, "annotations": annotations}}


def test_a_long_log_keeps_its_end_from_a_line_and_its_whole_length() -> None:
    chunks = [b"first line\n", b"x" * 50, b"\nlast line\n"]
    tail = log_tail(chunks, limit=20)
    assert tail.data == b"last line\n"
    assert (tail.total, tail.dropped) == (72, 62)
    whole = log_tail([b"short\n"], limit=20)
    assert (whole.data, whole.dropped) == (b"short\n", 0)


def test_kept_logs_are_ordered_by_attempt_and_older_ones_by_when_they_were_kept() -> None:
    second, first, legacy = _kept("b", 2), _kept("a", 1), _kept("z", kept_at="2026-01-01T00:00:00.000001Z")
    assert [item["metadata"]["name"] for item in in_order([second, first])] == ["a", "b"]
    assert [item["metadata"]["name"] for item in in_order([legacy, _kept("y", kept_at="2025")])] == ["y", "z"]


def test_numbers_stay_as_they_were_when_older_logs_go() -> None:
    kept = [_kept("a", 1), _kept("c", 5), _kept("d", 6)]
    assert attempt_numbers(kept) == [1, 5, 6]
    assert next_attempt(kept) == 7
    assert next_attempt([]) == 1
    assert attempt_numbers([_kept("x"), _kept("y")]) == [1, 2]  # older logs without numbers: by place


def test_only_a_gap_above_the_latest_kept_log_is_unkept() -> None:
    kept = [_kept("a", 1), _kept("c", 5)]
    assert unkept_before(kept, 8) == (6, 7)
    assert unkept_before(kept, 6) is None
    assert unkept_before([], 1) is None


def test_past_the_budget_the_oldest_after_the_first_attempt_go() -> None:
    kept = [_kept(f"log-{n}", n) for n in range(1, 7)]
    assert [item["metadata"]["name"] for item in surplus(kept, keep=4)] == ["log-2", "log-3"]
    assert surplus(kept[:4], keep=4) == []
