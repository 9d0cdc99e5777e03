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

The pod watch covers the namespaces named in DISTTRAIN_WATCH_NAMESPACES (comma-separated, set by
`disttrain operator` from its --namespace values), every namespace when it is empty.
"""

from __future__ import annotations

import contextvars
import logging
import os
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import kopf
import pydantic

from disttrain_operator import metrics
from disttrain_operator.api.job import GROUP, PLURAL, VERSION
from disttrain_operator.api.spec import DistTrainJobSpec
from disttrain_operator.api.status import JobPhase
from disttrain_operator.builders.gang import GangScheduler
from disttrain_operator.builders.naming import JOB_NAME_LABEL
from disttrain_operator.builders.settings import BuildSettings
from disttrain_operator.job_queue import DEFAULT_WORKERS, JobQueue
from disttrain_operator.kube import Kube, TransientApiError, load_client
from disttrain_operator.kueue import WorkloadView, workload_view
from disttrain_operator.observed import ChildView
from disttrain_operator.planner import STUCK_TERMINATING
from disttrain_operator.pod_watch import PodStore, PodWatch, scopes
from disttrain_operator.progress_poller import ProgressPoller, progress_url
from disttrain_operator.reconciler import Body, Reconciler
from disttrain_operator.wakeups import Wakeups

logger = logging.getLogger(__name__)

RETRY_DELAY_SECONDS = 5
IDLE_WORKER_SECONDS = 0.5
PROGRESS_POLL_SECONDS = 10.0
OWNED = {JOB_NAME_LABEL: kopf.PRESENT}
JobKey = tuple[str, str]


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf diffs every event's body against the last one handled, for change handlers and daemons; the
    operator has neither, and the deep copy of each body was 7 % of its CPU in a burst of jobs."""

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return kopf.BodyEssence()

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        pass


