"""Jobs and pod views for the unit tests of the pure core."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.parsing import parse_job
from disttrain_core.api.spec import ReplicaType
from disttrain_core.observed import PodPhase, PodView

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TEMPLATE = {"spec": {"containers": [{"name": "tensorflow", "image": "i"}]}}


def make_job(counts: dict[str, int], **spec: Any) -> DistTrainJob:
    """A job named `job` with these replica counts; ParameterServer when it has a PS."""
    replica_specs = {kind: {"replicas": count, "template": TEMPLATE} for kind, count in counts.items()}
    strategy = "ParameterServer" if "PS" in counts else "MultiWorkerMirrored"
    manifest = {
        "apiVersion": "disttrain.io/v1alpha1",
        "kind": "DistTrainJob",
        "metadata": {"name": "job", "generation": 3},
        "spec": {"strategy": strategy, "replicaSpecs": replica_specs, **spec},
    }
    return parse_job(manifest)


def make_pod(kind: ReplicaType, index: int, phase: PodPhase, *, job: str = "job", **fields: Any) -> PodView:
    """A task of the job named `job` (`make_job`'s by default)."""
    name = f"{job}-{kind.task_type}-{index}"
    fields = {"name": name, "uid": f"uid-{name}", **fields}
    return PodView(replica_type=kind, index=index, phase=phase, **fields)


def running_pods(kind: ReplicaType, count: int) -> list[PodView]:
    return [make_pod(kind, index, PodPhase.RUNNING, ready=True) for index in range(count)]
