"""The one reconcile path: parse the job, plan, act through `Kube`, write the status if it changed.

Every trigger (job created, resumed after an operator restart, spec changed, a child pod changed)
calls `Reconciler.reconcile`, which is idempotent. Reconciles of one job never overlap (`JobQueue`); the last
status written is remembered so that a trigger carrying a slightly older job body cannot roll the
status back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import pydantic

from disttrain_operator import metrics
from disttrain_operator.api.job import DistTrainJob
from disttrain_operator.api.status import ConditionType, DistTrainJobStatus, JobPhase, Progress
from disttrain_operator.builders.objects import Manifest
from disttrain_operator.builders.settings import BuildSettings
from disttrain_operator.kube import ChildRejectedError, Kube, TransientApiError
from disttrain_operator.kueue import (
    MANAGER,
    RESOURCE_FLAVOR_API_VERSION,
    PodSetInfo,
    WorkloadView,
    finished_condition,
    flavor_info,
    kueue_step,
    merge_patch,
    workload_reference,
)
from disttrain_operator.observed import ChildView, PodView, own_pods
from disttrain_operator.planner import STUCK_TERMINATING, Plan, object_key, plan
from disttrain_operator.status_aggregation import Verdict, aggregate, record_restart, with_condition

logger = logging.getLogger(__name__)

Body = Mapping[str, Any]


# How long the indexes may take to show a child the operator created (or a pod it deleted) before the plan
# may ask for it again: the child may have gone before any reconcile saw it. A duplicate costs a 409.
EXPECTATION = timedelta(seconds=15)
# A job's status writes that change only counts and progress come at most this often (see `_write_status`).
STATUS_BATCH = timedelta(seconds=2)
Expected = ChildView | str  # a child created, or the uid of a pod deleted
_COUNTS = frozenset({"replicaStatuses", "ready", "progress"})


class EventSink(Protocol):
    def __call__(self, body: Body, *, type: str, reason: str, message: str) -> None: ...


def utcnow() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def dump_status(status: DistTrainJobStatus) -> dict[str, Any]:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def _essence(body: Body, status: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """What a job event can change that the plan reads: spec (through its generation), labels, deletion, status."""
    metadata = body["metadata"]
    return (metadata.get("generation"), dict(metadata.get("labels") or {}), metadata.get("deletionTimestamp"), status)


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        settings: BuildSettings,
        emit: EventSink,
        *,
        clock: Callable[[], datetime] = utcnow,
        wake: Callable[[tuple[str, str], datetime], None] | None = None,
        stuck_after: timedelta = STUCK_TERMINATING,
    ) -> None:
        self._wake = wake
        self._stuck_after = stuck_after
        self._kube = kube
        self._settings = settings
        self._emit = emit
        self._clock = clock
        self._written: dict[str, dict[str, Any]] = {}
        self._unwritten: dict[str, dict[str, Any]] = {}  # per job: a status held back for the batch
        self._handled: dict[str, set[str]] = {}  # per job: pods already restarted, or deleted by the operator
        self._forced: dict[str, set[str]] = {}  # per job: pods removed by force (one Event each)
        self._phases: dict[str, tuple[str, str]] = {}  # per job: namespace and phase, for the active gauge
        self._unwatched: dict[str, set[ChildView]] = {}  # per job: children known to exist that no index watches
        self._settled: dict[str, tuple[Any, ...]] = {}  # per job: what it looked like after its last reconcile
        self._last_write: dict[str, datetime] = {}  # per job: when its status was last written
        self._expected: dict[str, dict[Expected, datetime]] = {}  # per job: done, not yet indexed; until when

    def forget(self, uid: str) -> None:
        """Drop what is remembered of a deleted job."""
        for memory in (
            self._settled,
            self._written,
            self._unwritten,
            self._handled,
            self._forced,
            self._phases,
            self._unwatched,
            self._expected,
            self._last_write,
        ):
            memory.pop(uid, None)
        metrics.set_active(dict(self._phases))

    def reconcile(
        self,
        body: Body,
        pods: Sequence[PodView],
        children: Collection[ChildView],
        reported: Progress | None = None,
        workload: WorkloadView | None = None,
    ) -> None:
        """Bring one job's children and status in line; raises TransientApiError when a retry is due.

        `reported` is the trainer's progress as last polled, and `workload` the job's Kueue Workload, if any.
        Calls for one job must not overlap (`JobQueue` sees to it); calls for different jobs may.
        """
        uid = str(body["metadata"]["uid"])
        known = self._unwritten.get(uid) or self._written.get(uid) or body.get("status") or {}
        current = {**body, "status": known}  # a status held back keeps its times (start, transitions)
        try:
            job = DistTrainJob.model_validate(current)
        except pydantic.ValidationError as error:
            self._reject_spec(body, current["status"], error)
            return
        with metrics.RECONCILE_SECONDS.time():
            job = self._follow_kueue(body, job, workload)
            self._reconcile(body, uid, job, own_pods(job, pods), children, reported=reported)
        self._settled[uid] = _essence(body, self._written.get(uid))

    def echoes(self, body: Body) -> bool:
        """The job event only carries the operator's own last status write: nothing to plan anew.

        Every status write comes back as an event of the job; reconciling it again would cost a
        full plan for nothing (issue 8's profile)."""
        settled = self._settled.get(str(body["metadata"]["uid"]))
        return settled is not None and settled == _essence(body, body.get("status") or {})

    def _reconcile(
        self,
        body: Body,
        uid: str,
        job: DistTrainJob,
        pods: Sequence[PodView],
        children: Collection[ChildView],
        *,
        reported: Progress | None,
    ) -> None:
        now, generation = self._clock(), job.metadata.generation
        unwatched = self._unwatched.setdefault(uid, set())
        children = [*children, *unwatched]
        status = aggregate(job, pods, created=False, now=now, reported=reported)
        handled = self._handled.setdefault(uid, set())
        expected = self._still_expected(uid, pods, children)
        awaited = {key.name for key in expected if isinstance(key, ChildView) and key.kind == "Pod"}

        def plan_for(status: DistTrainJobStatus) -> Plan:
            return plan(
                _with(job, status),
                pods,
                children,
                self._settings,
                now=now,
                handled=handled,
                awaited=awaited,
                stuck_after=self._stuck_after,
            )

        next_plan = plan_for(status)
        if next_plan.fail is not None:  # backoffLimit: fail now, and plan the cleanup that follows
            status = _failed(status, next_plan.fail, now, generation)
            next_plan = plan_for(status)
        if next_plan.delete_job:
            self._delete_job(body, uid)
            return
        retry = self._delete(body, uid, next_plan, pods, expected)
        if next_plan.restart is not None and retry is None:
            handled.update(str(pod.uid) for pod in next_plan.restart.failed)
            status = record_restart(status, next_plan.restart.failed, next_plan.restart.message, now, generation)
        creates = [manifest for manifest in next_plan.create if object_key(manifest) not in expected]
        wakes = [] if next_plan.wake_at is None else [next_plan.wake_at]
        if len(creates) < len(next_plan.create):  # a look again, should one never show up
            wakes.append(now + EXPECTATION)
        created, rejected, retry = self._create(body, creates, retry, unwatched)
        created_all = retry is None and rejected is None
        staying = [pod for pod in pods if pod.name not in next_plan.delete]
        status = aggregate(_with(job, status), staying, created=created_all, now=now, reported=reported)
        if rejected is not None:
            status = _failed(status, rejected, now, generation)
        deferred_until = self._write_status(body, uid, status, batch=self._wake is not None)
        if created:
            self._emit(body, type="Normal", reason="Created", message=f"created {', '.join(created)}")
        wakes += [] if deferred_until is None else [deferred_until]
        if wakes and self._wake is not None:  # one wake per job: the earliest (a later one replaces it)
            self._wake((job.metadata.namespace, job.metadata.name), min(wakes))
        if retry is not None:
            raise retry

    def _delete(
        self, body: Body, uid: str, next_plan: Plan, pods: Sequence[PodView], expected: set[Expected]
    ) -> TransientApiError | None:
        """The plan's deletions, each once; returns an error worth a retry, if any."""
        retry: TransientApiError | None = None
        namespace, by_name = body["metadata"]["namespace"], {pod.name: pod for pod in pods}
        self._handled[uid].update(str(by_name[name].uid) for name in next_plan.delete)  # not a loss to restart for
        for name in next_plan.delete:
            pod_uid = str(by_name[name].uid)
            if pod_uid in expected:  # deleted already; the index has yet to show it
                continue
            try:
                self._kube.delete_pod(namespace, name)
            except TransientApiError as error:
                retry = error
                continue
            self._expected[uid][pod_uid] = self._clock() + EXPECTATION
        forced = self._forced.setdefault(uid, set())
        for name in next_plan.force_delete:
            if by_name[name].uid in forced:  # removed by force already: the pod is on its way out
                continue
            try:
                self._kube.delete_pod(namespace, name, force=True)
            except TransientApiError as error:
                retry = error
                continue
            forced.add(str(by_name[name].uid))
            self._emit(body, type="Warning", reason="PodStuckTerminating", message=f"{name}: removed by force")
        return retry

    def _still_expected(self, uid: str, pods: Sequence[PodView], children: Collection[ChildView]) -> set[Expected]:
        """What this operator created or deleted that the indexes do not show yet: not to be done again.

        An index lags the operator's own writes by a few events; without this, every reconcile in that
        window asked to create the same pods again (a 409 each) or to delete them again (issue 8's API
        benchmark)."""
        expected = self._expected.setdefault(uid, {})
        present = {ChildView("Pod", pod.name) for pod in pods} | set(children)
        undeleted = {str(pod.uid) for pod in pods if not pod.deleting}
        moment = self._clock()

        def shown(key: Expected) -> bool:
            return key in present if isinstance(key, ChildView) else key not in undeleted

        for key in [key for key, until in expected.items() if until < moment or shown(key)]:
            del expected[key]
        return set(expected)

    def _follow_kueue(self, body: Body, job: DistTrainJob, workload: WorkloadView | None) -> DistTrainJob:
        """Kueue's contract for a queued job; returns the job as it is after any change made to it."""
        step = kueue_step(job, workload, self._flavor)
        if step.create is not None:
            try:
                self._kube.create(step.create)
            except ChildRejectedError as error:
                self._emit(body, type="Warning", reason="CreateFailed", message=f"Workload was refused: {error}")
                return job
        if step.finish is not None:
            condition = finished_condition(step.finish, self._clock().strftime("%Y-%m-%dT%H:%M:%SZ"))
            self._kube.apply_status_condition(workload_reference(job), condition, MANAGER)
        if step.event is not None:
            self._emit(body, type="Normal", reason=step.event.reason, message=step.event.message)
        if step.job_patch is None:
            return job
        metadata = job.metadata
        self._kube.patch_job(metadata.namespace, metadata.name, step.job_patch)
        patched = merge_patch(job.model_dump(mode="json", by_alias=True, exclude_none=True), step.job_patch)
        return DistTrainJob.model_validate(patched)

    def _flavor(self, name: str) -> PodSetInfo:
        flavor = self._kube.get_cluster_object(RESOURCE_FLAVOR_API_VERSION, "resourceflavors", name)
        return flavor_info(flavor) if flavor is not None else PodSetInfo()

    def _create(
        self, body: Body, manifests: Sequence[Manifest], retry: TransientApiError | None, unwatched: set[ChildView]
    ) -> tuple[list[str], Verdict | None, TransientApiError | None]:
        """Create in order; stop at the first refusal. Returns (what was created, refusal, error worth a retry).

        PodGroups are not watched (their CRD may be absent): once created they are remembered in `unwatched`;
        the rest are expected in the indexes soon.
        """
        expected = self._expected.setdefault(str(body["metadata"]["uid"]), {})
        created: list[str] = []
        rejected: Verdict | None = None
        for manifest in manifests:
            try:
                if self._kube.create(manifest):
                    created.append(_describe(manifest))
                if manifest["kind"] == "PodGroup":
                    unwatched.add(object_key(manifest))
                else:
                    expected[object_key(manifest)] = self._clock() + EXPECTATION
            except ChildRejectedError as error:
                rejected = Verdict("ChildRejected", f"{_describe(manifest)} was refused: {error}")
                self._emit(body, type="Warning", reason="CreateFailed", message=rejected.message)
                break
            except TransientApiError as error:
                retry = error
                self._emit(body, type="Warning", reason="CreateFailed", message=f"{_describe(manifest)}: {error}")
                break
        return created, rejected, retry

    def _delete_job(self, body: Body, uid: str) -> None:
        metadata = body["metadata"]
        self._emit(body, type="Normal", reason="TTLExpired", message="ttlSecondsAfterFinished passed: deleting the job")
        self._kube.delete_job(metadata["namespace"], metadata["name"])
        self.forget(uid)

    def _write_status(
        self, body: Body, uid: str, status: DistTrainJobStatus, *, batch: bool = False
    ) -> datetime | None:
        """Write the status if it changed. With `batch`, a change nobody waits on is held back until it is
        due (`_batch_due`), and that time is returned: pods of a job start within moments of each other,
        and each one's report need not cost a write of its own.
        Conditions newly true get an Event each; Created has one already, listing what was created."""
        new = dump_status(status)
        previous: dict[str, Any] = self._written.get(uid) or dict(body.get("status") or {})
        if new == previous:
            self._unwritten.pop(uid, None)
            return None
        now = self._clock()
        due = _batch_due(status, previous, new, self._last_write.get(uid)) if batch else None
        if due is not None and now < due:
            self._unwritten[uid] = new
            return due
        metadata = body["metadata"]
        self._kube.patch_job_status(metadata["namespace"], metadata["name"], new)
        self._written[uid], self._last_write[uid] = new, now
        self._unwritten.pop(uid, None)
        for condition in _newly_true(previous, new):
            kind = "Warning" if condition["type"] in _WARNING_CONDITIONS else "Normal"
            if condition["type"] != ConditionType.CREATED:
                self._emit(body, type=kind, reason=condition["reason"], message=condition.get("message", ""))
            metrics.count_transition(metadata["namespace"], condition["type"], condition["reason"])
        self._phases[uid] = (metadata["namespace"], str(new.get("phase", "")))
        metrics.set_active(dict(self._phases))
        if new.get("phase") != previous.get("phase"):
            logger.info("job %s/%s is %s", metadata["namespace"], metadata["name"], new.get("phase"))
        return None

    def _reject_spec(self, body: Body, previous: Mapping[str, Any], error: pydantic.ValidationError) -> None:
        """A spec the operator cannot act on: a Warning event and a Failed condition, never a crash."""
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()[:5])
        verdict = Verdict("InvalidSpec", f"the operator cannot act on this spec: {problems}")
        try:
            status = DistTrainJobStatus.model_validate(previous)
        except pydantic.ValidationError:
            status = DistTrainJobStatus()
        generation = body["metadata"].get("generation")
        uid = str(body["metadata"]["uid"])
        self._write_status(body, uid, _failed(status, verdict, self._clock(), generation))


