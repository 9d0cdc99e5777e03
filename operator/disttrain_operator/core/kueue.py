"""Kueue's contract for a job integration, on the job's side; pure, so each step is a unit test.

Kueue admits custom kinds it knows as external frameworks (`integrations.externalFrameworks:
["DistTrainJob.v1alpha1.disttrain.io"]`) and leaves the job's part to the job's controller, as
its own job reconciler does for built-in kinds:

- a job labelled `kueue.x-k8s.io/queue-name` gets a Workload (owned by the job) with one pod set per
  replica type, and stays suspended until that Workload is admitted;
- once admitted, each pod set's template gets the node labels and tolerations of its assigned
  ResourceFlavors and the admission checks' pod set updates, and the job is unsuspended;
- when the Workload loses its admission (evicted, preempted) the job is suspended again and its
  templates restored from the Workload's own copy;
- when the job ends, the Workload gets a `Finished` condition, which releases its quota.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from disttrain_operator.api.job import DistTrainJob
from disttrain_operator.api.spec import ReplicaType
from disttrain_operator.api.status import JobPhase
from disttrain_operator.core.builders import naming
from disttrain_operator.core.builders.objects import owner_references
from disttrain_operator.core.status import is_finished
from disttrain_operator.core.types import Manifest, Verdict

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
WORKLOAD_API_VERSION = "kueue.x-k8s.io/v1beta2"
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
        spec, metadata = template.get("spec") or {}, template.get("metadata") or {}
        return cls(
            dict(spec.get("nodeSelector") or {}),
            tuple(spec.get("tolerations") or ()),
            dict(metadata.get("labels") or {}),
            dict(metadata.get("annotations") or {}),
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


def queue_name(job: DistTrainJob) -> str | None:
    return job.metadata.labels.get(QUEUE_LABEL) or None


def pod_set_name(replica_type: ReplicaType) -> str:
    return replica_type.task_type


def workload_name(job_name: str) -> str:
    return f"disttrainjob-{job_name}"


def workload_reference(job: DistTrainJob) -> Manifest:
    """Enough of the job's Workload to address it."""
    name, namespace = workload_name(job.metadata.name), job.metadata.namespace
    return {"apiVersion": WORKLOAD_API_VERSION, "kind": "Workload", "metadata": {"name": name, "namespace": namespace}}


def workload(job: DistTrainJob) -> Manifest:
    """The job's Workload: its pod sets are the replica types, with counts and original templates."""
    metadata: Manifest = {
        "name": workload_name(job.metadata.name),
        "namespace": job.metadata.namespace,
        "labels": naming.job_labels(job.metadata.name),
        "ownerReferences": owner_references(job),
    }
    pod_sets = [
        {"name": pod_set_name(replica_type), "count": spec.replicas, "template": spec.template}
        for replica_type, spec in sorted(
            job.spec.replica_specs.items(), key=lambda item: list(ReplicaType).index(item[0])
        )
        if spec.replicas > 0
    ]
    spec: Manifest = {"queueName": queue_name(job), "podSets": pod_sets}
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.priority_class:
        spec["priorityClassName"] = policy.priority_class
        spec["priorityClassSource"] = "scheduling.k8s.io/priorityclass"
    return {"apiVersion": WORKLOAD_API_VERSION, "kind": "Workload", "metadata": metadata, "spec": spec}


def _holds(conditions: list[dict[str, Any]], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def workload_view(body: Mapping[str, Any]) -> WorkloadView:
    status, spec = body.get("status") or {}, body.get("spec") or {}
    conditions = status.get("conditions") or []
    admission = status.get("admission") or {}
    flavors = {
        str(assignment.get("name")): tuple(sorted(set((assignment.get("flavors") or {}).values())))
        for assignment in admission.get("podSetAssignments") or []
    }
    updates: dict[str, PodSetInfo] = {}
    for check in status.get("admissionChecks") or []:
        for update in check.get("podSetUpdates") or []:
            info = PodSetInfo(
                dict(update.get("nodeSelector") or {}),
                tuple(update.get("tolerations") or ()),
                dict(update.get("labels") or {}),
                dict(update.get("annotations") or {}),
            )
            name = str(update.get("name"))
            updates[name] = updates.get(name, PodSetInfo()).merged(info)
    return WorkloadView(
        name=str((body.get("metadata") or {}).get("name", "")),
        admitted=bool(admission) and _holds(conditions, "Admitted") and not _holds(conditions, "Evicted"),
        finished=_holds(conditions, "Finished"),
        flavors=flavors,
        updates=updates,
        originals={
            str(p.get("name")): PodSetInfo.of_template(p.get("template") or {}) for p in spec.get("podSets") or []
        },
    )


def flavor_info(flavor: Mapping[str, Any]) -> PodSetInfo:
    """A ResourceFlavor's node labels and tolerations, as Kueue injects them."""
    spec = flavor.get("spec") or {}
    return PodSetInfo(dict(spec.get("nodeLabels") or {}), tuple(spec.get("tolerations") or ()))


@dataclass(frozen=True)
class KueueStep:
    create: Manifest | None = None
    job_patch: Manifest | None = None  # a JSON merge patch of the job
    finish: Verdict | None = None  # the Workload's Finished condition
    event: Verdict | None = None  # what the step means to the job's owner


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


def kueue_step(job: DistTrainJob, current: WorkloadView | None, flavor: Callable[[str], PodSetInfo]) -> KueueStep:
    """The next step of the contract for a queued job; nothing for a job without a queue name."""
    if queue_name(job) is None:
        return KueueStep()
    suspended = job.spec.run_policy.suspend
    if is_finished(job.status):
        return _finish(job, current)
    if current is None:
        hold = None if suspended else {"spec": {"runPolicy": {"suspend": True}}}
        queued = Verdict(
            "Queued", f"waiting in Kueue queue {queue_name(job)} (Workload {workload_name(job.metadata.name)})"
        )
        return KueueStep(create=workload(job), job_patch=hold, event=queued)
    if current.admitted and suspended:
        targets = {
            name: _admitted_info(original, current, name, flavor) for name, original in current.originals.items()
        }
        admitted = Verdict("Admitted", f"Kueue admitted Workload {current.name}: starting")
        return KueueStep(job_patch=_job_patch(job, suspend=False, targets=targets), event=admitted)
    if not current.admitted and not suspended:
        evicted = Verdict("Evicted", f"Workload {current.name} lost its admission: suspending until admitted again")
        return KueueStep(job_patch=_job_patch(job, suspend=True, targets=current.originals), event=evicted)
    return KueueStep()


def _finish(job: DistTrainJob, current: WorkloadView | None) -> KueueStep:
    """A finished job releases its quota once; a Workload already Finished needs nothing."""
    if current is None or current.finished:
        return KueueStep()
    outcome = "Succeeded" if job.status.phase is JobPhase.SUCCEEDED else "Failed"
    return KueueStep(finish=Verdict(f"Job{outcome}", f"the DistTrainJob {outcome.lower()}"))


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
