"""Plots of a growth run: `python bench/plot.py RECORD.json FOLDER`.

RECORD.json is what `python bench/run.py --record RECORD.json growth --peer` kept: one row per size
and side. This writes admission-seconds.png (time until every pod and Service exists, against jobs)
with the same per job beside it (a flat line is linear growth), and operator-memory.png (peak RSS and
CPU seconds against jobs), the plots of docs/benchmarks.md, and prints the run as a Markdown table.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # after the backend is chosen

LABELS = {
    "operator": "disttrain",
    "peer": "training-operator v1.8.1, unthrottled",
    "peer-as-shipped": "training-operator v1.8.1, as shipped",
    "floor": "floor: a plain client making disttrain's objects",
}
STYLES = {"operator": "o-", "peer": "s-", "peer-as-shipped": "^:", "floor": "x--"}


def _series(rows: list[dict[str, Any]], field: str) -> dict[str, tuple[list[int], list[float]]]:
    """By side, the jobs and the field's values, in order of jobs; rows without the field are left out."""
    series: dict[str, tuple[list[int], list[float]]] = {}
    for row in sorted(rows, key=lambda row: int(row["jobs"])):
        value = max(row["pods_seconds"], row["services_seconds"]) if field == "seconds" else row.get(field)
        if value is None:
            continue
        jobs, values = series.setdefault(row["side"], ([], []))
        jobs.append(int(row["jobs"]))
        values.append(float(value))
    return series


def _plot(axes: Any, series: dict[str, tuple[list[int], list[float]]], ylabel: str) -> None:
    for side, (jobs, values) in series.items():
        axes.plot(jobs, values, STYLES.get(side, "-"), label=LABELS.get(side, side))
    axes.set_xlabel("jobs (7 pods each)")
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    axes.legend()


def _save(figure: Any, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def plot(record: Path, folder: Path) -> list[Path]:
    rows: list[dict[str, Any]] = json.loads(record.read_text())["growth"]
    folder.mkdir(parents=True, exist_ok=True)

    admission, (axes, per_job) = plt.subplots(1, 2, figsize=(12, 4.5))
    seconds = _series(rows, "seconds")
    _plot(axes, seconds, "seconds until every pod and Service exists")
    axes.set_title("Admission of N jobs at once (Chief 1, Worker 4, PS 2)")
    per_job_ms = {
        side: (jobs, [1000 * s / n for s, n in zip(values, jobs, strict=True)])
        for side, (jobs, values) in seconds.items()
    }
    _plot(per_job, per_job_ms, "milliseconds per job")
    per_job.set_title("Per job: flat where time grows linearly")

    footprint, (memory, cpu) = plt.subplots(1, 2, figsize=(11, 4.5))
    _plot(memory, _series(rows, "peak_rss_mb"), "peak RSS, MB")
    memory.set_title("Operator memory")
    _plot(cpu, _series(rows, "cpu_seconds"), "CPU seconds during admission")
    cpu.set_title("Operator CPU")
    return [_save(admission, folder / "admission-seconds.png"), _save(footprint, folder / "operator-memory.png")]


def table(record: Path) -> str:
    """The growth run by size: each side's seconds (and per job), the operators' CPU, RSS and requests."""
    rows: list[dict[str, Any]] = json.loads(record.read_text())["growth"]
    by_size: dict[int, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_size.setdefault(int(row["jobs"]), {})[row["side"]] = row
    lines = [
        "| jobs | disttrain s (ms/job) | peer s (ms/job) | floor s (ms/job) | disttrain/peer | disttrain/floor "
        "| CPU s, disttrain / peer | peak RSS MB, disttrain / peer | requests/job, disttrain / peer |",
        "| --- " * 9 + "|",
    ]
    for jobs, sides in sorted(by_size.items()):
        seconds = {side: max(row["pods_seconds"], row["services_seconds"]) for side, row in sides.items()}
        if "operator" not in seconds:
            continue
        timed = [
            f"{seconds[side]:.1f} ({1000 * seconds[side] / jobs:.1f})" if side in seconds else "not measured"
            for side in ("operator", "peer", "floor")
        ]
        ratios = [
            f"{seconds['operator'] / seconds[side]:.2f}" if side in seconds else "-" for side in ("peer", "floor")
        ]
        ours, peer = sides["operator"], sides.get("peer", {})
        figures = [
            f"{ours[field]:{form}} / " + (f"{peer[field]:{form}}" if field in peer else "-")
            for field, form in (("cpu_seconds", ".1f"), ("peak_rss_mb", ".0f"), ("requests_per_job", ".1f"))
        ]
        lines.append(f"| {jobs} | {' | '.join(timed)} | {' | '.join(ratios)} | {' | '.join(figures)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    for path in plot(Path(sys.argv[1]), Path(sys.argv[2])):
        print(path)
    print(table(Path(sys.argv[1])))
