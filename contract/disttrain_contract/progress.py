"""How the trainer's progress reaches the operator: one contract, read by both sides.

The reporting task (the chief, or worker 0 without one) serves its latest progress record as JSON
at `http://<pod IP>:<DISTTRAIN_PROGRESS_PORT>/progress`, which the operator polls while the job
runs, and writes the same record to `DISTTRAIN_TERMINATION_MESSAGE_PATH`, which the kubelet hands
to the API server as the container's termination message when it ends. Trainer pods need no API
access for either. A task that fails, whichever it is, adds its error (`ERROR_FIELD`) to the same
record in its termination message, and the operator quotes it where it says why the pod failed.
This module imports nothing heavy so that the operator can share it.
"""

from __future__ import annotations

import json
from pathlib import Path

PROGRESS_PORT_ENV = "DISTTRAIN_PROGRESS_PORT"
TERMINATION_MESSAGE_ENV = "DISTTRAIN_TERMINATION_MESSAGE_PATH"
PROGRESS_PATH = "/progress"
DEFAULT_PROGRESS_PORT = 9471
DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"
TERMINATION_MESSAGE_LIMIT = 4096  # bytes the kubelet keeps of a termination message
ERROR_FIELD = "error"  # in the termination message: why the task failed, in one line
# In a progress record: the last checkpoint saved, {"step": int, "time": RFC 3339, "path": inside the volume}
CHECKPOINT_FIELD = "checkpoint"


def reporting_task(has_chief: bool) -> tuple[str, int]:
    """The task that reports progress (and that TensorFlow makes its chief): the chief, or worker 0 without one."""
    return ("chief", 0) if has_chief else ("worker", 0)


def add_error(path: Path, message: str, **fields: object) -> bool:
    """Write `message` as the termination message's error, and any other `fields`, beside the progress record
    already there (the last report keeps its place); False where the file could not be written, which never
    fails training."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        record = {}
    record = record if isinstance(record, dict) else {}
    text = json.dumps({**record, **fields, ERROR_FIELD: message[:1024]})
    try:  # overwritten in place: the kubelet reads the file it mounted, so no rename
        path.write_text(text[:TERMINATION_MESSAGE_LIMIT])
    except OSError:
        return False
    return True
