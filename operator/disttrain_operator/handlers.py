"""kopf glue: settings, the watched indexes and the triggers; all decisions live in `Reconciler`.

Triggers: every event of a job (its creation, any change, and each job once at operator start),
and any change of a pod or Workload the operator labelled, which feeds back into the same
reconcile of its job (level-triggered); also a deadline, TTL or retry coming due (`Wakeups`) and a
new progress report from a trainer (`ProgressPoller`). kopf holds handlers back until every index
has its initial listing, so a restarted operator sees every existing pod before it plans anything.

Only event handlers are used, so kopf keeps no state on the job: no finalizer (children go with
their owner through the garbage collector) and no copy of the spec in an annotation, which a
large spec would push past the API server's 256 KiB limit on annotations.
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
from disttrain_operator.kube import Kube, TransientApiError, load_client
from disttrain_operator.kueue import WorkloadView, workload_view
from disttrain_operator.observed import ChildView, PodView, pod_view
from disttrain_operator.planner import STUCK_TERMINATING
from disttrain_operator.progress_poller import ProgressPoller, progress_url
from disttrain_operator.reconciler import Body, Reconciler
from disttrain_operator.wakeups import Wakeups

logger = logging.getLogger(__name__)

RETRY_DELAY_SECONDS = 5
IDLE_WORKER_SECONDS = 0.5
PROGRESS_POLL_SECONDS = 10.0
OWNED = {JOB_NAME_LABEL: kopf.PRESENT}
JobKey = tuple[str, str]


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
    build_settings = BuildSettings(
        cluster_domain=os.environ.get("DISTTRAIN_CLUSTER_DOMAIN") or None,
        gang_scheduler=GangScheduler(os.environ.get("DISTTRAIN_GANG_SCHEDULER", GangScheduler.SCHEDULER_PLUGINS)),
    )
    # kopf gives each object a shallow copy of this memo: a shared dict carries kopf's live indexes and
    # a handler's context (which holds kopf's event queue) to the wake-up thread.
    memo.shared = {}
    memo.wakeups = Wakeups(lambda key: _wake_job(memo, key))
    memo.wakeups.start()
    memo.progress = ProgressPoller(
        lambda: _progress_targets(memo),
        lambda key: _wake_job(memo, key),
        interval=float(os.environ.get("DISTTRAIN_PROGRESS_SECONDS") or PROGRESS_POLL_SECONDS),
    )
    memo.progress.start()
    logger.info("metrics on port %d", metrics.serve())
    stuck = os.environ.get("DISTTRAIN_STUCK_POD_SECONDS")
    memo.reconciler = Reconciler(
        Kube(load_client()),
        build_settings,
        _post_event,
        wake=memo.wakeups.schedule,
        stuck_after=timedelta(seconds=float(stuck)) if stuck else STUCK_TERMINATING,
    )


@kopf.on.cleanup()
def stop(*, memo: Any, **_: Any) -> None:
    memo.wakeups.stop()
    memo.progress.stop()


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
        url = progress_url(spec, _values(indexes["job_pods"], key))
        if url is not None:
            yield key, url


def _wake_job(memo: Any, key: JobKey) -> None:
    """A deadline, TTL, retry or progress report with nothing else happening: reconcile the job from the indexes."""
    indexes, context = memo.shared.get("indexes"), memo.shared.get("context")
    jobs = _values(indexes["disttrain_jobs"], key) if indexes else []
    if jobs and context is not None:
        context.run(_reconcile_or_retry, memo, jobs[0], indexes)


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
def disttrain_jobs(*, namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[JobKey, dict[str, Any]]:
    return {(namespace or "", name): _job_body(body)}


@kopf.index("", "v1", "pods", labels=OWNED)
def job_pods(*, namespace: str | None, labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict[JobKey, PodView] | None:
    view = pod_view(dict(body))
    return None if view is None else {(namespace or "", labels[JOB_NAME_LABEL]): view}


@kopf.index("kueue.x-k8s.io", "v1beta2", "workloads", labels=OWNED)
def job_workloads(
    *, namespace: str | None, labels: kopf.Labels, body: kopf.Body, **_: Any
) -> dict[JobKey, WorkloadView]:
    """Kueue's Workloads of queued jobs; kopf leaves this index empty where Kueue is not installed."""
    return {(namespace or "", labels[JOB_NAME_LABEL]): workload_view(body)}


@kopf.index("", "v1", "services", labels=OWNED)
def job_services(*, namespace: str | None, name: str, labels: kopf.Labels, **_: Any) -> dict[JobKey, ChildView]:
    return {(namespace or "", labels[JOB_NAME_LABEL]): ChildView("Service", name)}


@kopf.index("", "v1", "persistentvolumeclaims", labels=OWNED)
def job_claims(*, namespace: str | None, name: str, labels: kopf.Labels, **_: Any) -> dict[JobKey, ChildView]:
    return {(namespace or "", labels[JOB_NAME_LABEL]): ChildView("PersistentVolumeClaim", name)}


def _values(index: kopf.Index[JobKey, Any], key: JobKey) -> list[Any]:
    store: Iterable[Any] = index.get(key, [])
    return list(store)


def _reconcile(memo: Any, body: dict[str, Any], indexes: dict[str, Any]) -> None:
    """The job's reconcile with what the indexes hold of its children; kopf passes indexes by name."""
    if "context" not in memo.shared:
        memo.shared["context"] = contextvars.copy_context()
    memo.shared["indexes"] = indexes
    key = (body["metadata"]["namespace"], body["metadata"]["name"])
    children = _values(indexes["job_services"], key) + _values(indexes["job_claims"], key)
    reconciler: Reconciler = memo.reconciler
    poller: ProgressPoller = memo.progress
    workloads = _values(indexes["job_workloads"], key)
    reconciler.reconcile(
        body,
        _values(indexes["job_pods"], key),
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


@kopf.on.event(GROUP, VERSION, PLURAL)
def job_event(
    *, type: str | None, uid: str, namespace: str | None, name: str, body: kopf.Body, memo: Any, **indexes: Any
) -> None:
    if type == "DELETED":
        reconciler: Reconciler = memo.reconciler
        reconciler.forget(uid)
        poller: ProgressPoller = memo.progress
        poller.forget((namespace or "", name))
        wakeups: Wakeups = memo.wakeups
        wakeups.cancel((namespace or "", name))
        return
    job = _job_body(body)
    if not memo.reconciler.echoes(job):
        _reconcile_or_retry(memo, job, indexes)


@kopf.on.event("", "v1", "pods", labels=OWNED)
@kopf.on.event("kueue.x-k8s.io", "v1beta2", "workloads", labels=OWNED)
def child_changed(
    *, type: str | None, uid: str, namespace: str | None, labels: kopf.Labels, body: kopf.Body, memo: Any, **kw: Any
) -> None:
    """Feed a pod's or Workload's change back into its job's reconcile, unless nothing the plan reads changed
    (a pod bound to a node, a condition's timestamp): half of a pod's events during a burst."""
    if body.get("kind") == "Pod" and type != "DELETED":
        view, views = pod_view(dict(body)), memo.shared.setdefault("views", {})
        if views.get(uid) == view:
            return
        views[uid] = view
    elif type == "DELETED":
        memo.shared.get("views", {}).pop(uid, None)
    jobs = _values(kw["disttrain_jobs"], (namespace or "", labels[JOB_NAME_LABEL]))
    if jobs:
        _reconcile_or_retry(memo, jobs[0], kw)