@kopf.on.startup()
def configure(*, settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
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
    build_settings = BuildSettings(
        cluster_domain=os.environ.get("DISTTRAIN_CLUSTER_DOMAIN") or None,
        gang_scheduler=GangScheduler(os.environ.get("DISTTRAIN_GANG_SCHEDULER", GangScheduler.SCHEDULER_PLUGINS)),
    )
    # kopf gives each object a shallow copy of this memo: a shared dict carries kopf's live indexes and
    # a handler's context (which holds kopf's event queue) to the queue's threads.
    memo.shared = {}
    kube = Kube(load_client())
    memo.pods = PodStore()
    namespaces = [name for name in os.environ.get("DISTTRAIN_WATCH_NAMESPACES", "").split(",") if name]
    memo.queue = JobQueue(lambda key: _reconcile_job(memo, key), DEFAULT_WORKERS, ready=memo.pods.complete)
    memo.pod_watch = PodWatch(kube, memo.pods, scopes(namespaces), memo.queue.add)
    memo.wakeups = Wakeups(memo.queue.add)
    memo.progress = ProgressPoller(
        lambda: _progress_targets(memo),
        memo.queue.add,
        interval=float(os.environ.get("DISTTRAIN_PROGRESS_SECONDS") or PROGRESS_POLL_SECONDS),
    )
    logger.info("metrics on port %d", metrics.serve())
    stuck = os.environ.get("DISTTRAIN_STUCK_POD_SECONDS")
    memo.reconciler = Reconciler(
        kube,
        build_settings,
        _post_event,
        wake=memo.wakeups.schedule,
        stuck_after=timedelta(seconds=float(stuck)) if stuck else STUCK_TERMINATING,
    )
    for part in (memo.queue, memo.pod_watch, memo.wakeups, memo.progress):
        part.start()


@kopf.on.cleanup()
def stop(*, memo: Any, **_: Any) -> None:
    for part in (memo.pod_watch, memo.queue, memo.wakeups, memo.progress):
        part.stop()


def _progress_targets(memo: Any) -> Iterator[tuple[JobKey, str]]:
    """Each running job's progress URL, from what the indexes hold."""
    indexes = memo.shared.get("indexes")
    if not indexes:
        return
    for key, jobs in list(indexes["disttrain_jobs"].items()):
        body = next(iter(jobs), None)
        if body is None or body["status"].get("phase") != JobPhase.RUNNING:
            continue
        try:
            spec = DistTrainJobSpec.model_validate(body["spec"])
        except pydantic.ValidationError:
            continue
        url = progress_url(spec, memo.pods.pods(key))
        if url is not None:
            yield key, url


def _reconcile_job(memo: Any, key: JobKey) -> None:
    """Reconcile the job as the indexes hold it now, in a copy of a kopf handler's context (for its Events).

    Before kopf's first handler ran there is nothing to read: every job gets an event once kopf starts."""
    indexes, context = memo.shared.get("indexes"), memo.shared.get("context")
    jobs = _values(indexes["disttrain_jobs"], key) if indexes else []
    if jobs and context is not None:
        context.copy().run(_reconcile_or_retry, memo, jobs[0], indexes)


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


@kopf.index("kueue.x-k8s.io", "v1beta2", "workloads", labels=OWNED)
async def job_workloads(
    *, namespace: str | None, labels: kopf.Labels, body: kopf.Body, **_: Any
) -> dict[JobKey, WorkloadView]:
    """Kueue's Workloads of queued jobs; kopf leaves this index empty where Kueue is not installed."""
    return {(namespace or "", labels[JOB_NAME_LABEL]): workload_view(body)}


@kopf.index("", "v1", "services", labels=OWNED)
async def job_services(*, namespace: str | None, name: str, labels: kopf.Labels, **_: Any) -> dict[JobKey, ChildView]:
    return {(namespace or "", labels[JOB_NAME_LABEL]): ChildView("Service", name)}


@kopf.index("", "v1", "persistentvolumeclaims", labels=OWNED)
async def job_claims(*, namespace: str | None, name: str, labels: kopf.Labels, **_: Any) -> dict[JobKey, ChildView]:
    return {(namespace or "", labels[JOB_NAME_LABEL]): ChildView("PersistentVolumeClaim", name)}


def _values(index: kopf.Index[JobKey, Any], key: JobKey) -> list[Any]:
    store: Iterable[Any] = index.get(key, [])
    return list(store)


def _reconcile(memo: Any, body: dict[str, Any], indexes: dict[str, Any]) -> None:
    """The job's reconcile with what the indexes and the pod store hold of its children."""
    key = (body["metadata"]["namespace"], body["metadata"]["name"])
    children = _values(indexes["job_services"], key) + _values(indexes["job_claims"], key)
    reconciler: Reconciler = memo.reconciler
    poller: ProgressPoller = memo.progress
    workloads = _values(indexes["job_workloads"], key)
    reconciler.reconcile(
        body,
        memo.pods.pods(key),
        children,
        reported=poller.latest(key),
        workload=workloads[0] if workloads else None,
    )


def _reconcile_or_retry(memo: Any, body: dict[str, Any], indexes: dict[str, Any]) -> None:
    """Reconcile; when the API server could not take every write, try again in a few seconds."""
    try:
        _reconcile(memo, body, indexes)
    except TransientApiError as error:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        logger.warning("reconcile of %s/%s failed, retrying in %d s: %s", *key, RETRY_DELAY_SECONDS, error)
        wakeups: Wakeups = memo.wakeups
        wakeups.schedule(key, datetime.now(UTC) + timedelta(seconds=RETRY_DELAY_SECONDS))


def _remember_kopf(memo: Any, indexes: dict[str, Any]) -> None:
    """Keep kopf's live indexes (passed to handlers by name) and a handler's context for the queue's threads."""
    if "context" not in memo.shared:
        memo.shared["context"] = contextvars.copy_context()
        memo.shared["indexes"] = indexes


@kopf.on.event(GROUP, VERSION, PLURAL)
async def job_event(
    *, type: str | None, uid: str, namespace: str | None, name: str, body: kopf.Body, memo: Any, **indexes: Any
) -> None:
    _remember_kopf(memo, indexes)
    if type == "DELETED":
        reconciler: Reconciler = memo.reconciler
        reconciler.forget(uid)
        poller: ProgressPoller = memo.progress
        poller.forget((namespace or "", name))
        wakeups: Wakeups = memo.wakeups
        wakeups.cancel((namespace or "", name))
        return
    if not memo.reconciler.echoes(_job_body(body)):
        memo.queue.add((namespace or "", name))


@kopf.on.event("kueue.x-k8s.io", "v1beta2", "workloads", labels=OWNED)
async def workload_changed(*, namespace: str | None, labels: kopf.Labels, memo: Any, **indexes: Any) -> None:
    """Feed a Workload's change (admitted, evicted) back into its job's reconcile."""
    _remember_kopf(memo, indexes)
    memo.queue.add((namespace or "", labels[JOB_NAME_LABEL]))
