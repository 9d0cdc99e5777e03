"""`disttrain jobs`: the tables admins read, from the objects the API returns."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from disttrain import DistTrainJob, JobEvent

from disttrain_operator.cli.jobs import describe_text, list_table

TEMPLATE = {"spec": {"containers": [{"name": "tensorflow", "image": "trainer"}]}}


def _job(name: str, namespace: str = "team", **status: Any) -> DistTrainJob:
    replicas = {
        "Chief": {"template": TEMPLATE},
        "Worker": {"replicas": 2, "template": TEMPLATE},
        "PS": {"template": TEMPLATE},
    }
    return DistTrainJob.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"strategy": "ParameterServer", "replicaSpecs": replicas},
            "status": status,
        }
    )


RUNNING = _job(
    "mnist",
    phase="Running",
    restartCount=1,
    replicaStatuses={"Chief": {"ready": 1}, "Worker": {"ready": 1}, "PS": {"ready": 1}},
    progress={"step": 120, "totalSteps": 300, "loss": 0.3125},
    evaluation={"step": 100, "metrics": {"accuracy": 0.875}, "final": False},
    conditions=[
        {
            "type": "Running",
            "status": "True",
            "reason": "JobRunning",
            "message": "the chief is running",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ],
)


def test_list_shows_ready_replicas_restarts_and_progress() -> None:
    table = list_table([RUNNING, _job("new", namespace="a")], all_namespaces=True).splitlines()
    assert table[0].split() == ["NAMESPACE", "NAME", "PHASE", "REPLICAS", "(READY)", "RESTARTS", "PROGRESS"]
    assert table[1].split()[:3] == ["a", "new", "-"]
    assert "Chief 1/1, Worker 1/2, PS 1/1" in table[2]
    assert table[2].split("PS 1/1")[1].split() == ["1", "step", "120/300", "loss", "0.3125"]


def test_describe_shows_conditions_pods_and_events() -> None:
    pod = {
        "metadata": {"name": "mnist-worker-1"},
        "spec": {"nodeName": "node-a"},
        "status": {
            "phase": "Failed",
            "podIP": "10.0.0.9",
            "containerStatuses": [
                {"restartCount": 0, "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
            ],
        },
    }
    event = JobEvent(datetime(2026, 1, 1, tzinfo=UTC), "Warning", "Restarting", "worker-1 failed", "DistTrainJob/mnist")
    text = describe_text(RUNNING, [pod], [event])
    assert "Progress:   step 120/300 loss 0.3125" in text
    assert "Evaluation: step 100 accuracy 0.875" in text
    assert "JobRunning" in text and "the chief is running" in text
    assert "Failed (exit 137, OOMKilled)" in text and "node-a" in text
    assert "2026-01-01T00:00:00Z   Warning   Restarting   DistTrainJob/mnist   worker-1 failed" in text
