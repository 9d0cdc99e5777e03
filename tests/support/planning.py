"""Jobs, pods and plans as the planner's and the restart decision's unit tests build them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.observed import PodPhase, PodView
from disttrain_core.planner import Plan, plan
from disttrain_core.status_from_pods import aggregated
from support.job_builder import JobBuilder

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = BuildSettings()


def job_of(counts: dict[str, int], policy: str = "ExitCode", **run_policy: Any) -> DistTrainJob:
    """A job named `job` of these replica counts, their restart policy and run policy."""
    return JobBuilder().counts(counts, restartPolicy=policy).run_policy(**run_policy).job()


def pod_of(kind: ReplicaType, index: int, phase: PodPhase = PodPhase.RUNNING, **fields: Any) -> PodView:
    """The view of that job's pod; its uid names its `generation` (0 unless given)."""
    name = f"job-{kind.task_type}-{index}"
    return PodView(name, kind, index, phase, uid=f"uid-{name}-{fields.pop('generation', 0)}", **fields)


def planned(job: DistTrainJob, pods: list[PodView], now: datetime = NOW, **kwargs: Any) -> Plan:
    """Plan after aggregating the status from the same pods, as the reconciler does."""
    status = aggregated(job, pods, created=True, now=now).status
    return plan(
        job.model_copy(update={"status": status}), pods, kwargs.pop("children", []), SETTINGS, now=now, **kwargs
    )
