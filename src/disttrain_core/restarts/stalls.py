"""A job that stopped learning: no step for `runPolicy.progressDeadlineSeconds` while it runs.

The clock runs only while the job runs (its Running condition), and starts anew with every run: after
a start, a restart or a resume, the first step may take `startupDeadlineSeconds` (restoring, compiling);
from then on each step must follow the one before within the deadline. A step counts as reported when
the operator saw it (`Progress.last_advance_time`, its own clock), so a trainer whose progress endpoint
stops answering stalls too, and a trainer's clock never moves the deadline.

A deadline judges only a run whose trainer speaks the progress contract: one that answered its progress
port in that run (a report, or an answer that it has none yet: `status.progressAnswerTime`). A user's own
image, which serves no such port, runs unjudged, and the status says so (`Unjudged`) once the first step
would have been due; a run first answered after that has its first step's allowance from the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import DEFAULT_STARTUP_SECONDS
from disttrain_core.api.status import ConditionStatus, ConditionType, DistTrainJobStatus
from disttrain_core.types import Verdict

NO_PROGRESS = "NoProgress"  # the Stalled condition's reason
STALLED = "Stalled"  # the reason of the restart, or of the failure, a stall calls for
NOT_REPORTED = "ProgressNotReported"  # the Stalled condition's reason (False) for a run that is not judged
PROGRESSING = "Progressing"  # the Stalled condition's reason (False) for a run judged and on time


@dataclass(frozen=True)
class Unjudged:
    """A run past its first step's allowance whose trainer never answered its progress port: the deadline it
    would have, and why it does not apply."""

    message: str

    def verdict(self) -> Verdict:
        return Verdict(NOT_REPORTED, self.message)


@dataclass(frozen=True)
class StallReading:
    """What `stall` found for a job's status at one reconcile: the status's Stalled condition is set from it and
    the restart decision takes it, so that the deadline is judged once."""

    found: Verdict | Unjudged | datetime | None


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


def answered_in_run(status: DistTrainJobStatus) -> bool:
    """The current run's trainer answered its progress port (`status.progressAnswerTime`)."""
    since, answered = running_since(status), status.progress_answer_time
    return since is not None and answered is not None and answered >= since


def stall(job: DistTrainJob, now: datetime, default: int | None) -> Verdict | Unjudged | datetime | None:
    """The verdict on a running job whose step did not advance in time, else when it will be due (for the
    operator to wake then), else why its run is not judged, else None (no deadline, or not running)."""
    deadline = progress_deadline(job, default)
    since = running_since(job.status)
    if deadline is None or since is None or job.spec.run_policy.suspend:
        return None
    progress = job.status.progress
    advanced = progress.last_advance_time if progress is not None else None
    if advanced is not None and advanced >= since:
        due = advanced + timedelta(seconds=deadline)
        step = progress.step if progress is not None else None
        message = (
            f"step {step} was reported at {_time(advanced)} and no later step within progressDeadlineSeconds "
            f"({deadline} s)"
        )
        return Verdict(NO_PROGRESS, message) if now >= due else due
    allowance = startup_allowance(job, deadline)
    first_due = since + timedelta(seconds=allowance)
    answered = job.status.progress_answer_time
    if answered is None or answered < since:
        return Unjudged(_unjudged(job, deadline, allowance)) if now >= first_due else first_due
    start = since if answered <= first_due else answered
    due = start + timedelta(seconds=allowance)
    message = f"no step reported within {allowance} s of the run that began at {_time(start)}"
    return Verdict(NO_PROGRESS, message) if now >= due else due


def _unjudged(job: DistTrainJob, deadline: int, allowance: int) -> str:
    whose = "the job's" if job.spec.run_policy.progress_deadline_seconds else "the operator's default"
    return (
        f"progressDeadlineSeconds ({deadline} s, {whose}) does not apply to this run: no trainer answered on its "
        f"progress port ({job.spec.progress_port}) within {allowance} s of its start, as an image that does not "
        "serve disttrain's progress contract never does; the deadline judges a run from its first answer"
    )


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
