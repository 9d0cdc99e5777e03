"""MultiWorkerMirrored's lockstep for the stand-in: its workers step together, as an all-reduce makes them, over
plain sockets on their TF_CONFIG ports.

Each worker answers a peer's connection with one JSON line of its state (its step, the step it leaves at, its
incarnation, the peers' incarnations it joined with), and asks its peers the same before it may run ahead of the
slowest by more than `WINDOW` steps. What a collective does, the lockstep does:

- the workers start together (`join`): each waits until every peer is joining too, or stepping with it, so that
  a run started again in place never steps beside a peer's run from before, which leaves first;
- a peer that is gone (its port refuses, its name no longer resolves) or came back as another run fails the
  step within `LOST_AFTER` seconds: PEER_LOST, as a failed all-reduce;
- a peer that does not answer (frozen, its packets dropped) holds every worker in place, with no bound, as a
  collective waits;
- a termination signal names a step ahead of every worker (`stop_at`), which each learns before it can pass
  it, so all leave at that step, the chief saving there (preemption.py's `SaveTogether`);
- a worker that leaves, finished or preempted, answers its peers until each has asked once since, so none
  takes its going for a loss.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from disttrain_contract.exit_codes import ExitCode, TrainerError

WINDOW = 4  # steps a worker may run ahead of its slowest peer
LOST_AFTER = 1.0  # seconds a peer may refuse before a step fails, as gRPC reports a peer gone
ASK_TIMEOUT = 1.0  # seconds for a peer's answer; no answer is a held step, never a loss
POLL_SECONDS = 0.005
FAREWELL_SECONDS = 5.0  # the longest a leaving worker answers for peers that do not ask
MAX_LINE = 1 << 16  # an incarnation of each peer it joined with: 17 bytes a peer


@dataclass
class PeerState:
    step: int
    stop_at: int | None
    incarnation: str
    joining: bool
    joined: frozenset[str]


class Lockstep:
    """One worker's side: its state served on its port, its peers' asked for."""

    def __init__(self, own: str, port: int, peers: Sequence[str], clock: Callable[[], float] = time.monotonic) -> None:
        self.own, self.peers, self._clock = own, list(peers), clock
        self.incarnation = secrets.token_hex(8)
        self.step = 0
        self.stop_at: int | None = None
        self._joining, self._joined = True, frozenset[str]()
        self._known: dict[str, PeerState] = {}
        self._asked_since_leaving: set[str] = set()
        self._leaving = False
        self._lock = threading.Lock()
        self._socket = socket.create_server(("", port))
        threading.Thread(target=self._serve, name="lockstep", daemon=True).start()

    def _serve(self) -> None:
        while True:
            connection, _ = self._socket.accept()
            with connection:
                connection.settimeout(ASK_TIMEOUT)
                try:
                    asker = connection.recv(MAX_LINE).decode("utf-8", "replace").strip()
                    with self._lock:
                        state = {
                            "step": self.step,
                            "stop_at": self.stop_at,
                            "incarnation": self.incarnation,
                            "joining": self._joining,
                            "joined": sorted(self._joined),
                        }
                        if self._leaving and asker:
                            self._asked_since_leaving.add(asker)
                    connection.sendall(json.dumps(state).encode() + b"\n")
                except OSError:
                    continue

    def join(self, timeout: float, stopped: Callable[[], bool] = lambda: False) -> None:
        """Start with every peer: each joining too, or stepping having joined with this run; PEER_LOST naming those
        that did not within `timeout` seconds, PREEMPTED once `stopped` says so meanwhile."""
        until, waiting = self._clock() + timeout, list(self.peers)
        while waiting:
            if stopped():
                raise TrainerError(ExitCode.PREEMPTED, "preempted: stopped while waiting for peers, nothing to save")
            if self._clock() >= until:
                raise TrainerError(ExitCode.PEER_LOST, f"peers did not start with this run: {', '.join(waiting)}")
            for peer in list(waiting):
                answer = self._ask(peer)
                if isinstance(answer, PeerState) and (answer.joining or self.incarnation in answer.joined):
                    self._known[peer] = answer
                    waiting.remove(peer)
            time.sleep(POLL_SECONDS)
        with self._lock:
            self._joining = False
            self._joined = frozenset(state.incarnation for state in self._known.values())

    def stop(self) -> None:
        """A termination signal: leave at a step ahead of every worker."""
        with self._lock:
            if self.stop_at is None:
                self.stop_at = self.step + WINDOW + 1

    def before(self, step: int) -> int | None:
        """Wait until every peer is within WINDOW of `step`; the step to leave at once one is named (by this worker
        or a peer), else None."""
        lost_since: dict[str, float] = {}
        while True:
            behind = [peer for peer in self.peers if self._behind(peer, step)]
            if not behind or self._stopping_by(step):
                return self.stop_at
            for peer in behind:
                answer = self._ask(peer)
                if isinstance(answer, PeerState):
                    lost_since.pop(peer, None)
                    self._learn(peer, answer)
                elif answer is Gone:
                    since = lost_since.setdefault(peer, self._clock())
                    if self._clock() - since >= LOST_AFTER:
                        raise TrainerError(ExitCode.PEER_LOST, f"a peer was lost: {peer}")
            time.sleep(POLL_SECONDS)

    def advanced(self, step: int) -> None:
        with self._lock:
            self.step = step

    def farewell(self) -> None:
        """Leaving: ask every peer once, so each hears this worker's last state, and answer until each asked."""
        with self._lock:
            self._leaving = True
        for peer in self.peers:
            self._ask(peer)
        until = self._clock() + FAREWELL_SECONDS
        while self._clock() < until:
            with self._lock:
                if self._asked_since_leaving >= set(self.peers):
                    return
            time.sleep(POLL_SECONDS)

    def _behind(self, peer: str, step: int) -> bool:
        known = self._known.get(peer)
        return known is None or known.step < step - WINDOW

    def _stopping_by(self, step: int) -> bool:
        return self.stop_at is not None and self.stop_at <= step

    def _learn(self, peer: str, state: PeerState) -> None:
        known = self._known.get(peer)
        if known is not None and known.incarnation != state.incarnation:
            raise TrainerError(ExitCode.PEER_LOST, f"a peer was lost: {peer} started again")
        self._known[peer] = state
        if state.stop_at is not None:
            with self._lock:
                self.stop_at = state.stop_at if self.stop_at is None else min(self.stop_at, state.stop_at)

    def _ask(self, peer: str) -> PeerState | type[Gone] | None:
        """The peer's state; Gone where it refuses or no longer resolves; None where it does not answer."""
        host, _, port = peer.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=ASK_TIMEOUT) as connection:
                connection.sendall(self.own.encode() + b"\n")
                line = connection.makefile("rb").readline(MAX_LINE)
        except (ConnectionRefusedError, ConnectionResetError, socket.gaierror):
            return Gone
        except OSError:
            return None
        try:
            state = json.loads(line)
            stop_at = state["stop_at"]
            return PeerState(
                step=int(state["step"]),
                stop_at=None if stop_at is None else int(stop_at),
                incarnation=str(state["incarnation"]),
                joining=bool(state["joining"]),
                joined=frozenset(str(incarnation) for incarnation in state["joined"]),
            )
        except (ValueError, KeyError, TypeError):
            return Gone if not line else None


class Gone:
    """A peer that refuses or no longer resolves."""
