"""Gang scheduling: one PodGroup per job, for the scheduler the operator is configured with.

Without a gang, a job whose pods do not all fit starts some of them, which then hold GPUs while
waiting for peers that never come (and block other jobs). A PodGroup asks the scheduler to place
`minMember` pods together or none.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from disttrain_operator.api.job import DistTrainJob
from disttrain_operator.api.spec import ReplicaType
from disttrain_operator.core.types import Manifest


class GangScheduler(StrEnum):
    SCHEDULER_PLUGINS = "scheduler-plugins"
    VOLCANO = "volcano"


@dataclass(frozen=True)
class GangApi:
    api_version: str
    scheduler_name: str


GANG_APIS = {
    GangScheduler.SCHEDULER_PLUGINS: GangApi("scheduling.x-k8s.io/v1alpha1", "scheduler-plugins-scheduler"),
    GangScheduler.VOLCANO: GangApi("scheduling.volcano.sh/v1beta1", "volcano"),
}
# How a pod names its group, per scheduler.
SCHEDULER_PLUGINS_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"


def _add(totals: dict[str, float], resources: dict[str, Any], times: int) -> None:
    for name, quantity in resources.items():
        totals[name] = totals.get(name, 0.0) + _quantity(quantity) * times


_SUFFIXES = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _quantity(value: Any) -> float:
    text = str(value)
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _SUFFIXES[suffix]
    return float(text)


def _format(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{round(value * 1000)}m"


def min_resources(job: DistTrainJob) -> dict[str, str]:
    """What every pod of the job requests together (limits stand in for requests, as in Kubernetes)."""
    totals: dict[str, float] = {}
    for replica_type in ReplicaType:
        count = job.spec.replicas(replica_type)
        if count == 0:
            continue
        for container in job.spec.replica_specs[replica_type].template["spec"]["containers"]:
            resources = container.get("resources") or {}
            _add(totals, {**(resources.get("limits") or {}), **(resources.get("requests") or {})}, count)
    return {name: _format(value) for name, value in sorted(totals.items())}


def pod_group_name(job: DistTrainJob) -> str:
    return job.metadata.name


def pod_group(job: DistTrainJob, scheduler: GangScheduler) -> Manifest | None:
    """The job's PodGroup, or None without a schedulingPolicy."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is None:
        return None
    spec: Manifest = {"minMember": policy.min_available or job.spec.total_replicas, "minResources": min_resources(job)}
    if policy.priority_class:
        spec["priorityClassName"] = policy.priority_class
    if scheduler is GangScheduler.VOLCANO and policy.queue:
        spec["queue"] = policy.queue
    if scheduler is GangScheduler.SCHEDULER_PLUGINS and policy.schedule_timeout_seconds:
        spec["scheduleTimeoutSeconds"] = policy.schedule_timeout_seconds
    return {
        "apiVersion": GANG_APIS[scheduler].api_version,
        "kind": "PodGroup",
        "metadata": {"name": pod_group_name(job), "namespace": job.metadata.namespace},
        "spec": spec,
    }


def pod_membership(job: DistTrainJob, scheduler: GangScheduler) -> tuple[str, dict[str, str], dict[str, str]] | None:
    """(schedulerName, labels, annotations) that make a pod a member of the job's PodGroup."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is None:
        return None
    name = pod_group_name(job)
    if scheduler is GangScheduler.VOLCANO:
        annotations = {VOLCANO_ANNOTATION: name}
        if policy.queue:
            annotations["scheduling.volcano.sh/queue-name"] = policy.queue
        return GANG_APIS[scheduler].scheduler_name, {}, annotations
    return GANG_APIS[scheduler].scheduler_name, {SCHEDULER_PLUGINS_LABEL: name}, {}
