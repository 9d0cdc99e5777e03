"""A job that stopped learning: no step for `runPolicy.progressDeadlineSeconds` while it runs.

The clock runs only while the job runs (its Running condition), and starts anew with every run: after
a start, a restart or a resume, the first step may take `startupDeadlineSeconds` (restoring, compiling);
from then on each step must follow the one before within the deadline. A step counts as reported when
the operator saw it (`Progress.last_advance_time`, its own clock), so a trainer whose progress endpoint
stops answering stalls too, and a trainer's clock never moves the deadline.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import DEFAULT_STARTUP_SECONDS
from disttrain_core.api.status import ConditionStatus, ConditionType, DistTrainJobStatus
from disttrain_core.types import Verdict

NO_PROGRESS = "NoProgress"  # the Stalled condition's reason
STALLED = "Stalled"  # the reason of the restart, or of the failure, a stall calls for


def progress_deadline(job: DistTrainJob, default: int | None) -> int | None:
    """The job's deadline in seconds: its own, else the operator's default; None: no deadline."""
    return job.spec.run_policy.progress_deadline_seconds or default


def startup_allowance(job: DistTrainJob, deadline: int) -> int:
    """How long the first step of a run may take: startupDeadlineSeconds, else the deadline and at least
    DEFAULT_STARTUP_SECONDS."""
    return job.spec.run_policy.startup_deadline_seconds or max(deadline, DEFAULT_STARTUP_SECONDS)


def running_since(status: DistTrainJobStatus) -> datetime | None:
    """When the current run began: the Running condition's last turn to True; None while it does not run."""
    found = status.condition(ConditionType.RUNNING)
    return found.last_transition_time if found is not None and found.status is ConditionStatus.TRUE else None


def stall(job: DistTrainJob, now: datetime, default: int | None) -> Verdict | datetime | None:
    """The verdict on a running job whose step did not advance in time, else when it will be due (for the
    operator to wake then), else None (no deadline, or not running)."""
    deadline = progress_deadline(job, default)
    since = running_since(job.status)
    if deadline is None or since is None or job.spec.run_policy.suspend:
        return None
    progress = job.status.progress
    advanced = progress.last_advance_time if progress is not None else None
    if advanced is None or advanced < since:
        allowance = startup_allowance(job, deadline)
        due = since + timedelta(seconds=allowance)
        message = f"no step reported within {allowance} s of the run that began at {_time(since)}"
    else:
        due = advanced + timedelta(seconds=deadline)
        step = progress.step if progress is not None else None
        message = (
            f"step {step} was reported at {_time(advanced)} and no later step within progressDeadlineSeconds "
            f"({deadline} s)"
        )
    return Verdict(NO_PROGRESS, message) if now >= due else due


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
