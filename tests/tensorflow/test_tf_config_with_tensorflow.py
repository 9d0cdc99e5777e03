"""The TF_CONFIG the builders write works with real TensorFlow processes.

In particular the evaluator's place: listed only in its own TF_CONFIG, so a ParameterServer
coordinator (which waits for every task of its cluster spec) does not wait for it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from disttrain_operator.api.spec import ReplicaType
from disttrain_operator.builders.settings import BuildSettings
from disttrain_operator.builders.tfconfig import tf_config
from disttrain_operator.render import parse_job

pytest.importorskip("tensorflow", reason="the trainer extra (tensorflow-cpu) is not installed")

TASK = Path(__file__).with_name("tf_task.py")
TEMPLATE = {"spec": {"containers": [{"name": "tensorflow", "image": "trainer"}]}}
TIMEOUT = 240


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _localhost(config: dict[str, Any], ports: dict[str, str]) -> dict[str, Any]:
    """The same TF_CONFIG with each service address mapped to a loopback port."""
    cluster = {kind: [ports[address] for address in addresses] for kind, addresses in config["cluster"].items()}
    return {**config, "cluster": cluster}


def _run_cluster(strategy: str, counts: dict[str, int]) -> str:
    manifest = {
        "apiVersion": "disttrain.io/v1alpha1",
        "kind": "DistTrainJob",
        "metadata": {"name": "tf", "namespace": "ns"},
        "spec": {
            "strategy": strategy,
            "replicaSpecs": {kind: {"replicas": count, "template": TEMPLATE} for kind, count in counts.items()},
        },
    }
    job = parse_job(manifest)
    tasks = [(kind, index) for kind in ReplicaType for index in range(job.spec.replicas(kind))]
    configs = {task: tf_config(job, *task, BuildSettings()) for task in tasks}
    addresses = {
        address for config in configs.values() if config for group in config["cluster"].values() for address in group
    }
    ports = {address: f"127.0.0.1:{_free_port()}" for address in sorted(addresses)}
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0", "CUDA_VISIBLE_DEVICES": ""}
    processes: dict[tuple[ReplicaType, int], subprocess.Popen[str]] = {}
    try:
        for task, config in configs.items():
            if task[0] is ReplicaType.EVALUATOR:
                continue  # a side-car that runs no server: training must not wait for it
            assert config is not None
            task_env = {**env, "TF_CONFIG": json.dumps(_localhost(config, ports))}
            processes[task] = subprocess.Popen(
                [sys.executable, str(TASK), strategy],
                env=task_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        finisher = (ReplicaType.CHIEF, 0) if (ReplicaType.CHIEF, 0) in processes else (ReplicaType.WORKER, 0)
        output, _ = processes[finisher].communicate(timeout=TIMEOUT)
        assert processes[finisher].returncode == 0, output
        return output
    finally:
        for process in processes.values():
            process.kill()
            process.wait()


def test_parameter_server_with_an_evaluator_trains() -> None:
    output = _run_cluster("ParameterServer", {"Chief": 1, "Worker": 1, "PS": 1, "Evaluator": 1})
    assert "RESULT 3" in output


def test_multi_worker_mirrored_with_an_evaluator_trains() -> None:
    output = _run_cluster("MultiWorkerMirrored", {"Worker": 2, "Evaluator": 1})
    assert "RESULT 2" in output
