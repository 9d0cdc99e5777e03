"""Gang scheduling: the objects that make the scheduler the operator is configured with place a job's pods
together or not at all, so that pods that fit never hold GPUs waiting for peers that do not.

Scheduler-plugins and Volcano take one PodGroup asking for `minMember` pods; Kubernetes' own gangs take a
Workload and the PodGroup that is its running instance, which each gang pod names (an Evaluator is no
part of it). A job is a gang with `runPolicy.schedulingPolicy` or `gang: true`, or where the operator
makes every job one (`by_default`), unless `gang: false`; its gang outlives restarts. Each scheduler is
one `Gang` (`gang_for`): what it needs made, how a pod joins, and what it cannot do; the builders and the
planner ask the operator's one and never which it is. docs/gang-scheduling.md has the details."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any, ClassVar

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.quantity import format_quantity, parse_quantity
from disttrain_core.api.spec import ReplicaType, SchedulingPolicy
from disttrain_core.types import Manifest


class GangScheduler(StrEnum):
    SCHEDULER_PLUGINS = "scheduler-plugins"
    VOLCANO = "volcano"
    KUBERNETES = "kubernetes"


GANG_KINDS = frozenset({"PodGroup", "Workload"})
# How a pod names its group, per scheduler.
SCHEDULER_PLUGINS_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
GANG_TEMPLATE = "gang"  # the Workload's one pod group template


def _add(totals: dict[str, Decimal], resources: dict[str, Any], times: int) -> None:
    for name, quantity in resources.items():
        totals[name] = totals.get(name, Decimal(0)) + parse_quantity(quantity) * times


def min_resources(job: DistTrainJob) -> dict[str, str]:
    """What every pod of the job requests together (limits stand in for requests, as in Kubernetes)."""
    totals: dict[str, Decimal] = {}
    for replica_type in ReplicaType:
        count = job.spec.replicas(replica_type)
        if count == 0:
            continue
        for container in job.spec.replica_specs[replica_type].template["spec"]["containers"]:
            resources = container.get("resources") or {}
            _add(totals, {**(resources.get("limits") or {}), **(resources.get("requests") or {})}, count)
    return {name: format_quantity(value) for name, value in sorted(totals.items())}


def pod_group_name(job: DistTrainJob) -> str:
    return job.metadata.name


@dataclass(frozen=True)
class Membership:
    """What makes a pod a member of its job's gang."""

    scheduler_name: str | None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    scheduling_group: str | None = None  # Kubernetes' gangs: the PodGroup in `spec.schedulingGroup`


def gang_policy(job: DistTrainJob, by_default: bool) -> SchedulingPolicy | None:
    """The job's gang, or None when it is none."""
    run_policy = job.spec.run_policy
    if run_policy.gang is False:
        return None
    if run_policy.scheduling_policy is not None:
        return run_policy.scheduling_policy
    return SchedulingPolicy() if run_policy.gang or by_default else None


@dataclass(frozen=True)
class Gang(ABC):
    """One gang scheduler; for a job that is no gang (`gang_policy`), `objects` is empty and `membership` None."""

    by_default: bool = False  # every job is a gang unless it opts out

    name: ClassVar[GangScheduler]
    api_version: ClassVar[str]
    scheduler_name: ClassVar[str | None]  # the pods' schedulerName; None: the default scheduler

    def in_gang(self, replica_type: ReplicaType) -> bool:
        """Whether pods of `replica_type` belong to a gang job's gang."""
        return True

    def min_count(self, job: DistTrainJob) -> int:
        """The pods the gang needs together: minAvailable, but never more than the gang has (a larger one could
        never be met)."""
        policy = gang_policy(job, self.by_default)
        members = sum(job.spec.replicas(kind) for kind in ReplicaType if self.in_gang(kind))
        return min(policy.min_available, members) if policy is not None and policy.min_available else members

    def unmet_need(self, job: DistTrainJob) -> str | None:
        """What the job asks of its gang that this scheduler cannot give, if anything."""
        policy = gang_policy(job, self.by_default)
        if policy is None or policy.topology_key is None:
            return None
        return (
            f"schedulingPolicy.topologyKey needs the operator's gang scheduler to be {GangScheduler.KUBERNETES.value} "
            f"(DISTTRAIN_GANG_SCHEDULER); this operator's is {self.name.value}"
        )

    def objects(self, job: DistTrainJob) -> list[Manifest]:
        """The job's gang (metadata without owner or labels), in creation order."""
        policy = gang_policy(job, self.by_default)
        if policy is None:
            return []
        metadata = {"name": pod_group_name(job), "namespace": job.metadata.namespace}
        return self._objects(job, policy, metadata)

    def membership(self, job: DistTrainJob, replica_type: ReplicaType) -> Membership | None:
        """How a pod of `replica_type` joins the job's gang; None outside of one."""
        policy = gang_policy(job, self.by_default)
        if policy is None or not self.in_gang(replica_type):
            return None
        return self._membership(policy, pod_group_name(job))

    @abstractmethod
    def _objects(self, job: DistTrainJob, policy: SchedulingPolicy, metadata: Manifest) -> list[Manifest]: ...

    @abstractmethod
    def _membership(self, policy: SchedulingPolicy, group: str) -> Membership: ...


