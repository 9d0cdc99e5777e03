"""The one backoff: doubling from the first delay up to the longest, jitter only ever adding."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from disttrain_core.backoff import Backoff


def test_the_delay_doubles_from_the_first_up_to_the_longest() -> None:
    backoff = Backoff(first=1, longest=6)
    assert [backoff.delay(n) for n in range(1, 6)] == [1, 2, 4, 6, 6]


@given(failures=st.integers(1, 200), draw=st.floats(0, 1, exclude_max=True))
def test_jitter_adds_at_most_its_fraction(failures: int, draw: float) -> None:
    plain, jittered = Backoff(0.5, 30), Backoff(0.5, 30, jitter=0.5)
    base = plain.delay(failures)
    assert base <= jittered.delay(failures, lambda: draw) <= base * 1.5
    assert 0.5 <= base <= 30
