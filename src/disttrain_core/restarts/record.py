"""The record of a restart in the job's status: the Restarting condition, the counts, and the pause it earns.

A restart that comes before the job ran `HEALTHY_RUN` since the last (or the pause it earned) is quick, and so
is one beyond `FREE_RESTARTS` within `RESTART_DECAY` each of the last; quick restarts in a row wait before
their pods start, as a kubelet's CrashLoopBackOff does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from disttrain_core.api.status import (
    MAX_DISRUPTION_MESSAGE,
    ConditionType,
    Disruption,
    DistTrainJobStatus,
    JobPhase,
    ReplicaStatus,
    RestartBackoff,
)
from disttrain_core.backoff import Backoff
from disttrain_core.observed import PodView
from disttrain_core.restarts.stalls import STALLED
from disttrain_core.status_from_pods import with_condition
from disttrain_core.types import Verdict

DISRUPTED = "Disrupted"  # the reason of the Restarting condition, and of its Event, for a disruption


# A restart that comes before the job ran this long, after the last restart or the pause it earned, is quick;
# quick restarts in a row wait before their pods start: 10 s, doubling to 5 minutes, as a kubelet's
# CrashLoopBackOff does. Preemptions every 30 s (the goodput benchmark's quickest) stay unpaused.
HEALTHY_RUN = timedelta(seconds=20)
RESTART_PAUSE = Backoff(first=10, longest=300)
# Restarts at a slower pace still loop: each is remembered (`RestartBackoff.recent_restarts`) until the job ran
# RESTART_DECAY past it, the kubelet's reset of CrashLoopBackOff, and a restart beyond FREE_RESTARTS remembered
# is quick too. A loop of restarts at any pace faster than one per RESTART_DECAY pauses so; the goodput
# benchmark's 4 preemptions do not.
RESTART_DECAY = timedelta(minutes=10)
FREE_RESTARTS = 5


def restart_backoff(previous: RestartBackoff | None, now: datetime) -> RestartBackoff:
    """The pause a restart decided at `now` earns: none after a healthy run with few restarts remembered, else
    the next of RESTART_PAUSE."""
    if previous is None:
        return RestartBackoff(quick_restarts=0, last_restart=now, until=now, recent_restarts=1)
    ran = max(now - max(previous.last_restart, previous.until), timedelta(0))
    recent = max(0, previous.recent_restarts - ran // RESTART_DECAY) + 1
    quick = previous.quick_restarts + 1 if ran < HEALTHY_RUN or recent > FREE_RESTARTS else 0
    pause = timedelta(seconds=RESTART_PAUSE.delay(quick)) if quick else timedelta(0)
    return RestartBackoff(quick_restarts=quick, last_restart=now, until=now + pause, recent_restarts=recent)


def record_restart(
    status: DistTrainJobStatus,
    failed: Sequence[PodView],
    message: str,
    now: datetime,
    generation: int | None,
    *,
    disruption: str | None = None,
    stalled: bool = False,
) -> DistTrainJobStatus:
    """One restart decision: each failed pod's type + 1, the Restarting condition (reason Stalled for a stall),
    the pause it earns (`restart_backoff`), and restartCount + 1; or, for a `disruption` (its reason),
    disruptions + 1 and lastDisruption instead of restartCount."""
    counts = dict(status.replica_statuses)
    for pod in failed:
        current = counts.get(pod.replica_type, ReplicaStatus())
        counts[pod.replica_type] = current.model_copy(update={"restarts": current.restarts + 1})
    message += resumes_from(status)
    backoff = restart_backoff(status.restart_backoff, now)
    if backoff.quick_restarts:
        pause = int((backoff.until - now).total_seconds())
        message += (
            f"; {backoff.quick_restarts + 1} restarts in a row, each within {HEALTHY_RUN.seconds} s of running"
            f" or beyond {FREE_RESTARTS} in {RESTART_DECAY.seconds // 60} minutes each: its pods start again in"
            f" {pause} s"
        )
    verdict = Verdict(DISRUPTED if disruption is not None else STALLED if stalled else "Restarting", message)
    conditions = with_condition(
        status.conditions, ConditionType.RESTARTING, holds=True, verdict=verdict, now=now, generation=generation
    )
    stopped = Verdict("Restarting", "pods are being replaced")
    conditions = with_condition(
        conditions, ConditionType.RUNNING, holds=False, verdict=stopped, now=now, generation=generation
    )
    counted: dict[str, object] = (
        {"restart_count": status.restart_count + 1}
        if disruption is None
        else {
            "disruptions": status.disruptions + 1,
            "last_disruption": Disruption(reason=disruption, message=message[:MAX_DISRUPTION_MESSAGE], time=now),
        }
    )
    update = {**counted, "replica_statuses": counts, "conditions": conditions, "phase": JobPhase.RESTARTING}
    return status.model_copy(update={**update, "restart_backoff": backoff})


def record_outrun(
    status: DistTrainJobStatus, pods: Sequence[PodView], outrun: Sequence[tuple[str, int]]
) -> DistTrainJobStatus:
    """The restarts in place the job's pods outran (`in_place.outrun`: each pod's runs counted through), counted
    in restartCount and against each pod's type as the kubelet made them; the conditions and phase stay as
    the pods make them, which ran on."""
    if not outrun:
        return status
    by_name = {pod.name: pod for pod in pods}
    counts, total = dict(status.replica_statuses), 0
    for name, through in outrun:
        pod = by_name[name]
        assert pod.runs is not None  # the planner chose it for its runs
        more = through - pod.runs.counted
        current = counts.get(pod.replica_type, ReplicaStatus())
        counts[pod.replica_type] = current.model_copy(update={"restarts": current.restarts + more})
        total += more
    return status.model_copy(update={"restart_count": status.restart_count + total, "replica_statuses": counts})


def resumes_from(status: DistTrainJobStatus) -> str:
    """Where a restart decided now resumes, as far as the trainer said: its last checkpoint's step, and the
    steps it trains again. Reports reach the status up to a poll late: a checkpoint saved since the last one
    the status holds is where the trainer resumes, and it redoes fewer steps."""
    saved, progress = status.checkpoint, status.progress
    if saved is None:
        return "; no checkpoint reported: it starts from its own latest, if any" if progress else ""
    where = f" ({saved.path})" if saved.path else ""
    redone = progress.step - saved.step if progress is not None and progress.step is not None else None
    again = f", redoing the {redone} steps since as reported" if redone is not None and redone >= 0 else ""
    return f"; it resumes from the last checkpoint reported, step {saved.step}{where}, or one saved since{again}"
