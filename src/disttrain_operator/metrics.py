"""Prometheus metrics of the operator, served on /metrics (port $DISTTRAIN_METRICS_PORT, default 9090)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Mapping

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from disttrain_core.restarts.record import DISRUPTED

JOBS_CREATED = Counter("disttrain_jobs_created_total", "Jobs whose children were created.", ["namespace"])
JOBS_SUCCEEDED = Counter("disttrain_jobs_succeeded_total", "Jobs that succeeded.", ["namespace"])
JOBS_FAILED = Counter("disttrain_jobs_failed_total", "Jobs that failed, by reason.", ["namespace", "reason"])
JOBS_RESTARTED = Counter("disttrain_jobs_restarted_total", "Restarts of jobs or their pods.", ["namespace"])
JOBS_STALLED = Counter(
    "disttrain_jobs_stalled_total",
    "Jobs that ran past runPolicy.progressDeadlineSeconds without a step (the Stalled condition turned True).",
    ["namespace"],
)
JOBS_DISRUPTED = Counter(
    "disttrain_jobs_disrupted_total",
    "Restarts after pods were taken away on purpose (not counted against backoffLimit).",
    ["namespace"],
)
JOBS_ACTIVE = Gauge("disttrain_jobs_active", "Jobs neither succeeded nor failed.", ["namespace"])
JOBS_BY_PHASE = Gauge("disttrain_jobs", "Jobs the operator knows, by phase.", ["namespace", "phase"])
FOLLOWS_CUT = Counter(
    "disttrain_log_follows_cut_total",
    "Follows of a deleted pod's log cut at their bound of time or bytes; what was read is kept.",
)
RECONCILE_ERRORS = Counter(
    "disttrain_reconcile_errors_total", "Reconciles that failed for another reason than the API, by error.", ["error"]
)
EVENTS_DROPPED = Counter(
    "disttrain_events_dropped_total", "Events not posted because their job had spent its Event budget."
)
ITEM_ERRORS = Counter(
    "disttrain_item_errors_total",
    "Items a background worker failed on for another reason than the API (logged with the object's name), by worker.",
    ["worker"],
)

# A controller's internals under the names controller-runtime and client-go's work queue give them, so that
# the panels and alerts admins already have for Go controllers read these too.
CONTROLLER = "disttrainjob"  # the `controller` and `name` label of every series below
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Time of one reconcile of one job, API calls included.",
    ["controller"],
    buckets=_SECONDS,
)
RECONCILES = Counter(
    "controller_runtime_reconcile_total", "Reconciles, by result: success or error.", ["controller", "result"]
)
RECONCILE_FAILURES = Counter(
    "controller_runtime_reconcile_errors_total", "Reconciles that failed, API errors included.", ["controller"]
)
ACTIVE_WORKERS = Gauge("controller_runtime_active_workers", "Threads reconciling a job now.", ["controller"])
MAX_WORKERS = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Threads that reconcile jobs (DISTTRAIN_RECONCILE_WORKERS).",
    ["controller"],
)
QUEUE_DEPTH = Gauge("workqueue_depth", "Jobs waiting for a reconcile.", ["name"])
QUEUE_ADDS = Counter("workqueue_adds_total", "Jobs named to the queue while not already waiting.", ["name"])
QUEUE_WAIT = Histogram(
    "workqueue_queue_duration_seconds",
    "Time a job waited in the queue before a thread took it.",
    ["name"],
    buckets=_SECONDS,
)
QUEUE_WORK = Histogram(
    "workqueue_work_duration_seconds", "Time a thread spent on a job taken from the queue.", ["name"], buckets=_SECONDS
)
QUEUE_RETRIES = Counter("workqueue_retries_total", "Reconciles scheduled again after a failure.", ["name"])
API_ERRORS = Counter("disttrain_api_errors_total", "Failed API requests of the operator, by operation.", ["operation"])


def count_api_error(method: str) -> None:
    """Told by the operator's API client (`Kube`'s `on_error`) of each request that failed."""
    API_ERRORS.labels(method).inc()


LEADER = Gauge("disttrain_leader", "1 in the replica that acts (it holds the Lease, or runs without election), else 0.")


def _count_restart(namespace: str, reason: str) -> None:
    JOBS_RESTARTED.labels(namespace).inc()
    if reason == DISRUPTED:
        JOBS_DISRUPTED.labels(namespace).inc()


_TRANSITIONS: dict[str, Callable[[str, str], None]] = {
    "Created": lambda namespace, reason: JOBS_CREATED.labels(namespace).inc(),
    "Succeeded": lambda namespace, reason: JOBS_SUCCEEDED.labels(namespace).inc(),
    "Failed": lambda namespace, reason: JOBS_FAILED.labels(namespace, reason).inc(),
    "Restarting": _count_restart,
    "Stalled": lambda namespace, reason: JOBS_STALLED.labels(namespace).inc(),
}


def count_transition(namespace: str, condition_type: str, reason: str) -> None:
    """A condition that became True: the job counters follow from it."""
    record = _TRANSITIONS.get(condition_type)
    if record is not None:
        record(namespace, reason)


_seen: set[tuple[str, str]] = set()  # (namespace, phase) series set so far, zeroed when they empty


def set_active(jobs: Mapping[tuple[str, str], int]) -> None:
    """Active jobs and jobs by phase per namespace, from the number of known jobs in each (namespace, phase)."""
    active: Tally[str] = Tally()
    for (namespace, phase), count in jobs.items():
        active[namespace] += count if phase not in ("Succeeded", "Failed") else 0
    for namespace, count in active.items():
        JOBS_ACTIVE.labels(namespace).set(count)
    _seen.update(jobs)
    for namespace, phase in _seen:
        JOBS_BY_PHASE.labels(namespace, phase).set(jobs.get((namespace, phase), 0))


def serve(port: int) -> None:
    """Serve /metrics on `port` from the process's start: a standby answers its Service too, and goes on
    as leader. An OSError says the port is taken."""
    start_http_server(port)
