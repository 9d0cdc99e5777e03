"""kopf glue: settings, the watched indexes and the triggers; all decisions live in `Reconciler`.

Every trigger only names a job to `JobQueue`, whose threads reconcile it from what is known now:
the job's event (its creation, any change, and each job once at operator start), a change of a pod
the operator labelled (`PodWatch`, the operator's own lean watch) or of a Workload, a deadline, TTL
or retry coming due (`Wakeups`) and a new progress report from a trainer (`ProgressPoller`). kopf
holds its handlers back until every index has its initial listing, and the queue's threads wait for
the pod listing, so a restarted operator sees every existing pod before it plans anything. kopf's
handlers and index functions here are coroutines that do little: kopf would run sync ones through
its thread pool, a hand-over per event.

Only event handlers are used, so kopf keeps no state on the job: no finalizer (children go with
their owner through the garbage collector) and no copy of the spec in an annotation, which a
large spec would push past the API server's 256 KiB limit on annotations.

Settings come from the environment (`OperatorSettings`); everything the operator runs is one `Runtime`
in kopf's memo.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import kopf
import pydantic

from disttrain_operator.api import tfjob
from disttrain_operator.api.crd import openapi_schema
from disttrain_operator.api.job import GROUP, PLURAL, VERSION
from disttrain_operator.api.spec import DistTrainJobSpec
from disttrain_operator.api.status import JobPhase
from disttrain_operator.core.builders.naming import JOB_NAME_LABEL
from disttrain_operator.core.kueue import WorkloadView, workload_view
from disttrain_operator.core.types import JobKey, ObjectRef, Verdict
from disttrain_operator.runtime import metrics
from disttrain_operator.runtime.failures import FailurePolicy
from disttrain_operator.runtime.job_queue import JobQueue
from disttrain_operator.runtime.kube import Kube, load_client
from disttrain_operator.runtime.pod_watch import PodStore, PodWatch, scopes
from disttrain_operator.runtime.progress_poller import ProgressPoller, progress_url
from disttrain_operator.runtime.reconciler import Body, Reconciler, utcnow
from disttrain_operator.runtime.settings import OperatorSettings
from disttrain_operator.runtime.wakeups import Wakeups

logger = logging.getLogger(__name__)

IDLE_WORKER_SECONDS = 0.5
OWNED = {JOB_NAME_LABEL: kopf.PRESENT}


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf diffs every event's body against the last one handled, for change handlers and daemons; the
    operator has neither, and the deep copy of each body was 7 % of its CPU in a burst of jobs."""

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return kopf.BodyEssence()

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        pass


@dataclass
class Runtime:
    """Everything the operator runs, kept in kopf's memo (whose per-object copies all share this one object).

    `indexes` and `context` are kopf's live indexes and a copy of a handler's context (which holds kopf's
    event queue, for Events), both taken from the first handler call and used by the queue's threads."""

    reconciler: Reconciler
    pods: PodStore
    queue: JobQueue[JobKey]
    pod_watch: PodWatch
    wakeups: Wakeups
    progress: ProgressPoller
    failures: FailurePolicy
    indexes: Mapping[str, Any] | None = None
    context: contextvars.Context | None = None

    def parts(self) -> tuple[PodWatch, JobQueue[JobKey], Wakeups, ProgressPoller]:
        return self.pod_watch, self.queue, self.wakeups, self.progress


def runtime_of(memo: kopf.Memo) -> Runtime:
    runtime = memo.get("runtime")
    if not isinstance(runtime, Runtime):
        raise RuntimeError("the operator's runtime is not set up: the startup handler did not run")
    return runtime


def _build_runtime(settings: OperatorSettings) -> Runtime:
    kube = Kube(load_client())
    pods = PodStore()

    def reconcile_job(key: JobKey) -> None:
        _reconcile_job(runtime, key)

    queue = JobQueue(reconcile_job, settings.reconcile_workers, ready=pods.complete)
    wakeups = Wakeups(queue.add)
    runtime = Runtime(
        reconciler=Reconciler(
            kube, settings.build, _post_event, wake=wakeups.schedule, stuck_after=settings.stuck_after
        ),
        pods=pods,
        queue=queue,
        pod_watch=PodWatch(kube, pods, scopes(settings.watch_namespaces), queue.add),
        wakeups=wakeups,
        progress=ProgressPoller(lambda: _progress_targets(runtime), queue.add, interval=settings.progress_seconds),
        failures=FailurePolicy(wakeups.schedule, clock=utcnow),
    )
    return runtime


