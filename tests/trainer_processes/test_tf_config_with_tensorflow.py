"""The TF_CONFIG the builders write works with real TensorFlow processes.

In particular the evaluator's place: listed only in its own TF_CONFIG, so a ParameterServer
coordinator (which waits for every task of its cluster spec) does not wait for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from disttrain.local.run import local_processes
from disttrain_core.api.parsing import parse_job
from disttrain_core.api.spec import ReplicaType

TASK = Path(__file__).with_name("tf_task.py")
TEMPLATE = {"spec": {"containers": [{"name": "tensorflow", "image": "trainer", "command": ["unused"]}]}}
TIMEOUT = 240


def _run_cluster(strategy: str, counts: dict[str, int], workdir: Path) -> str:
    """Every task but the evaluator (a side-car that runs no server); the chief's or worker 0's output."""
    manifest = {
        "apiVersion": "disttrain.io/v1alpha1",
        "kind": "DistTrainJob",
        "metadata": {"name": "tf"},
        "spec": {
            "strategy": strategy,
            "replicaSpecs": {kind: {"replicas": count, "template": TEMPLATE} for kind, count in counts.items()},
        },
    }
    tasks = [
        task for task in local_processes(parse_job(manifest), workdir) if task.replica_type is not ReplicaType.EVALUATOR
    ]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
    processes = {
        task.label: subprocess.Popen(
            [sys.executable, str(TASK), strategy],
            env={**env, **task.env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for task in tasks
    }
    try:
        finisher = processes.get("chief-0") or processes["worker-0"]
        output, _ = finisher.communicate(timeout=TIMEOUT)
        assert finisher.returncode == 0, output
        return output
    finally:
        for process in processes.values():
            process.kill()
            process.wait()


def test_parameter_server_with_an_evaluator_trains(tmp_path: Path) -> None:
    output = _run_cluster("ParameterServer", {"Chief": 1, "Worker": 1, "PS": 1, "Evaluator": 1}, tmp_path)
    assert "RESULT 3" in output


def test_multi_worker_mirrored_with_an_evaluator_trains(tmp_path: Path) -> None:
    output = _run_cluster("MultiWorkerMirrored", {"Worker": 2, "Evaluator": 1}, tmp_path)
    assert "RESULT 2" in output
