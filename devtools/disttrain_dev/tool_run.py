"""Build tools run by the development commands write to stderr, never to stdout.

The commands' stdout carries only their results (a kubeconfig's path, the images built), and scripts
read it; a tool that printed its progress there (debootstrap, apt-get, go, pip, docker) would be read
as a result, and a reader that stopped early would kill the tool with SIGPIPE.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

STDERR = 2  # the file descriptor, so that a tool's output reaches it unbuffered and in order with ours


def run_tool(
    command: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: IO[bytes] | None = None,
) -> None:
    """Run a tool to completion with its output on stderr, showing the command first and how long it took
    after (what a build from empty caches spends its time on); a failure raises."""
    print(f"+ {shlex.join(command)}", file=sys.stderr, flush=True)
    started = time.monotonic()
    subprocess.run(list(command), cwd=cwd, env=env, stdin=stdin, stdout=STDERR, check=True)
    print(f"+ {time.monotonic() - started:.0f}s: {shlex.join(command[:3])}", file=sys.stderr, flush=True)
