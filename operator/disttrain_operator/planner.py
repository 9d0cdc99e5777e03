"""What to do next for a job, from what exists: a pure function of the job and its observed children.

Deterministic names make the plan safe to repeat: acting on a stale view only ever asks to create an
object that already exists, which the API server answers with 409.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from disttrain_operator.api.job import DistTrainJob
from disttrain_operator.builders.objects import Manifest, desired_objects
from disttrain_operator.builders.settings import BuildSettings
from disttrain_operator.observed import ChildView, PodView
from disttrain_operator.status_aggregation import is_finished


@dataclass(frozen=True)
class Plan:
    create: list[Manifest] = field(default_factory=list)


def object_key(manifest: Manifest) -> ChildView:
    return ChildView(str(manifest["kind"]), str(manifest["metadata"]["name"]))


def plan(job: DistTrainJob, pods: Sequence[PodView], children: Collection[ChildView], settings: BuildSettings) -> Plan:
    """Create whatever the job owns and is missing; a finished job gets nothing new.

    A pod still terminating counts as present: its replacement waits until it is gone.
    """
    if is_finished(job.status):
        return Plan()
    existing = {*children, *(ChildView("Pod", pod.name) for pod in pods)}
    return Plan(create=[item for item in desired_objects(job, settings) if object_key(item) not in existing])
