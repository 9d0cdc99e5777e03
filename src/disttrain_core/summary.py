"""A job in a few words: the texts `disttrain jobs`, the dashboard and the Headlamp plugin show for a
job's phase, replicas, progress, time left, last checkpoint, scores, age, pods and log commands. Pure
functions of the objects.

`summary` is what every view says of a job, in one JSON object; the Headlamp plugin's TypeScript port
(disttrain-headlamp-plugin/src/summary.ts) is tested against the same fixtures
(tests/fixtures/summaries/), so the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from disttrain_contract.timestamps import format_time
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.status import JobPhase
from disttrain_core.kueue import queue_name
from disttrain_core.naming import pod_name


def summary(job: DistTrainJob) -> dict[str, Any]:
    """What every view says of the job, as the fixtures hold it."""
    return {
        "phase": phase_text(job),
        "ready": ready_text(job),
        "restarts": restarts_text(job),
        "replicas": replicas_text(job),
        "progress": progress_text(job),
        "eta": eta_text(job),
        "checkpoint": checkpoint_text(job),
        "evaluation": evaluation_text(job),
        "queue": queue_text(job),
        "tensorboardCommand": tensorboard_command(job),
        "replicaPods": [
            {"pod": pod, "replica": replica, "logCommand": kept_log_command(job, replica)}
            for pod, replica in replica_pods(job)
        ],
    }


def phase_text(job: DistTrainJob) -> str:
    """The phase the operator wrote; Pending for a job it has not written yet."""
    return (job.status.phase or JobPhase.PENDING).value


def ready_text(job: DistTrainJob) -> str:
    """`3/4`: pods ready over pods desired, as the operator wrote it; `-` before it did."""
    return job.status.ready or "-"


def restarts_text(job: DistTrainJob) -> str:
    """`2`: restarts counted against backoffLimit; `2 (1 disrupted)` when pods were also taken away on
    purpose (evicted, preempted, drained), which restarted the job without counting."""
    status = job.status
    return f"{status.restart_count}" + (f" ({status.disruptions} disrupted)" if status.disruptions else "")


def queue_text(job: DistTrainJob) -> str:
    return queue_name(job) or "-"


def replicas_text(job: DistTrainJob) -> str:
    """`Worker 3/4, PS 1/1`: ready over desired, per replica type."""
    statuses = job.status.replica_statuses
    return ", ".join(
        f"{kind.value} {statuses[kind].ready if kind in statuses else 0}/{job.spec.replicas(kind)}"
        for kind in ReplicaType
        if kind in job.spec.replica_specs
    )


def progress_text(job: DistTrainJob) -> str:
    progress = job.status.progress
    if progress is None or progress.step is None:
        return "-"
    total = f"/{progress.total_steps}" if progress.total_steps is not None else ""
    loss = f" loss {progress.loss:.4g}" if progress.loss is not None else ""
    return f"step {progress.step}{total}{loss}"


def remaining_text(job: DistTrainJob) -> str:
    """`6m20s`: the time left at the rate of the last minute, as `disttrain jobs get` shows it; `-` unknown."""
    progress = job.status.progress
    seconds = progress.estimated_remaining_seconds if progress is not None else None
    return "-" if seconds is None else duration(seconds)


def eta_text(job: DistTrainJob) -> str:
    """`6m20s left at 2.125 steps/s`: the time left and the rate it comes from; `-` where either is unknown."""
    progress = job.status.progress
    if progress is None or progress.estimated_remaining_seconds is None or progress.steps_per_second is None:
        return "-"
    return f"{remaining_text(job)} left at {progress.steps_per_second:.4g} steps/s"


def checkpoint_text(job: DistTrainJob) -> str:
    """`step 500 at 2026-01-01T00:00:00Z (ckpt/ckpt-500)`: the last checkpoint the trainer saved; `-` before one."""
    saved = job.status.checkpoint
    if saved is None:
        return "-"
    when = f" at {format_time(saved.time)}" if saved.time is not None else ""
    return f"step {saved.step}{when}" + (f" ({saved.path})" if saved.path else "")


def evaluation_text(job: DistTrainJob) -> str:
    scores = job.status.evaluation
    if scores is None:
        return "-"
    metrics = " ".join(f"{name} {value:.4g}" for name, value in sorted(scores.metrics.items()))
    step = f"step {scores.step} " if scores.step is not None else ""
    return f"{step}{metrics}" + (" (final checkpoint)" if scores.final else "")


def _kind_option(job: DistTrainJob) -> str:
    return " --kind TFJob" if job.kind == "TFJob" else ""


def tensorboard_command(job: DistTrainJob) -> str:
    """The command that opens the job's TensorBoard from the viewer's machine."""
    return f"disttrain jobs tensorboard {job.metadata.name} -n {job.metadata.namespace}{_kind_option(job)}"


def replica_pods(job: DistTrainJob) -> list[tuple[str, str]]:
    """Each replica's pod and its name as `--replica` takes it (`worker-1`), in the replica types' order."""
    return [
        (pod_name(job.metadata.name, kind, index), f"{kind.task_type}-{index}")
        for kind in ReplicaType
        for index in range(job.spec.replicas(kind))
    ]


def kept_log_command(job: DistTrainJob, replica: str) -> str:
    """The command that reads a replica's log, its kept attempts too, after its pod is gone."""
    name, namespace = job.metadata.name, job.metadata.namespace
    return f"disttrain jobs logs {name} -n {namespace} --replica {replica}{_kind_option(job)}"


def age(created: datetime | None, now: datetime) -> str:
    """kubectl's short duration: 45s, 3m20s, 17m, 5h12m, 3d4h, 21d."""
    if created is None:
        return "-"
    return duration(int((now - created).total_seconds()))


def duration(seconds: int) -> str:
    """kubectl's short duration of `seconds`: 45s, 3m20s, 17m, 5h12m, 3d4h, 21d."""
    seconds = max(0, seconds)
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
