"""The restart decision: what a job's failed pods, the runs that ended in place and its progress call for now.

One answer per reconcile (`decide`): a restart (of the job, or of the failed pods and those that must join
them, each pod in place or recreated, counted against backoffLimit or as a disruption), a verdict that fails
the job (a FailJob rule, a diverged trainer, backoffLimit reached, a stall an onStall rule fails), or nothing
yet, with when a stall falls due. What each failure calls for is `rules.response`; a stall is `stalls.stall`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from disttrain_contract.exit_codes import ExitCode
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import FailureAction, ReplicaType, RestartScope
from disttrain_core.naming import pod_name
from disttrain_core.observed import PodView
from disttrain_core.restarts import in_place
from disttrain_core.restarts.record import restart_backoff
from disttrain_core.restarts.rules import Reach, Response, response, stall_rule
from disttrain_core.restarts.stalls import STALLED, StallReading, Unjudged, stall
from disttrain_core.status_from_pods import describe_failure, is_finished
from disttrain_core.types import Verdict


@dataclass(frozen=True)
class Restart:
    """One restart decision: the pods to replace, the failures behind it, and why; the pods that restart in
    place instead, each with the count of its runs' ends the restart covers (`in_place.RUNS_COUNTED`)."""

    pods: tuple[str, ...]
    failed: tuple[PodView, ...]
    message: str
    disruption: str | None = None  # every failed pod was taken away on purpose: the first one's reason
    stalled: bool = False  # no pod failed: the job made no step within its progress deadline
    in_place: tuple[tuple[str, int], ...] = ()

    def replacing(self) -> Restart:
        """The same restart with every pod replaced, none in place."""
        names = tuple(dict.fromkeys([*self.pods, *(name for name, _ in self.in_place)]))
        return replace(self, pods=names, in_place=())


def restart_for(
    job: DistTrainJob,
    pods: Sequence[PodView],
    handled: Collection[str],
    awaited: Collection[str] = (),
    runs: Sequence[PodView] = (),
) -> Restart | None:
    """The restart the failed pods, and the runs that ended in place (`runs`, `in_place.previous_runs`), call
    for, or None when nothing new failed, nothing may restart, or a pod that must restart with them was created
    moments ago and is not in the view yet (`awaited`, by name): restarted without it, it would fail on its own
    moments later (a Chief that lost its PS).

    `handled` holds the uids of pods the operator already acted on (restarted, or deleted itself), and the keys
    of runs (`in_place.run_key`). What each failure calls for is `rules.response`. A pod that restarts
    in place and still runs restarts in place; any other is replaced.
    """
    ended = [*(pod for pod in pods if pod.lost), *runs]
    answers = [(pod, response(job, pod)) for pod in ended if pod.uid not in handled]
    failed = [(pod, answer) for pod, answer in answers if not answer.fails]
    if not failed:
        return None
    training = [(pod, answer) for pod, answer in failed if pod.replica_type is not ReplicaType.EVALUATOR]
    alive = [pod for pod in pods if not pod.deleting]
    scoped_to_job = job.spec.effective_restart_scope is RestartScope.JOB
    whole_job = any(
        answer.reach is Reach.JOB or (answer.reach is Reach.AS_SCOPED and scoped_to_job) for _, answer in training
    )
    if whole_job:
        joining, scope = {kind for kind in ReplicaType if kind is not ReplicaType.EVALUATOR}, "the whole job restarts"
    elif any(pod.replica_type is ReplicaType.PS for pod, _ in failed):
        joining, scope = {ReplicaType.CHIEF, ReplicaType.WORKER}, "the PS, the Chief and the workers restart"
    else:
        joining, scope = set(), "the failed pods restart"
    names = {pod_name(job.metadata.name, kind, index) for kind in joining for index in range(job.spec.replicas(kind))}
    if names & set(awaited):
        return None
    joined = [pod.name for pod in alive if pod.replica_type in joining]
    if whole_job:
        victims = joined + [pod.name for pod, _ in failed if pod.replica_type is ReplicaType.EVALUATOR]
    else:
        victims = [pod.name for pod, _ in failed] + joined
    uncounted = _uncounted(failed)
    apart = ", not counted against backoffLimit" if uncounted is not None else ""
    message = f"{'; '.join(describe_failure(pod) + answer.says() for pod, answer in failed)}: {scope}{apart}"
    in_place = _in_place(pods, victims, {pod.name for pod, _ in failed if pod in runs})
    replaced = tuple(name for name in dict.fromkeys(victims) if name not in dict(in_place))
    return Restart(replaced, tuple(pod for pod, _ in failed), message, uncounted, in_place=in_place)


def _in_place(
    pods: Sequence[PodView], victims: Sequence[str], restarted: Collection[str]
) -> tuple[tuple[str, int], ...]:
    """Of the pods a restart stops, those that restart in place: running, their runs followed. The count of their
    runs' ends it covers: up to the one that restarted already, or the one still to come."""
    by_name = {pod.name: pod for pod in pods}
    chosen: dict[str, int] = {}
    for name in victims:
        pod = by_name.get(name)
        if pod is None or pod.runs is None or pod.ended or pod.deleting:
            continue
        chosen[name] = pod.runs.ended if name in restarted else pod.runs.ended + 1
    return tuple(chosen.items())


