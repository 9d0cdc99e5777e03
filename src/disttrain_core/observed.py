"""What the operator keeps of each child it watches: a few fields, not the whole object.

Pods are the bulk of what streams through the operator; keeping a small frozen view of each (instead
of the full body) keeps memory flat with thousands of pods, and gives the pure status and planner
code plain typed input. Only a pod whose log is due keeps its body, until the kept-log keeper let it go: the
keeper starts from it instead of reading the pod again, one request less before its replacement.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from disttrain_contract.divergence import DIVERGED_FIELD
from disttrain_contract.exit_codes import ExitCode
from disttrain_contract.progress import ERROR_FIELD
from disttrain_contract.timestamps import parse_time
from disttrain_core import naming
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import MAX_ATTEMPT, ReplicaType
from disttrain_core.api.status import MAX_DISRUPTION_REASON, Evaluation
from disttrain_core.api.tenant_input import PodLogNotes, PodRunNotes, as_list, as_mapping
from disttrain_core.kept_logs import essentials, log_due, previous_run_due, run_index
from disttrain_core.progress import Report, parse_evaluation, parse_report
from disttrain_core.types import Body


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class Unschedulable:
    """The pod's `PodScheduled` condition is False for want of a place: since when, and the scheduler's words."""

    since: datetime
    message: str


@dataclass(frozen=True)
class Runs:
    """The runs of a pod's trainer container, in a pod that restarts in place (`disttrain_core.restarts.in_place`): how
    many ended and restarted, how many of those ends restarts already counted, and how the last one ended."""

    ended: int
    counted: int
    backing_off: bool = False  # the kubelet holds its next start back (CrashLoopBackOff)
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    finished_at: datetime | None = None
    diverged: bool = False  # the run's termination message file says its loss turned no number

    @property
    def uncounted(self) -> bool:
        return self.ended > self.counted

    @property
    def owed(self) -> bool:
        """A restart counted the end of the current run, which has not come."""
        return self.counted > self.ended


@dataclass(frozen=True)
class PodView:
    name: str
    replica_type: ReplicaType
    index: int
    phase: PodPhase
    uid: str
    ready: bool = False
    deleting: bool = False
    exit_code: int | None = None
    reason: str | None = None
    restarts: int = 0
    deletion_time: datetime | None = None
    pod_ip: str | None = None
    final_report: Report | None = None  # the trainer's last report, from the termination message
    evaluation: Evaluation | None = None  # an Evaluator's scores, from its termination message
    finished_at: datetime | None = None  # when its container ended, for a pod that ended
    message: str | None = None  # why a failed container says it failed: the trainer's error, or its own text
    diverged: bool = False  # a failed container's termination message file says its loss turned no number
    log_due: bool = False  # its log is to be kept now (`disttrain_core.kept_logs`), if it is not already
    run_log_due: int | None = None  # the run it restarted in place after, whose log is to be kept now
    log_due_body: Body | None = field(default=None, compare=False, repr=False)  # its `essentials`, when either is due
    attempt: int | None = None  # which attempt of its replica it is (`disttrain_core.kept_logs.pods`)
    released: bool = False  # deleted with no grace left: only a finalizer (another's) keeps it
    unschedulable: Unschedulable | None = None  # the scheduler found no place for it (or for its gang)
    resource_version: str | None = field(default=None, compare=False)  # the version seen, that a deletion names
    disruption: str | None = None  # why it was taken away on purpose, not for its own fault (`disruption`)
    conditions: frozenset[str] = frozenset()  # the types of its conditions that are True (`true_conditions`)
    gone: bool = False  # removed from the API: its view `after_removal`, kept until a reconcile acted on its loss
    runs: Runs | None = None  # its trainer container's runs, where it restarts in place

    @property
    def ended(self) -> bool:
        return self.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)

    @property
    def active(self) -> bool:
        return self.phase in (PodPhase.PENDING, PodPhase.RUNNING) and not self.deleting

    @property
    def owed_restart_in_place(self) -> bool:
        """A restart counted the end of this pod's current run, which has not come (`disttrain_core.restarts.in_place`):
        it is to restart in place, and runs for its job no more."""
        return self.runs is not None and not self.ended and self.runs.owed

    @property
    def lost(self) -> bool:
        """Failed, or deleted before it ended (by a user, an eviction, a lost node, or the operator itself)."""
        if self.deleting:
            return self.phase is not PodPhase.SUCCEEDED
        return self.phase is PodPhase.FAILED


def after_removal(pod: PodView) -> PodView | None:
    """What stays in sight of a pod removed from the API before it succeeded, until a reconcile acted on its
    loss. A pod deleted with no grace period (kwok's, a forced deletion, an evicted pod on a node that
    confirms at once) may be gone before the next reconcile reads its job: without its remains, that
    reconcile finds the pod missing and creates it again alone, as if nothing had been lost. The remains
    are going and let go (nothing runs), and keep the pod's name until its loss is handled."""
    if pod.phase is PodPhase.SUCCEEDED:
        return None
    return replace(
        pod, deleting=True, released=True, gone=True, ready=False, log_due=False, run_log_due=None, log_due_body=None
    )


