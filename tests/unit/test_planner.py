"""The planner creates what is missing, and nothing for a finished job."""

from __future__ import annotations

from datetime import UTC, datetime

from disttrain_operator.api.spec import ReplicaType
from disttrain_operator.builders.settings import BuildSettings
from disttrain_operator.observed import ChildView, PodPhase, PodView
from disttrain_operator.planner import object_key, plan
from disttrain_operator.render import parse_job
from disttrain_operator.status_aggregation import aggregate
from support import ROOT, load_one

JOB = parse_job(load_one(ROOT / "examples" / "multi-worker-mirrored-gpu.yaml"))
SETTINGS = BuildSettings()


def _names(pods: list[PodView], children: list[ChildView]) -> list[str]:
    return [object_key(item).name for item in plan(JOB, pods, children, SETTINGS).create]


def _worker(index: int, phase: PodPhase = PodPhase.RUNNING, deleting: bool = False) -> PodView:
    return PodView(f"mnist-mwms-worker-{index}", ReplicaType.WORKER, index, phase, deleting=deleting)


def test_everything_for_a_new_job() -> None:
    assert _names([], []) == [
        "mnist-mwms",
        "mnist-mwms-checkpoint",
        "mnist-mwms-worker-0",
        "mnist-mwms-worker-1",
        "mnist-mwms-worker-2",
        "mnist-mwms-worker-3",
    ]


def test_only_what_is_missing() -> None:
    children = [ChildView("Service", "mnist-mwms"), ChildView("PersistentVolumeClaim", "mnist-mwms-checkpoint")]
    assert _names([_worker(0), _worker(2)], children) == ["mnist-mwms-worker-1", "mnist-mwms-worker-3"]


def test_terminating_pod_is_not_replaced_yet() -> None:
    children = [ChildView("Service", "mnist-mwms"), ChildView("PersistentVolumeClaim", "mnist-mwms-checkpoint")]
    pods = [_worker(0, deleting=True), _worker(1), _worker(2), _worker(3)]
    assert _names(pods, children) == []


def test_nothing_for_a_finished_job() -> None:
    done = aggregate(JOB, [_worker(0, PodPhase.SUCCEEDED)], created=True, now=datetime(2026, 1, 1, tzinfo=UTC))
    finished = JOB.model_copy(update={"status": done})
    assert plan(finished, [], [], SETTINGS).create == []
