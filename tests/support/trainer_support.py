"""Real trainer processes for tests: started from a manifest the way `disttrain local run` starts them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from disttrain.local.run import LocalProcess, local_processes
from disttrain_core.api.parsing import parse_job
from disttrain_dev.polling import wait_for
from disttrain_trainer.stand_in import TRAINER_PACE
from support.job_builder import JobBuilder

TRAINER = "disttrain-train"
# The trainer's contract without TensorFlow (trainer_image/disttrain_trainer/stand_in.py), in the trainer image
# and on the process node: what the tests of the operator's decisions run.
STAND_IN = "disttrain-stand-in"
# The stand-in at the trainer's own pace on the digits on two cores, unlimited: a fault lands where it does under
# TensorFlow, in as long (a later `--max-steps-per-second` in a job's args wins).
PACED_STAND_IN = (STAND_IN, "--max-steps-per-second", str(TRAINER_PACE))


def job_manifest(name: str, strategy: str, counts: dict[str, int], args: list[str]) -> dict[str, Any]:
    """A job whose replicas run the trainer with `args`."""
    builder = JobBuilder(name).strategy(strategy)
    for kind, count in counts.items():
        builder.replicas(kind, count, {"image": "trainer", "command": [TRAINER], "args": args})
    return builder.obj()


def events(output: str, kind: str) -> list[dict[str, Any]]:
    found = []
    for line in output.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("event") == kind:
                found.append(record)
    return found


@dataclass
class LocalJob:
    """The replicas of one job as processes, each restartable with the same TF_CONFIG."""

    workdir: Path
    processes: dict[str, LocalProcess]
    running: dict[str, subprocess.Popen[str]] = field(default_factory=dict)
    logs: dict[str, list[Path]] = field(default_factory=dict)

    @classmethod
    def of(cls, manifest: dict[str, Any], workdir: Path) -> LocalJob:
        plan = local_processes(parse_job(manifest), workdir)
        (workdir / "checkpoints").mkdir(parents=True, exist_ok=True)
        return cls(workdir, {process.label: process for process in plan})

    def start(self, label: str, extra_env: dict[str, str] | None = None) -> None:
        process = self.processes[label]
        log = self.workdir / f"{label}.{len(self.logs.get(label, []))}.log"
        self.logs.setdefault(label, []).append(log)
        env = {**os.environ, **process.env, "TF_CPP_MIN_LOG_LEVEL": "2", **(extra_env or {})}
        with log.open("w") as sink:
            self.running[label] = subprocess.Popen(
                process.argv, env=env, cwd=self.workdir, stdout=sink, stderr=subprocess.STDOUT, text=True
            )

    def kill(self, label: str, sig: signal.Signals = signal.SIGKILL) -> None:
        self.running[label].send_signal(sig)
        self.running[label].wait(timeout=60)

    def wait(self, label: str, timeout: float = 300) -> int:
        return self.running[label].wait(timeout=timeout)

    def output(self, label: str) -> str:
        return self.logs[label][-1].read_text(errors="replace")

    def progress(self) -> dict[str, Any]:
        try:
            progress: dict[str, Any] = json.loads((self.workdir / "checkpoints" / "progress.json").read_text())
        except (OSError, ValueError):
            return {}
        return progress

    def wait_for_step(self, step: int, timeout: float = 180) -> int:
        def reached() -> int | None:
            current = int(self.progress().get("step", 0))
            return current if current >= step else None

        return wait_for(f"step {step}", reached, timeout)

    def saved_step(self) -> int:
        """The step of the checkpoint a restart restores: the one TensorFlow's state file names. A save cut
        short by a lost peer may leave its files behind, but the state file names a checkpoint only once
        every file of it is written."""
        state = (self.workdir / "checkpoints" / "ckpt" / "checkpoint").read_text()
        named = re.search(r'^model_checkpoint_path: "(?:.*/)?ckpt-(\d+)"$', state, re.MULTILINE)
        assert named is not None, state
        return int(named[1])

    def stop_all(self) -> None:
        for child in self.running.values():
            if child.poll() is None:
                child.kill()
                child.wait()


def run_trainer(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "disttrain_trainer.main", *args]
    full_env = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
    full_env.update({"TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})})
    return subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=timeout, check=False)
