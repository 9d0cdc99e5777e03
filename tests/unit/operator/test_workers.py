"""The operator's parts name a thread that ended unasked, which fails the liveness probe."""

from __future__ import annotations

import threading

from disttrain_operator.workers import Workers


class _Broken(Workers):
    """Thread `broken` returns at once, as one that died on an error would; `steady` waits to be stopped."""

    def __init__(self) -> None:
        super().__init__("broken", "steady")

    def _work(self) -> None:
        if threading.current_thread().name == "broken":
            return
        with self._condition:
            while not self._stopped:
                self._condition.wait()


def test_a_thread_that_ended_unasked_is_named_until_the_part_is_stopped() -> None:
    part = _Broken()
    assert part.ended() == []  # not started: nothing ended
    part.start()
    part._threads[0].join(timeout=10)
    assert part.ended() == ["broken"]
    part.stop()
    part.join(timeout=10)
    assert part.ended() == []  # stopped: its threads end as asked
