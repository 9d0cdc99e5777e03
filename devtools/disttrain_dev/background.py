"""Processes that outlive the command starting them: each in a session of its own, its output in a log,
stopped with its whole process group. The local cluster's components and its operator run this way."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


def start(log: Path, command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> int:
    """Start `command` in a new session, appending its output to `log`; its pid."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd, env=env
        )
    return process.pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop(pid: int, grace: float = 10) -> None:
    """SIGTERM to the process group, SIGKILL after `grace` seconds."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.1)
        _reap(pid)
    if alive(pid):
        os.killpg(pid, signal.SIGKILL)
        _reap(pid)


def _reap(pid: int) -> None:
    """Collect the exit status of a child of this process, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
