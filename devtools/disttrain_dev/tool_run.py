"""Build tools run by the development commands write to stderr, never to stdout, without the Go
toolchain's line per module downloaded.

The commands' stdout carries only their results (a kubeconfig's path, the images built), and scripts
read it; a tool that printed its progress there (debootstrap, apt-get, go, pip, docker) would be read
as a result, and a reader that stopped early would kill the tool with SIGPIPE.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

STDERR = 2  # the file descriptor, so that a tool's output reaches it unbuffered and in order with ours
# A cold Go build names each of its hundreds of modules as it downloads them: counted, not shown.
GO_DOWNLOAD = re.compile(rb"^go: (downloading|extracting|finding) ")


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
    downloads = 0
    with subprocess.Popen(
        list(command), cwd=cwd, env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if GO_DOWNLOAD.match(line):
                downloads += 1
            else:
                os.write(STDERR, line)
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode, list(command))
    counted = f" ({downloads} Go modules downloaded)" if downloads else ""
    print(f"+ {time.monotonic() - started:.0f}s: {shlex.join(command[:3])}{counted}", file=sys.stderr, flush=True)
