"""What to do next for a job, from what exists: a pure function of the job, its observed pods and time.

Deterministic names make the plan safe to repeat: acting on a stale view only ever asks to create an
object that already exists (409) or to delete one already going. Restarts already acted on are passed
in (`handled`), so a failed pod is counted once however often the plan is computed. Every pod runs with
restartPolicy Never and the plan decides its restart: the whole job or the pod alone, counted against
backoffLimit or, for pods taken away on purpose, as a disruption; `runPolicy.failurePolicy` rules come
first (docs/lifecycle.md says each rule and why). Which restart, or which failure, is `restarts.decision`'s
one answer, a stall among its causes. A pod removed before any plan saw it go holds its name
(`observed.after_removal`) until the restart it calls for is recorded; a pod that ended is deleted only once
its log is kept (`unkept`): no finalizer holds it, and its log goes with it."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import CleanPodPolicy, ReplicaType, Strategy
from disttrain_core.api.status import ConditionType
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.objects import owned_objects
from disttrain_core.held import weight
from disttrain_core.naming import pod_name
from disttrain_core.observed import PodView
from disttrain_core.restarts import in_place
from disttrain_core.restarts.decision import Restart, decide, held_back, past_in_place_grace, pause_end
from disttrain_core.restarts.stalls import StallReading
from disttrain_core.status_from_pods import (
    condition_holds,
    evaluation_due,
    is_finished,
    time_left_lapses,
)
from disttrain_core.types import Manifest, ObjectRef, Verdict, invalid_spec

# A pod still terminating this long after its deletion time is on a node that stopped reporting: no
# kubelet will ever confirm it, so it is removed by force and replaced instead of blocking the job.
STUCK_TERMINATING = timedelta(seconds=30)


@dataclass(frozen=True)
class Plan:
    create: list[Manifest] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    force_delete: list[str] = field(default_factory=list)
    more: bool = False  # pods are missing beyond the `create` batch: the next plan makes them
    restart: Restart | None = None
    fail: Verdict | None = None
    delete_job: bool = False
    wake_at: datetime | None = None
    outrun: tuple[tuple[str, int], ...] = ()  # restarts in place the job outran, to count (`in_place.outrun`)


def cleanup(job: DistTrainJob, pods: Sequence[PodView]) -> list[str]:
    """Pods to stop once the job finished: Running (default) stops what still runs, All everything."""
    policy = job.spec.run_policy.clean_pod_policy
    if policy is CleanPodPolicy.NONE:
        return []
    return [pod.name for pod in pods if not pod.deleting and (policy is CleanPodPolicy.ALL or pod.active)]


# A plan creates at most this many pods; a job of more gets them over several reconciles, each planned
# and built anew (Kubernetes' Job controller creates in bounded batches too), so that what a plan holds
# stays bounded whatever a job's size.
CREATE_BATCH = 100
# And pods whose templates weigh this much together as JSON at most, the first pod always: each pod holds its
# own copy of its template until it is created, about 7 times its JSON in Python (a 387 KiB template's 100
# pods held 221 MiB).
PLAN_TEMPLATE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Missing:
    """What the job owns and lacks, in creation order, and whether pods beyond `pod_batch` lack too."""

    objects: list[Manifest]
    more: bool = False


def pod_batch(job: DistTrainJob) -> int:
    """How many pods one plan builds at most: CREATE_BATCH, fewer where the job's largest template is so large
    that they would weigh more than PLAN_TEMPLATE_BYTES, and one at least."""
    largest = max((weight(replica.template) for replica in job.spec.replica_specs.values()), default=1)
    return max(1, min(CREATE_BATCH, PLAN_TEMPLATE_BYTES // max(largest, 1)))


def _missing(
    job: DistTrainJob,
    pods: Sequence[PodView],
    children: Collection[ObjectRef],
    settings: BuildSettings,
    *,
    with_pods: bool = True,
    awaited: Collection[str] = (),
) -> Missing:
    """What the job owns and lacks, except pods of indexes that already succeeded (never run twice); only
    what is missing is built, and of the pods at most `pod_batch`; `awaited` pods were just created."""
    existing = {*children, *(ObjectRef("Pod", name) for name in [*(pod.name for pod in pods), *awaited])}
    done = {
        pod_name(job.metadata.name, replica_type, index)
        for replica_type, status in job.status.replica_statuses.items()
        for index in status.succeeded_indexes
    }
    objects: list[Manifest] = []
    pods_built, more, batch = 0, False, None
    for key, build in owned_objects(job, settings):
        if key in existing or (key.kind == "Pod" and (not with_pods or key.name in done)):
            continue
        if key.kind == "Pod":
            batch = pod_batch(job) if batch is None else batch  # weighed once a pod is missing, not every plan
            if pods_built >= batch:
                more = True
                continue
            pods_built += 1
        objects.append(build())
    return Missing(objects, more)


def _startable(missing: Missing, pods: Sequence[PodView]) -> Missing:
    """No pod starts while a training pod of an earlier attempt is still stopping: under the same names, new
    pods reach the old ones (a MultiWorkerMirrored worker still setting up its collective takes a new peer
    for its old one, fails, and its failure restarts the new attempt in turn). A pod that ended, or whose
    node let it go, runs nothing; one on a lost node is removed by force after `stuck_after`."""
    stopping = any(
        pod.deleting and not pod.ended and not pod.released and pod.replica_type is not ReplicaType.EVALUATOR
        for pod in pods
    )
    return Missing([item for item in missing.objects if item["kind"] != "Pod"]) if stopping else missing


def _after(start: datetime | None, seconds: int | None) -> datetime | None:
    return None if start is None or seconds is None else start + timedelta(seconds=seconds)


def plan(
    job: DistTrainJob,
    pods: Sequence[PodView],
    children: Collection[ObjectRef],
    settings: BuildSettings,
    *,
    now: datetime,
    handled: Collection[str] = (),
    awaited: Collection[str] = (),
    unkept: Collection[str] = (),
    stuck_after: timedelta = STUCK_TERMINATING,
    stalled: StallReading | None = None,
) -> Plan:
    """The next actions for a job whose status was just aggregated from the same pods; `awaited`: the
    names of pods created but not in the view yet; `unkept`: the uids of pods that ended and whose log is
    not kept yet, which stay until it is (the kept-log keeper wakes the job then); `stalled`: the stall
    reading that status was judged by, if any. Restarts in place that its pods outran are counted whatever
    the job's state."""
    actions = _actions(
        job,
        pods,
        children,
        settings,
        now=now,
        handled=handled,
        awaited=awaited,
        unkept=unkept,
        stuck_after=stuck_after,
        stalled=stalled,
    )
    return replace(actions, outrun=in_place.outrun(pods, handled))


