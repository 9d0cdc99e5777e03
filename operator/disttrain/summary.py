"""A job in a few words: the texts `disttrain jobs` and the dashboard show for a job's replicas,
progress, scores, age and pods. Pure functions of the objects."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from disttrain_operator.api.job import DistTrainJob


def replicas_text(job: DistTrainJob) -> str:
    """`Worker 3/4, PS 1/1`: ready over desired, per replica type."""
    statuses = job.status.replica_statuses
    return ", ".join(
        f"{kind.value} {statuses[kind].ready if kind in statuses else 0}/{spec.replicas}"
        for kind, spec in job.spec.replica_specs.items()
    )


def progress_text(job: DistTrainJob) -> str:
    progress = job.status.progress
    if progress is None or progress.step is None:
        return "-"
    total = f"/{progress.total_steps}" if progress.total_steps is not None else ""
    loss = f" loss {progress.loss:.4g}" if progress.loss is not None else ""
    return f"step {progress.step}{total}{loss}"


def evaluation_text(job: DistTrainJob) -> str:
    scores = job.status.evaluation
    if scores is None:
        return "-"
    metrics = " ".join(f"{name} {value:.4g}" for name, value in sorted(scores.metrics.items()))
    step = f"step {scores.step} " if scores.step is not None else ""
    return f"{step}{metrics}" + (" (final checkpoint)" if scores.final else "")


def age(created: datetime | None, now: datetime) -> str:
    """kubectl's short duration: 45s, 3m20s, 17m, 5h12m, 3d4h, 21d."""
    if created is None:
        return "-"
    seconds = max(0, int((now - created).total_seconds()))
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        shown = f"{seconds}s"
    elif minutes < 10:
        shown = _two_units(minutes, "m", seconds % 60, "s")
    elif hours < 3:
        shown = f"{minutes}m"
    elif hours < 8:
        shown = _two_units(hours, "h", minutes % 60, "m")
    elif hours < 48:
        shown = f"{hours}h"
    elif hours < 192:
        shown = _two_units(days, "d", hours % 24, "h")
    else:
        shown = f"{days}d"
    return shown


def _two_units(big: int, big_unit: str, small: int, small_unit: str) -> str:
    return f"{big}{big_unit}{small}{small_unit}" if small else f"{big}{big_unit}"


def pod_state(pod: Mapping[str, Any]) -> str:
    status = pod.get("status", {})
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated:
            return f"{status.get('phase')} (exit {terminated.get('exitCode')}, {terminated.get('reason', '')})"
    return str(status.get("phase", "Pending"))
