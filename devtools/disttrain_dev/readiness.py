"""Readiness probes as a kubelet runs them, for the process node: an HTTP GET or a TCP connection to the pod's
address, every `periodSeconds` once `initialDelaySeconds` passed. A container without one is ready once it
runs; one with an `exec` probe too, as the process node runs no command beside a pod's."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_PERIOD_SECONDS = 10  # a kubelet's defaults
DEFAULT_TIMEOUT_SECONDS = 1


@dataclass
class ReadinessProbe:
    probe: Mapping[str, Any]
    ports: Mapping[str, int]  # the container's named ports
    due: float  # when it runs next, on the monotonic clock

    @classmethod
    def of(cls, container: Mapping[str, Any], started: float) -> ReadinessProbe | None:
        """The container's readiness probe, first due `initialDelaySeconds` after `started`; None without one."""
        probe = container.get("readinessProbe")
        if not isinstance(probe, Mapping) or not ({"httpGet", "tcpSocket"} & probe.keys()):
            return None
        ports = {port["name"]: int(port["containerPort"]) for port in container.get("ports") or [] if "name" in port}
        return cls(probe, ports, started + float(probe.get("initialDelaySeconds", 0)))

    def restart(self, now: float) -> None:
        """The container started again: not ready until the probe says so, after its initial delay."""
        self.due = now + float(self.probe.get("initialDelaySeconds", 0))

    def check(self, address: str, now: float) -> bool | None:
        """Whether the container at `address` is ready, once the probe is due; None before."""
        if now < self.due:
            return None
        self.due = now + float(self.probe.get("periodSeconds", DEFAULT_PERIOD_SECONDS))
        timeout = float(self.probe.get("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS))
        if "httpGet" in self.probe:
            action = self.probe["httpGet"]
            url = f"http://{address}:{self._port(action['port'])}{action.get('path') or '/'}"
            try:
                with urllib.request.urlopen(url, timeout=timeout) as answer:
                    return 200 <= int(answer.status) < 400
            except (urllib.error.URLError, OSError):  # an HTTPError (400 and above) is a URLError
                return False
        try:
            socket.create_connection((address, self._port(self.probe["tcpSocket"]["port"])), timeout=timeout).close()
        except OSError:
            return False
        return True

    def _port(self, port: int | str) -> int:
        return self.ports[port] if isinstance(port, str) and port in self.ports else int(port)
