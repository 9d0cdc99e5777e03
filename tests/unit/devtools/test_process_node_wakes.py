"""The process node's loop is woken by what a kubelet reacts to: a change to one of its pods (its watch) and a
container's exit (the whole node runs in tests/integration/test_process_node.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any, cast

from disttrain_dev.kubelet import KubeletApi
from disttrain_dev.process_node import _wake_on_exit, _watch_pods
from disttrain_kube.api_errors import TransientApiError


class _Watches:
    """A watch that breaks once, then delivers one event, after which the node is stopping."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.queries: list[dict[str, str]] = []

    def stream_lines(self, path: str, query: dict[str, str], read_timeout: float) -> Iterator[bytes]:
        assert path == "/api/v1/pods"
        self.queries.append(query)
        if len(self.queries) == 1:
            raise TransientApiError(0, "GET /api/v1/pods: connection reset")
        self.stop.set()
        yield b'{"type": "ADDED", "object": {}}'


def test_a_change_to_the_node_s_pods_wakes_the_loop_after_a_broken_watch() -> None:
    stop, wake = threading.Event(), threading.Event()
    watches = _Watches(stop)
    _watch_pods(cast(KubeletApi, cast(Any, watches)), "process-node-0", wake, stop)
    assert wake.is_set()
    assert [query["fieldSelector"] for query in watches.queries] == ["spec.nodeName=process-node-0"] * 2


def test_a_process_ending_wakes_the_loop() -> None:
    wake = threading.Event()
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    waiter = threading.Thread(target=_wake_on_exit, args=(process, wake), daemon=True)
    waiter.start()
    assert not wake.wait(0.2)  # still running: nothing to report
    assert process.poll() is None  # the waiter holds the process; a poll meanwhile answers without blocking
    assert process.stdin is not None
    process.stdin.close()
    assert wake.wait(30)
    assert process.poll() == 0