def _failed(status: DistTrainJobStatus, verdict: Verdict, now: datetime, generation: int | None) -> DistTrainJobStatus:
    conditions = with_condition(
        status.conditions, ConditionType.FAILED, holds=True, verdict=verdict, now=now, generation=generation
    )
    return status.model_copy(
        update={
            "conditions": conditions,
            "phase": JobPhase.FAILED,
            "completion_time": status.completion_time or now,
            "observed_generation": generation,
        }
    )


_WARNING_CONDITIONS = {ConditionType.FAILED.value, ConditionType.RESTARTING.value}


def _batch_due(
    status: DistTrainJobStatus, previous: Mapping[str, Any], new: Mapping[str, Any], last_write: datetime | None
) -> datetime | None:
    """When a status change may wait until, None when it is written at once. Counts alone wait until
    STATUS_BATCH after the job's last write. A new job's first status, Pending with its children created,
    waits until STATUS_BATCH after their creation: its pods mostly run by then, and one write says both
    (issue 8's admission benchmark: one write fewer per job in a burst)."""
    if last_write is not None:
        return last_write + STATUS_BATCH if _counts_alone(previous, new) else None
    created = [condition for condition in status.conditions if condition.type is ConditionType.CREATED]
    if (
        not previous.get("conditions")
        and status.phase is JobPhase.PENDING
        and len(status.conditions) == 1 == len(created)
    ):
        return created[0].last_transition_time + STATUS_BATCH
    return None


def _counts_alone(previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Only replica counts, readiness or progress differ: nothing a user waits on (phase, conditions)."""
    return {k: v for k, v in previous.items() if k not in _COUNTS} == {k: v for k, v in new.items() if k not in _COUNTS}


def _newly_true(previous: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Conditions that became True (or changed reason while True): each is an Event users can search for."""
    before = {c["type"]: (c["status"], c.get("reason")) for c in previous.get("conditions", [])}
    return [
        condition
        for condition in new.get("conditions", [])
        if condition["status"] == "True" and before.get(condition["type"]) != ("True", condition.get("reason"))
    ]


def _with(job: DistTrainJob, status: DistTrainJobStatus) -> DistTrainJob:
    return job.model_copy(update={"status": status})


def _describe(manifest: Manifest) -> str:
    key = object_key(manifest)
    return f"{key.kind} {key.name}"
