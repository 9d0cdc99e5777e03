"""`bench/run.py` as the tests run it: at sizes small enough for CI, its last line the one README and
docs/benchmarks.md quote."""

from __future__ import annotations

import subprocess
import sys

from support.repository import ROOT

FIGURE = r"\d+\.\d+"
# Rounds start after 1 s without a write to pods or Services, not the 3 s of the runs whose figures
# docs/benchmarks.md quotes, and without waiting for an idle CPU, which the tests beside these keep busy
# (each wait was 30 s, some two minutes a benchmark): nothing here reads a figure.
QUIET = ("--quiet", "1", "--busy-wait", "0")


def bench(*args: str) -> str:
    """`python bench/run.py ARGS`; its last line."""
    return bench_output(*args).splitlines()[-1]


def bench_output(*args: str) -> str:
    """`python bench/run.py ARGS`; what it printed."""
    command = [sys.executable, str(ROOT / "bench" / "run.py"), *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout.strip()
