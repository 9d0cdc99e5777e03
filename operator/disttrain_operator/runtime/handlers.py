"""The operator's start and stop under kopf, and the glue from what it watches to the reconcile; all
decisions live in `Reconciler`.

Every trigger only names a job to `JobQueue`, whose threads reconcile it from what is known now: a
change of the job (its creation, any change but the operator's own status write, and each job once
as it is first listed), a change of an object the operator labelled (its pods, Service, PVCs) or of a
Kueue Workload, a deadline, TTL or retry coming due (`Wakeups`) and a new progress report from a
trainer (`ProgressPoller`). The operator's own watches (`watch.py`) hold what it knows, and the
queue's threads wait until each was listed once, so a restarted operator sees every existing object
before it plans anything. A job's deletion too is only named to the queue (`Departures`), whose
thread for the job forgets it. Events are posted by a thread of their own (`EventPoster`).

kopf runs the operator: its command line (`kopf run`, --namespace), start-up and clean-up, signals,
logging and the liveness probe. It watches nothing, so it keeps no state on the job either: no
finalizer (children go with their owner through the garbage collector) and no copy of the spec in
an annotation, which a large spec would push past the API server's 256 KiB limit on annotations.

Settings come from the environment (`OperatorSettings`); everything the operator runs is one `Runtime`
in kopf's memo.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import kopf
import pydantic

from disttrain_operator.api.crd import openapi_schema
from disttrain_operator.api.spec import DistTrainJobSpec
from disttrain_operator.api.status import JobPhase
from disttrain_operator.core.kueue import WorkloadView
from disttrain_operator.core.observed import PodView
from disttrain_operator.core.types import Body, JobKey, ObjectRef, Verdict
from disttrain_operator.runtime import metrics
from disttrain_operator.runtime.departures import Departures
from disttrain_operator.runtime.event_poster import EventApi, EventPoster
from disttrain_operator.runtime.failures import FailurePolicy
from disttrain_operator.runtime.job_queue import JobQueue
from disttrain_operator.runtime.kube import Kube, load_client
from disttrain_operator.runtime.progress_poller import ProgressPoller, progress_url
from disttrain_operator.runtime.reconciler import JobApi, Reconciler, utcnow
from disttrain_operator.runtime.settings import OperatorSettings
from disttrain_operator.runtime.wakeups import Wakeups
from disttrain_operator.runtime.watch import (
    ListAndWatch,
    Listings,
    ObjectStore,
    ObjectWatch,
    Reconnects,
    Resource,
    scopes,
)
from disttrain_operator.runtime.watched import CLAIMS, DISTTRAIN_JOBS, PODS, SERVED_TFJOBS, SERVICES, WORKLOADS

logger = logging.getLogger(__name__)

Changed = Callable[[JobKey, Any, bool], None]


class Part(Protocol):
    """A part of the operator with threads of its own."""

    def start(self) -> None: ...
    def stop(self) -> None: ...


@dataclass
class Runtime:
    """Everything the operator runs: what its watches keep, and the threads that act on it."""

    reconciler: Reconciler
    queue: JobQueue[JobKey]
    wakeups: Wakeups
    progress: ProgressPoller
    failures: FailurePolicy
    events: EventPoster
    jobs: ObjectStore[dict[str, Any]]
    served_tfjobs: ObjectStore[dict[str, Any]] | None  # where the operator serves Kubeflow's TFJobs
    pods: ObjectStore[PodView]
    children: Sequence[ObjectStore[ObjectRef]]  # Services and PVCs
    workloads: ObjectStore[WorkloadView]
    listings: Listings = field(default_factory=Listings)
    departures: Departures = field(default_factory=Departures)
    watches: Sequence[ObjectWatch[Any]] = ()

    def parts(self) -> list[Part]:
        return [*self.watches, self.queue, self.wakeups, self.progress, self.events]

    def job_stores(self) -> list[ObjectStore[dict[str, Any]]]:
        return [self.jobs] if self.served_tfjobs is None else [self.jobs, self.served_tfjobs]


def runtime_of(memo: kopf.Memo) -> Runtime:
    runtime = memo.get("runtime")
    if not isinstance(runtime, Runtime):
        raise RuntimeError("the operator's runtime is not set up: the startup handler did not run")
    return runtime


class OperatorApi(JobApi, ListAndWatch, EventApi, Protocol):
    """Every API call the operator makes (`Kube`)."""


def build_runtime(settings: OperatorSettings, kube: OperatorApi) -> Runtime:
    """The operator's parts wired together, none started."""
    listings = Listings()

    def reconcile_job(key: JobKey) -> None:
        _reconcile_job(runtime, key)

    queue = JobQueue(reconcile_job, settings.reconcile_workers, ready=listings.done)
    wakeups = Wakeups(queue.add)
    events = EventPoster(kube, clock=utcnow)
    runtime = Runtime(
        reconciler=Reconciler(kube, settings.build, events, wake=wakeups.schedule, stuck_after=settings.stuck_after),
        queue=queue,
        wakeups=wakeups,
        progress=ProgressPoller(lambda: _progress_targets(runtime), queue.add, interval=settings.progress_seconds),
        failures=FailurePolicy(wakeups.schedule, clock=utcnow),
        events=events,
        jobs=ObjectStore(),
        served_tfjobs=ObjectStore() if settings.serve_tfjobs else None,
        pods=ObjectStore(),
        children=(ObjectStore(), ObjectStore()),
        workloads=ObjectStore(),
        listings=listings,
    )
    watched = scopes(settings.watch_namespaces)
    reconnects = Reconnects()

    def job_changed(key: JobKey, body: dict[str, Any], present: bool) -> None:
        _job_changed(runtime, key, body, present)

    def child_changed(key: JobKey, view: object, present: bool) -> None:
        runtime.queue.add(key)

    def watch(resource: Resource[Any], store: ObjectStore[Any], changed: Changed) -> ObjectWatch[Any]:
        return ObjectWatch(
            kube,
            resource,
            store,
            watched,
            changed,
            listings=listings,
            reconnects=reconnects,
            watch_seconds=settings.watch_seconds,
        )

    services, claims = runtime.children
    runtime.watches = [
        watch(DISTTRAIN_JOBS, runtime.jobs, job_changed),
        *([watch(SERVED_TFJOBS, runtime.served_tfjobs, job_changed)] if runtime.served_tfjobs is not None else []),
        watch(PODS, runtime.pods, child_changed),
        watch(SERVICES, services, child_changed),
        watch(CLAIMS, claims, child_changed),
        watch(WORKLOADS, runtime.workloads, child_changed),
    ]
    return runtime