def own_pods(job: DistTrainJob, pods: Sequence[PodView]) -> list[PodView]:
    """The pods that are the job's tasks: a pod labelled as the job's by hand, with a type the job lacks
    or an index past its replicas, is not one of them and must not sway its status or plan."""
    return [
        pod
        for pod in pods
        if 0 <= pod.index < job.spec.replicas(pod.replica_type)
        and pod.name == naming.pod_name(job.metadata.name, pod.replica_type, pod.index)
    ]


def find_pod(pods: Sequence[PodView], replica_type: ReplicaType, index: int) -> PodView | None:
    """The pod of one task, if it exists."""
    return next((pod for pod in pods if pod.replica_type is replica_type and pod.index == index), None)


def container_status(status: Mapping[str, Any], container_name: str) -> Mapping[str, Any]:
    """One container's entry of a pod's `status.containerStatuses`, empty before the kubelet reports it."""
    statuses = status.get("containerStatuses") or []
    return next((entry for entry in statuses if isinstance(entry, Mapping) and entry.get("name") == container_name), {})


CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"  # the kubelet's reason for a container whose next start it holds back


def restarts_on(container: Mapping[str, Any], code: object) -> bool:
    """Whether the kubelet starts the container again in its pod after a run that exited with `code`: a rule of
    its `restartPolicyRules` restarts on it (the operator's is `in_place.restart_rule`). A run that ended
    otherwise (its success, a code the job fails on) was its last: the pod's phase says so next."""
    if not isinstance(code, int) or isinstance(code, bool):
        return False
    for rule in map(as_mapping, as_list(container.get("restartPolicyRules"))[:MAX_RESTART_RULES]):
        codes = as_mapping(rule.get("exitCodes"))
        listed = code in as_list(codes.get("values"))[:MAX_RULE_CODES]
        if codes.get("operator") in ("In", "NotIn") and listed == (codes.get("operator") == "In"):
            return rule.get("action") == "Restart"  # the first rule that matches decides
    return False


MAX_RESTART_RULES = 20  # the API server's bound on a container's rules
MAX_RULE_CODES = 255  # and on the codes a rule names


def runs(
    metadata: Mapping[str, Any], status: Mapping[str, Any], container: Mapping[str, Any], *, from_file: bool
) -> Runs | None:
    """The trainer container's runs, for a pod the operator made to restart in place; None for any other. The
    kubelet counts a container's restarts once the next run starts: a run that ended is read from its state
    (ended, or waiting out CrashLoopBackOff) before that, as soon as it shows, where the kubelet restarts on
    its exit code (`restarts_on`, by the trainer `container`'s spec). A run it does not restart is the pod's
    last, counted once the pod's phase says it ended (`in_place.end_counted` compares the two)."""
    counted = PodRunNotes.of(metadata).counted
    if counted is None:
        return None
    reported = container_status(status, str(container.get("name", "")))
    restarts = reported.get("restartCount")
    ended = restarts if isinstance(restarts, int) and 0 <= restarts < MAX_ATTEMPT else 0
    state = reported.get("state") or {}
    last = (reported.get("lastState") or {}).get("terminated") or {}
    final = status.get("phase") in (PodPhase.SUCCEEDED, PodPhase.FAILED)
    if state.get("terminated") and (final or restarts_on(container, as_mapping(state["terminated"]).get("exitCode"))):
        ended, last = ended + 1, state["terminated"]
    elif state.get("waiting") and last:
        ended += 1
    code = last.get("exitCode")
    return Runs(
        ended=ended,
        counted=counted,
        backing_off=(state.get("waiting") or {}).get("reason") == CRASH_LOOP_BACK_OFF,
        exit_code=code if isinstance(code, int) else None,
        reason=str(last["reason"])[:MAX_DISRUPTION_REASON] if last.get("reason") else None,
        message=failure_message(last.get("message")),
        finished_at=parse_time(last.get("finishedAt")),
        diverged=from_file and said_diverged(last.get("message")),
    )


