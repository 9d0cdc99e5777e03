"""Cluster facts the builders need but the job does not carry."""

from __future__ import annotations

from dataclasses import dataclass

from disttrain_core.builders.gang import Gang, GangScheduler, gang_for


@dataclass(frozen=True)
class BuildSettings:
    """`cluster_domain` (e.g. `cluster.local`) is appended to TF_CONFIG addresses when set.

    Without it, `{pod}.{job}.{namespace}.svc` resolves through the pod's DNS search path, which
    works on any cluster domain; set it where pods use a custom resolver without that path.
    """

    cluster_domain: str | None = None
    gang_scheduler: GangScheduler = GangScheduler.SCHEDULER_PLUGINS
    gang_by_default: bool = False  # every job is a gang unless it opts out (`runPolicy.gang: false`)

    @property
    def gang(self) -> Gang:
        return gang_for(self.gang_scheduler, self.gang_by_default)