@dataclass(frozen=True)
class _PodGroupGang(Gang):
    """scheduler-plugins and Volcano: one PodGroup asking for `minMember` pods and their resources together."""

    def _objects(self, job: DistTrainJob, policy: SchedulingPolicy, metadata: Manifest) -> list[Manifest]:
        spec: Manifest = {"minMember": self.min_count(job), "minResources": min_resources(job)}
        if policy.priority_class:
            spec["priorityClassName"] = policy.priority_class
        spec.update(self._spec_extras(policy))
        return [{"apiVersion": self.api_version, "kind": "PodGroup", "metadata": metadata, "spec": spec}]

    def _spec_extras(self, policy: SchedulingPolicy) -> Manifest:
        return {}


@dataclass(frozen=True)
class SchedulerPluginsGang(_PodGroupGang):
    name = GangScheduler.SCHEDULER_PLUGINS
    api_version = "scheduling.x-k8s.io/v1alpha1"
    scheduler_name = "scheduler-plugins-scheduler"

    def _spec_extras(self, policy: SchedulingPolicy) -> Manifest:
        return {"scheduleTimeoutSeconds": policy.schedule_timeout_seconds} if policy.schedule_timeout_seconds else {}

    def _membership(self, policy: SchedulingPolicy, group: str) -> Membership:
        return Membership(self.scheduler_name, labels={SCHEDULER_PLUGINS_LABEL: group})


@dataclass(frozen=True)
class VolcanoGang(_PodGroupGang):
    name = GangScheduler.VOLCANO
    api_version = "scheduling.volcano.sh/v1beta1"
    scheduler_name = "volcano"

    def _spec_extras(self, policy: SchedulingPolicy) -> Manifest:
        return {"queue": policy.queue} if policy.queue else {}

    def _membership(self, policy: SchedulingPolicy, group: str) -> Membership:
        annotations = {VOLCANO_ANNOTATION: group}
        if policy.queue:
            annotations[VOLCANO_QUEUE_ANNOTATION] = policy.queue
        return Membership(self.scheduler_name, annotations=annotations)


@dataclass(frozen=True)
class KubernetesGang(Gang):
    """kube-scheduler's own: a Workload with one gang template and the PodGroup that is its running instance;
    it alone takes a topology constraint (Volcano's network topology and scheduler-plugins know no node
    label). An Evaluator is no member."""

    name = GangScheduler.KUBERNETES
    api_version = "scheduling.k8s.io/v1alpha2"
    scheduler_name = None

    def in_gang(self, replica_type: ReplicaType) -> bool:
        return replica_type is not ReplicaType.EVALUATOR

    def unmet_need(self, job: DistTrainJob) -> str | None:
        return None

    def _objects(self, job: DistTrainJob, policy: SchedulingPolicy, metadata: Manifest) -> list[Manifest]:
        gang: Manifest = {"schedulingPolicy": {"gang": {"minCount": self.min_count(job)}}}
        if policy.topology_key:
            gang["schedulingConstraints"] = {"topology": [{"key": policy.topology_key}]}
        if policy.priority_class:
            gang["priorityClassName"] = policy.priority_class
        template = {"name": GANG_TEMPLATE, **gang}
        owner = {"apiGroup": job.api_version.split("/")[0], "kind": job.kind, "name": job.metadata.name}
        reference = {"workload": {"workloadName": pod_group_name(job), "podGroupTemplateName": GANG_TEMPLATE}}
        return [
            {
                "apiVersion": self.api_version,
                "kind": "Workload",
                "metadata": dict(metadata),
                "spec": {"controllerRef": owner, "podGroupTemplates": [template]},
            },
            {
                "apiVersion": self.api_version,
                "kind": "PodGroup",
                "metadata": dict(metadata),
                "spec": {"podGroupTemplateRef": reference, **gang},
            },
        ]

    def _membership(self, policy: SchedulingPolicy, group: str) -> Membership:
        return Membership(self.scheduler_name, scheduling_group=group)


_GANGS: dict[GangScheduler, type[Gang]] = {
    gang.name: gang for gang in (SchedulerPluginsGang, VolcanoGang, KubernetesGang)
}


def gang_for(scheduler: GangScheduler, by_default: bool = False) -> Gang:
    return _GANGS[scheduler](by_default)
