"""Gang scheduling: the objects that make the scheduler the operator is configured with place a job's pods
together or not at all.

Without a gang, a job whose pods do not all fit starts some of them, which then hold GPUs while
waiting for peers that never come (and block other jobs). For scheduler-plugins and Volcano the job
gets one PodGroup that asks for `minMember` pods together. For Kubernetes' own gang scheduling
(`scheduling.k8s.io/v1alpha2`, kube-scheduler's GangScheduling plugin) it gets a Workload with one
gang template and the PodGroup that is the gang's running instance (with `topologyKey`, a constraint that
places the whole gang in one domain of that node label); each pod that must run with the others names that
PodGroup in `spec.schedulingGroup`. An Evaluator is no part of the gang there: it takes no part in the
collective or the parameter servers, and a job must not wait on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any

from disttrain_operator.api.job import DistTrainJob
from disttrain_operator.api.quantity import format_quantity, parse_quantity
from disttrain_operator.api.spec import ReplicaType
from disttrain_operator.core.types import Manifest


class GangScheduler(StrEnum):
    SCHEDULER_PLUGINS = "scheduler-plugins"
    VOLCANO = "volcano"
    KUBERNETES = "kubernetes"


@dataclass(frozen=True)
class GangApi:
    api_version: str
    scheduler_name: str | None  # None: the default scheduler


GANG_APIS = {
    GangScheduler.SCHEDULER_PLUGINS: GangApi("scheduling.x-k8s.io/v1alpha1", "scheduler-plugins-scheduler"),
    GangScheduler.VOLCANO: GangApi("scheduling.volcano.sh/v1beta1", "volcano"),
    GangScheduler.KUBERNETES: GangApi("scheduling.k8s.io/v1alpha2", None),
}
GANG_KINDS = frozenset({"PodGroup", "Workload"})
# How a pod names its group, per scheduler.
SCHEDULER_PLUGINS_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
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


def _in_gang(job: DistTrainJob, scheduler: GangScheduler, replica_type: ReplicaType) -> bool:
    """Whether pods of `replica_type` belong to the gang: every pod, but an Evaluator with Kubernetes' gangs."""
    if job.spec.run_policy.scheduling_policy is None:
        return False
    return scheduler is not GangScheduler.KUBERNETES or replica_type is not ReplicaType.EVALUATOR


def _min_count(job: DistTrainJob, scheduler: GangScheduler) -> int:
    """The pods the gang needs together: minAvailable, but never more than the gang has (a larger one could
    never be met)."""
    policy = job.spec.run_policy.scheduling_policy
    members = sum(job.spec.replicas(kind) for kind in ReplicaType if _in_gang(job, scheduler, kind))
    return min(policy.min_available, members) if policy is not None and policy.min_available else members


def unmet_need(job: DistTrainJob, scheduler: GangScheduler) -> str | None:
    """What the job asks of its gang that `scheduler` cannot give, if anything: only Kubernetes' gangs take a
    topology constraint (Volcano's network topology and scheduler-plugins know no node label)."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is None or policy.topology_key is None or scheduler is GangScheduler.KUBERNETES:
        return None
    return (
        f"schedulingPolicy.topologyKey needs the operator's gang scheduler to be {GangScheduler.KUBERNETES.value} "
        f"(DISTTRAIN_GANG_SCHEDULER); this operator's is {scheduler.value}"
    )


def gang_objects(job: DistTrainJob, scheduler: GangScheduler) -> list[Manifest]:
    """The job's gang (metadata without owner or labels), in creation order; none without a schedulingPolicy."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is None:
        return []
    metadata = {"name": pod_group_name(job), "namespace": job.metadata.namespace}
    api_version = GANG_APIS[scheduler].api_version
    if scheduler is GangScheduler.KUBERNETES:
        gang: Manifest = {"schedulingPolicy": {"gang": {"minCount": _min_count(job, scheduler)}}}
        if policy.topology_key:
            gang["schedulingConstraints"] = {"topology": [{"key": policy.topology_key}]}
        if policy.priority_class:
            gang["priorityClassName"] = policy.priority_class
        template = {"name": GANG_TEMPLATE, **gang}
        owner = {"apiGroup": job.api_version.split("/")[0], "kind": job.kind, "name": job.metadata.name}
        reference = {"workload": {"workloadName": pod_group_name(job), "podGroupTemplateName": GANG_TEMPLATE}}
        return [
            {
                "apiVersion": api_version,
                "kind": "Workload",
                "metadata": dict(metadata),
                "spec": {"controllerRef": owner, "podGroupTemplates": [template]},
            },
            {
                "apiVersion": api_version,
                "kind": "PodGroup",
                "metadata": dict(metadata),
                "spec": {"podGroupTemplateRef": reference, **gang},
            },
        ]
    spec: Manifest = {"minMember": _min_count(job, scheduler), "minResources": min_resources(job)}
    if policy.priority_class:
        spec["priorityClassName"] = policy.priority_class
    if scheduler is GangScheduler.VOLCANO and policy.queue:
        spec["queue"] = policy.queue
    if scheduler is GangScheduler.SCHEDULER_PLUGINS and policy.schedule_timeout_seconds:
        spec["scheduleTimeoutSeconds"] = policy.schedule_timeout_seconds
    return [{"apiVersion": api_version, "kind": "PodGroup", "metadata": metadata, "spec": spec}]


@dataclass(frozen=True)
class Membership:
    """What makes a pod a member of its job's gang."""

    scheduler_name: str | None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    scheduling_group: str | None = None  # Kubernetes' gangs: the PodGroup in `spec.schedulingGroup`


def pod_membership(job: DistTrainJob, scheduler: GangScheduler, replica_type: ReplicaType) -> Membership | None:
    """How a pod of `replica_type` joins the job's gang; None outside of one."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is None or not _in_gang(job, scheduler, replica_type):
        return None
    name = pod_group_name(job)
    api = GANG_APIS[scheduler]
    if scheduler is GangScheduler.KUBERNETES:
        return Membership(api.scheduler_name, scheduling_group=name)
    if scheduler is GangScheduler.VOLCANO:
        annotations = {VOLCANO_ANNOTATION: name}
        if policy.queue:
            annotations["scheduling.volcano.sh/queue-name"] = policy.queue
        return Membership(api.scheduler_name, annotations=annotations)
    return Membership(api.scheduler_name, labels={SCHEDULER_PLUGINS_LABEL: name})
