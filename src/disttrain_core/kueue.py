"""Kueue's contract for a job integration, on the job's side; pure, so each step is a unit test.

Kueue admits DistTrainJobs as an external framework and leaves the job's part to the job's controller,
as its own reconciler does for built-in kinds: a queued job gets a Workload (a pod set per replica type)
and stays suspended until it is admitted; admitted, its templates take the flavors' node labels and
tolerations and it runs; evicted, it is suspended, its templates restored and, once its pods are gone,
its quota released; ended, its Workload is `Finished`. Under MultiKueue the manager's copy gets only its
Workload and suspension, and a worker's copy waits for the Workload MultiKueue made for it, found by the
watch, never by a name written on the job (its writer could name another job's). The Workload carries
the job's priority as Kueue's own integrations set it. docs/lifecycle.md#kueue says each step in full."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from disttrain_core import naming
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaSpec, ReplicaType
from disttrain_core.api.status import JobPhase
from disttrain_core.api.tenant_input import as_list, as_mapping
from disttrain_core.builders.objects import owner_references
from disttrain_core.status_from_pods import is_finished
from disttrain_core.types import Manifest, Verdict

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
PREBUILT_WORKLOAD = "kueue.x-k8s.io/prebuilt-workload-name"  # an annotation's key, or a label's
JOB_LABELS = (QUEUE_LABEL, PRIORITY_CLASS_LABEL, PREBUILT_WORKLOAD)  # the labels of a job that are read
LONGEST_NAME = 253  # characters of an object's name: what a read annotation's value may be
MULTIKUEUE = "kueue.x-k8s.io/multikueue"  # the managedBy of a job MultiKueue dispatches
KUEUE_GROUP = "kueue.x-k8s.io"
WORKLOAD_API_VERSION = f"{KUEUE_GROUP}/v1beta2"
RESOURCE_FLAVOR_API_VERSION = WORKLOAD_API_VERSION
MANAGER = "disttrain-operator"


@dataclass(frozen=True)
class PodSetInfo:
    """What Kueue may set on a pod set's template: merged in at admission, restored at eviction."""

    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_template(cls, template: Mapping[str, Any]) -> PodSetInfo:
        spec, metadata = as_mapping(template.get("spec")), as_mapping(template.get("metadata"))
        return cls(
            dict(as_mapping(spec.get("nodeSelector"))),
            tuple(as_list(spec.get("tolerations"))),
            dict(as_mapping(metadata.get("labels"))),
            dict(as_mapping(metadata.get("annotations"))),
        )

    def merged(self, other: PodSetInfo) -> PodSetInfo:
        tolerations = self.tolerations + tuple(t for t in other.tolerations if t not in self.tolerations)
        return PodSetInfo(
            {**self.node_selector, **other.node_selector},
            tolerations,
            {**self.labels, **other.labels},
            {**self.annotations, **other.annotations},
        )


@dataclass(frozen=True)
class WorkloadView:
    name: str
    admitted: bool
    finished: bool
    flavors: dict[str, tuple[str, ...]]  # per pod set: the ResourceFlavors assigned to it
    updates: dict[str, PodSetInfo]  # per pod set: what admission checks add
    originals: dict[str, PodSetInfo]  # per pod set: the job's template as the Workload was made
    eviction: Verdict | None = None  # the reason and message of a true Evicted condition
    reserved: bool = False  # the Workload holds quota (has an admission)
    generation: int | None = None
    resource_version: str | None = None
    conditions: tuple[Mapping[str, Any], ...] = ()


def queue_name(job: DistTrainJob) -> str | None:
    return job.metadata.labels.get(QUEUE_LABEL) or None


@dataclass(frozen=True)
class PriorityClassRef:
    """What a Workload's `spec.priorityClassRef` names: a WorkloadPriorityClass or a PriorityClass."""

    group: str
    kind: str
    name: str

    @property
    def reference(self) -> Manifest:
        return {"group": self.group, "kind": self.kind, "name": self.name}

    @property
    def path(self) -> tuple[str, str]:
        """The API version and plural to read the class at."""
        if self.group == KUEUE_GROUP:
            return WORKLOAD_API_VERSION, "workloadpriorityclasses"
        return "scheduling.k8s.io/v1", "priorityclasses"


