"""Wait until the peers of the cluster can be reached, before TensorFlow connects to them.

TensorFlow waits for an unreachable peer in silence (seen: two MultiWorkerMirrored workers stuck
connecting for ten minutes with empty logs). Here a peer whose name resolves and whose port answers is
reachable: it accepts a connection, or refuses it because its server has not started yet, as every
peer's has not at start. A peer whose name resolves but that does not answer at all (its packets
dropped, no route) is not. Each task says in its log which peers it waits for, and gives up once
peers stayed silent for a bounded time, with a retryable exit code and a message naming them, which
the operator shows on the job. A name that does not resolve yet belongs to a pod not placed yet
(Pending, as the job's status shows): it is waited for without a bound.

A ParameterServer coordinator needs more: its servers must accept connections, or the coordinator
fails at once. Pure sockets: no TensorFlow.
"""

from __future__ import annotations

import enum
import socket
import time
from collections.abc import Callable, Iterable

from disttrain_contract.exit_codes import ExitCode, TrainerError
from disttrain_trainer.config import Role
from disttrain_trainer.reporting import log

LOG_EVERY_SECONDS = 10.0


class Answer(enum.Enum):
    ACCEPTS = "accepts"
    REFUSES = "refuses"  # reachable, its server not up yet
    SILENT = "silent"  # no route, or its packets dropped
    UNRESOLVED = "unresolved"  # no address for its name yet


def probe(address: str, timeout: float) -> Answer:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return Answer.ACCEPTS
    except ConnectionRefusedError:
        return Answer.REFUSES
    except socket.gaierror:
        return Answer.UNRESOLVED
    except (OSError, ValueError):
        return Answer.SILENT


def peers_before_training(role: Role, *, parameter_server: bool) -> tuple[list[str], bool]:
    """The addresses a training task waits for, and whether each must accept connections: a ParameterServer
    coordinator's servers must; MultiWorkerMirrored's other workers need only answer."""
    if parameter_server:
        return [address for kind in ("ps", "worker") for address in role.cluster.get(kind, [])], True
    own = role.cluster.get(role.task_type, [""])[role.index]
    return [address for kind in ("chief", "worker") for address in role.cluster.get(kind, []) if address != own], False


def wait_for_peers(
    addresses: Iterable[str],
    timeout: float,
    *,
    listening: bool,
    interval: float = 0.5,
    probe_timeout: float = 2.0,
    stopped: Callable[[], bool] = lambda: False,
) -> None:
    """Return once every `host:port` accepts a connection (`listening`) or at least answers; PEER_LOST
    (retryable) naming the peers that kept it waiting for `timeout` seconds, unresolved names aside;
    PREEMPTED once `stopped` says the task was told to stop meanwhile (nothing trained: nothing to save)."""
    enough = {Answer.ACCEPTS} if listening else {Answer.ACCEPTS, Answer.REFUSES}
    waiting = sorted(set(addresses))
    blocked_since: float | None = None
    logged: tuple[list[str], float] = ([], time.monotonic() - LOG_EVERY_SECONDS)
    while True:
        if stopped():
            raise TrainerError(ExitCode.PREEMPTED, "preempted: stopped while waiting for peers, nothing to save")
        answers = {address: probe(address, probe_timeout) for address in waiting}
        waiting = [address for address, answer in answers.items() if answer not in enough]
        if not waiting:
            return
        blocking = [address for address in waiting if answers[address] is not Answer.UNRESOLVED]
        now = time.monotonic()
        blocked_since = (blocked_since or now) if blocking else None
        if blocked_since is not None and now - blocked_since >= timeout:
            state = "not accepting connections" if listening else "unreachable"
            raise TrainerError(ExitCode.PEER_LOST, f"peers {state} after {timeout:.0f}s: {', '.join(blocking)}")
        if waiting != logged[0] or now - logged[1] >= LOG_EVERY_SECONDS:
            unresolved = [address for address in waiting if address not in blocking]
            log("waiting for peers", peers=waiting, unresolved=unresolved, gives_up_after=timeout)
            logged = (waiting, now)
        time.sleep(interval)