def _actions(
    job: DistTrainJob,
    pods: Sequence[PodView],
    children: Collection[ObjectRef],
    settings: BuildSettings,
    *,
    now: datetime,
    handled: Collection[str],
    awaited: Collection[str],
    unkept: Collection[str],
    stuck_after: timedelta,
    stalled: StallReading | None,
) -> Plan:
    run_policy = job.spec.run_policy
    keeping = [pod for pod in pods if pod.uid in unkept]
    winding_down = _winding_down(job, pods, keeping, now)
    if winding_down is not None:
        return winding_down

    unmet = settings.gang.unmet_need(job)
    if unmet is not None:  # before any pod is made
        return Plan(fail=invalid_spec([unmet]))
    stuck, unstuck_at = _stuck(pods, now, stuck_after)
    if run_policy.suspend:
        return _suspended(job, pods, children, settings, keeping=keeping, stuck=stuck)
    decided = decide(
        job, pods, handled, awaited, now=now, default_deadline=settings.progress_deadline_seconds, reading=stalled
    )
    if decided.fails is not None:
        return Plan(fail=decided.fails)
    restart, handled = decided.restart, decided.handled
    if restart is not None and any(pod.name in restart.pods for pod in keeping):
        restart = None  # decided once the logs of the pods it deletes are kept
    unplaced = _unplaced_gang(job, pods, now)
    if isinstance(unplaced, Verdict):
        return Plan(fail=unplaced)
    deadline = _after(job.status.start_time, run_policy.active_deadline_seconds)
    evaluated_by = evaluation_due(job, pods)  # the Evaluator's time for the final checkpoint runs out
    still_there = [pod.name for pod in pods if pod.uid in handled and not pod.deleting and pod not in keeping]
    overdue, in_place_due = past_in_place_grace(job, pods, now)
    paused_until = pause_end(job, now)
    held = paused_until is not None or settings.gang.oversized(job) is not None
    missing = _startable(_missing(job, pods, children, settings, awaited=awaited, with_pods=not held), pods)
    # The remains of a pod held its name until this restart: handled now, they give it up to the next plan.
    freed = now if restart is not None and any(pod.gone for pod in restart.failed) else None
    next_batch = now if missing.more else None
    lapses = time_left_lapses(job.status)  # the time left goes blank then
    wakes = [deadline, unstuck_at, evaluated_by, unplaced, freed, next_batch, paused_until, decided.stall_due]
    wakes += [in_place_due, lapses]
    return Plan(
        create=missing.objects,
        more=missing.more,
        delete=sorted({*(restart.pods if restart else ()), *still_there, *overdue, *held_back(pods)}),
        force_delete=stuck,
        restart=restart,
        wake_at=min(filter(None, wakes), default=None),
    )


