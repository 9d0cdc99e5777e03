"""The cost of keeping a log on the checkpoint volume: the trainer's own copy of what it prints
(`disttrain_trainer.log_copy`), against printing alone, side by side in one run.

Each side is a fresh Python process that prints LINES lines of 108 bytes to a pipe read into nothing;
the sides alternate, and the median of ROUNDS rounds each is kept. Run: `python bench/log_copy.py`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

LINES = 500_000
ROUNDS = 5
PROGRAM = f"""
import sys, time
from disttrain_trainer import log_copy
copy = log_copy.from_environment()
start = time.perf_counter()
for number in range({LINES}):
    print(f"{{number:07d}} " + "x" * 100)
sys.stdout.flush()
elapsed = time.perf_counter() - start
if copy is not None:
    copy.finish()
print(elapsed, file=sys.stderr)
"""


def _seconds(env: dict[str, str]) -> float:
    ran = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True
    )
    return float(ran.stderr.decode().strip().splitlines()[-1])


def main() -> None:
    plain: list[float] = []
    copied: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "DISTTRAIN_LOG_DIR": folder, "DISTTRAIN_LOG_MAX_BYTES": str(256 * 1024)}
        for _ in range(ROUNDS):
            plain.append(_seconds(dict(os.environ)))
            copied.append(_seconds(env))
    base, kept = statistics.median(plain), statistics.median(copied)
    print(
        f"{LINES} lines: printed {base:.3f} s, printed and copied {kept:.3f} s (x{kept / base:.2f}), "
        f"{(kept - base) / LINES * 1e6:.2f} us a line more"
    )


if __name__ == "__main__":
    main()
