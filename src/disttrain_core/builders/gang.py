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
from disttrain_core.api.spec import GANG_MEMBERS, ReplicaType, RestartScope, SchedulingPolicy
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
    """What the gang's pods request together (limits stand in for requests, as in Kubernetes)."""
    totals: dict[str, Decimal] = {}
    for replica_type in GANG_MEMBERS:
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
    pod_spec: Manifest = field(default_factory=dict)  # Kubernetes' gangs: the pod's field naming its group


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
    scheduler_name: ClassVar[str | None]  # the pods' schedulerName; None: the default scheduler

    def members(self, job: DistTrainJob) -> int:
        return sum(job.spec.replicas(kind) for kind in GANG_MEMBERS)

    def min_count(self, job: DistTrainJob) -> int:
        """The pods the gang needs together: minAvailable, else every member. A served TFJob's minAvailable that
        counts its Evaluator too, as training-operator counted it, is every member."""
        policy = gang_policy(job, self.by_default)
        members = self.members(job)
        return min(policy.min_available, members) if policy is not None and policy.min_available else members

    def oversized(self, job: DistTrainJob) -> str | None:
        """Why the gang could never be placed: it needs more pods together than the job has. Its pods and its gang
        wait until minAvailable is lowered, as training-operator's stay unplaced (a DistTrainJob's CRD refuses
        such a spec; a served TFJob's cannot)."""
        policy = gang_policy(job, self.by_default)
        if policy is None or not policy.min_available or policy.min_available <= job.spec.total_replicas:
            return None
        return (
            f"schedulingPolicy.minAvailable {policy.min_available} is more than the {job.spec.total_replicas} pods of "
            "the job: its gang could never be placed, so its pods wait until minAvailable is lowered"
        )

    def unserved(self, job: DistTrainJob) -> str | None:
        """Why the job, a gang by its spec, runs as none on this cluster (its scheduler's API is not served)."""
        return None

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
        if policy is None or self.oversized(job) is not None:
            return []
        metadata = {"name": pod_group_name(job), "namespace": job.metadata.namespace}
        return self._objects(job, policy, metadata)

    def membership(self, job: DistTrainJob, replica_type: ReplicaType) -> Membership | None:
        """How a pod of `replica_type` joins the job's gang; None outside of one."""
        policy = gang_policy(job, self.by_default)
        if policy is None or replica_type not in GANG_MEMBERS:
            return None
        return self._membership(policy, pod_group_name(job))

    @abstractmethod
    def _objects(self, job: DistTrainJob, policy: SchedulingPolicy, metadata: Manifest) -> list[Manifest]: ...

    @abstractmethod
    def _membership(self, policy: SchedulingPolicy, group: str) -> Membership: ...


@dataclass(frozen=True)
class _PodGroupGang(Gang):
    """scheduler-plugins and Volcano: one PodGroup asking for `minMember` pods and their resources together."""

    api_version: ClassVar[str]

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


class WorkloadApi(StrEnum):
    """The versions of Kubernetes' Workload API disttrain builds, newest first: the operator takes the newest
    the cluster serves (`disttrain_kube.cluster_facts`)."""

    V1BETA1 = "scheduling.k8s.io/v1beta1"  # Kubernetes 1.37: Workload and PodGroup, GenericWorkload gate
    V1ALPHA2 = "scheduling.k8s.io/v1alpha2"  # 1.36: Workload and PodGroup, GangScheduling gate
    V1ALPHA1 = "scheduling.k8s.io/v1alpha1"  # 1.35: a Workload whose pod groups pods name directly


