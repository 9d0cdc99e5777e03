"""What the operator reads of the cluster once, at its start: the Kubernetes version it runs and the
newest Workload API version it serves, for Kubernetes' own gangs. Both come from endpoints every
authenticated client may read (`/version`, discovery), so they need no rights of their own."""

from __future__ import annotations

from dataclasses import dataclass, replace

from disttrain_core.api.kubernetes_version import (
    SUPPORTED_MINORS,
    minor_of,
    restarts_containers_on_rules,
    supported_list,
)
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.gang import WorkloadApi
from disttrain_kube.api_errors import RefusedError
from disttrain_kube.resources import Resources
from disttrain_kube.rest import Kube


@dataclass(frozen=True)
class ClusterFacts:
    version: str  # the API server's gitVersion
    workload_api: WorkloadApi | None

    def build_settings(self, install: BuildSettings) -> BuildSettings:
        """The install's settings as this cluster allows them: its Workload API, and restarts in place where its
        version restarts containers on their rules."""
        in_place = install.restart_in_place and restarts_containers_on_rules(self.version)
        return replace(install, workload_api=self.workload_api, restart_in_place=in_place)

    @property
    def unsupported(self) -> str | None:
        """Why disttrain does not support this cluster's version, if it does not."""
        if minor_of(self.version) in SUPPORTED_MINORS:
            return None
        return f"Kubernetes {self.version} is outside the versions disttrain supports ({supported_list()})"


def served_workload_api(resources: Resources) -> WorkloadApi | None:
    """The newest Workload API version the cluster serves both kinds of (from v1alpha2 on, the PodGroup too)."""
    for api in WorkloadApi:
        kinds = ("Workload",) if api is WorkloadApi.V1ALPHA1 else ("Workload", "PodGroup")
        try:
            for kind in kinds:
                resources.served(api.value, kind)
        except RefusedError:
            continue
        return api
    return None


def read_cluster_facts(kube: Kube) -> ClusterFacts:
    version = kube.json_request("GET", "/version", {})
    return ClusterFacts(str(version.get("gitVersion", "")), served_workload_api(kube.resources))