def _terminated_state(status: dict[str, Any], container_name: str | None) -> dict[str, Any] | None:
    statuses: list[dict[str, Any]] = status.get("containerStatuses") or []
    chosen = next((entry for entry in statuses if entry.get("name") == container_name), None)
    for entry in [chosen, *statuses]:
        if entry is None:
            continue
        state = entry.get("state") or {}
        terminated = state.get("terminated") or (entry.get("lastState") or {}).get("terminated")
        if terminated:
            return dict(terminated)
    return None


MESSAGE_LIMIT = 300  # characters of a container's own words kept for the job's status and Events


def failure_message(text: Any) -> str | None:
    """The error in a failed container's termination message: the trainer's `error` field, or a message
    that is not a report at all (a user's own container); None for a report without one, or nothing."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return text.strip()[:MESSAGE_LIMIT]
    error = record.get(ERROR_FIELD) if isinstance(record, dict) else None
    return str(error)[:MESSAGE_LIMIT] if error else None


def said_diverged(text: Any) -> bool:
    """The termination message is the trainer's record with `DIVERGED_FIELD` true (`disttrain_contract.divergence`)."""
    if not isinstance(text, str) or DIVERGED_FIELD not in text:
        return False
    try:
        record = json.loads(text)
    except ValueError:
        return False
    return isinstance(record, dict) and record.get(DIVERGED_FIELD) is True


FALLBACK_TO_LOGS = "FallbackToLogsOnError"


def message_from_file(container: Mapping[str, Any]) -> bool:
    """The container's termination message is only what it wrote in its file: under `FallbackToLogsOnError` the
    kubelet puts its log's tail there when the file is empty, and any program may print anything."""
    return container.get("terminationMessagePolicy") != FALLBACK_TO_LOGS


