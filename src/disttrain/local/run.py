"""`disttrain local run`: every replica of a manifest as a local process, for debugging before submitting.

The processes get what their pods would get (command, args, env, TF_CONFIG from the same builders)
with TF_CONFIG addresses mapped to localhost ports, the checkpoint volume mapped to
`<workdir>/checkpoints` and termination messages to `<workdir>/<task>.termination-message`. Progress
is in `<workdir>/checkpoints/progress.json`, not served over HTTP. Images are not pulled: commands
run in this environment. The outcome follows the operator's rules (the Chief, else worker 0,
decides; PS and Evaluator never count).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from disttrain.local.containers import UnsupportedContainerError, command_line, environment
from disttrain.local.ports import free_port
from disttrain_contract.progress import PROGRESS_PORT_ENV, TERMINATION_MESSAGE_ENV
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType, trainer_container
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.objects import CHECKPOINT_DIR_ENV, pods
from disttrain_core.builders.tfconfig import cluster_spec
from disttrain_core.observed import PodPhase, PodView
from disttrain_core.status_from_pods import evaluation_due, failure, success

POLL_SECONDS = 0.2
GRACE_SECONDS = 10.0


class LocalRunError(ValueError):
    """The manifest cannot run locally (no command, env from Secrets...): says what to change."""


@dataclass(frozen=True)
class LocalOutcome:
    """How a local run ended: 0 when the job succeeded by the operator's rules, else the deciding exit code;
    and each replica's exit code (None: stopped by the run's end) and output, by its label (`worker-0`)."""

    code: int
    exit_codes: dict[str, int | None]
    logs: dict[str, str]


@dataclass(frozen=True)
class LocalProcess:
    label: str
    replica_type: ReplicaType
    index: int
    argv: list[str]
    env: dict[str, str]


def localize(tf_config: str, ports: Mapping[str, int]) -> str:
    """The same TF_CONFIG with every `host:port` of the cluster replaced by its loopback port."""
    config = json.loads(tf_config)
    config["cluster"] = {
        kind: [f"127.0.0.1:{ports[address]}" for address in addresses] for kind, addresses in config["cluster"].items()
    }
    return json.dumps(config, separators=(",", ":"))


def local_processes(job: DistTrainJob, workdir: Path, ports: Mapping[str, int] | None = None) -> list[LocalProcess]:
    """What to run for each replica; pure apart from picking free ports when none are given.

    `ports` maps each cluster address (`{pod}.{job}.{namespace}.svc:{port}`) to a loopback port.
    """
    settings = BuildSettings()
    if ports is None:  # the evaluator's view of the cluster lists every task
        every = cluster_spec(job, ReplicaType.EVALUATOR, settings).values()
        ports = {address: free_port() for group in every for address in group}
    manifests = pods(job, settings)
    result = []
    for manifest in manifests:
        labels = manifest["metadata"]["labels"]
        replica_type = ReplicaType.from_task_type(labels["disttrain.io/replica-type"])
        index = int(labels["disttrain.io/replica-index"])
        container = trainer_container(manifest["spec"]["containers"])
        label = f"{replica_type.task_type}-{index}"
        try:
            argv = list(command_line(container))
            env = environment(container, {})
        except UnsupportedContainerError as error:
            raise LocalRunError(f"{label}: {error}") from error
        if "TF_CONFIG" in env:
            env["TF_CONFIG"] = localize(env["TF_CONFIG"], ports)
        env[CHECKPOINT_DIR_ENV] = str(workdir / "checkpoints")
        env[TERMINATION_MESSAGE_ENV] = str(workdir / f"{label}.termination-message")
        env.pop(PROGRESS_PORT_ENV, None)
        result.append(LocalProcess(label, replica_type, index, argv, env))
    return result


def _stream(label: str, source: IO[str], sink: IO[str], lock: threading.Lock, kept: list[str]) -> None:
    for line in source:
        kept.append(line)
        with lock:
            sink.write(f"[{label}] {line}")
            sink.flush()


def _view(process: LocalProcess, code: int | None, ended: datetime | None) -> PodView:
    phases = {None: PodPhase.RUNNING, 0: PodPhase.SUCCEEDED}
    phase = phases.get(code, PodPhase.FAILED)
    return PodView(
        process.label,
        process.replica_type,
        process.index,
        phase,
        uid=process.label,
        exit_code=code or None,
        finished_at=ended,
    )


def _stop(running: Sequence[subprocess.Popen[str]]) -> None:
    for child in running:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    for child in running:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def run(
    job: DistTrainJob, workdir: Path, out: IO[str] = sys.stdout, env: Mapping[str, str] | None = None
) -> LocalOutcome:
    """Run the job, every process with `env` added to its own."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "checkpoints").mkdir(exist_ok=True)
    plan = local_processes(job, workdir)
    lock = threading.Lock()
    children: list[subprocess.Popen[str]] = []
    threads = []
    logs: dict[str, list[str]] = {process.label: [] for process in plan}
    try:
        for process in plan:
            child = subprocess.Popen(
                process.argv,
                env={**os.environ, **process.env, **(env or {})},
                cwd=workdir,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            children.append(child)
            kept = logs[process.label]
            thread = threading.Thread(target=_stream, args=(process.label, child.stdout, out, lock, kept), daemon=True)
            thread.start()
            threads.append(thread)
        code = _supervise(job, plan, children, out, lock)
    finally:
        ended = {process.label: child.poll() for process, child in zip(plan, children, strict=False)}
        _stop(children)
        for thread in threads:
            thread.join(timeout=5)
    texts = {label: "".join(lines) for label, lines in logs.items()}
    return LocalOutcome(code, {process.label: ended.get(process.label) for process in plan}, texts)


def _supervise(
    job: DistTrainJob,
    plan: list[LocalProcess],
    children: list[subprocess.Popen[str]],
    out: IO[str],
    lock: threading.Lock,
) -> int:
    ended: dict[str, datetime] = {}
    while True:
        codes = [child.poll() for child in children]
        now = datetime.now(UTC)
        for process, code in zip(plan, codes, strict=True):
            if code is not None:
                ended.setdefault(process.label, now)
        views = [_view(process, code, ended.get(process.label)) for process, code in zip(plan, codes, strict=True)]
        outcome = failure(job, views)
        if outcome is not None:
            return _report(out, lock, f"job failed: {outcome.message}", _deciding_code(views))
        won = success(job, views)
        due = evaluation_due(job, views) if won is not None else None  # as the operator: the evaluator's last word
        if won is not None and (due is None or now >= due):
            return _report(out, lock, f"job succeeded: {won.message}", 0)
        stopped = [
            view for view in views if view.phase is PodPhase.FAILED and view.replica_type is not ReplicaType.EVALUATOR
        ]
        if stopped:
            first = stopped[0]
            message = f"{first.name} exited with {first.exit_code}; the operator would restart it, not a local run"
            return _report(out, lock, f"job failed: {message}", first.exit_code or 1)
        if all(code is not None for code in codes):
            return _report(out, lock, "job failed: every process exited without success", 1)
        time.sleep(POLL_SECONDS)


def _deciding_code(views: Sequence[PodView]) -> int:
    return next((view.exit_code for view in views if view.exit_code), 1)


def _report(out: IO[str], lock: threading.Lock, message: str, code: int) -> int:
    with lock:
        out.write(f"[disttrain] {message}\n")
        out.flush()
    return code
