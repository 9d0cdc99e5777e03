"""The ParameterServer chief waits for its servers before it connects."""

from __future__ import annotations

import socket
import threading

import pytest

from disttrain_contract.exit_codes import ExitCode, TrainerError
from disttrain_operator.cli.ports import free_port
from disttrain_trainer.peers import wait_for_peers


def test_peers_are_awaited_until_they_listen_or_the_wait_ends() -> None:
    port = free_port()
    listener = socket.socket()

    def listen_later() -> None:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen()

    timer = threading.Timer(1.0, listen_later)
    timer.start()
    try:
        wait_for_peers([f"127.0.0.1:{port}"], timeout=10, interval=0.2)
    finally:
        timer.join()
        listener.close()
    with pytest.raises(TrainerError) as raised:
        wait_for_peers([f"127.0.0.1:{free_port()}"], timeout=0.5, interval=0.1)
    assert raised.value.code == ExitCode.PEER_LOST
