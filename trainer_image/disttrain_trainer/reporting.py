"""What training tells the world: JSON log lines on stdout and, from the chief, progress.json."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PROGRESS_FILE = "progress.json"


def log(event: str, **fields: Any) -> None:
    """One structured line per event, for `kubectl logs` and log collectors alike."""
    print(json.dumps({"event": event, **fields}, default=str), flush=True)


def fail(message: str) -> None:
    print(f"disttrain-train: error: {message}", file=sys.stderr, flush=True)


def write_atomically(path: Path, text: str) -> None:
    """Readers (the operator, a user) never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(text)
    temporary.replace(path)


class Progress:
    """Throughput is measured between reports; only the chief writes the file."""

    def __init__(self, checkpoint_dir: Path, writes_file: bool, global_batch_size: int) -> None:
        self._path = checkpoint_dir / PROGRESS_FILE
        self._writes_file = writes_file
        self._batch = global_batch_size
        self._since = (time.monotonic(), 0)

    def report(self, step: int, epoch: int, loss: float, finished: bool = False, **extra: Any) -> None:
        now, (then, last_step) = time.monotonic(), self._since
        rate = (step - last_step) * self._batch / (now - then) if now > then and step > last_step else 0.0
        self._since = (now, step)
        record = {
            "step": step,
            "epoch": epoch,
            "loss": round(loss, 6),
            "examplesPerSecond": round(rate, 2),
            "updateTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "finished": finished,
            **extra,
        }
        log("progress", **record)
        if self._writes_file:
            write_atomically(self._path, json.dumps(record, indent=1) + "\n")


def read_progress(checkpoint_dir: Path) -> dict[str, Any] | None:
    try:
        progress: dict[str, Any] = json.loads((checkpoint_dir / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return progress
