"""Trainer throughput: MultiWorkerMirrored across processes against one process, at one global batch.

Every configuration trains the same CNN on the same synthetic images with the same global batch;
the trainer's own progress reports give examples per second, of which the first reports (graph
tracing, warm-up) are dropped and the median of the rest is kept.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

WARMUP_REPORTS = 2


@dataclass(frozen=True)
class Setup:
    name: str
    processes: int
    flags: tuple[str, ...] = ()


SETUPS = (
    Setup("one process", 1, ("--strategy", "default")),
    Setup("one process, Mirrored over 2 logical CPUs", 1, ("--strategy", "mirrored", "--logical-cpus", "2")),
    Setup("MultiWorkerMirrored, 2 processes", 2, ("--strategy", "multi-worker-mirrored")),
)


def _ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for probe in sockets:
        probe.bind(("127.0.0.1", 0))
    ports = [int(probe.getsockname()[1]) for probe in sockets]
    for probe in sockets:
        probe.close()
    return ports


def _rates(output: str) -> list[float]:
    reports = [json.loads(line) for line in output.splitlines() if line.startswith('{"event": "progress"')]
    return [report["examplesPerSecond"] for report in reports[WARMUP_REPORTS:] if report["examplesPerSecond"] > 0]


def run(setup: Setup, batch: int, steps: int) -> float:
    """Median examples per second of worker 0 (the reporting task)."""
    flags = ["--model", "cnn", "--dataset", "synthetic", "--input-shape", "32,32,3", "--global-batch-size", str(batch)]
    flags += ["--epochs", "1", "--steps-per-epoch", str(steps), "--log-every", "5"]
    flags += ["--checkpoint-every", str(10 * steps)]  # no checkpoint inside the timed steps
    addresses = [f"127.0.0.1:{port}" for port in _ports(setup.processes)]
    with tempfile.TemporaryDirectory() as folder:
        processes = []
        for index in range(setup.processes):
            env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
            if setup.processes > 1:
                task = {"type": "worker", "index": index}
                env["TF_CONFIG"] = json.dumps({"cluster": {"worker": addresses}, "task": task})
            command = ["disttrain-train", *flags, *setup.flags, "--checkpoint-dir", str(Path(folder) / "ckpt")]
            output = subprocess.PIPE
            processes.append(subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.DEVNULL, text=True))
        outputs = [process.communicate(timeout=1800)[0] for process in processes]
    if any(process.returncode for process in processes):
        raise RuntimeError(f"{setup.name}: a trainer failed")
    return statistics.median(_rates(outputs[0]))


def main(batch: int, steps: int) -> str:
    rates = {}
    for setup in SETUPS:
        rates[setup.name] = run(setup, batch, steps)
        print(f"{setup.name:45} {rates[setup.name]:9.1f} examples/s", flush=True)
    single, multi = rates[SETUPS[0].name], rates[SETUPS[-1].name]
    print(f"{os.cpu_count()} CPUs; global batch {batch}; CNN on 32x32x3 synthetic images", file=sys.stderr)
    return f"trainer batch={batch} mwms/single={multi / single:.2f}"
