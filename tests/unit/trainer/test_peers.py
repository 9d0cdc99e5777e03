"""The ParameterServer chief waits for its servers before it connects."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from disttrain.local.ports import free_port
from disttrain_contract.exit_codes import ExitCode, TrainerError
from disttrain_trainer.peers import Answer, probe, wait_for_peers


def test_peers_are_awaited_until_they_listen_or_the_wait_ends() -> None:
    port = free_port()
    listener = socket.socket()

    def listen_later() -> None:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen()

    timer = threading.Timer(0.3, listen_later)
    timer.start()
    try:
        wait_for_peers([f"127.0.0.1:{port}"], timeout=10, listening=True, interval=0.2)
    finally:
        timer.join()
        listener.close()
    with pytest.raises(TrainerError) as raised:
        wait_for_peers([f"127.0.0.1:{free_port()}"], timeout=0.5, listening=True, interval=0.1)
    assert raised.value.code == ExitCode.PEER_LOST


def test_a_multi_worker_peer_that_refuses_is_reachable_its_server_is_just_not_up() -> None:
    wait_for_peers([f"127.0.0.1:{free_port()}"], timeout=5, listening=False, interval=0.1)


def test_a_silent_peer_is_named_in_the_log_and_in_the_error_that_ends_the_wait(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A listener whose accept queue is full drops further connections unanswered, as a cut link does."""
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        silent = f"127.0.0.1:{full.getsockname()[1]}"
        with socket.create_connection(full.getsockname()):  # takes the queue's one place
            assert probe(silent, timeout=0.1) is Answer.SILENT
            answering = f"127.0.0.1:{free_port()}"
            with pytest.raises(TrainerError) as raised:
                wait_for_peers([silent, answering], timeout=1, listening=False, interval=0.1, probe_timeout=0.1)
    assert raised.value.code == ExitCode.PEER_LOST
    assert str(raised.value) == f"peers unreachable after 1s: {silent}"
    waiting = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert waiting and all(line["event"] == "waiting for peers" and line["peers"] == [silent] for line in waiting)


def test_a_peer_whose_name_does_not_resolve_yet_is_waited_for_without_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its pod is not placed yet: the wait goes on past `timeout` until the name resolves."""
    resolving_after = time.monotonic() + 0.6
    create_connection = socket.create_connection

    def resolver(address: tuple[str, int], timeout: float) -> socket.socket:
        if address[0] == "pending-peer" and time.monotonic() < resolving_after:
            raise socket.gaierror("Name or service not known")
        return create_connection(("127.0.0.1", address[1]), timeout)

    monkeypatch.setattr(socket, "create_connection", resolver)
    assert probe(f"pending-peer:{free_port()}", timeout=0.3) is Answer.UNRESOLVED
    started = time.monotonic()
    wait_for_peers([f"pending-peer:{free_port()}"], timeout=0.3, listening=False, interval=0.1)
    assert time.monotonic() - started >= 0.5  # past its timeout: it waited until the name resolved, then answered


def test_a_task_told_to_stop_while_it_waits_leaves_at_once_with_nothing_to_save() -> None:
    calls = iter([False, False, True])
    with pytest.raises(TrainerError) as raised:
        wait_for_peers(
            [f"127.0.0.1:{free_port()}"], timeout=60, listening=True, interval=0.01, stopped=lambda: next(calls)
        )
    assert raised.value.code == ExitCode.PREEMPTED
    assert str(raised.value) == "preempted: stopped while waiting for peers, nothing to save"
