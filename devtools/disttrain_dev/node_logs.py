"""The kubelet's log endpoint for the process node, so `kubectl logs` works through the API server.

The API server asks the node's InternalIP on the port of `status.daemonEndpoints.kubeletEndpoint`,
over HTTPS, for `/containerLogs/{namespace}/{pod}/{container}`; it checks no kubelet certificate
unless told to (`--kubelet-certificate-authority`), so a self-signed one serves. Container output is
already in files (`pods/{namespace}_{pod}_{uid}/{container}.log`, and the run before a restart's in
`previous_log`); this serves them, with `tailLines`, `limitBytes`, `previous` and `follow` (the log so far,
then what the container writes until its process ends). Lines carry no timestamps: the files hold the
processes' output as it is.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qs, urlsplit

logger = logging.getLogger(__name__)

_PATH = re.compile(r"/containerLogs/(?P<namespace>[^/]+)/(?P<pod>[^/]+)/(?P<container>[^/]+)/?")


def find_log(pods: Path, namespace: str, pod: str, container: str) -> Path | None:
    """The container's log in the newest folder of that pod name (a pod recreated with a new uid)."""
    candidates = [path / f"{container}.log" for path in pods.glob(f"{namespace}_{pod}_*") if path.is_dir()]
    existing = [path for path in candidates if path.exists()]
    return max(existing, key=lambda path: path.stat().st_mtime, default=None)


def previous_log(log: Path) -> Path:
    """Where a container's log goes when it restarts: the kubelet keeps the log of one run before the current."""
    return log.with_name(f"{log.stem}.previous{log.suffix}")


def select(data: bytes, tail_lines: int | None, limit_bytes: int | None) -> bytes:
    """The last `tail_lines` lines, then at most the first `limit_bytes` of them, as the kubelet cuts."""
    if tail_lines is not None:
        lines = data.splitlines(keepends=True)
        data = b"".join(lines[-tail_lines:]) if tail_lines > 0 else b""
    return data[:limit_bytes] if limit_bytes is not None else data


FOLLOW_POLL_SECONDS = 0.2


def _pid(log: Path) -> int:
    """The pid of the container's current run, which the node writes beside its log (0 once unreadable)."""
    try:
        return int(log.with_suffix(".pid").read_text())
    except (OSError, ValueError):
        return 0


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _number(query: dict[str, list[str]], name: str) -> int | None:
    values = query.get(name)
    try:
        return max(int(values[0]), 0) if values else None
    except ValueError:
        return None


def _handler(pods: Path) -> type[BaseHTTPRequestHandler]:
    class LogHandler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            match = _PATH.fullmatch(url.path)
            log = find_log(pods, **match.groupdict()) if match else None
            if match is None or log is None:
                self.send_error(404, "no such container log")
                return
            query = parse_qs(url.query)
            if query.get("previous", [""])[0] == "true":
                log = previous_log(log)
                if not log.exists():  # the kubelet's words and status for a container that never restarted
                    self.send_error(400, f'previous terminated container "{match.group("container")}" not found')
                    return
            follow = query.get("follow", [""])[0] == "true"
            pid = _pid(log) if follow else None  # read before the log is opened: a restart after it ends the follow
            with log.open("rb") as file:  # one run's file, even once a restart moves it to `previous`
                data = file.read()
                body = select(data, _number(query, "tailLines"), _number(query, "limitBytes"))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                if not follow:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                if pid is not None:
                    try:
                        self._follow(file, pid)
                    except (BrokenPipeError, ConnectionResetError):  # the reader went away
                        return

        def _follow(self, file: BinaryIO, pid: int) -> None:
            """What the run writes after what was sent, until its process ends (the connection closes then), as
            the kubelet's follow ends with its container: a restarted container is a new stream."""
            running = True
            while running:
                running = _alive(pid)  # read before the file: what is written before the exit is sent
                more = file.read()
                if more:
                    self.wfile.write(more)
                    self.wfile.flush()
                elif running:
                    time.sleep(FOLLOW_POLL_SECONDS)

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("logs: " + format, *args)

    return LogHandler


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed serving certificate, made once."""
    cert, key = folder / "node-logs.crt", folder / "node-logs.key"
    if not cert.exists() or not key.exists():
        folder.mkdir(parents=True, exist_ok=True)
        request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=node"]
        subprocess.run(
            [*request, "-keyout", str(key), "-out", str(cert)],
            check=True,
            capture_output=True,
        )
    return cert, key


def serve(folder: Path, host: str) -> ThreadingHTTPServer:
    """Serve the logs under `folder/pods` on a free port of `host` from a daemon thread."""
    server = ThreadingHTTPServer((host, 0), _handler(folder / "pods"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*_certificate(folder))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, name="node-logs", daemon=True).start()
    return server
