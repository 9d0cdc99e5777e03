"""Cluster facts and operator defaults the builders and the planner need but the job does not carry."""

from __future__ import annotations

from dataclasses import dataclass

from disttrain_core.builders.gang import Gang, GangScheduler, WorkloadApi, gang_for
from disttrain_core.images import TRAINER_IMAGE


@dataclass(frozen=True)
class BuildSettings:
    """`cluster_domain` (e.g. `cluster.local`) is appended to TF_CONFIG addresses when set.

    Without it, `{pod}.{job}.{namespace}.svc` resolves through the pod's DNS search path, which
    works on any cluster domain; set it where pods use a custom resolver without that path.
    """

    cluster_domain: str | None = None
    gang_scheduler: GangScheduler = GangScheduler.SCHEDULER_PLUGINS
    gang_by_default: bool = False  # every job is a gang unless it opts out (`runPolicy.gang: false`)
    network_policy: bool = True  # each job's trainers closed to all but the job and the operator
    operator_namespace: str | None = None  # where the operator's pods run, which that policy admits
    progress_deadline_seconds: int | None = None  # for jobs that set no runPolicy.progressDeadlineSeconds
    # The Workload API version the cluster serves, for Kubernetes' own gangs: found at the operator's start.
    workload_api: WorkloadApi | None = WorkloadApi.V1BETA1
    # Whole-job restarts in place (`disttrain_core.restarts.in_place`): the install allows it and the cluster serves it,
    # which only the operator knows (`ClusterFacts.build_settings`).
    restart_in_place: bool = False
    # What a trainer container that names no image runs: the install's trainer image (`DISTTRAIN_TRAINER_IMAGE`).
    trainer_image: str = TRAINER_IMAGE

    @property
    def gang(self) -> Gang:
        return gang_for(self.gang_scheduler, self.gang_by_default, self.workload_api)