def priority_class(job: DistTrainJob) -> PriorityClassRef | None:
    """Where the job's priority comes from, in Kueue's order; None when nothing names one."""
    workload_class = job.metadata.labels.get(PRIORITY_CLASS_LABEL)
    if workload_class:
        return PriorityClassRef(KUEUE_GROUP, "WorkloadPriorityClass", workload_class)
    policy = job.spec.run_policy.scheduling_policy
    pod_class = policy.priority_class if policy is not None else None
    for _, spec in _pod_sets(job):
        pod_class = pod_class or (spec.template.get("spec") or {}).get("priorityClassName")
    return PriorityClassRef("scheduling.k8s.io", "PriorityClass", pod_class) if pod_class else None


def read_labels(labels: Any) -> dict[str, str]:
    """A job's labels that anything reads (JOB_LABELS, Kueue's): the operator holds no other of a tenant's."""
    found = as_mapping(labels)
    return {key: found[key] for key in JOB_LABELS if key in found}


def read_annotations(annotations: Any) -> dict[str, str]:
    """A job's annotations that anything reads (PREBUILT_WORKLOAD's, a Workload's name, of at most 253
    characters): the operator holds no other of a tenant's."""
    value = as_mapping(annotations).get(PREBUILT_WORKLOAD)
    return {PREBUILT_WORKLOAD: value} if isinstance(value, str) and len(value) <= LONGEST_NAME else {}


def pod_set_name(replica_type: ReplicaType) -> str:
    return replica_type.task_type


def kueue_makes_its_workload(job: DistTrainJob) -> bool:
    """The job names a Workload Kueue made for it (MultiKueue's copy on a worker cluster): none is made here."""
    metadata = job.metadata
    return bool(metadata.annotations.get(PREBUILT_WORKLOAD) or metadata.labels.get(PREBUILT_WORKLOAD))


def workload_name(job_name: str) -> str:
    return f"disttrainjob-{job_name}"


def workload_reference(job: DistTrainJob, current: WorkloadView) -> Manifest:
    """Enough of the job's Workload, as its watch found it, to address it."""
    metadata = {"name": current.name, "namespace": job.metadata.namespace}
    return {"apiVersion": WORKLOAD_API_VERSION, "kind": "Workload", "metadata": metadata}


def _pod_sets(job: DistTrainJob) -> list[tuple[ReplicaType, ReplicaSpec]]:
    """The replica types with pods, in the declared order."""
    specs = job.spec.replica_specs
    return [(kind, specs[kind]) for kind in ReplicaType if job.spec.replicas(kind) > 0]


def workload(job: DistTrainJob, priority: int | None) -> Manifest:
    """The job's Workload: its pod sets are the replica types, with counts and original templates;
    `priority` is the value of `priority_class(job)`, None where that names nothing that exists."""
    metadata: Manifest = {
        "name": workload_name(job.metadata.name),
        "namespace": job.metadata.namespace,
        "labels": naming.job_labels(job.metadata.name),
        "ownerReferences": owner_references(job),
    }
    pod_sets = [
        {"name": pod_set_name(replica_type), "count": spec.replicas, "template": spec.template}
        for replica_type, spec in _pod_sets(job)
    ]
    spec: Manifest = {"queueName": queue_name(job), "podSets": pod_sets}
    source = priority_class(job)
    if source is not None and priority is not None:
        spec["priorityClassRef"] = source.reference
        spec["priority"] = priority
    return {"apiVersion": WORKLOAD_API_VERSION, "kind": "Workload", "metadata": metadata, "spec": spec}


