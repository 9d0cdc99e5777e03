"""What training tells the world: JSON log lines on stdout and, from the chief, its progress.

The chief's progress goes to progress.json beside the checkpoints, to an HTTP endpoint and to the
termination message, as `progress_contract` describes for the operator.
"""

from __future__ import annotations

import json
import math
import os
import socketserver
import sys
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from disttrain_contract.divergence import DIVERGED_FIELD
from disttrain_contract.evaluation import EVALUATION_FIELD
from disttrain_contract.progress import (
    CHECKPOINT_FIELD,
    PROGRESS_PATH,
    PROGRESS_PORT_ENV,
    TERMINATION_MESSAGE_ENV,
    TERMINATION_MESSAGE_LIMIT,
    add_error,
)
from disttrain_contract.timestamps import format_time

PROGRESS_FILE = "progress.json"


def log(event: str, **fields: Any) -> None:
    """One structured line per event, for `kubectl logs` and log collectors alike."""
    print(json.dumps({"event": event, **fields}, default=str), flush=True)


def fail(
    message: str,
    environ: Mapping[str, str] = os.environ,
    *,
    preempted: bool = False,
    diverged: bool = False,
    program: str = "disttrain-train",
) -> None:
    """Say why the task ends unfinished: on stderr, after the name of the `program` that ends, and in its
    termination message for the operator to show; `diverged` says there too that the loss turned no number
    (`disttrain_contract.divergence`)."""
    print(f"{program}: {'' if preempted else 'error: '}{message}", file=sys.stderr, flush=True)
    path = environ.get(TERMINATION_MESSAGE_ENV)
    said = {DIVERGED_FIELD: True} if diverged else {}
    if path and not add_error(Path(path), message, **said):
        log("warning", message="termination message not written")