def _uncounted(failed: Sequence[tuple[PodView, Response]]) -> str | None:
    """Why a restart is not counted against backoffLimit (the first disruption's reason), or None where one
    of its pods failed on the job's own account. A pod that left saying a peer was lost, beside a pod taken
    away, lost that very pod: it is part of the disruption, unless a failurePolicy rule said otherwise."""
    disruptions = [answer.uncounted for _, answer in failed if answer.uncounted is not None]
    if not disruptions:
        return None
    own = [
        pod
        for pod, answer in failed
        if answer.uncounted is None and (answer.rule is not None or pod.exit_code != ExitCode.PEER_LOST)
    ]
    return None if own else disruptions[0]


def acts_on_losses(job: DistTrainJob) -> bool:
    """Whether a pod lost now calls for a restart: not while the job is suspended, finished or being deleted
    (its pods are stopped, or stay as they are)."""
    finished = is_finished(job.status) or job.metadata.deletion_timestamp is not None
    return not (finished or job.spec.run_policy.suspend)


def past_in_place_grace(job: DistTrainJob, pods: Sequence[PodView], now: datetime) -> tuple[list[str], datetime | None]:
    """Where a pod owed a restart in place (`PodView.owed_restart_in_place`) did not make it within IN_PLACE_GRACE
    of the restart that counted it, every training pod is replaced: the ones that restarted in place would
    reach its old run. Else when the grace ends, while one is owed."""
    owed = [pod for pod in pods if pod.owed_restart_in_place and not pod.deleting]
    if not owed:
        return [], None
    backoff = job.status.restart_backoff
    due = (backoff.last_restart if backoff is not None else now) + in_place.IN_PLACE_GRACE
    if now < due:
        return [], due
    training = [pod.name for pod in pods if not pod.deleting and pod.replica_type is not ReplicaType.EVALUATOR]
    return training, None


def _past_backoff_limit(job: DistTrainJob, restart: Restart | None) -> Verdict | None:
    """The verdict on a counted restart that backoffLimit no longer allows."""
    limit = job.spec.run_policy.backoff_limit
    if restart is None or restart.disruption is not None or job.status.restart_count < limit:
        return None
    reason = STALLED if restart.stalled else "BackoffLimitExceeded"
    return Verdict(reason, f"{restart.message}, but backoffLimit {limit} is reached")


def _on_stall(
    job: DistTrainJob, pods: Sequence[PodView], found: Verdict | Unjudged | datetime | None
) -> Restart | Verdict | datetime | None:
    """What a stall (`stall`'s answer) calls for: the whole job restarted (the Evaluator scores on), counted; the
    job failed where an onStall rule says FailJob; else when the deadline falls due, or None."""
    if isinstance(found, Unjudged):
        return None
    if not isinstance(found, Verdict):
        return found
    message = f"the job stalled: {found.message}"
    rule = stall_rule(job)
    if rule is not None and rule[1].action is FailureAction.FAIL_JOB:
        return Verdict(STALLED, f"{message}; failurePolicy rule {rule[0]} fails the job")
    says = "" if rule is None else f" (failurePolicy rule {rule[0]})"
    training = [pod.name for pod in pods if not pod.deleting and pod.replica_type is not ReplicaType.EVALUATOR]
    return Restart(tuple(training), (), f"{message}{says}: the whole job restarts", stalled=True)


def pause_end(job: DistTrainJob, now: datetime) -> datetime | None:
    """When the pause that quick restarts earned ends (`record.restart_backoff`), while it lasts."""
    backoff = job.status.restart_backoff
    return backoff.until if backoff is not None and backoff.until > now else None


@dataclass(frozen=True)
class Decision:
    """What the job's failures, runs and progress call for now: a restart or a verdict, at most one."""

    handled: frozenset[str]  # the uids and run keys acted on, with the ends a restart counted already
    restart: Restart | None = None
    fails: Verdict | None = None
    stall_due: datetime | None = None  # when the progress deadline falls due, while no step comes


def decide(
    job: DistTrainJob,
    pods: Sequence[PodView],
    handled: Collection[str],
    awaited: Collection[str],
    *,
    now: datetime,
    default_deadline: int | None,
    reading: StallReading | None = None,
) -> Decision:
    """The one restart question the planner asks. A restart in place that earns a pause (`record.restart_backoff`)
    recreates every pod instead: the pause holds each back, as it holds a recreated one. A stall is looked at only
    where no pod failed, from `reading` where the status was judged by it (else read now). A pod the restart
    before covered in place that is then deleted (a drain evicts pods one by one) is part of that restart, as its
    end would be (`in_place.loss_covered`)."""
    covered = (pod.uid for pod in pods if in_place.end_counted(pod) or in_place.loss_covered(pod))
    handled = frozenset({*handled, *covered})
    restart = restart_for(job, pods, handled, awaited, in_place.previous_runs(pods))
    if restart is not None and restart.in_place and restart_backoff(job.status.restart_backoff, now).quick_restarts:
        restart = restart.replacing()
    stalled = None
    if restart is None:
        found = reading.found if reading is not None else stall(job, now, default_deadline)
        stalled = _on_stall(job, pods, found)
    if isinstance(stalled, Verdict):
        return Decision(handled, fails=stalled)
    restart = stalled if isinstance(stalled, Restart) else restart
    over = _past_backoff_limit(job, restart)
    if over is not None:
        return Decision(handled, fails=over)
    return Decision(handled, restart, stall_due=stalled if isinstance(stalled, datetime) else None)


def held_back(pods: Sequence[PodView]) -> list[str]:
    """The pods whose trainer the kubelet holds back (10 s after a restart within 10 minutes of the last, doubling
    to 5 minutes): it starts sooner in a pod of its own; its run's end is counted first."""
    return [
        pod.name
        for pod in pods
        if pod.runs is not None and pod.runs.backing_off and not pod.runs.uncounted and not pod.deleting
    ]
