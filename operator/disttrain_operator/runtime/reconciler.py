"""The one reconcile path: parse the job, plan, act through `Kube`, write the status if it changed.

Every trigger (job created, resumed after an operator restart, spec changed, a child pod changed)
calls `Reconciler.reconcile`, which is idempotent. Reconciles of one job never overlap (`JobQueue`); the last
status written is remembered so that a trigger carrying a slightly older job body cannot roll the
status back.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import pydantic

from disttrain_contract.timestamps import format_time
from disttrain_operator.api.job import DistTrainJob
from disttrain_operator.api.status import ConditionType, DistTrainJobStatus, JobPhase, Progress
from disttrain_operator.api.validation import spec_violations
from disttrain_operator.core import served
from disttrain_operator.core.builders.settings import BuildSettings
from disttrain_operator.core.kueue import (
    MANAGER,
    RESOURCE_FLAVOR_API_VERSION,
    PodSetInfo,
    PriorityClassRef,
    WorkloadView,
    finished_condition,
    flavor_info,
    kueue_step,
    merge_patch,
    released_status,
    workload_reference,
)
from disttrain_operator.core.observed import PodView, own_pods
from disttrain_operator.core.planner import STUCK_TERMINATING, Plan, object_key, plan
from disttrain_operator.core.status import aggregate, record_restart, with_condition
from disttrain_operator.core.tfjob_conversion import UnconvertibleError
from disttrain_operator.core.types import Body, JobKey, Manifest, ObjectRef, Verdict
from disttrain_operator.runtime import metrics
from disttrain_operator.runtime.kube import ChildRejectedError, TransientApiError

logger = logging.getLogger(__name__)


# How long the watches may take to show a child the operator created (or a pod it deleted) before the plan
# may ask for it again: the child may have gone before any reconcile saw it. A duplicate costs a 409.
EXPECTATION = timedelta(seconds=15)
# A job's status writes that change only counts and progress come at most this often (see `_write_status`).
STATUS_BATCH = timedelta(seconds=2)
Expected = ObjectRef | str  # a child created, or the uid of a pod deleted
_COUNTS = frozenset({"replicaStatuses", "ready", "progress"})


class EventSink(Protocol):
    def __call__(self, body: Body, *, type: str, reason: str, message: str) -> None: ...


class JobApi(Protocol):
    """The API calls a reconcile makes (`Kube` in the operator, a recording fake in tests)."""

    def create(self, manifest: Manifest) -> bool: ...
    def delete_pod(self, namespace: str, name: str, force: bool = False) -> bool: ...
    def delete_job(self, job: Body) -> bool: ...
    def patch_job(self, job: Body, patch: dict[str, Any]) -> None: ...
    def patch_job_status(self, job: Body, status: dict[str, Any]) -> None: ...
    def apply_status_condition(self, manifest: Manifest, condition: dict[str, Any], field_manager: str) -> None: ...
    def patch_object_status(self, manifest: Body, patch: dict[str, Any]) -> None: ...
    def get_cluster_object(self, api_version: str, plural: str, name: str) -> dict[str, Any] | None: ...


@dataclass
class JobMemory:
    """What the operator remembers of one job between its reconciles; dropped with the job (`forget`)."""

    written: dict[str, Any] | None = None  # the status last written
    unwritten: dict[str, Any] | None = None  # a status held back for the batch
    last_write: datetime | None = None  # when the status was last written
    settled: tuple[Any, ...] | None = None  # what the job looked like after its last reconcile
    phase: tuple[str, str] | None = None  # namespace and phase, for the active gauge
    handled: set[str] = field(default_factory=set)  # uids of pods restarted, or deleted by the operator
    forced: set[str] = field(default_factory=set)  # uids of pods removed by force (one Event each)
    unwatched: set[ObjectRef] = field(default_factory=set)  # children known to exist that no watch sees
    expected: dict[Expected, datetime] = field(default_factory=dict)  # done, not yet seen by a watch; until when
    checked_generation: int | None = None  # the last generation whose spec passed the CRD's schema
    served_names: dict[str, str] | None = None  # a served TFJob's replica type keys (`served.replica_names`)


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
        kube: JobApi,
        settings: BuildSettings,
        emit: EventSink,
        *,
        clock: Callable[[], datetime] = utcnow,
        wake: Callable[[JobKey, datetime], None] | None = None,
        stuck_after: timedelta = STUCK_TERMINATING,
    ) -> None:
        self._wake = wake
        self._stuck_after = stuck_after
        self._kube = kube
        self._settings = settings
        self._emit = emit
        self._clock = clock
        self._jobs: dict[str, JobMemory] = {}  # by the job's uid
        # Known jobs by (namespace, phase), kept as phases change: the gauges are set per status write, and
        # counting every job's phase on each one made a burst of N new jobs cost N^2.
        self._phases: Counter[tuple[str, str]] = Counter()
        self._phases_lock = threading.Lock()  # reconciles of different jobs run on different threads

    def _memory(self, uid: str) -> JobMemory:
        return self._jobs.setdefault(uid, JobMemory())

    def forget(self, uid: str) -> None:
        """Drop what is remembered of a deleted job."""
        memory = self._jobs.pop(uid, None)
        if memory is not None:
            self._set_phase(memory, None)

    def _set_phase(self, memory: JobMemory, phase: tuple[str, str] | None) -> None:
        with self._phases_lock:
            if phase == memory.phase:
                return
            if memory.phase is not None:
                self._phases[memory.phase] -= 1
            if phase is not None:
                self._phases[phase] += 1
            memory.phase = phase
            metrics.set_active(self._phases)

    def reconcile(
        self,
        body: Body,
        pods: Sequence[PodView],
        children: Collection[ObjectRef],
        reported: Progress | None = None,
        workload: WorkloadView | None = None,
    ) -> None:
        """Bring one job's children and status in line; raises TransientApiError when a retry is due.

        `reported` is the trainer's progress as last polled, and `workload` the job's Kueue Workload, if any.
        Calls for one job must not overlap (`JobQueue` sees to it); calls for different jobs may.
        """
        uid = str(body["metadata"]["uid"])
        memory = self._memory(uid)
        core = self._core_body(body, memory)
        if core is None:
            return
        known = memory.unwritten or memory.written or core.get("status") or {}
        current = {**core, "status": known}  # a status held back keeps its times (start, transitions)
        job = self._parsed(core, memory, current)
        if job is None:
            return
        owned = own_pods(job, pods)
        job = self._follow_kueue(core, memory, job, workload, has_pods=bool(owned))
        self._reconcile(core, memory, job, owned, children, reported=reported)
        memory.settled = _essence(core, memory.written)

    def _core_body(self, body: Body, memory: JobMemory) -> Body | None:
        """The job as the core reads it: a DistTrainJob as it is, a served TFJob in DistTrainJob's terms
        (None, and the job failed, when it has a field disttrain cannot serve)."""
        if not served.is_served(body):
            return body
        memory.served_names = served.replica_names(body)
        try:
            return served.job_manifest(body)
        except UnconvertibleError as error:
            bare = _bare_core(body)
            self._reject_spec(bare, bare["status"], [str(error)])
            return None

    def refuse(self, body: Body, verdict: Verdict) -> None:
        """Fail a job the operator does not act on at all (another job holds its names): a Warning Event
        and a Failed condition saying why, written once."""
        memory = self._memory(str(body["metadata"]["uid"]))
        if served.is_served(body):
            memory.served_names = served.replica_names(body)
            body = _bare_core(body)
        self._fail_as_it_is(body, memory.written or body.get("status") or {}, verdict)  # the job's watch may lag
        memory.settled = _essence(body, memory.written)  # the echo of that write needs no reconcile

    def _parsed(self, body: Body, memory: JobMemory, current: Mapping[str, Any]) -> DistTrainJob | None:
        """The job, or None when its spec was refused: the CRD's schema normally keeps such a spec out, but an
        older CRD (or none) may not, and the builders must never see a template of the wrong shape."""
        generation = body["metadata"].get("generation")
        if generation is None or memory.checked_generation != generation:
            violations = spec_violations(current.get("spec"))
            if violations:
                self._reject_spec(body, current["status"], [str(violation) for violation in violations])
                return None
            memory.checked_generation = generation
        try:
            return DistTrainJob.model_validate(current)
        except pydantic.ValidationError as error:
            problems = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()]
            self._reject_spec(body, current["status"], problems)
            return None

    def echoes(self, body: Body) -> bool:
        """The job event only carries the operator's own last status write: nothing to plan anew.

        Every status write comes back as an event of the job; reconciling it again would cost a full plan for
        nothing, and in a burst of new jobs these echoes were a large part of the operator's CPU."""
        memory = self._jobs.get(str(body["metadata"]["uid"]))
        status = body.get("status") or {}
        if served.is_served(body):
            status = served.core_status(status)
        return memory is not None and memory.settled == _essence(body, status)

    def _reconcile(
        self,
        body: Body,
        memory: JobMemory,
        job: DistTrainJob,
        pods: Sequence[PodView],
        children: Collection[ObjectRef],
        *,
        reported: Progress | None,
    ) -> None:
        now, generation = self._clock(), job.metadata.generation
        children = [*children, *memory.unwatched]
        status = aggregate(job, pods, created=False, now=now, reported=reported)
        expected = self._still_expected(memory, pods, children)
        awaited = {key.name for key in expected if isinstance(key, ObjectRef) and key.kind == "Pod"}

        def plan_for(status: DistTrainJobStatus) -> Plan:
            return plan(
                _with(job, status),
                pods,
                children,
                self._settings,
                now=now,
                handled=memory.handled,
                awaited=awaited,
                stuck_after=self._stuck_after,
            )

        next_plan = plan_for(status)
        if next_plan.fail is not None:  # backoffLimit: fail now, and plan the cleanup that follows
            status = _failed(status, next_plan.fail, now, generation)
            next_plan = plan_for(status)
        if next_plan.delete_job:
            self._delete_job(body)
            return
        retry = self._delete(body, memory, next_plan, pods, expected)
        if next_plan.restart is not None and retry is None:
            memory.handled.update(pod.uid for pod in next_plan.restart.failed)
            status = record_restart(status, next_plan.restart.failed, next_plan.restart.message, now, generation)
        creates = [manifest for manifest in next_plan.create if object_key(manifest) not in expected]
        wakes = [] if next_plan.wake_at is None else [next_plan.wake_at]
        if len(creates) < len(next_plan.create):  # a look again, should one never show up
            wakes.append(now + EXPECTATION)
        created, rejected, retry = self._create(body, memory, creates, retry)
        created_all = retry is None and rejected is None
        staying = [pod for pod in pods if pod.name not in next_plan.delete]
        status = aggregate(_with(job, status), staying, created=created_all, now=now, reported=reported)
        if rejected is not None:
            status = _failed(status, rejected, now, generation)
        deferred_until = self._write_status(body, memory, status, batch=self._wake is not None)
        if created:
            self._emit(body, type="Normal", reason="Created", message=f"created {', '.join(created)}")
        wakes += [] if deferred_until is None else [deferred_until]
        if wakes and self._wake is not None:  # one wake per job: the earliest (a later one replaces it)
            self._wake((job.metadata.namespace, job.metadata.name), min(wakes))
        if retry is not None:
            raise retry

    def _delete(
        self, body: Body, memory: JobMemory, next_plan: Plan, pods: Sequence[PodView], expected: set[Expected]
    ) -> TransientApiError | None:
        """The plan's deletions, each once; returns an error worth a retry, if any."""
        retry: TransientApiError | None = None
        namespace, by_name = body["metadata"]["namespace"], {pod.name: pod for pod in pods}
        memory.handled.update(by_name[name].uid for name in next_plan.delete)  # not a loss to restart for
        for name in next_plan.delete:
            pod_uid = by_name[name].uid
            if pod_uid in expected:  # deleted already; the watch has yet to show it
                continue
            try:
                self._kube.delete_pod(namespace, name)
            except TransientApiError as error:
                retry = error
                continue
            memory.expected[pod_uid] = self._clock() + EXPECTATION
        for name in next_plan.force_delete:
            if by_name[name].uid in memory.forced:  # removed by force already: the pod is on its way out
                continue
            try:
                self._kube.delete_pod(namespace, name, force=True)
            except TransientApiError as error:
                retry = error
                continue
            memory.forced.add(by_name[name].uid)
            self._emit(body, type="Warning", reason="PodStuckTerminating", message=f"{name}: removed by force")
        return retry

    def _still_expected(
        self, memory: JobMemory, pods: Sequence[PodView], children: Collection[ObjectRef]
    ) -> set[Expected]:
        """What this operator created or deleted that the watches do not show yet: not to be done again.

        A watch lags the operator's own writes by a few events; without this, every reconcile in that
        window asked to create the same pods again (a 409 each) or to delete them again."""
        expected = memory.expected
        present = {ObjectRef("Pod", pod.name) for pod in pods} | set(children)
        undeleted = {pod.uid for pod in pods if not pod.deleting}
        moment = self._clock()

        def shown(key: Expected) -> bool:
            return key in present if isinstance(key, ObjectRef) else key not in undeleted

        for key in [key for key, until in expected.items() if until < moment or shown(key)]:
            del expected[key]
        return set(expected)

    def _follow_kueue(
        self, body: Body, memory: JobMemory, job: DistTrainJob, workload: WorkloadView | None, *, has_pods: bool
    ) -> DistTrainJob:
        """Kueue's contract for a queued job; returns the job as it is after any change made to it."""
        step = kueue_step(job, workload, self._flavor, self._priority, has_pods=has_pods)
        if step.release and workload is not None:
            self._kube.patch_object_status(
                workload_reference(job), released_status(workload, format_time(self._clock()))
            )
        if step.create is not None:
            try:
                self._kube.create(step.create)
            except ChildRejectedError as error:
                self._emit(body, type="Warning", reason="CreateFailed", message=f"Workload was refused: {error}")
                return job
        if step.finish is not None:
            condition = finished_condition(step.finish, format_time(self._clock()))
            self._kube.apply_status_condition(workload_reference(job), condition, MANAGER)
        if step.event is not None:
            self._emit(body, type="Normal", reason=step.event.reason, message=step.event.message)
        if step.warning is not None:
            self._emit(body, type="Warning", reason=step.warning.reason, message=step.warning.message)
        if step.job_patch is None:
            return job
        patch = (
            step.job_patch if memory.served_names is None else served.wire_patch(step.job_patch, memory.served_names)
        )
        self._kube.patch_job(body, patch)
        patched = merge_patch(job.model_dump(mode="json", by_alias=True, exclude_none=True), step.job_patch)
        return DistTrainJob.model_validate(patched)

    def _priority(self, source: PriorityClassRef) -> int | None:
        found = self._kube.get_cluster_object(*source.path, source.name)
        return int(found["value"]) if found is not None else None

    def _flavor(self, name: str) -> PodSetInfo:
        flavor = self._kube.get_cluster_object(RESOURCE_FLAVOR_API_VERSION, "resourceflavors", name)
        return flavor_info(flavor) if flavor is not None else PodSetInfo()

    def _create(
        self, body: Body, memory: JobMemory, manifests: Sequence[Manifest], retry: TransientApiError | None
    ) -> tuple[list[str], Verdict | None, TransientApiError | None]:
        """Create in order; stop at the first refusal. Returns (what was created, refusal, error worth a retry).

        PodGroups are not watched (their CRD may be absent): once created they are remembered as `unwatched`;
        the rest are expected in the watches soon.
        """
        created: list[str] = []
        rejected: Verdict | None = None
        for manifest in manifests:
            try:
                if self._kube.create(manifest):
                    created.append(_describe(manifest))
                if manifest["kind"] == "PodGroup":
                    memory.unwatched.add(object_key(manifest))
                else:
                    memory.expected[object_key(manifest)] = self._clock() + EXPECTATION
            except ChildRejectedError as error:
                rejected = Verdict("ChildRejected", f"{_describe(manifest)} was refused: {error}")
                self._emit(body, type="Warning", reason="CreateFailed", message=rejected.message)
                break
            except TransientApiError as error:
                retry = error
                self._emit(body, type="Warning", reason="CreateFailed", message=f"{_describe(manifest)}: {error}")
                break
        return created, rejected, retry

    def _delete_job(self, body: Body) -> None:
        metadata = body["metadata"]
        self._emit(body, type="Normal", reason="TTLExpired", message="ttlSecondsAfterFinished passed: deleting the job")
        self._kube.delete_job(body)
        self.forget(str(metadata["uid"]))

    def _write_status(
        self, body: Body, memory: JobMemory, status: DistTrainJobStatus, *, batch: bool = False
    ) -> datetime | None:
        """Write the status if it changed. With `batch`, a change nobody waits on is held back until it is
        due (`_batch_due`), and that time is returned: pods of a job start within moments of each other,
        and each one's report need not cost a write of its own.
        Conditions newly true get an Event each; Created has one already, listing what was created."""
        new = dump_status(status)
        previous: dict[str, Any] = memory.written or dict(body.get("status") or {})
        if new == previous:
            memory.unwritten = None
            return None
        now = self._clock()
        due = _batch_due(status, previous, new, memory.last_write) if batch else None
        if due is not None and now < due:
            memory.unwritten = new
            return due
        metadata = body["metadata"]
        names = memory.served_names
        self._kube.patch_job_status(body, new if names is None else served.wire_status(new, names, format_time(now)))
        memory.written, memory.last_write, memory.unwritten = new, now, None
        for condition in _newly_true(previous, new):
            kind = "Warning" if condition["type"] in _WARNING_CONDITIONS else "Normal"
            if condition["type"] != ConditionType.CREATED:
                self._emit(body, type=kind, reason=condition["reason"], message=condition.get("message", ""))
            metrics.count_transition(metadata["namespace"], condition["type"], condition["reason"])
        self._set_phase(memory, (metadata["namespace"], str(new.get("phase", ""))))
        if new.get("phase") != previous.get("phase"):
            logger.info("job %s/%s is %s", metadata["namespace"], metadata["name"], new.get("phase"))
        return None

    def _reject_spec(self, body: Body, previous: Mapping[str, Any], problems: Sequence[str]) -> None:
        """A spec the operator cannot act on: a Warning event and a Failed condition, never a crash."""
        verdict = Verdict("InvalidSpec", f"the operator cannot act on this spec: {'; '.join(problems[:5])}")
        self._fail_as_it_is(body, previous, verdict)

    def _fail_as_it_is(self, body: Body, previous: Mapping[str, Any], verdict: Verdict) -> None:
        """The job's status, as far as it parses, with the Failed condition of `verdict`."""
        try:
            status = DistTrainJobStatus.model_validate(previous)
        except pydantic.ValidationError:
            status = DistTrainJobStatus()
        generation = body["metadata"].get("generation")
        memory = self._memory(str(body["metadata"]["uid"]))
        self._write_status(body, memory, _failed(status, verdict, self._clock(), generation))


def _bare_core(body: Body) -> dict[str, Any]:
    """A served TFJob without its spec, its status in the core's terms."""
    bare = {key: body[key] for key in ("apiVersion", "kind", "metadata")}
    return {**bare, "status": served.core_status(body.get("status") or {})}


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
    (in a burst of new jobs, one write fewer per job)."""
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
