"""Wake-ups: each job's latest request comes due once, in time order; a cancelled one never does.

A sentinel scheduled after every other request is the positive sign: once it came due, each request
before it has come due or been dropped."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from disttrain_core.types import JobKey
from disttrain_operator.wakeups import Wakeups


def test_the_latest_request_of_each_job_comes_due_once_and_a_cancelled_one_never() -> None:
    woken: list[JobKey] = []
    sentinel_due = threading.Event()

    def wake(key: JobKey) -> None:
        woken.append(key)
        if key == ("team", "sentinel"):
            sentinel_due.set()

    wakeups = Wakeups(wake)
    wakeups.start()
    now = datetime.now(UTC)
    wakeups.schedule(("team", "moved"), now)
    wakeups.schedule(("team", "cancelled"), now + timedelta(milliseconds=20))
    wakeups.cancel(("team", "cancelled"))
    wakeups.schedule(("team", "due"), now + timedelta(milliseconds=10))
    wakeups.schedule(("team", "moved"), now + timedelta(milliseconds=60))
    wakeups.schedule(("team", "sentinel"), now + timedelta(milliseconds=100))
    assert sentinel_due.wait(10)
    wakeups.stop()
    wakeups.join(10)
    assert woken == [("team", "due"), ("team", "moved"), ("team", "sentinel")]


def test_a_wall_clock_stepped_back_after_scheduling_does_not_hold_a_wake_up_back() -> None:
    """The due time is read off the monotonic clock: NTP moving the wall clock an hour back changes nothing."""
    woken = threading.Event()
    wall = [1_000_000.0]
    wakeups = Wakeups(lambda key: woken.set(), wall=lambda: wall[0])
    wakeups.start()
    wakeups.schedule(("team", "deadline"), datetime.fromtimestamp(wall[0] + 0.05, UTC))
    wall[0] -= 3600
    assert woken.wait(10)
    wakeups.stop()