@kopf.on.startup()
def configure(*, settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.posting.level = logging.WARNING
    if logging.getLogger().level > logging.DEBUG:  # not --verbose: no line per handled event, thousands a minute
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    # kopf gives each object with events in flight a worker (a task and a queue), kept 5 s after its last
    # event by default. No limit on workers, though: until every index is filled, each worker waits for
    # all the others, so a limit below the number of objects would stall a restarted operator.
    settings.queueing.idle_timeout = IDLE_WORKER_SECONDS
    settings.persistence.diffbase_storage = NoDiffBase()
    openapi_schema()  # each new spec is checked against it: built now, not in the first reconcile of a burst
    operator_settings = OperatorSettings.from_environment()
    runtime = memo["runtime"] = _build_runtime(operator_settings)
    metrics.serve(operator_settings.metrics_port)
    metrics.LEADER.set(1)
    logger.info("metrics on port %d", operator_settings.metrics_port)
    for part in runtime.parts():
        part.start()


@kopf.on.cleanup()
def stop(*, memo: kopf.Memo, **_: Any) -> None:
    for part in runtime_of(memo).parts():
        part.stop()


def _progress_targets(runtime: Runtime) -> Iterator[tuple[JobKey, str]]:
    """Each running job's progress URL, from what the indexes hold."""
    if runtime.indexes is None:
        return
    for key, jobs in list(runtime.indexes["disttrain_jobs"].items()):
        body = next(iter(jobs), None)
        if body is None or body["status"].get("phase") != JobPhase.RUNNING:
            continue
        try:
            spec = DistTrainJobSpec.model_validate(body["spec"])
        except pydantic.ValidationError:
            continue
        url = progress_url(spec, runtime.pods.pods(key))
        if url is not None:
            yield key, url


def jobs_of(indexes: Mapping[str, Any], key: JobKey) -> list[dict[str, Any]]:
    """The jobs of this key, the oldest first: a DistTrainJob, and where TFJobs are served, a TFJob of the
    same name, which would name the same pods and Service; the one created first keeps them."""
    found = _values(indexes["disttrain_jobs"], key) + (
        _values(indexes[TFJOBS_INDEX], key) if TFJOBS_INDEX in indexes else []
    )
    return sorted(found, key=lambda body: str(body["metadata"].get("creationTimestamp") or ""))


def _reconcile_job(runtime: Runtime, key: JobKey) -> None:
    """Reconcile the job as the indexes hold it now, in a copy of a kopf handler's context (for its Events).

    Before kopf's first handler ran there is nothing to read: every job gets an event once kopf starts."""
    indexes, context = runtime.indexes, runtime.context
    jobs = jobs_of(indexes, key) if indexes is not None else []
    if jobs and indexes is not None and context is not None:
        body, *namesakes = jobs

        def surface(message: str) -> None:
            _post_event(body, type="Warning", reason="ReconcileError", message=message)

        def reconcile() -> None:
            _reconcile(runtime, body, indexes)
            for namesake in namesakes:
                runtime.reconciler.refuse(namesake, name_in_use(body))

        context.copy().run(runtime.failures.run, key, reconcile, surface)


def name_in_use(holder: Body) -> Verdict:
    """Why a job is refused: `holder`, its namesake created first, has the names its pods would take."""
    name = holder["metadata"]["name"]
    message = f"the {holder['kind']} {name}, created first, holds the names of this job's pods and Service: rename one"
    return Verdict("NameInUse", message)


def _post_event(body: Body, *, type: str, reason: str, message: str) -> None:
    try:
        kopf.event(cast(kopf.Body, body), type=type, reason=reason, message=message[:1024])
    except LookupError:  # outside kopf's handler context: log rather than lose the reconcile
        logger.warning("event %s for %s not posted: %s", reason, body["metadata"]["name"], message)


def _job_body(body: kopf.Body) -> dict[str, Any]:
    """The parts of a job the operator reads (no managedFields): what the jobs index keeps."""
    metadata = body.metadata
    return {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": {
            "name": metadata.name,
            "namespace": metadata.namespace,
            "uid": metadata.uid,
            "generation": metadata.get("generation"),
            "creationTimestamp": metadata.get("creationTimestamp"),
            "labels": dict(metadata.labels),
            "annotations": {},
            **({"deletionTimestamp": metadata["deletionTimestamp"]} if metadata.get("deletionTimestamp") else {}),
        },
        "spec": dict(body.spec),
        "status": dict(body.status),
    }


