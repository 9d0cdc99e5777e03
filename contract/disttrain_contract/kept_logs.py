"""Logs kept on the checkpoint volume (`spec.logs.destination: CheckpointVolume`): one contract, read by both sides.

The operator cannot mount a job's claim, so the program in the pod keeps its own log there: the
operator gives each TensorFlow container `DISTTRAIN_LOG_DIR` (a folder per replica of the job),
`DISTTRAIN_POD_UID` and `DISTTRAIN_LOG_MAX_BYTES`, and the trainer copies everything it prints into one
file per attempt, `attempt_file_name`, which sort in the order the attempts started. A file stays
within the bound and starts at a line: once it would pass the bound it is rewritten to its end first,
so it holds at least the last half of the bound. This module imports nothing heavy.
"""

from __future__ import annotations

from datetime import UTC, datetime

LOG_DIR_ENV = "DISTTRAIN_LOG_DIR"
POD_UID_ENV = "DISTTRAIN_POD_UID"
LOG_MAX_BYTES_ENV = "DISTTRAIN_LOG_MAX_BYTES"
DEFAULT_LOG_BYTES = 256 * 1024  # of each attempt, wherever it is kept
LOGS_FOLDER = "logs"  # under the checkpoint volume's mount path
LOG_SUFFIX = ".log"
_STARTED_FORMAT = "%Y%m%dT%H%M%S.%fZ"


def attempt_file_name(started: datetime, pod_uid: str) -> str:
    """`20261125T174501.123456Z-<pod uid>.log`: the start first, so names sort as attempts began."""
    return f"{started.astimezone(UTC).strftime(_STARTED_FORMAT)}-{pod_uid}{LOG_SUFFIX}"


def parse_attempt_file_name(name: str) -> tuple[datetime, str] | None:
    """The start and pod uid an attempt's file is named after; None for any other name."""
    if not name.endswith(LOG_SUFFIX):
        return None
    started, _, pod_uid = name.removesuffix(LOG_SUFFIX).partition("-")
    try:
        moment = datetime.strptime(started, _STARTED_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
    return (moment, pod_uid) if pod_uid else None


def from_a_line(data: bytes) -> bytes:
    """The end of a log cut at a line: from the first line that starts within `data`, all of it when none does
    (kept logs start so, in ConfigMaps as on the volume)."""
    return data[data.find(b"\n") + 1 :] or data