def write_atomically(path: Path, text: str) -> None:
    """Readers (the operator, a user) never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(text)
    temporary.replace(path)


class _QuietlyNamedServer(ThreadingHTTPServer):
    """HTTPServer names itself by a DNS lookup of its address (`socket.getfqdn`), which took 10 s in a pod
    whose nameserver did not answer: the reporting task's whole start, and each restart's, waited on it. The
    name is never used here."""

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


class ProgressServer:
    """Serves the latest progress record at GET /progress, for the operator to poll; 204 before the first."""

    def __init__(self, port: int) -> None:
        self._record = b""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = server.latest
                if self.path.split("?")[0] != PROGRESS_PATH:
                    self.send_response(404)
                    body = b""
                else:
                    self.send_response(200 if body else 204)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """Polls are not worth a log line each."""

        self._http = _QuietlyNamedServer(("", port), Handler)
        self._http.daemon_threads = True
        self.port = int(self._http.server_address[1])
        threading.Thread(target=self._http.serve_forever, name="progress-server", daemon=True).start()

    @property
    def latest(self) -> bytes:
        return self._record

    def publish(self, text: str) -> None:
        self._record = text.encode()

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()


class ProgressReporter:
    """Throughput is measured between reports (the final report, of no new step, keeps the last measure) from
    the step the run started at; only the chief publishes (file, HTTP, termination message). Each record
    names the last checkpoint saved, or restored from (disttrain_contract.progress.CHECKPOINT_FIELD)."""

    def __init__(
        self,
        checkpoint_dir: Path,
        publishes: bool,
        global_batch_size: int,
        total_steps: int,
        environ: Mapping[str, str] = os.environ,
        *,
        start_step: int = 0,
        restored: str | None = None,
    ) -> None:
        self._directory = checkpoint_dir
        self._path = checkpoint_dir / PROGRESS_FILE
        self._publishes = publishes
        self._batch = global_batch_size
        self._total = total_steps
        self._since = (time.monotonic(), start_step)
        self._rate = 0.0
        self._record: dict[str, Any] | None = None
        self._checkpoint = self._saved(start_step, restored) if restored else None
        self.server = serve_progress(environ) if publishes else None
        message_path = environ.get(TERMINATION_MESSAGE_ENV) if publishes else None
        self._termination_message = Path(message_path) if message_path else None

    def report(self, step: int, epoch: int, loss: float, finished: bool = False, **extra: Any) -> None:
        now, (then, last_step) = time.monotonic(), self._since
        if now > then and step > last_step:
            self._rate = (step - last_step) * self._batch / (now - then)
            self._since = (now, step)
        record = {
            "step": step,
            "totalSteps": self._total,
            "epoch": epoch,
            "loss": round(loss, 6) if math.isfinite(loss) else None,  # no step run yet, or diverged: no loss
            "examplesPerSecond": round(self._rate, 2),
            "updateTime": format_time(datetime.now(UTC)),
            "finished": finished,
            **extra,
        }
        self._publish(record, logged=True)

    def saved(self, step: int, path: str) -> None:
        """A checkpoint was saved: the latest record says so at once."""
        self._checkpoint = self._saved(step, path)
        if self._record is not None:
            self._publish({**self._record, "updateTime": format_time(datetime.now(UTC))})

    def _saved(self, step: int, path: str) -> dict[str, Any]:
        """The checkpoint as the record names it: its path inside the checkpoint volume where it lies there."""
        inside = Path(path)
        if inside.is_relative_to(self._directory):
            inside = inside.relative_to(self._directory)
        try:
            written = datetime.fromtimestamp(Path(f"{path}.index").stat().st_mtime, UTC)
        except OSError:
            written = datetime.now(UTC)
        return {"step": step, "time": format_time(written), "path": str(inside)}

    def _publish(self, record: dict[str, Any], *, logged: bool = False) -> None:
        if self._checkpoint is not None:
            record = {**record, CHECKPOINT_FIELD: self._checkpoint}
        self._record = record
        if logged:
            log("progress", **record)
        if not self._publishes:
            return
        text = json.dumps(record)
        write_atomically(self._path, text + "\n")
        if self.server is not None:
            self.server.publish(text)
        if self._termination_message is not None:
            _write_termination_message(self._termination_message, text)


def report_evaluation(
    checkpoint_dir: Path,
    checkpoint: str,
    metrics: Mapping[str, float],
    final: bool,
    environ: Mapping[str, str] = os.environ,
) -> None:
    """The Evaluator's scores of a checkpoint: logged, in `evaluation.json` beside the checkpoints, and in its
    termination message for the operator (disttrain_contract.evaluation), the last one winning."""
    step = checkpoint.rsplit("-", 1)[-1]
    record = {
        "checkpoint": checkpoint,
        "step": int(step) if step.isdigit() else None,
        "metrics": dict(metrics),
        "final": final,
    }
    log("evaluation", **record)
    write_atomically(checkpoint_dir / "evaluation.json", json.dumps(record) + "\n")
    message_path = environ.get(TERMINATION_MESSAGE_ENV)
    if message_path:
        _write_termination_message(Path(message_path), json.dumps({EVALUATION_FIELD: record}))


_SERVING: dict[str, ProgressServer | None] = {}  # by port: one server per process, however often asked


def serve_progress(environ: Mapping[str, str] = os.environ) -> ProgressServer | None:
    """The progress server on `$DISTTRAIN_PROGRESS_PORT`, started on the first call. The reporting task
    starts it before TensorFlow loads, so the operator's polls get an answer (204) from the start and are
    not backed off as a silent pod's are; its first report then reaches the job within one poll.
    A bad or taken port costs the operator its live view, never the training."""
    port = environ.get(PROGRESS_PORT_ENV)
    if not port:
        return None
    if port not in _SERVING:
        try:
            _SERVING[port] = ProgressServer(int(port))
        except (OSError, ValueError, OverflowError) as error:
            log("warning", message=f"progress not served on port {port}: {error}")
            _SERVING[port] = None
    return _SERVING[port]


def _write_termination_message(path: Path, text: str) -> None:
    """Overwritten in place (the kubelet reads the file it mounted, so no rename); never fails training."""
    try:
        path.write_text(text[:TERMINATION_MESSAGE_LIMIT])
    except OSError as error:
        log("warning", message=f"termination message not written: {error}")


def read_progress(checkpoint_dir: Path) -> dict[str, Any] | None:
    try:
        progress: dict[str, Any] = json.loads((checkpoint_dir / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return progress
