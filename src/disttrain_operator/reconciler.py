"""The one reconcile path: parse the job, plan, act through `Kube`, write the status if it changed.

Every trigger (job created, resumed after an operator restart, spec changed, a child pod changed)
calls `Reconciler.reconcile`, which is idempotent. Reconciles of one job never overlap (`JobQueue`); the last
status written is remembered so that a trigger carrying a slightly older job body cannot roll the
status back. Its parts: what is remembered of a job (`JobMemory`), what was done and is not yet seen
(`Expectations`), the status write (`StatusWriter`), Kueue's contract (`KueueAdapter`), and a served
TFJob's translation on its way in and out (`disttrain_core.served.JobShape`), each in a module of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import pydantic

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.status import DistTrainJobStatus, UnkeptLogs
from disttrain_core.api.validation import spec_violations
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.objects import UNWATCHED_KINDS, object_key
from disttrain_core.job_step import Acts, Observed, Remembered, decide_next, status_after_acts, with_status
from disttrain_core.kueue import MULTIKUEUE, QUEUE_LABEL, WorkloadView, read_labels
from disttrain_core.managers import managed_elsewhere
from disttrain_core.observed import PodView, created_pod_view, own_pods
from disttrain_core.planner import STUCK_TERMINATING, Plan
from disttrain_core.progress import Report
from disttrain_core.restarts.decision import acts_on_losses
from disttrain_core.restarts.in_place import counted_patch, run_key
from disttrain_core.served import JobShape, is_served
from disttrain_core.status_from_pods import failed_status, with_unkept_logs
from disttrain_core.tensorboard_status import TensorBoardView, is_tensorboard_object
from disttrain_core.tfjob_conversion import UnconvertibleError
from disttrain_core.types import Body, JobKey, Manifest, ObjectRef, Verdict, invalid_spec
from disttrain_kube.api_errors import RefusedError, TransientApiError
from disttrain_operator.expectations import EXPECTATION, Expected
from disttrain_operator.job_memory import JobMemory
from disttrain_operator.kueue_adapter import KueueAdapter
from disttrain_operator.status_writer import RESTART_HOLD, EventSink, StatusWriter

logger = logging.getLogger(__name__)

UNWATCHED_RECHECK = timedelta(minutes=1)


class JobApi(Protocol):
    """The API calls a reconcile makes (`Kube` in the operator, a recording fake in tests)."""

    def create(self, manifest: Manifest) -> bool: ...
    def delete_pod(
        self, namespace: str, name: str, force: bool = False, resource_version: str | None = None
    ) -> bool: ...
    def delete_job(self, job: Body) -> bool: ...
    def patch_pod(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> bool: ...
    def patch_job(self, job: Body, patch: dict[str, Any]) -> None: ...
    def patch_job_status(self, job: Body, status: dict[str, Any]) -> None: ...
    def apply_status_condition(self, manifest: Manifest, condition: dict[str, Any], field_manager: str) -> None: ...
    def patch_object_status(self, manifest: Body, patch: dict[str, Any]) -> None: ...
    def get_cluster_object(self, api_version: str, plural: str, name: str) -> dict[str, Any] | None: ...


class LogState(Protocol):
    """What the kept-log keeper (`disttrain_operator.kept_log_keeper`) knows that a plan and a status need."""

    def log_done(self, uid: str) -> bool: ...
    def unkept(self, job_uid: str) -> list[UnkeptLogs]: ...


class _NoLogsKept:
    def log_done(self, uid: str) -> bool:
        return True

    def unkept(self, job_uid: str) -> list[UnkeptLogs]:
        return []


def utcnow() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _essence(body: Body, status: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """What a job event can change that the plan reads: spec (through its generation), Kueue's labels, deletion,
    status."""
    metadata = body["metadata"]
    return (metadata.get("generation"), read_labels(metadata.get("labels")), metadata.get("deletionTimestamp"), status)


class Reconciler:
    def __init__(
        self,
        kube: JobApi,
        settings: BuildSettings,
        emit: EventSink,
        *,
        logs: LogState | None = None,
        clock: Callable[[], datetime] = utcnow,
        wake: Callable[[JobKey, datetime], None] | None = None,
        stuck_after: timedelta = STUCK_TERMINATING,
        kueue_queues_tfjobs: bool = False,
        unsupported: str | None = None,
    ) -> None:
        """`kueue_queues_tfjobs`: Kueue's own TFJob integration queues served TFJobs (as it does training-operator's),
        so Kueue's contract is not the operator's part for them. `unsupported`: why the cluster's Kubernetes is
        outside the supported range, said once on each job (`cluster_facts`)."""
        self._kueue_queues_tfjobs = kueue_queues_tfjobs
        self._unsupported = unsupported
        self._logs = logs or _NoLogsKept()
        self._wake = wake
        self._stuck_after = stuck_after
        self._kube = kube
        self._settings = settings
        self._emit = emit
        self._clock = clock
        self._jobs: dict[str, JobMemory] = {}  # by the job's uid
        self._status = StatusWriter(kube, emit, clock)
        self._kueue = KueueAdapter(kube, emit, clock)

    def _memory(self, uid: str) -> JobMemory:
        return self._jobs.setdefault(uid, JobMemory())

    def _job_memory(self, body: Body) -> JobMemory:
        """The job's memory; a job met for the first time on a cluster outside the supported range is told so."""
        uid = str(body["metadata"]["uid"])
        if self._unsupported is not None and uid not in self._jobs:
            message = f"{self._unsupported}: the job is served as on the nearest supported version, untested"
            self._emit(body, type="Warning", reason="UnsupportedKubernetes", message=message)
        return self._memory(uid)

    def forget(self, uid: str) -> None:
        """Drop what is remembered of a deleted job."""
        memory = self._jobs.pop(uid, None)
        if memory is not None:
            self._status.forget(memory)

    def reconcile(
        self,
        body: Body,
        pods: Sequence[PodView],
        children: Collection[ObjectRef],
        *,
        reported: Report | None = None,
        answered: datetime | None = None,
        unbound: Mapping[str, str] | None = None,
        workload: WorkloadView | None = None,
        tensorboard: TensorBoardView | None = None,
    ) -> None:
        """Bring one job's children and status in line; raises TransientApiError when a retry is due. A write the
        API server refuses as invalid fails the job (WriteRefused) rather than being retried.

        `reported` is the trainer's progress as last polled, `answered` when it last answered a poll at all
        (`disttrain_core.restarts.stalls`), `unbound` what StorageClasses say of its claims still Pending
        (`disttrain_core.claims`), `workload` the job's Kueue Workload and
        `tensorboard` its TensorBoard Deployment, if any.
        Calls for one job must not overlap (`JobQueue` sees to it); calls for different jobs may.
        """
        other = self._other_manager(body)
        if other is not None:
            self._follow_dispatched(body, other, workload)
            return
        memory = self._job_memory(body)
        parsed = self._job_in(body, memory)
        if parsed is None:
            return
        core, job = parsed
        owned = own_pods(job, pods)
        memory.forget_pods_beyond({pod.uid for pod in owned})
        queued = self._follows_kueue(body)
        try:
            if queued:
                job = self._kueue.follow(core, memory.shape, job, workload, has_pods=any(not pod.gone for pod in owned))
            if not acts_on_losses(job):  # what remains of a pod lost now calls for nothing, then or later
                memory.handled.update(pod.uid for pod in owned if pod.gone)
            owned = [pod for pod in owned if not (pod.gone and pod.uid in memory.handled)]
            decided = self._reconcile(
                core,
                memory,
                job,
                owned,
                children,
                reported=reported,
                answered=answered,
                unbound=unbound or {},
                tensorboard=tensorboard,
            )
            if queued and decided is not None:
                self._kueue.finish(with_status(job, decided), workload)
        except RefusedError as error:  # the same write can never pass: the job says so, once
            verdict = Verdict("WriteRefused", f"the API server refused a write of the job's: {error}")
            self._fail_as_it_is(core, memory.written or core.get("status") or {}, verdict)
        memory.settled = _essence(core, memory.written)

    def handled(self, body: Body) -> AbstractSet[str]:
        """The uids of the job's pods whose loss was acted on (restarted, or deleted by the operator): what
        remains of them in the pod watch may go. The job's own set, read between its reconciles."""
        memory = self._jobs.get(str(body["metadata"]["uid"]))
        return frozenset() if memory is None else memory.handled

    def refuse(self, body: Body, verdict: Verdict) -> None:
        """Fail a job the operator does not act on at all (another job holds its names): a Warning Event
        and a Failed condition saying why, written once."""
        if self._other_manager(body) is not None:
            return
        memory = self._job_memory(body)
        memory.shape = JobShape.of(body)
        body = memory.shape.bare_in(body)
        self._fail_as_it_is(body, memory.written or body.get("status") or {}, verdict)  # the job's watch may lag
        memory.settled = _essence(body, memory.written)  # the echo of that write needs no reconcile

    def _other_manager(self, body: Body) -> str | None:
        """The other manager a job's `managedBy` names, which runs it: the job is not touched (no children, status
        or Events), and the operator's log says so once. None where the job is this operator's."""
        other = managed_elsewhere(body)
        if other is None:
            return None
        memory = self._memory(str(body["metadata"]["uid"]))
        if memory.left_to != other:
            memory.left_to = other
            metadata = body["metadata"]
            logger.info("leaving %s %s/%s to %s", body.get("kind"), metadata.get("namespace"), metadata["name"], other)
        return other

    def _follows_kueue(self, body: Body) -> bool:
        """Kueue's contract is the operator's part for DistTrainJobs (an external framework to Kueue), and for
        served TFJobs unless Kueue's own TFJob integration queues them."""
        return not (self._kueue_queues_tfjobs and is_served(body))

    def _follow_dispatched(self, body: Body, other: str, workload: WorkloadView | None) -> None:
        """MultiKueue's copy of a queued job, on the manager cluster: Kueue's contract leaves its Workload, its
        suspension and its resumption to the job's controller (Kueue's own job reconciler does them for built-in
        kinds), and nothing else is done here: a worker cluster runs the job and MultiKueue copies its status
        back. A copy that does not parse stays suspended, its Workload unmade: the worker's refusal is the one
        the user reads."""
        if other != MULTIKUEUE or not (body["metadata"].get("labels") or {}).get(QUEUE_LABEL):
            return
        if not self._follows_kueue(body):
            return
        shape = JobShape.of(body)
        try:
            core = shape.body_in(body)
            job = DistTrainJob.model_validate(core)
        except (UnconvertibleError, pydantic.ValidationError) as error:
            metadata = body["metadata"]
            logger.info("not queueing %s/%s for MultiKueue: %s", metadata.get("namespace"), metadata["name"], error)
            return
        self._kueue.follow(core, shape, job, workload, has_pods=False)
        self._kueue.finish(job, workload)  # the status MultiKueue copied back says it ended

    def _job_in(self, body: Body, memory: JobMemory) -> tuple[Body, DistTrainJob] | None:
        """The job as the core reads it (a served TFJob translated) beside its parsed model, with the status
        last decided; None when it was refused."""
        memory.shape = JobShape.of(body)
        try:
            core = memory.shape.body_in(body)
        except UnconvertibleError as error:
            bare = memory.shape.bare_in(body)
            self._reject_spec(bare, bare["status"], [str(error)])
            return None
        known = memory.unwritten or memory.written or core.get("status") or {}
        current = {**core, "status": known}  # a status held back keeps its times (start, transitions)
        job = self._parsed(core, memory, current)
        return None if job is None else (core, job)

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

    def is_own_status_write(self, body: Body) -> bool:
        """The job event only carries the operator's own last status write: nothing to plan anew.

        Every status write comes back as an event of the job; reconciling it again would cost a full plan for
        nothing, and in a burst of new jobs these echoes were a large part of the operator's CPU."""
        memory = self._jobs.get(str(body["metadata"]["uid"]))
        return memory is not None and memory.settled == _essence(body, memory.shape.status_in(body.get("status") or {}))

    def _reconcile(
        self,
        body: Body,
        memory: JobMemory,
        job: DistTrainJob,
        pods: Sequence[PodView],
        children: Collection[ObjectRef],
        *,
        reported: Report | None,
        answered: datetime | None,
        unbound: Mapping[str, str],
        tensorboard: TensorBoardView | None,
    ) -> DistTrainJobStatus | None:
        """Returns the status decided (written or held back for the batch); None when the job was deleted."""
        now, generation = self._clock(), job.metadata.generation
        children = [*children, *_unwatched(memory, pods, now)]
        expected = memory.expected.pending(pods, children, now)
        observed = Observed(pods, children, reported, answered, tensorboard, unbound)
        status, next_plan = decide_next(
            job,
            observed,
            self._remembered(memory, pods, expected),
            self._settings,
            now=now,
            stuck_after=self._stuck_after,
        )
        if next_plan.delete_job:
            self._delete_job(body)
            return None
        if next_plan.restart is not None:  # the pods it stops are handled from now on, deleted now or by a later plan
            memory.handled.update(pod.uid for pod in next_plan.restart.failed)
        wakes = [] if next_plan.wake_at is None else [next_plan.wake_at]
        if any(isinstance(key, ObjectRef) for key in expected):  # should a child made never show up (a pod made
            wakes.append(now + EXPECTATION)  # and removed before any view showed it), look again once it lapses
        created, acts, retry = self._act(body, memory, next_plan, pods, expected, generation=generation)
        refused = memory.tensorboard_refused
        status = status_after_acts(
            job,
            status,
            next_plan,
            observed,
            acts,
            settings=self._settings,
            now=now,
            tensorboard_refused=None if refused is None else refused[1],
        )
        status = self._with_unkept_logs(body, status)
        _hold_for_replacements(memory, next_plan, created, acts, retried=retry is not None, now=now)
        deferred_until = self._status.write(body, memory, status, batch=self._wake is not None)
        if created:
            described = ", ".join(_describe(manifest) for manifest in created)
            self._emit(body, type="Normal", reason="Created", message=f"created {described}")
        wakes += [] if deferred_until is None else [deferred_until]
        if wakes and self._wake is not None:  # one wake per job: the earliest (a later one replaces it)
            self._wake((job.metadata.namespace, job.metadata.name), min(wakes))
        if retry is not None:
            raise retry
        return status

    def _act(
        self,
        body: Body,
        memory: JobMemory,
        next_plan: Plan,
        pods: Sequence[PodView],
        expected: set[Expected],
        *,
        generation: int | None,
    ) -> tuple[list[Manifest], Acts, TransientApiError | None]:
        """The plan's deletes, counts of restarts in place and creates, in that order: what was created, what the
        acts did (as `status_after_acts` reads them), and an error worth a retry."""
        retry = self._delete(body, memory, next_plan, pods, expected)
        retry = self._count_in_place(body, memory, next_plan, pods) or retry
        creates = self._to_create(memory, next_plan, expected, generation)
        created, rejected, retry = self._create(body, memory, creates, retry)
        # The pods just created count as the watch will show them (Pending), so that their first sight
        # changes nothing to write.
        made = [view for manifest in created if (view := created_pod_view(manifest)) is not None]
        acts = Acts(made, created_all=retry is None and rejected is None and not next_plan.more, rejected=rejected)
        return created, acts, retry

    def _remembered(self, memory: JobMemory, pods: Sequence[PodView], expected: set[Expected]) -> Remembered:
        """What the decision reads of the operator's memory: pods handled, pods awaited, logs not kept yet."""
        unkept = {pod.uid for pod in pods if pod.log_due and pod.ended and not self._logs.log_done(pod.uid)}
        awaited = {key.name for key in expected if isinstance(key, ObjectRef) and key.kind == "Pod"}
        return Remembered(memory.handled, awaited, unkept)

    @staticmethod
    def _to_create(
        memory: JobMemory, next_plan: Plan, expected: set[Expected], generation: int | None
    ) -> list[Manifest]:
        """What the plan creates, less what is expected already and, while the cluster refuses this
        generation's TensorBoard, its objects."""
        refused = memory.tensorboard_refusal(generation)
        return [
            manifest
            for manifest in next_plan.create
            if object_key(manifest) not in expected and (refused is None or not is_tensorboard_object(manifest))
        ]

    def _with_unkept_logs(self, body: Body, status: DistTrainJobStatus) -> DistTrainJobStatus:
        """The status with the attempts found without a kept log, and a Warning Event when there are new ones."""
        noted = with_unkept_logs(status, self._logs.unkept(str(body["metadata"]["uid"])))
        for entry in noted.unkept_logs:
            if entry not in status.unkept_logs:
                attempts = f"{entry.first_attempt}" + (
                    f" to {entry.last_attempt}" if entry.last_attempt > entry.first_attempt else ""
                )
                message = f"{entry.replica}, attempt {attempts}: no log kept; {entry.reason}"
                self._emit(body, type="Warning", reason="LogNotKept", message=message)
        return noted

    def _delete(
        self, body: Body, memory: JobMemory, next_plan: Plan, pods: Sequence[PodView], expected: set[Expected]
    ) -> TransientApiError | None:
        """The plan's deletions, each once and each of the pod as it was seen; returns an error worth a
        retry, if any. A pod refused because it changed since (it may have ended, its log not kept yet)
        stays handled: the next plan, from the newer view, deletes it once it may."""
        retry: TransientApiError | None = None
        namespace, by_name = body["metadata"]["namespace"], {pod.name: pod for pod in pods}
        memory.handled.update(by_name[name].uid for name in next_plan.delete)  # not a loss to restart for
        for name in next_plan.delete:
            pod = by_name[name]
            if pod.uid in expected or pod.gone:  # deleted already; the watch has yet to show it, or shows its remains
                continue
            try:
                self._kube.delete_pod(namespace, name, resource_version=pod.resource_version)
            except TransientApiError as error:
                retry = error
                continue
            memory.expected.expect(pod.uid, self._clock())
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

    def _count_in_place(
        self, body: Body, memory: JobMemory, next_plan: Plan, pods: Sequence[PodView]
    ) -> TransientApiError | None:
        """The restart's pods that restart in place, and the restarts in place the job outran: the ends of their
        runs it covers are handled from now on (an end still to come too, however soon it comes), and written on
        each pod, for an operator that reads them afresh (`in_place.RUNS_COUNTED`). A pod gone or replaced
        meanwhile takes no note."""
        counts = [*(next_plan.restart.in_place if next_plan.restart is not None else ()), *next_plan.outrun]
        retry: TransientApiError | None = None
        namespace, by_name = body["metadata"]["namespace"], {pod.name: pod for pod in pods}
        for name, counted in counts:
            pod = by_name[name]
            runs = pod.runs
            assert runs is not None  # the planner chose it for its runs
            memory.handled.update(run_key(pod.uid, run) for run in range(runs.counted + 1, counted + 1))
            try:
                self._kube.patch_pod(namespace, name, counted_patch(pod.uid, counted))
            except TransientApiError as error:
                retry = error
        return retry

    def _create(
        self, body: Body, memory: JobMemory, manifests: Sequence[Manifest], retry: TransientApiError | None
    ) -> tuple[list[Manifest], Verdict | None, TransientApiError | None]:
        """Create in order; stop at the first refusal. Returns (what was created, refusal, error worth a retry).

        Gangs (PodGroups, Workloads) and NetworkPolicies are not watched (`UNWATCHED_KINDS`): once created they
        are remembered as `unwatched`, and asked for again while the job has a pod the scheduler cannot place,
        at most every UNWATCHED_RECHECK (someone may have deleted its PodGroup); the rest are expected in the
        watches soon.
        """
        created: list[Manifest] = []
        rejected: Verdict | None = None
        for manifest in manifests:
            try:
                if self._kube.create(manifest):
                    created.append(manifest)
                if manifest["kind"] in UNWATCHED_KINDS:
                    memory.unwatched.add(object_key(manifest))
                    memory.unwatched_since = self._clock()
                else:
                    memory.expected.expect(object_key(manifest), self._clock())
            except RefusedError as error:
                if is_tensorboard_object(manifest):  # the job trains on without it; its condition says why
                    problem = Verdict("FailedCreate", f"{_describe(manifest)} was refused: {error}")
                    memory.tensorboard_refused = (body["metadata"].get("generation"), problem)
                    continue
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

    def _reject_spec(self, body: Body, previous: Mapping[str, Any], problems: Sequence[str]) -> None:
        """A spec the operator cannot act on: a Warning event and a Failed condition, never a crash."""
        self._fail_as_it_is(body, previous, invalid_spec(problems))

    def _fail_as_it_is(self, body: Body, previous: Mapping[str, Any], verdict: Verdict) -> None:
        """The job's status, as far as it parses, with the Failed condition of `verdict`."""
        try:
            status = DistTrainJobStatus.model_validate(previous)
        except pydantic.ValidationError:
            status = DistTrainJobStatus()
        generation = body["metadata"].get("generation")
        memory = self._memory(str(body["metadata"]["uid"]))
        self._status.write(body, memory, failed_status(status, verdict, self._clock(), generation))


def _unwatched(memory: JobMemory, pods: Sequence[PodView], now: datetime) -> set[ObjectRef]:
    """The children of kinds no watch sees, as made; forgotten a minute on while a pod cannot be scheduled,
    so that they are asked for again (409 where they are, made anew where they were deleted)."""
    recheck = memory.unwatched_since is not None and now - memory.unwatched_since >= UNWATCHED_RECHECK
    if memory.unwatched and recheck and any(pod.unschedulable for pod in pods):
        memory.unwatched = set()
    return memory.unwatched


def _hold_for_replacements(
    memory: JobMemory, next_plan: Plan, created: Sequence[Manifest], acts: Acts, *, retried: bool, now: datetime
) -> None:
    """A restart whose pods were all deleted, with nothing made yet, holds the status write back a moment
    (`RESTART_HOLD`): the replacements come next. Anything made, refused or failed ends the hold."""
    if next_plan.restart is not None and next_plan.restart.pods and not retried and not created:
        memory.making_way_until = now + RESTART_HOLD
    elif created or retried or acts.rejected is not None or next_plan.fail is not None:
        memory.making_way_until = None


def _describe(manifest: Manifest) -> str:
    key = object_key(manifest)
    return f"{key.kind} {key.name}"
