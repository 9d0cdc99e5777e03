"""Waiting for something to happen, by asking until it has: the one poll that the local cluster, the
benchmarks and the tests all use."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal, TypeVar

T = TypeVar("T")


def wait_for(
    what: str, check: Callable[[], T | Literal[False] | None], timeout: float = 30, interval: float = 0.2
) -> T:
    """Ask `check` every `interval` seconds until it answers something truthy, and return that; a TimeoutError
    naming what never happened after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
