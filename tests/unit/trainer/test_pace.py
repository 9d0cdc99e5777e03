"""The trainer's cap on its speed (`--max-steps-per-second`): a fast run waits for each step's time, a slow
stretch starts the schedule again instead of a burst, and no cap waits for nothing."""

from __future__ import annotations

from disttrain_trainer.pace import Pace


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def test_a_fast_run_trains_at_the_cap_and_a_slow_stretch_is_not_caught_up() -> None:
    clock = _Clock()
    pace = Pace(10, step=5, clock=clock, sleep=clock.sleep)
    clock.now += 0.02
    pace.after(6)  # due 0.1 s after the start
    assert clock.slept == [0.08] and round(clock.now, 6) == 100.1
    clock.now += 0.5  # a slow step: 0.4 s late
    pace.after(7)
    assert clock.slept == [0.08]  # no wait, and the schedule starts again here
    clock.now += 0.01
    pace.after(8)
    assert clock.slept == [0.08, 0.09]


def test_without_a_cap_nothing_waits() -> None:
    clock = _Clock()
    pace = Pace(None, step=0, clock=clock, sleep=clock.sleep)
    for step in range(1, 100):
        pace.after(step)
    assert clock.slept == []
