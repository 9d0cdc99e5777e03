"""kopf's handlers: the operator's start and stop, the watch of its jobs, and the glue from what it
watches to the reconcile; all decisions live in `Reconciler`.

kopf watches the jobs (an index of what the reconcile reads, an event handler that names the job to
`JobQueue` unless the event is the operator's own status write) and writes nothing to them: no
finalizer, no copy of the spec, no progress. The children stay on the operator's own watches
(`watch.py`); they, the `Wakeups` and the `ProgressPoller` name jobs to the queue too, whose threads
reconcile once every watch was listed. `disttrain operator` (`disttrain_cli.operator_command`) starts
kopf with these handlers, and everything the operator runs is one `Runtime` in kopf's memo.
docs/architecture.md#one-reconcile follows a job through them."""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import kopf
import pydantic

from disttrain_core.api.crd import openapi_schema
from disttrain_core.api.job import GROUP, KIND, PLURAL, VERSION
from disttrain_core.api.kubernetes_version import KUBERNETES_VERSION
from disttrain_core.api.spec import DistTrainJobSpec
from disttrain_core.api.status import JobPhase
from disttrain_core.builders.gang import GangScheduler, WorkloadApi
from disttrain_core.claims import ClaimView
from disttrain_core.kueue import WorkloadView
from disttrain_core.managers import managed_elsewhere
from disttrain_core.observed import PodView, after_removal
from disttrain_core.tensorboard_status import TensorBoardView
from disttrain_core.types import Body, JobKey, ObjectRef, Verdict
from disttrain_kube.api_errors import NotServedError
from disttrain_kube.cluster_facts import ClusterFacts, read_cluster_facts
from disttrain_kube.connection import NoClusterError, connect
from disttrain_kube.rest import WATCH_SILENCE_MARGIN, Kube
from disttrain_operator import metrics
from disttrain_operator.claim_checker import CHECK_SECONDS, ClaimChecker
from disttrain_operator.deleted_jobs import DeletedJobs
from disttrain_operator.event_poster import EventApi, EventPoster
from disttrain_operator.indexed_jobs import IndexedJobs, JobIndex
from disttrain_operator.job_queue import JobQueue
from disttrain_operator.kept_log_keeper import KeptLogKeeper, KeptLogSweeper, LogApi, SweepApi
from disttrain_operator.operator_settings import OperatorSettings
from disttrain_operator.progress_poller import ProgressPoller, Target, progress_url
from disttrain_operator.reconcile_retry import ReconcileRetry
from disttrain_operator.reconciler import JobApi, Reconciler, utcnow
from disttrain_operator.wakeups import Wakeups
from disttrain_operator.watch import (
    ListAndWatch,
    Listings,
    ObjectStore,
    ObjectWatch,
    Reconnects,
    WatchedResource,
    WatchScope,
    scopes,
)
from disttrain_operator.watched import (
    CLAIMS,
    DISTTRAIN_JOBS,
    JOB_PAGE,
    PODS,
    SERVED_TFJOBS,
    SERVICES,
    TENSORBOARDS,
    WORKLOADS,
    JobKind,
    job_body,
)

logger = logging.getLogger(__name__)

Changed = Callable[[JobKey, Any, bool], None]
SETTINGS = "settings"  # the memo's key for the OperatorSettings `disttrain operator` read
IDLE_WORKER_SECONDS = 0.5