def _suspended(
    job: DistTrainJob,
    pods: Sequence[PodView],
    children: Collection[ObjectRef],
    settings: BuildSettings,
    *,
    keeping: Sequence[PodView],
    stuck: list[str],
) -> Plan:
    """A suspended job's plan: no pods at all (each stops once its log is kept); the Service and the volume
    stay for the resume."""
    owned = _missing(job, pods, children, settings, with_pods=False).objects
    stopped = [pod.name for pod in pods if not pod.deleting and pod not in keeping]
    return Plan(create=owned, delete=stopped, force_delete=stuck)


def _winding_down(job: DistTrainJob, pods: Sequence[PodView], keeping: Sequence[PodView], now: datetime) -> Plan | None:
    """The plan of a job being deleted (nothing: it may be going with its namespace, and nothing is made
    again) or finished (its cleanup, then its TTL), or None for one that runs."""
    if job.metadata.deletion_timestamp is not None:
        return Plan()
    if not is_finished(job.status):
        return None
    expiry = _after(job.status.completion_time, job.spec.run_policy.ttl_seconds_after_finished)
    peers, peers_due = _peers_ending(job, pods, now)
    expired = expiry is not None and now >= expiry and not keeping and not peers
    held = {pod.name for pod in keeping} | peers
    stopped = [name for name in cleanup(job, pods) if name not in held]
    wakes = [due for due in (None if expired else expiry, peers_due) if due is not None]
    return Plan(delete=stopped, delete_job=expired, wake_at=min(wakes, default=None))


# After a MultiWorkerMirrored job's worker 0 succeeded, how long its peers, which ran the same steps and end
# with it, have to end on their own before the cleanup stops them: their last lines and exit codes are kept.
PEERS_END_GRACE = timedelta(seconds=15)


def _peers_ending(job: DistTrainJob, pods: Sequence[PodView], now: datetime) -> tuple[set[str], datetime | None]:
    """The Chief and Worker pods of a MultiWorkerMirrored job that succeeded still running within
    PEERS_END_GRACE of its completion, and when that ends."""
    completed = job.status.completion_time
    if (
        job.spec.strategy is not Strategy.MULTI_WORKER_MIRRORED
        or completed is None
        or not condition_holds(job.status, ConditionType.SUCCEEDED)
        or now >= completed + PEERS_END_GRACE
    ):
        return set(), None
    training = (ReplicaType.CHIEF, ReplicaType.WORKER)
    peers = {pod.name for pod in pods if pod.active and pod.replica_type in training}
    return peers, completed + PEERS_END_GRACE if peers else None


def _unplaced_gang(job: DistTrainJob, pods: Sequence[PodView], now: datetime) -> Verdict | datetime | None:
    """With `schedulingPolicy.scheduleTimeoutSeconds`: the verdict once a pod has found no place for that long
    (a gang is placed whole or not at all, so one such pod holds up the job), else when that will be."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is None or policy.schedule_timeout_seconds is None:
        return None
    waiting = [(found.since, pod.name, found.message) for pod in pods if pod.active and (found := pod.unschedulable)]
    if not waiting:
        return None
    since, name, why = min(waiting)
    due = since + timedelta(seconds=policy.schedule_timeout_seconds)
    if now < due:
        return due
    message = (
        f"{len(waiting)} of its pods found no place within scheduleTimeoutSeconds "
        f"{policy.schedule_timeout_seconds} ({name}: {why})"
    )
    return Verdict("ScheduleTimeout", message)


def _stuck(pods: Sequence[PodView], now: datetime, stuck_after: timedelta) -> tuple[list[str], datetime | None]:
    """Pods terminating for longer than `stuck_after` past their deletion time, and when the next one will be.
    A pod whose containers ended, or whose node let it go, is held by a finalizer (another's, or an earlier
    version's kept-log keeper's), not by a node that stopped reporting: removing it by force would change nothing."""
    stuck: list[tuple[str, datetime]] = []
    pending: list[tuple[str, datetime]] = []
    for pod in pods:
        if pod.deletion_time is None or pod.released or pod.ended:
            continue
        due = pod.deletion_time + stuck_after
        (stuck if now >= due else pending).append((pod.name, due))
    return [name for name, _ in stuck], min((due for _, due in pending), default=None)
