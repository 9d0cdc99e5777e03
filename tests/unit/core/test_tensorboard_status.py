"""The job's TensorBoard in its status: where it serves, and what its Deployment's state says of it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.status import ConditionType
from disttrain_core.naming import JOB_NAME_LABEL
from disttrain_core.tensorboard_status import TensorBoardView, is_tensorboard_object, tensorboard_view, with_tensorboard
from support.job_builder import JobBuilder

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def _job(*, tensorboard: bool) -> DistTrainJob:
    builder = JobBuilder("mnist", "team").counts({"Worker": 2}).spec(checkpoint={"size": "1Gi"})
    return builder.spec(**({"tensorboard": {}} if tensorboard else {})).job()


def _deployment(ready: int, *conditions: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "mnist-tensorboard"},
        "status": {"readyReplicas": ready, "conditions": list(conditions)},
    }


@pytest.mark.parametrize(
    ("view", "status", "reason"),
    [
        (None, "False", "TensorBoardStarting"),
        (tensorboard_view(_deployment(0)), "False", "TensorBoardStarting"),
        (tensorboard_view(_deployment(1)), "True", "TensorBoardReady"),
        (
            tensorboard_view(
                _deployment(
                    0, {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "quota"}
                )
            ),
            "False",
            "FailedCreate",
        ),
        (
            tensorboard_view(
                _deployment(0, {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"})
            ),
            "False",
            "ProgressDeadlineExceeded",
        ),
    ],
)
def test_the_status_names_the_service_and_says_whether_tensorboard_serves(
    view: TensorBoardView | None, status: str, reason: str
) -> None:
    job = _job(tensorboard=True)
    found = with_tensorboard(job, job.status, view, NOW)
    assert found.tensorboard is not None and found.tensorboard.service == "mnist-tensorboard"
    assert found.tensorboard.url == "http://mnist-tensorboard.team.svc:6006"
    (said,) = [c for c in found.conditions if c.type is ConditionType.TENSORBOARD_READY]
    assert (said.status.value, said.reason) == (status, reason)
    untouched = _job(tensorboard=False)
    assert with_tensorboard(untouched, untouched.status, view, NOW) == untouched.status


def test_only_the_job_s_own_tensorboard_objects_are_its_tensorboard_s() -> None:
    def manifest(kind: str, name: str) -> dict[str, Any]:
        return {"kind": kind, "metadata": {"name": name, "labels": {JOB_NAME_LABEL: "mnist"}}}

    assert all(is_tensorboard_object(manifest(kind, "mnist-tensorboard")) for kind in ("Deployment", "Service"))
    assert not is_tensorboard_object(manifest("Pod", "mnist-tensorboard"))
    assert not is_tensorboard_object(manifest("Service", "mnist"))