@dataclass(frozen=True)
class KubernetesGang(Gang):
    """kube-scheduler's own, in the Workload API version the cluster serves (`workload_api`; None where it
    serves none: the job runs as no gang, and `unserved` says why). From v1alpha2 on, a Workload with one
    gang template and the PodGroup that is its running instance, which each pod names; in v1alpha1 the
    Workload alone, whose pod group each pod names. It alone takes a topology constraint (Volcano's network
    topology and scheduler-plugins know no node label)."""

    workload_api: WorkloadApi | None = WorkloadApi.V1BETA1

    name = GangScheduler.KUBERNETES
    scheduler_name = None

    def unmet_need(self, job: DistTrainJob) -> str | None:
        policy = gang_policy(job, self.by_default)
        if policy is None or policy.topology_key is None or self.workload_api is not WorkloadApi.V1ALPHA1:
            return None
        return (
            "schedulingPolicy.topologyKey needs Kubernetes 1.36 or later: this cluster serves the Workload API as "
            f"{WorkloadApi.V1ALPHA1.value}, which has no topology constraint"
        )

    def unserved(self, job: DistTrainJob) -> str | None:
        if self.workload_api is not None or gang_policy(job, self.by_default) is None:
            return None
        built = ", ".join(api.value for api in WorkloadApi)
        return (
            f"this cluster serves no Workload API disttrain builds ({built}; see docs/gang-scheduling.md for "
            "the feature gates each Kubernetes version needs): the job runs, but not as a gang"
        )

    def membership(self, job: DistTrainJob, replica_type: ReplicaType) -> Membership | None:
        return None if self.workload_api is None else super().membership(job, replica_type)

    def _objects(self, job: DistTrainJob, policy: SchedulingPolicy, metadata: Manifest) -> list[Manifest]:
        api = self.workload_api
        if api is None:
            return []
        gang: Manifest = {"schedulingPolicy": {"gang": {"minCount": self.min_count(job)}}}
        if policy.topology_key:
            gang["schedulingConstraints"] = {"topology": [{"key": policy.topology_key}]}
        if api is WorkloadApi.V1BETA1 and job.spec.effective_restart_scope is RestartScope.JOB:
            gang["disruptionMode"] = {"all": {}}  # one pod disrupted takes the gang's others with it
        if policy.priority_class and api is not WorkloadApi.V1ALPHA1:
            gang["priorityClassName"] = policy.priority_class
        owner = {"apiGroup": job.api_version.split("/")[0], "kind": job.kind, "name": job.metadata.name}
        workload: Manifest = {"apiVersion": api.value, "kind": "Workload", "metadata": dict(metadata)}
        if api is WorkloadApi.V1ALPHA1:
            group = {"name": GANG_TEMPLATE, "policy": gang["schedulingPolicy"]}
            return [{**workload, "spec": {"controllerRef": owner, "podGroups": [group]}}]
        workload["spec"] = {"controllerRef": owner, "podGroupTemplates": [{"name": GANG_TEMPLATE, **gang}]}
        if api is WorkloadApi.V1BETA1:
            reference: Manifest = {"workloadRef": {"workloadName": pod_group_name(job), "templateName": GANG_TEMPLATE}}
        else:
            reference = {
                "podGroupTemplateRef": {
                    "workload": {"workloadName": pod_group_name(job), "podGroupTemplateName": GANG_TEMPLATE}
                }
            }
        pod_group = {
            "apiVersion": api.value,
            "kind": "PodGroup",
            "metadata": dict(metadata),
            "spec": {**reference, **gang},
        }
        return [workload, pod_group]

    def _membership(self, policy: SchedulingPolicy, group: str) -> Membership:
        if self.workload_api is WorkloadApi.V1ALPHA1:
            return Membership(self.scheduler_name, pod_spec={"workloadRef": {"name": group, "podGroup": GANG_TEMPLATE}})
        return Membership(self.scheduler_name, pod_spec={"schedulingGroup": {"podGroupName": group}})


_POD_GROUP_GANGS: dict[GangScheduler, type[_PodGroupGang]] = {
    gang.name: gang for gang in (SchedulerPluginsGang, VolcanoGang)
}


def gang_for(
    scheduler: GangScheduler, by_default: bool = False, workload_api: WorkloadApi | None = WorkloadApi.V1BETA1
) -> Gang:
    """The operator's gang scheduler; `workload_api`: the Workload API version the cluster serves, for
    Kubernetes' own gangs (None: none)."""
    if scheduler is GangScheduler.KUBERNETES:
        return KubernetesGang(by_default, workload_api)
    return _POD_GROUP_GANGS[scheduler](by_default)