def _holds(conditions: list[Mapping[str, Any]], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def workload_view(body: Mapping[str, Any]) -> WorkloadView:
    """What the operator reads of a Workload; a field of another shape than Kueue's reads as empty."""
    status, spec = as_mapping(body.get("status")), as_mapping(body.get("spec"))
    conditions = [as_mapping(condition) for condition in as_list(status.get("conditions"))]
    admission = as_mapping(status.get("admission"))
    flavors = {
        str(assignment.get("name")): tuple(
            sorted({str(flavor) for flavor in as_mapping(assignment.get("flavors")).values()})
        )
        for assignment in map(as_mapping, as_list(admission.get("podSetAssignments")))
    }
    updates: dict[str, PodSetInfo] = {}
    for check in map(as_mapping, as_list(status.get("admissionChecks"))):
        for update in map(as_mapping, as_list(check.get("podSetUpdates"))):
            info = PodSetInfo(
                dict(as_mapping(update.get("nodeSelector"))),
                tuple(as_list(update.get("tolerations"))),
                dict(as_mapping(update.get("labels"))),
                dict(as_mapping(update.get("annotations"))),
            )
            name = str(update.get("name"))
            updates[name] = updates.get(name, PodSetInfo()).merged(info)
    evicted = next((c for c in conditions if c.get("type") == "Evicted" and c.get("status") == "True"), None)
    metadata = as_mapping(body.get("metadata"))
    return WorkloadView(
        name=str(metadata.get("name", "")),
        admitted=bool(admission) and _holds(conditions, "Admitted") and not _holds(conditions, "Evicted"),
        finished=_holds(conditions, "Finished"),
        flavors=flavors,
        updates=updates,
        originals={
            str(p.get("name")): PodSetInfo.of_template(as_mapping(p.get("template")))
            for p in map(as_mapping, as_list(spec.get("podSets")))
        },
        eviction=Verdict(str(evicted.get("reason", "")), str(evicted.get("message", ""))) if evicted else None,
        reserved=bool(admission),
        generation=metadata.get("generation"),
        resource_version=metadata.get("resourceVersion"),
        conditions=tuple(conditions),
    )


# Evictions after which Kueue's own job reconciler marks a Workload to be queued again at once.
_REQUEUED_AFTER = ("Preempted", "NodeFailures")


def released_status(current: WorkloadView, now: str) -> Manifest:
    """A merge patch of the Workload's status that gives its quota back after an eviction, as Kueue's job
    reconciler does once the job is stopped; the resourceVersion makes it fail rather than overwrite a
    change made since the Workload was read."""
    eviction = current.eviction or Verdict("Evicted", "")

    def condition(kind: str, holds: bool, reason: str, message: str) -> Manifest:
        status = "True" if holds else "False"
        previous = next((c for c in current.conditions if c.get("type") == kind), None)
        unchanged = previous is not None and previous.get("status") == status
        since = previous.get("lastTransitionTime", now) if previous is not None and unchanged else now
        built: Manifest = {"type": kind, "status": status, "reason": reason, "message": message}
        built["lastTransitionTime"] = since
        if current.generation is not None:
            built["observedGeneration"] = current.generation
        return built

    replaced = {
        "QuotaReserved": condition("QuotaReserved", False, "PendingEvaluation", eviction.message),
        "Admitted": condition("Admitted", False, "NoReservation", "The workload has no reservation"),
        "Requeued": condition("Requeued", eviction.reason in _REQUEUED_AFTER, eviction.reason, eviction.message),
    }
    conditions = [replaced.pop(c.get("type", ""), c) for c in current.conditions] + list(replaced.values())
    return {
        "metadata": {"resourceVersion": current.resource_version},
        "status": {"admission": None, "conditions": conditions},
    }


def flavor_info(flavor: Mapping[str, Any]) -> PodSetInfo:
    """A ResourceFlavor's node labels and tolerations, as Kueue injects them."""
    spec = flavor.get("spec") or {}
    return PodSetInfo(dict(spec.get("nodeLabels") or {}), tuple(spec.get("tolerations") or ()))


@dataclass(frozen=True)
class KueueStep:
    create: Manifest | None = None
    job_patch: Manifest | None = None  # a JSON merge patch of the job
    event: Verdict | None = None  # what the step means to the job's owner
    warning: Verdict | None = None  # something the job's owner must fix
    release: bool = False  # clear the evicted Workload's admission (`released_status`)


def _keyed_patch(patch: Manifest, key: str, before: dict[str, str], after: dict[str, str]) -> None:
    """Set `patch[key]` to take a string map from `before` to `after`: nothing, changed keys, or null."""
    if before == after:
        return
    if not after:
        patch[key] = None
        return
    changes: dict[str, str | None] = {name: None for name in before if name not in after}
    changes.update({name: value for name, value in after.items() if before.get(name) != value})
    patch[key] = changes


def _template_patch(current: Mapping[str, Any], target: PodSetInfo) -> Manifest:
    """A merge patch taking the template's Kueue-managed fields to `target`."""
    now = PodSetInfo.of_template(current)
    spec: Manifest = {}
    metadata: Manifest = {}
    _keyed_patch(spec, "nodeSelector", now.node_selector, target.node_selector)
    if now.tolerations != target.tolerations:
        spec["tolerations"] = list(target.tolerations) or None
    _keyed_patch(metadata, "labels", now.labels, target.labels)
    _keyed_patch(metadata, "annotations", now.annotations, target.annotations)
    return {key: value for key, value in (("spec", spec), ("metadata", metadata)) if value}


def _job_patch(job: DistTrainJob, suspend: bool, targets: Mapping[str, PodSetInfo]) -> Manifest:
    replica_specs = {
        replica_type.value: {"template": _template_patch(spec.template, targets[pod_set_name(replica_type)])}
        for replica_type, spec in job.spec.replica_specs.items()
        if pod_set_name(replica_type) in targets
    }
    return {"spec": {"runPolicy": {"suspend": suspend}, "replicaSpecs": replica_specs}}


def kueue_step(
    job: DistTrainJob,
    current: WorkloadView | None,
    flavor: Callable[[str], PodSetInfo],
    priority: Callable[[PriorityClassRef], int | None],
    *,
    has_pods: bool,
) -> KueueStep:
    """The next step of the contract for a queued job; nothing for a job without a queue name.

    `flavor` reads a ResourceFlavor, `priority` the value of a priority class (None if it is missing);
    `has_pods`: some of the job's pods still exist, terminating ones included."""
    if queue_name(job) is None:
        return KueueStep()
    suspended = job.spec.run_policy.suspend
    if is_finished(job.status):  # its Workload is finished after the reconcile (`finish_verdict`)
        return KueueStep()
    if current is None:
        return _await_prebuilt(job) if kueue_makes_its_workload(job) else _queue(job, priority)
    if current.admitted and suspended:
        targets = {
            name: _admitted_info(original, current, name, flavor) for name, original in current.originals.items()
        }
        admitted = Verdict("Admitted", f"Kueue admitted Workload {current.name}: starting")
        return KueueStep(job_patch=_job_patch(job, suspend=False, targets=targets), event=admitted)
    if not current.admitted and not suspended:
        evicted = Verdict("Evicted", f"Workload {current.name} lost its admission: suspending until admitted again")
        return KueueStep(job_patch=_job_patch(job, suspend=True, targets=current.originals), event=evicted)
    return KueueStep(release=current.eviction is not None and current.reserved and suspended and not has_pods)


def _queue(job: DistTrainJob, priority: Callable[[PriorityClassRef], int | None]) -> KueueStep:
    """A queued job's first step: its Workload, with its priority, and the job held suspended."""
    name = workload_name(job.metadata.name)
    queued = Verdict("Queued", f"waiting in Kueue queue {queue_name(job)} (Workload {name})")
    source = priority_class(job)
    value = priority(source) if source is not None else None
    missing = None
    if source is not None and value is None:
        missing = Verdict(
            "PriorityClassNotFound", f"{source.kind} {source.name} not found: the Workload has priority 0"
        )
    return KueueStep(create=workload(job, value), job_patch=_hold(job), event=queued, warning=missing)


def _hold(job: DistTrainJob) -> Manifest | None:
    """The patch that suspends the job, where it runs."""
    return None if job.spec.run_policy.suspend else {"spec": {"runPolicy": {"suspend": True}}}


def _await_prebuilt(job: DistTrainJob) -> KueueStep:
    """A job whose Workload Kueue makes (MultiKueue's, created before the job) is held until that one shows."""
    return KueueStep(job_patch=_hold(job))


def finish_verdict(job: DistTrainJob, current: WorkloadView | None) -> Verdict | None:
    """The Workload's Finished condition, for a queued job whose status, as just decided, says it ended.

    The reconcile that finds a job ended writes that status itself, and the echo of its own write calls for no
    reconcile: the quota must be released in that same reconcile, not on a later event that may never come.
    A Workload already Finished needs nothing."""
    if queue_name(job) is None or not is_finished(job.status) or current is None or current.finished:
        return None
    outcome = "Succeeded" if job.status.phase is JobPhase.SUCCEEDED else "Failed"
    return Verdict(f"Job{outcome}", f"the DistTrainJob {outcome.lower()}")


def _admitted_info(
    original: PodSetInfo, current: WorkloadView, name: str, flavor: Callable[[str], PodSetInfo]
) -> PodSetInfo:
    info = original
    for flavor_name in current.flavors.get(name, ()):
        info = info.merged(flavor(flavor_name))
    return info.merged(current.updates.get(name, PodSetInfo()))


def merge_patch(document: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, to see the job as the API server will after `job_patch`."""
    if not isinstance(patch, dict):
        return patch
    result = dict(document) if isinstance(document, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def finished_condition(verdict: Verdict, now: str) -> Manifest:
    return {
        "type": "Finished",
        "status": "True",
        "reason": verdict.reason,
        "message": verdict.message,
        "lastTransitionTime": now,
    }
