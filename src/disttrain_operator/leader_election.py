"""Leader election over a coordination.k8s.io Lease, as client-go does it: one replica acts, the rest wait.

Expiry is judged by this process's own monotonic clock from the moment it last saw the lease record
change, never by comparing `renewTime` with the local wall clock, so clock skew between nodes
cannot hand the lease to two replicas. The leader gives up (the process exits) when it could not
renew for `renew_seconds`, which is shorter than the lease, so it stops acting before anyone else
may start. The whole operator, its own threads included, runs only in the leader.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from disttrain_contract.timestamps import format_micro_time
from disttrain_kube.api_errors import TransientApiError
from disttrain_kube.rest import Kube
from disttrain_operator.leases import read_lease, write_lease

logger = logging.getLogger(__name__)

LEASE_NAME = "disttrain-operator"
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class Decision(Enum):
    CREATE = "create"  # no lease yet
    RENEW = "renew"  # we hold it
    TAKE = "take"  # released, or its holder stopped renewing
    WAIT = "wait"  # someone else holds it


@dataclass(frozen=True)
class Timing:
    lease_seconds: float = 15.0
    renew_seconds: float = 10.0
    retry_seconds: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_seconds < self.renew_seconds < self.lease_seconds:
            raise ValueError("leader election needs 0 < --retry-seconds < --renew-seconds < --lease-seconds")


def decide(spec: dict[str, Any] | None, identity: str, unchanged_for: float) -> Decision:
    """What to do with the lease we read, given how long (on our clock) its record has not changed."""
    if spec is None:
        return Decision.CREATE
    holder = spec.get("holderIdentity")
    if holder == identity:
        return Decision.RENEW
    if not holder or unchanged_for >= float(spec.get("leaseDurationSeconds") or 0):
        return Decision.TAKE
    return Decision.WAIT


def claimed(
    spec: dict[str, Any] | None, identity: str, decision: Decision, *, lease_seconds: int, now: str
) -> dict[str, Any]:
    """The lease spec after acting on `decision`: acquire time and transitions move only on a change of holder."""
    current = spec or {}
    changed_hands = decision is not Decision.RENEW
    transitions = int(current.get("leaseTransitions") or 0) + (1 if changed_hands and spec is not None else 0)
    return {
        "holderIdentity": identity,
        "leaseDurationSeconds": lease_seconds,
        "acquireTime": now if changed_hands else current.get("acquireTime", now),
        "renewTime": now,
        "leaseTransitions": transitions,
    }


def released(spec: dict[str, Any]) -> dict[str, Any]:
    """What a leader leaves behind on a clean shutdown, so a standby takes over at once."""
    return {**spec, "holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": _now()}


def default_identity() -> str:
    """The pod's name (or host name) and a random suffix: a restarted container is a new candidate."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def default_namespace() -> str:
    """POD_NAMESPACE (from the downward API), else the ServiceAccount's namespace, else default."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    if _SERVICE_ACCOUNT_NAMESPACE.exists():
        return _SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    return "default"


MIN_REQUEST_SECONDS = 0.1


def _now() -> str:
    return format_micro_time(datetime.now(UTC))


class LeaderElector:
    """Acquires the lease (blocking), then renews it from a daemon thread until the process ends."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        identity: str,
        *,
        timing: Timing,
        on_lost: Callable[[], None],
        name: str = LEASE_NAME,
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._name = name
        self.identity = identity
        self._timing = timing
        self._on_lost = on_lost
        self._seen: tuple[Any, ...] | None = None
        self._seen_at = time.monotonic()
        self._leading = threading.Event()
        self._lock = threading.Lock()  # a renewal and the release never interleave

    def _unchanged_for(self, spec: dict[str, Any] | None) -> float:
        record = (spec or {}).get("holderIdentity"), (spec or {}).get("renewTime")
        if record != self._seen:
            self._seen, self._seen_at = record, time.monotonic()
        return time.monotonic() - self._seen_at

    def try_once(self, seconds: float | None = None) -> bool:
        """One round: read, decide, write with the read's resourceVersion. True while we hold the lease.
        `seconds`: how long the round may take, its two requests sharing it (None: the client's timeouts)."""
        kube = self._kube if seconds is None else self._kube.with_timeout(max(seconds / 2, MIN_REQUEST_SECONDS))
        lease = read_lease(kube, self._namespace, self._name)
        spec = lease.get("spec") if lease else None
        decision = decide(spec, self.identity, self._unchanged_for(spec))
        if decision is Decision.WAIT:
            return False
        new_spec = claimed(spec, self.identity, decision, lease_seconds=round(self._timing.lease_seconds), now=_now())
        won = write_lease(kube, self._namespace, self._name, new_spec, lease)
        if won and decision is not Decision.RENEW:
            logger.info("leader election: %s took lease %s/%s", self.identity, self._namespace, self._name)
        return won

    def acquire(self) -> None:
        """Block until this process leads, then keep the lease from a daemon thread."""
        logger.info("leader election: %s waits for lease %s/%s", self.identity, self._namespace, self._name)
        while not self._attempt():
            time.sleep(self._timing.retry_seconds)
        self._leading.set()
        threading.Thread(target=self._keep, name="leader-election", daemon=True).start()

    def _attempt(self, seconds: float | None = None) -> bool:
        try:
            return self.try_once(seconds)
        except TransientApiError as error:
            logger.warning("leader election: %s", error)
            return False

    def _keep(self) -> None:
        """Renew every `retry_seconds`. As client-go's renew deadline does, a renewal may take only what is left
        of `renew_seconds` since the last one that held, so a leader whose API server hangs stops acting before
        its lease could run out, while a slow but answering API server keeps it leading."""
        renewed = time.monotonic()
        while True:
            time.sleep(self._timing.retry_seconds)
            with self._lock:
                if not self._leading.is_set():
                    return
                left = renewed + self._timing.renew_seconds - time.monotonic()
                if left > 0 and self._attempt(left):
                    renewed = time.monotonic()
                    continue
                if time.monotonic() - renewed < self._timing.renew_seconds:
                    continue
                self._leading.clear()
            logger.error("leader election: %s could not renew lease %s; stopping", self.identity, self._name)
            self._on_lost()
            return

    def release(self) -> None:
        """Hand the lease back on a clean shutdown; a failure here only delays the standby."""
        with self._lock:
            if not self._leading.is_set():
                return
            self._leading.clear()
            try:
                lease = read_lease(self._kube, self._namespace, self._name)
                if lease and lease.get("spec", {}).get("holderIdentity") == self.identity:
                    write_lease(self._kube, self._namespace, self._name, released(lease["spec"]), lease)
            except TransientApiError as error:
                logger.warning("leader election: could not release the lease: %s", error)


class _Alive(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"standby\n")

    def log_message(self, format: str, *args: Any) -> None:
        """Probes every few seconds are not worth a log line."""


@contextmanager
def standby(liveness_url: str) -> Iterator[None]:
    """While waiting: answer the liveness probe, whose port kopf binds once we lead."""
    url = urlsplit(liveness_url)
    server = ThreadingHTTPServer((url.hostname or "0.0.0.0", url.port or 80), _Alive)
    threading.Thread(target=server.serve_forever, name="standby-probe", daemon=True).start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
