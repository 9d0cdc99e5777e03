"""`disttrain jobs`: the tables admins read, from the objects the API returns; the command's parser,
outputs and completion."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rich.console import RenderableType

from disttrain import DistTrainJob, JobEvent
from disttrain_cli import job_tables
from disttrain_cli.jobs import console, emit
from disttrain_contract.timestamps import format_time
from disttrain_core import summary
from disttrain_core.api.status import Disruption, UnkeptLogs
from support.job_builder import JobBuilder

NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


def _text(renderable: RenderableType, capsys: pytest.CaptureFixture[str]) -> str:
    emit(console(), renderable)  # pytest's capture is no terminal: plain text, as in a pipe
    return capsys.readouterr().out


TEMPLATE = {"spec": {"containers": [{"name": "tensorflow", "image": "trainer"}]}}


def _job(name: str, namespace: str = "team", **status: Any) -> DistTrainJob:
    builder = JobBuilder(name, namespace).metadata(creationTimestamp="2026-01-01T00:00:00Z")
    return builder.counts({"Chief": 1, "Worker": 2, "PS": 1}).status(**status).model()


RUNNING = _job(
    "mnist",
    phase="Running",
    restartCount=1,
    ready="3/4",
    replicaStatuses={"Chief": {"ready": 1}, "Worker": {"ready": 1}, "PS": {"ready": 1}},
    progress={"step": 120, "totalSteps": 300, "loss": 0.3125, "stepsPerSecond": 2.125, "estimatedRemainingSeconds": 84},
    checkpoint={"step": 100, "time": "2026-01-01T00:00:00Z", "path": "ckpt/ckpt-100"},
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


def test_list_shows_ready_pods_restarts_progress_and_age(capsys: pytest.CaptureFixture[str]) -> None:
    table = job_tables.jobs_table([RUNNING, _job("new", namespace="a")], all_namespaces=True, wide=False, now=NOW)
    lines = _text(table, capsys).splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "PHASE", "READY", "RESTARTS", "PROGRESS", "ETA", "AGE"]
    assert lines[1].split() == [
        "a",
        "new",
        "Pending",
        "-",
        "0",
        "-",
        "-",
        "10m",
    ]  # not written yet: Pending, as every view says
    assert lines[2].split() == [
        *("team", "mnist", "Running", "3/4", "1"),
        *("step", "120/300", "loss", "0.3125", "84s", "10m"),
    ]
    assert all(line == line.rstrip() for line in lines)
    assert "\x1b[" not in "".join(lines)  # no colour where the output is not a terminal


def test_wide_adds_strategy_replicas_queue_and_evaluation(capsys: pytest.CaptureFixture[str]) -> None:
    queued = RUNNING.model_copy(deep=True)
    queued.metadata.labels["kueue.x-k8s.io/queue-name"] = "research"
    lines = _text(job_tables.jobs_table([queued], all_namespaces=False, wide=True, now=NOW), capsys).splitlines()
    assert lines[0].split()[-4:] == ["STRATEGY", "REPLICAS", "QUEUE", "EVALUATION"]
    assert "ParameterServer   Chief 1/1, Worker 1/2, PS 1/1   research   step 100 accuracy 0.875" in lines[1]


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(5, "5s"), (119, "119s"), (200, "3m20s"), (600, "10m"), (4 * 3600 + 60, "4h1m"), (30 * 3600, "30h"),
     (3 * 86400 + 3600, "3d1h"), (21 * 86400, "21d")],
)  # fmt: skip
def test_age_is_kubectls_short_duration(seconds: int, shown: str) -> None:
    assert summary.age(NOW - timedelta(seconds=seconds), NOW) == shown


def test_describe_shows_conditions_pods_and_events(capsys: pytest.CaptureFixture[str]) -> None:
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
    text = _text(job_tables.describe(RUNNING, [pod], [event]), capsys)
    assert "Progress:    step 120/300 loss 0.3125" in text
    assert "Time left:   84s left at 2.125 steps/s" in text
    assert "Checkpoint:  step 100 at 2026-01-01T00:00:00Z (ckpt/ckpt-100)" in text
    assert "Evaluation:  step 100 accuracy 0.875" in text
    assert "JobRunning" in text and "the chief is running" in text
    assert "Failed (exit 137, OOMKilled)" in text and "node-a" in text
    assert "2026-01-01T00:00:00Z   Warning   Restarting   DistTrainJob/mnist   worker-1 failed" in text
    assert "Logs not kept" not in text
    missed = [
        UnkeptLogs(replica="worker-0", first_attempt=1, last_attempt=1, reason="away"),
        UnkeptLogs(replica="ps-0", first_attempt=2, last_attempt=4, reason="away"),
    ]
    gapped = RUNNING.model_copy(update={"status": RUNNING.status.model_copy(update={"unkept_logs": missed})})
    assert "Logs not kept: worker-0 attempt 1; ps-0 attempts 2-4" in _text(job_tables.describe(gapped, [], []), capsys)
    assert "Last disruption" not in text


def test_disruptions_show_beside_restarts_and_the_last_one_in_describe(capsys: pytest.CaptureFixture[str]) -> None:
    last = Disruption(reason="EvictionByEvictionAPI", message="mnist-worker-1 was taken away", time=NOW)
    status = RUNNING.status.model_copy(update={"disruptions": 2, "last_disruption": last})
    disrupted = RUNNING.model_copy(update={"status": status})
    lines = _text(job_tables.jobs_table([disrupted], all_namespaces=False, wide=False, now=NOW), capsys).splitlines()
    assert lines[1].split()[3:6] == ["1", "(2", "disrupted)"]
    text = _text(job_tables.describe(disrupted, [], []), capsys)
    assert "Restarts:        1 (2 disrupted)" in text
    assert f"Last disruption: {format_time(NOW)} EvictionByEvictionAPI: mnist-worker-1 was taken away" in text