class Part(Protocol):
    """A part of the operator with threads of its own."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def ended(self) -> list[str]: ...


@dataclass
class Runtime:
    """Everything the operator runs: what kopf and its own watches keep, and the threads that act on it."""

    reconciler: Reconciler
    queue: JobQueue[JobKey]
    wakeups: Wakeups
    progress: ProgressPoller
    retry: ReconcileRetry
    events: EventPoster
    jobs: IndexedJobs
    logs: KeptLogKeeper
    sweeper: KeptLogSweeper
    job_paths: Sequence[str]  # what kopf watches, as the liveness probe names it
    pods: ObjectStore[PodView]
    services: ObjectStore[ObjectRef]
    claims: ObjectStore[ClaimView]
    claim_checker: ClaimChecker
    workloads: ObjectStore[WorkloadView]
    tensorboards: ObjectStore[TensorBoardView]
    listings: Listings = field(default_factory=Listings)
    progress_deadline: int | None = None  # the operator's default for runPolicy.progressDeadlineSeconds
    deleted_jobs: DeletedJobs = field(default_factory=DeletedJobs)
    watches: Sequence[ObjectWatch[Any]] = ()
    _indexed: bool = False

    def parts(self) -> list[Part]:
        parts: list[Part] = [
            self.queue,
            self.wakeups,
            self.progress,
            self.claim_checker,
            self.events,
            self.logs,
            self.sweeper,
        ]
        return [*self.watches, *parts]

    def indexed(self) -> None:
        """kopf has indexed every job it lists: it calls event handlers only once every index is full."""
        if not self._indexed:
            self._indexed = True
            for path in self.job_paths:
                self.listings.listed(path)


def runtime_of(memo: kopf.Memo) -> Runtime:
    runtime = memo.get("runtime")
    if not isinstance(runtime, Runtime):
        raise RuntimeError("the operator's runtime is not set up: the startup handler did not run")
    return runtime


class OperatorApi(JobApi, ListAndWatch, EventApi, LogApi, SweepApi, Protocol):
    """Every API call the operator makes (`Kube`)."""


def job_kinds(settings: OperatorSettings) -> list[JobKind]:
    return [DISTTRAIN_JOBS, SERVED_TFJOBS] if settings.serve_tfjobs else [DISTTRAIN_JOBS]


def build_runtime(
    settings: OperatorSettings,
    kube: OperatorApi,
    indexes: Mapping[str, JobIndex],
    cluster: ClusterFacts | None = None,
) -> Runtime:
    """The operator's parts wired together, none started; `indexes`: kopf's index of each kind of job;
    `cluster`: what the operator read of the cluster at its start (None: the newest supported version's)."""
    cluster = cluster or ClusterFacts(KUBERNETES_VERSION, WorkloadApi.V1BETA1)
    listings = Listings()
    watched = scopes(settings.watch_namespaces)
    kinds = job_kinds(settings)
    job_paths = [kind.path(scope.namespace) for kind in kinds for scope in watched]
    for path in job_paths:
        listings.expect(path)

    def reconcile_job(key: JobKey) -> None:
        _reconcile_job(runtime, key)

    queue = JobQueue(reconcile_job, settings.reconcile_workers, ready=listings.done)
    wakeups = Wakeups(queue.add)
    events = EventPoster(kube, clock=utcnow)
    jobs = IndexedJobs([indexes[kind.index] for kind in kinds], kube.read)
    logs = KeptLogKeeper(kube, jobs.uids, wake=queue.add, ready=listings.done)
    pods: ObjectStore[PodView] = ObjectStore(after_removal)
    claims: ObjectStore[ClaimView] = ObjectStore()
    runtime = Runtime(
        reconciler=_reconciler(settings, kube, cluster, events=events, logs=logs, wakeups=wakeups),
        queue=queue,
        wakeups=wakeups,
        progress=ProgressPoller(lambda: _progress_targets(runtime), queue.add, interval=settings.progress_seconds),
        retry=ReconcileRetry(wakeups.schedule, clock=utcnow),
        events=events,
        jobs=jobs,
        logs=logs,
        sweeper=KeptLogSweeper(
            kube, jobs.all_uids, utcnow, watched, ready=listings.done, interval=settings.log_sweep_seconds
        ),
        job_paths=job_paths,
        pods=pods,
        services=ObjectStore(),
        claims=claims,
        claim_checker=ClaimChecker(
            kube,
            lambda: [(key, claims.views(key)) for key in claims.job_keys()],
            pods.views,
            queue.add,
            interval=CHECK_SECONDS,
        ),
        workloads=ObjectStore(),
        tensorboards=ObjectStore(),
        listings=listings,
        progress_deadline=settings.progress_deadline_seconds,
    )
    runtime.watches = _child_watches(runtime, kube, settings, watched)
    return runtime


def _reconciler(
    settings: OperatorSettings,
    kube: OperatorApi,
    cluster: ClusterFacts,
    *,
    events: EventPoster,
    logs: KeptLogKeeper,
    wakeups: Wakeups,
) -> Reconciler:
    """The reconciler as the settings and the cluster's facts configure it."""
    return Reconciler(
        kube,
        cluster.build_settings(settings.build),
        events,
        logs=logs,
        wake=wakeups.schedule,
        stuck_after=settings.stuck_after,
        kueue_queues_tfjobs=settings.kueue_tfjob_integration,
        unsupported=cluster.unsupported,
    )


def _child_watches(
    runtime: Runtime, kube: OperatorApi, settings: OperatorSettings, watched: Sequence[WatchScope]
) -> list[ObjectWatch[Any]]:
    """A watch of each kind of child in every watched scope, each change named to the queue; a pod whose
    log is due is offered to the kept-log keeper first."""
    reconnects = Reconnects()

    def child_changed(key: JobKey, view: object, present: bool) -> None:
        if isinstance(view, PodView) and not present:
            runtime.logs.forget(view.uid)
        if present and isinstance(view, PodView) and view.run_log_due is not None:  # restarted in place
            runtime.logs.offer(key, key[0], view.name, view.uid, view.log_due_body, run=view.run_log_due)
        if present and isinstance(view, PodView) and view.log_due:
            offered = runtime.logs.offer(key, key[0], view.name, view.uid, view.log_due_body)
            if offered and view.ended:  # the keeper wakes the job once the log is kept: its plan waits for that
                return
        runtime.queue.add(key)

    def watch(resource: WatchedResource[Any], store: ObjectStore[Any]) -> ObjectWatch[Any]:
        return ObjectWatch(
            kube,
            resource,
            store,
            watched,
            child_changed,
            listings=runtime.listings,
            reconnects=reconnects,
            watch_seconds=settings.watch_seconds,
        )

    return [
        watch(PODS, runtime.pods),
        watch(SERVICES, runtime.services),
        watch(CLAIMS, runtime.claims),
        watch(WORKLOADS, runtime.workloads),
        watch(TENSORBOARDS, runtime.tensorboards),
    ]


class NoDiffBase(kopf.DiffBaseStorage):
    """No last-handled state of a job: kopf diffs it for on-create and on-update handlers, which this
    operator has none of. kopf's default storages deep-copy each event's body twice to diff it, a cost
    docs/benchmarks.md measured."""

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        raise AssertionError("kopf stores a diff base only for on-create and on-update handlers")


def tune(kopf_settings: kopf.OperatorSettings, settings: OperatorSettings) -> None:
    """kopf as this operator needs it: the operator posts its own Events; kopf keeps no diff base; a job's
    worker in kopf ends 0.5 s after its last event (not 5 s), so fewer live on in a burst of new jobs;
    kopf's watches end and notice a silent stream as the operator's own do; and an operator given
    namespaces by name does not look for more, which needs a right to list namespaces that a namespaced
    install lacks (kopf would retry the list for 54 s before it watched a job)."""
    kopf_settings.posting.enabled = False
    kopf_settings.persistence.diffbase_storage = NoDiffBase()
    kopf_settings.queueing.idle_timeout = IDLE_WORKER_SECONDS
    kopf_settings.watching.server_timeout = settings.watch_seconds
    kopf_settings.watching.inactivity_timeout = settings.watch_seconds + WATCH_SILENCE_MARGIN
    kopf_settings.watching.chunk_size = JOB_PAGE  # jobs are tenants' objects too: listed a bounded page at a time
    named = scopes(settings.watch_namespaces)
    kopf_settings.scanning.disabled = all(scope.namespace is not None for scope in named)


def nothing_to_index(kube: ListAndWatch, paths: Sequence[str]) -> bool:
    """No job exists where kopf will look: kopf calls no event handler then, so none can say it indexed."""
    for path in paths:
        try:
            if kube.list_page(path, {"limit": "1"})["items"]:
                return False
        except NotServedError:  # the kind's CRD is not installed (yet): kopf serves it once it is
            continue
    return True


# kopf starts again a start-up that raised after this many seconds; its default, a minute, would leave
# the liveness probe failing that long after one request the API server did not answer.
STARTUP_RETRY_SECONDS = 2


@kopf.on.startup(backoff=STARTUP_RETRY_SECONDS)
def configure(*, memo: kopf.Memo, settings: kopf.OperatorSettings, **indexes: Any) -> None:
    """Build the operator's parts and start them. An API error is tried again; no cluster to reach stops
    the operator, with the reason."""
    operator_settings = memo.get(SETTINGS) or OperatorSettings.from_environment()
    tune(settings, operator_settings)
    openapi_schema()  # each new spec is checked against it: built now, not in the first reconcile of a burst
    try:
        connection = connect(in_cluster_first=True)
    except NoClusterError as error:
        raise kopf.PermanentError(str(error)) from error
    kube = Kube(connection.api_client, on_error=metrics.count_api_error)
    facts = read_cluster_facts(kube)
    if facts.unsupported is not None:
        logger.warning("%s: jobs are served as on the nearest supported version, untested", facts.unsupported)
    if operator_settings.gang_scheduler is GangScheduler.KUBERNETES:
        served = "none" if facts.workload_api is None else facts.workload_api.value
        logger.info("Kubernetes %s serves the Workload API: %s", facts.version, served)
    runtime = memo["runtime"] = build_runtime(operator_settings, kube, indexes, facts)
    if nothing_to_index(kube, runtime.job_paths):
        runtime.indexed()
    metrics.LEADER.set(1)
    # What start-up made (modules, the schema, kopf, the client) lives as long as the process. Out of
    # the collector's reach, a full collection walks only the objects made since: the reconciles
    # and the watches' views, rather than stalling every thread for 45 to 51 ms with 1,400 pods.
    gc.freeze()
    for part in runtime.parts():
        part.start()


@kopf.index(GROUP, VERSION, PLURAL, id=DISTTRAIN_JOBS.index)
async def index_job(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[JobKey, Body]:
    """What the reconcile reads of a job (`job_body`), by its key."""
    return {(str(namespace), name): job_body(body)}


@kopf.on.event(GROUP, VERSION, PLURAL, id=f"{DISTTRAIN_JOBS.index}_changed")
async def job_changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    """Name the job to the queue; kopf has updated its index first."""
    job_event(runtime_of(memo), event["type"], event["object"])


def serve_tfjobs() -> None:
    """kopf watches Kubeflow's TFJobs too, with the same handlers: only where the operator serves them."""
    kind = SERVED_TFJOBS
    kopf.index(kind.group, kind.version, kind.plural, id=kind.index)(index_job)
    kopf.on.event(kind.group, kind.version, kind.plural, id=f"{kind.index}_changed")(job_changed)


@kopf.on.probe(id="watches")
def watches_listed(*, memo: kopf.Memo, **_: Any) -> dict[str, bool]:
    """On the liveness endpoint: each watched path, and whether it was listed once (no reconcile runs
    before all were)."""
    return runtime_of(memo).listings.state()


@kopf.on.probe(id="threads")
def threads_running(*, memo: kopf.Memo, **_: Any) -> int:
    """On the liveness endpoint: how many parts run their threads. A thread that ended unasked fails the
    probe (500), so that the kubelet restarts the operator rather than leave the keeping of logs, a watch or the
    sweep dead while the rest goes on."""
    parts = runtime_of(memo).parts()
    ended = [name for part in parts for name in part.ended()]
    if ended:
        raise kopf.PermanentError(f"threads ended: {', '.join(ended)}")
    return len(parts)


@kopf.on.probe(id="queue_depth")
def queue_depth(*, memo: kopf.Memo, **_: Any) -> int:
    return runtime_of(memo).queue.depth()


@kopf.on.cleanup()
def stop(*, memo: kopf.Memo, **_: Any) -> None:
    for part in runtime_of(memo).parts():
        part.stop()


def job_event(runtime: Runtime, kind: str | None, body: Body) -> None:
    """A job's change is reconciled unless it only carries the operator's own last status write; a job gone
    is noted, and forgotten by the queue's thread for its key. `kind`: the event's type, None as listed."""
    runtime.indexed()
    metadata = body["metadata"]
    key = str(metadata["namespace"]), str(metadata["name"])
    if kind != "DELETED":
        if not runtime.reconciler.is_own_status_write(body):
            runtime.queue.add(key)
        return
    runtime.deleted_jobs.note(key, str(metadata["uid"]))
    runtime.queue.add(key)


def _forget_departed(runtime: Runtime, key: JobKey) -> None:
    """What is remembered of the key's deleted jobs goes; a namesake left sets its wake-ups again."""
    departed = runtime.deleted_jobs.take(key)
    for uid in departed:
        runtime.reconciler.forget(uid)
        runtime.logs.forget_job(uid)
    if departed:
        runtime.pods.bury(key)
        runtime.progress.forget(key)
        runtime.wakeups.cancel(key)
        runtime.retry.forget(key)


def _progress_targets(runtime: Runtime) -> Iterator[Target]:
    """Each running DistTrainJob's progress URL and deadline, from what kopf's index and the pod watch hold."""
    for key in runtime.jobs.job_keys():
        body = next((job for job in runtime.jobs.views(key) if job["kind"] == KIND), None)
        if body is None or body["status"].get("phase") != JobPhase.RUNNING or managed_elsewhere(body):
            continue
        try:
            spec = DistTrainJobSpec.model_validate(body["spec"])
        except pydantic.ValidationError:
            continue
        url = progress_url(spec, runtime.pods.views(key))
        if url is not None:
            yield Target(key, url, spec.run_policy.progress_deadline_seconds or runtime.progress_deadline)


def _reconcile_job(runtime: Runtime, key: JobKey) -> None:
    """Reconcile the job as kopf's index holds it now (read whole where it holds it without its templates); a
    namesake created later is refused."""
    _forget_departed(runtime, key)
    jobs = runtime.jobs.views(key)
    if not jobs:
        runtime.pods.bury(key)
        return
    body, *namesakes = jobs

    def surface(message: str) -> None:
        runtime.events(body, type="Warning", reason="ReconcileError", message=message)

    def reconcile() -> None:
        whole = runtime.jobs.whole(body)
        if whole is None:
            return
        claims, workloads, boards = (
            runtime.claims.views(key),
            runtime.workloads.views(key),
            runtime.tensorboards.views(key),
        )
        children = [
            *runtime.services.views(key),
            *(ObjectRef("PersistentVolumeClaim", claim.name) for claim in claims),
            *(ObjectRef("Deployment", board.name) for board in boards),
        ]
        runtime.reconciler.reconcile(
            whole,
            runtime.pods.views(key),
            children,
            reported=runtime.progress.latest(key),
            answered=runtime.progress.answered(key),
            unbound=runtime.claim_checker.unbound(key, claims),
            workload=workloads[0] if workloads else None,
            tensorboard=boards[0] if boards else None,
        )
        runtime.pods.bury(key, runtime.reconciler.handled(body))
        for namesake in namesakes:
            runtime.reconciler.refuse(namesake, name_in_use(body))

    runtime.retry.run(key, reconcile, surface)


def name_in_use(holder: Body) -> Verdict:
    """Why a job is refused: `holder`, its namesake created first, has the names its pods would take."""
    name = holder["metadata"]["name"]
    message = f"the {holder['kind']} {name}, created first, holds the names of this job's pods and Service: rename one"
    return Verdict("NameInUse", message)