def pod_ready(body: Mapping[str, Any]) -> bool:
    """The pod's Ready condition is True."""
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def unschedulable(body: Mapping[str, Any]) -> Unschedulable | None:
    """Set while the scheduler finds no place for the pod (reason `Unschedulable`, not a scheduling gate)."""
    if (body.get("spec") or {}).get("nodeName"):
        return None
    for condition in (body.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            since = parse_time(condition.get("lastTransitionTime"))
            if condition.get("reason") == "Unschedulable" and since is not None:
                return Unschedulable(since, str(condition.get("message") or "no node fits it"))
    return None


# What Kubernetes names the pods it takes away on purpose (the pod condition DisruptionTarget, True): an
# eviction (a drain, the autoscaler), the scheduler's preemption, the taint manager, the pod collector
# with a lost node's pods, and the kubelet (node shutdown, node pressure).
DISRUPTION_CONDITION = "DisruptionTarget"
PREEMPTED = "Preempted"  # the disruption of a trainer that saved on a termination signal and exited with PREEMPTED


def disruption(body: Mapping[str, Any], exit_code: int | None) -> str | None:
    """Why the pod was taken away on purpose: its DisruptionTarget condition's reason, or `Preempted` for the
    trainer's exit code that says so; None for a pod that failed, or was deleted, on its own account."""
    for condition in (body.get("status") or {}).get("conditions") or []:
        if condition.get("type") == DISRUPTION_CONDITION and condition.get("status") == "True":
            return str(condition.get("reason") or DISRUPTION_CONDITION)[:MAX_DISRUPTION_REASON]
    return run_disruption(exit_code)


def run_disruption(exit_code: int | None) -> str | None:
    """`Preempted` for a trainer that saved on a termination signal and left saying so."""
    return PREEMPTED if exit_code == ExitCode.PREEMPTED else None


# Bounds on what a pod's status may hold that failure-policy rules match: whoever writes a pod's status
# reaches only that pod's job, and only within these.
MAX_POD_CONDITIONS = 32
MAX_CONDITION_TYPE = 317  # a qualified name: a 253-character prefix, a slash and a 63-character name


def true_conditions(body: Mapping[str, Any]) -> frozenset[str]:
    conditions = (body.get("status") or {}).get("conditions") or []
    return frozenset(
        str(condition.get("type"))[:MAX_CONDITION_TYPE]
        for condition in conditions[:MAX_POD_CONDITIONS]
        if condition.get("status") == "True" and condition.get("type")
    )


# The uid of a pod's view made from its manifest: the API server gives the uid, in its answer to the create.
CREATED_UID = "(just created)"


def created_pod_view(manifest: Mapping[str, Any]) -> PodView | None:
    """How the watches will first show a pod the operator has just created (Pending, its labels and
    attempt as built); None for any other kind."""
    if manifest.get("kind") != "Pod":
        return None
    return pod_view({**manifest, "metadata": {**(manifest.get("metadata") or {}), "uid": CREATED_UID}})


def _identity(metadata: Mapping[str, Any]) -> tuple[str, ReplicaType, int] | None:
    """A pod's uid and the replica its labels name; None where it has no uid or the labels are not ours."""
    labels = metadata.get("labels") or {}
    uid = metadata.get("uid")
    if not isinstance(uid, str) or not uid:
        return None
    try:
        return (
            uid,
            ReplicaType.from_task_type(labels[naming.REPLICA_TYPE_LABEL]),
            int(labels[naming.REPLICA_INDEX_LABEL]),
        )
    except (KeyError, ValueError):
        return None


def _phase(status: Mapping[str, Any]) -> PodPhase:
    try:
        return PodPhase(status.get("phase", "Pending"))
    except ValueError:
        return PodPhase.UNKNOWN


def pod_view(body: dict[str, Any], trainer_container: str = "tensorflow") -> PodView | None:
    """The view of a pod the operator made; None for a pod whose labels are not ours, or that has no uid
    (only a manifest not yet created has none)."""
    metadata = body.get("metadata") or {}
    identity = _identity(metadata)
    if identity is None:
        return None
    uid, replica_type, index = identity
    status = body.get("status") or {}
    phase = _phase(status)
    ready = pod_ready(body)
    ended = phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)
    terminated = _terminated_state(status, trainer_container) if ended else None
    failed = (terminated or {}) if phase is PodPhase.FAILED else {}
    container_statuses = status.get("containerStatuses") or []
    due, run_due = log_due(body), previous_run_due(body)
    containers = as_list(as_mapping(body.get("spec")).get("containers"))
    trainer = next(
        (c for c in containers if as_mapping(c).get("name") == trainer_container), {"name": trainer_container}
    )
    from_file = message_from_file(trainer)
    in_place = runs(metadata, status, trainer, from_file=from_file)
    attempt = PodLogNotes.of(metadata).attempt
    run = run_index(body)  # the latest run's, from 0: an attempt a run, where it restarts in place
    return PodView(
        name=str(metadata.get("name", "")),
        replica_type=replica_type,
        index=index,
        phase=phase,
        ready=ready and phase is PodPhase.RUNNING and not (in_place is not None and in_place.owed),
        deleting=metadata.get("deletionTimestamp") is not None,
        deletion_time=parse_time(metadata.get("deletionTimestamp")),
        exit_code=failed.get("exitCode"),
        reason=failed.get("reason") or status.get("reason"),
        restarts=sum(int(entry.get("restartCount", 0)) for entry in container_statuses),
        uid=uid,
        pod_ip=status.get("podIP") or None,
        final_report=parse_report((terminated or {}).get("message")),
        evaluation=parse_evaluation((terminated or {}).get("message")),
        finished_at=parse_time((terminated or {}).get("finishedAt")),
        message=failure_message(failed.get("message")),
        diverged=from_file and said_diverged(failed.get("message")),
        log_due=due,
        run_log_due=run_due,
        log_due_body=essentials(body) if due or run_due else None,
        attempt=attempt + run if attempt is not None else None,
        released=metadata.get("deletionTimestamp") is not None and metadata.get("deletionGracePeriodSeconds") == 0,
        unschedulable=unschedulable(body),
        resource_version=str(metadata["resourceVersion"]) if metadata.get("resourceVersion") else None,
        disruption=disruption(body, failed.get("exitCode")),
        conditions=true_conditions(body),
        runs=in_place,
    )
