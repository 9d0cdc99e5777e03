"""A cap on the steps a second (`--max-steps-per-second`): a run whose natural speed is above the cap trains at
the cap, steady whatever its machine's neighbours do, as a GPU job's steps are. A run that falls behind starts
its schedule again where it is, so a slow stretch is never followed by a burst."""

from __future__ import annotations

import time
from collections.abc import Callable


class Pace:
    def __init__(
        self,
        steps_per_second: int | None,
        step: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._rate, self._clock, self._sleep = steps_per_second, clock, sleep
        self._since = (clock(), step)

    def after(self, step: int) -> None:
        """Wait until `step` is due at the cap, from where the schedule began."""
        if not self._rate:
            return
        then, first = self._since
        due, now = then + (step - first) / self._rate, self._clock()
        if now < due:
            self._sleep(due - now)
        else:
            self._since = (now, step)