@kopf.index(GROUP, VERSION, PLURAL)
async def disttrain_jobs(
    *, namespace: str | None, name: str, body: kopf.Body, **_: Any
) -> dict[JobKey, dict[str, Any]]:
    return {(namespace or "", name): _job_body(body)}


TFJOBS_INDEX = "served_tfjobs"


async def served_tfjobs(*, namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[JobKey, dict[str, Any]]:
    """Kubeflow's TFJobs, indexed only where the operator serves them (`--serve-tfjobs`)."""
    return {(namespace or "", name): _job_body(body)}


@kopf.index("kueue.x-k8s.io", "v1beta2", "workloads", labels=OWNED)
async def job_workloads(
    *, namespace: str | None, labels: kopf.Labels, body: kopf.Body, **_: Any
) -> dict[JobKey, WorkloadView]:
    """Kueue's Workloads of queued jobs; kopf leaves this index empty where Kueue is not installed."""
    return {(namespace or "", labels[JOB_NAME_LABEL]): workload_view(body)}


@kopf.index("", "v1", "services", labels=OWNED)
async def job_services(*, namespace: str | None, name: str, labels: kopf.Labels, **_: Any) -> dict[JobKey, ObjectRef]:
    return {(namespace or "", labels[JOB_NAME_LABEL]): ObjectRef("Service", name)}


@kopf.index("", "v1", "persistentvolumeclaims", labels=OWNED)
async def job_claims(*, namespace: str | None, name: str, labels: kopf.Labels, **_: Any) -> dict[JobKey, ObjectRef]:
    return {(namespace or "", labels[JOB_NAME_LABEL]): ObjectRef("PersistentVolumeClaim", name)}


def _values(index: kopf.Index[JobKey, Any], key: JobKey) -> list[Any]:
    store: Iterable[Any] = index.get(key, [])
    return list(store)


def _reconcile(runtime: Runtime, body: dict[str, Any], indexes: Mapping[str, Any]) -> None:
    """The job's reconcile with what the indexes and the pod store hold of its children."""
    key = (body["metadata"]["namespace"], body["metadata"]["name"])
    children = _values(indexes["job_services"], key) + _values(indexes["job_claims"], key)
    workloads = _values(indexes["job_workloads"], key)
    runtime.reconciler.reconcile(
        body,
        runtime.pods.pods(key),
        children,
        reported=runtime.progress.latest(key),
        workload=workloads[0] if workloads else None,
    )


def _remember_kopf(runtime: Runtime, indexes: dict[str, Any]) -> None:
    """Keep kopf's live indexes (passed to handlers by name) and a handler's context for the queue's threads."""
    if runtime.context is None:
        runtime.indexes = indexes
        runtime.context = contextvars.copy_context()


@kopf.on.event(GROUP, VERSION, PLURAL)
async def job_event(
    *, type: str | None, uid: str, namespace: str | None, name: str, body: kopf.Body, memo: kopf.Memo, **indexes: Any
) -> None:
    runtime = runtime_of(memo)
    _remember_kopf(runtime, indexes)
    key = (namespace or "", name)
    if type == "DELETED":
        runtime.reconciler.forget(uid)
        runtime.progress.forget(key)
        runtime.wakeups.cancel(key)
        runtime.failures.forget(key)
        if jobs_of(indexes, key):  # its namesake's wake-ups went with it: a reconcile sets them again
            runtime.queue.add(key)
        return
    if not runtime.reconciler.echoes(_job_body(body)):
        runtime.queue.add(key)


@kopf.on.event("kueue.x-k8s.io", "v1beta2", "workloads", labels=OWNED)
async def workload_changed(*, namespace: str | None, labels: kopf.Labels, memo: kopf.Memo, **indexes: Any) -> None:
    """Feed a Workload's change (admitted, evicted) back into its job's reconcile."""
    runtime = runtime_of(memo)
    _remember_kopf(runtime, indexes)
    runtime.queue.add((namespace or "", labels[JOB_NAME_LABEL]))


if OperatorSettings.from_environment().serve_tfjobs:  # registered as kopf imports this module
    kopf.index(tfjob.GROUP, tfjob.VERSION, tfjob.PLURAL)(served_tfjobs)
    kopf.on.event(tfjob.GROUP, tfjob.VERSION, tfjob.PLURAL, id="served_tfjob_event")(job_event)