@kopf.on.startup()
def configure(*, memo: kopf.Memo, **_: Any) -> None:
    openapi_schema()  # each new spec is checked against it: built now, not in the first reconcile of a burst
    operator_settings = OperatorSettings.from_environment()
    runtime = memo["runtime"] = build_runtime(operator_settings, Kube(load_client()))
    metrics.serve(operator_settings.metrics_port)
    metrics.LEADER.set(1)
    logger.info("metrics on port %d", operator_settings.metrics_port)
    # What start-up made (modules, the schema, kopf, the client) lives as long as the process. Out of
    # the collector's reach, a full collection walks only the objects made since: the reconciles
    # and the watches' views, rather than stalling every thread for 45 to 51 ms with 1,400 pods.
    gc.freeze()
    for part in runtime.parts():
        part.start()


@kopf.on.probe(id="watches")
def watches_listed(*, memo: kopf.Memo, **_: Any) -> dict[str, bool]:
    """On the liveness endpoint: each watched path, and whether it was listed once (no reconcile runs
    before all were)."""
    return runtime_of(memo).listings.state()


@kopf.on.probe(id="queue_depth")
def queue_depth(*, memo: kopf.Memo, **_: Any) -> int:
    return runtime_of(memo).queue.depth()


@kopf.on.cleanup()
def stop(*, memo: kopf.Memo, **_: Any) -> None:
    for part in runtime_of(memo).parts():
        part.stop()


def _job_changed(runtime: Runtime, key: JobKey, body: Body, present: bool) -> None:
    """A job's change is reconciled unless it only carries the operator's own last status write; a job gone
    is noted, and forgotten by the queue's thread for its key."""
    if present:
        if not runtime.reconciler.echoes(body):
            runtime.queue.add(key)
        return
    runtime.departures.note(key, str(body["metadata"]["uid"]))
    runtime.queue.add(key)


def _forget_departed(runtime: Runtime, key: JobKey) -> None:
    """What is remembered of the key's deleted jobs goes; a namesake left sets its wake-ups again."""
    departed = runtime.departures.take(key)
    for uid in departed:
        runtime.reconciler.forget(uid)
    if departed:
        runtime.progress.forget(key)
        runtime.wakeups.cancel(key)
        runtime.failures.forget(key)


def _progress_targets(runtime: Runtime) -> Iterator[tuple[JobKey, str]]:
    """Each running job's progress URL, from what the watches hold."""
    for key in runtime.jobs.job_keys():
        body = next(iter(runtime.jobs.views(key)), None)
        if body is None or body["status"].get("phase") != JobPhase.RUNNING:
            continue
        try:
            spec = DistTrainJobSpec.model_validate(body["spec"])
        except pydantic.ValidationError:
            continue
        url = progress_url(spec, runtime.pods.views(key))
        if url is not None:
            yield key, url


def jobs_of(stores: Sequence[ObjectStore[dict[str, Any]]], key: JobKey) -> list[dict[str, Any]]:
    """The jobs of this key, the oldest first: a DistTrainJob, and where TFJobs are served, a TFJob of the
    same name, which would name the same pods and Service; the one created first keeps them."""
    found = [body for store in stores for body in store.views(key)]
    return sorted(found, key=lambda body: str(body["metadata"].get("creationTimestamp") or ""))


def _reconcile_job(runtime: Runtime, key: JobKey) -> None:
    """Reconcile the job as the watches hold it now; a namesake created later is refused."""
    _forget_departed(runtime, key)
    jobs = jobs_of(runtime.job_stores(), key)
    if not jobs:
        return
    body, *namesakes = jobs

    def surface(message: str) -> None:
        runtime.events(body, type="Warning", reason="ReconcileError", message=message)

    def reconcile() -> None:
        children = [child for store in runtime.children for child in store.views(key)]
        workloads = runtime.workloads.views(key)
        runtime.reconciler.reconcile(
            body,
            runtime.pods.views(key),
            children,
            reported=runtime.progress.latest(key),
            workload=workloads[0] if workloads else None,
        )
        for namesake in namesakes:
            runtime.reconciler.refuse(namesake, name_in_use(body))

    runtime.failures.run(key, reconcile, surface)


def name_in_use(holder: Body) -> Verdict:
    """Why a job is refused: `holder`, its namesake created first, has the names its pods would take."""
    name = holder["metadata"]["name"]
    message = f"the {holder['kind']} {name}, created first, holds the names of this job's pods and Service: rename one"
    return Verdict("NameInUse", message)
