"""Where the operator spent its time: `python bench/profile.py FILE.stacks` over py-spy's collapsed stacks.

Run a benchmark with DISTTRAIN_BENCH_PROFILE=1 (and py-spy installed) to get the stacks; this
prints the functions of our own packages and kopf by inclusive share of the samples.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

OURS = ("disttrain", "kopf", "kubernetes", "pydantic", "json", "ssl", "aiohttp", "urllib3")


def inclusive(stacks: Path) -> tuple[Counter[str], int]:
    """Samples in which each function appears at least once, and the number of samples."""
    counts: Counter[str] = Counter()
    total = 0
    for line in stacks.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack or not samples.isdigit():
            continue
        total += int(samples)
        for frame in set(stack.split(";")):
            if any(part in frame for part in OURS):
                counts[frame.split(" (")[0] + " " + frame.split("/")[-1].split(":")[0].rstrip(")")] += int(samples)
    return counts, total


def main(path: str) -> int:
    counts, total = inclusive(Path(path))
    for frame, samples in counts.most_common(40):
        print(f"{100 * samples / total:5.1f}%  {frame}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
