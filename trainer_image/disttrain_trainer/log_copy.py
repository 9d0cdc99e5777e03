"""The trainer's own copy of what it prints, kept on the checkpoint volume when the job asks for it.

With `spec.logs.destination: CheckpointVolume` the operator names a folder (`disttrain_contract.kept_logs`).
Standard output and standard error are redirected at the file-descriptor level, so TensorFlow's C++
logs are copied too: a thread per stream hands each chunk on to the container's own stream, which the
kubelet still serves, and each whole line to the attempt's file, so lines of the two streams never mix
mid-line however the program splits its writes. The file is written unbuffered: a killed trainer loses
at most the unfinished last line of each stream. A volume that cannot be written to costs the copy,
never the training.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from disttrain_contract.kept_logs import (
    DEFAULT_LOG_BYTES,
    LOG_DIR_ENV,
    LOG_MAX_BYTES_ENV,
    POD_UID_ENV,
    attempt_file_name,
    from_a_line,
)

_CHUNK = 1 << 16
_STREAMS = (1, 2)


class BoundedFile:
    """An append-only file that stays within `max_bytes` and starts at a line: once a write would pass the
    bound, the file is first rewritten (atomically) to its last half at most, so rewriting costs O(1) a byte
    and the file always holds at least the last half of the bound."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self._path = path
        self._max = max_bytes
        self._file: BinaryIO = path.open("ab", buffering=0)
        self._size = self._file.tell()

    def write(self, data: bytes) -> None:
        cut = len(data) > self._max
        if cut:  # what came before it is no part of the end
            data = from_a_line(data[-self._max :])
        if cut or self._size + len(data) > self._max:
            self._file.close()
            keep = 0 if cut else min(self._max // 2, self._max - len(data))
            kept = from_a_line(self._path.read_bytes()[-keep:]) if keep > 0 else b""
            rewritten = self._path.with_name(self._path.name + ".rewrite")
            rewritten.write_bytes(kept)
            rewritten.replace(self._path)
            self._file = self._path.open("ab", buffering=0)
            self._size = len(kept)
        self._file.write(data)
        self._size += len(data)

    def close(self) -> None:
        self._file.close()


class LogCopy:
    """Copies this process's standard output and error into `file` while passing them on."""

    def __init__(self, file: BoundedFile) -> None:
        self._file = file
        self._lock = threading.Lock()
        self._consoles: dict[int, int] = {}
        self._threads: list[threading.Thread] = []
        self._failed = False

    def start(self) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        for stream in _STREAMS:
            read_end, write_end = os.pipe()
            self._consoles[stream] = os.dup(stream)
            os.dup2(write_end, stream)
            os.close(write_end)
            thread = threading.Thread(
                target=self._copy, args=(read_end, stream), name=f"log-copy-{stream}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def finish(self, timeout: float = 10) -> None:
        """Puts the streams back, which ends the copies once they have handed on what was printed."""
        sys.stdout.flush()
        sys.stderr.flush()
        for stream, console in self._consoles.items():
            os.dup2(console, stream)
        for thread in self._threads:
            thread.join(timeout)
        self._file.close()

    def _copy(self, read_end: int, stream: int) -> None:
        console = self._consoles[stream]
        unfinished = b""
        while chunk := os.read(read_end, _CHUNK):
            _write_all(console, chunk)
            unfinished += chunk
            lines_end = unfinished.rfind(b"\n") + 1 or (len(unfinished) if len(unfinished) >= _CHUNK else 0)
            if lines_end:
                self._keep(unfinished[:lines_end])
                unfinished = unfinished[lines_end:]
        if unfinished:
            self._keep(unfinished)
        os.close(read_end)

    def _keep(self, lines: bytes) -> None:
        """Writes whole lines (or a line longer than a chunk) from one stream, one stream at a time."""
        with self._lock:
            if self._failed:
                return
            try:
                self._file.write(lines)
            except OSError as error:
                self._failed = True
                _write_all(self._consoles[2], f"the log copy on the checkpoint volume stopped: {error}\n".encode())


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def from_environment(environ: Mapping[str, str] = os.environ) -> LogCopy | None:
    """The copy the operator asked for, started; None when it asked for none or the folder cannot be written."""
    folder = environ.get(LOG_DIR_ENV)
    if not folder:
        return None
    name = attempt_file_name(datetime.now(UTC), environ.get(POD_UID_ENV) or f"pid{os.getpid()}")
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        file = BoundedFile(Path(folder) / name, int(environ.get(LOG_MAX_BYTES_ENV) or DEFAULT_LOG_BYTES))
    except OSError as error:
        print(f"no log copy on the checkpoint volume: {error}", file=sys.stderr, flush=True)
        return None
    copy = LogCopy(file)
    copy.start()
    return copy
