"""`bench/reconcile_step.py` at a size small enough for the fast run: it runs both sides and says their ratio."""

from __future__ import annotations

import re
import subprocess
import sys

from support.repository import ROOT


def test_the_reconcile_step_benchmark_times_this_checkout_beside_a_baseline() -> None:
    command = [sys.executable, str(ROOT / "bench" / "reconcile_step.py"), "--workers", "3", "--rounds", "1"]
    command += ["--repeats", "2", "--baseline", str(ROOT)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "a steady MultiWorkerMirrored job of 3 ready workers; medians of 1 rounds"
    assert re.fullmatch(r"this checkout / baseline: \d+\.\d\d", lines[-1]), lines
