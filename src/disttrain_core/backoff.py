"""One exponential backoff for everything the operator retries: a reconcile that failed, a watch that
lost its API server, a trainer that does not answer its progress poll."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """`first` after one failure, doubling with each failure in a row up to `longest`. `jitter` adds up to
    that fraction of the delay at random (client-go's `wait.Jitter`), so that many callers failing at
    once, as every watch does when the API server restarts, do not come back in step."""

    first: float
    longest: float
    jitter: float = 0.0

    def delay(self, failures: int, draw: Callable[[], float] = random.random) -> float:
        """The pause after `failures` failures in a row (1 or more); `draw` returns a float in [0, 1)."""
        base: float = min(self.first * 2 ** max(failures - 1, 0), self.longest)
        return base * (1 + self.jitter * draw()) if self.jitter else base
