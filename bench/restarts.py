"""Whole-job restarts in place against recreated pods: the bundled MultiWorkerMirrored digits example (two
workers, its checkpoint volume, a checkpoint every 40 steps) whose worker 1 trainer is killed (SIGKILL) a few
times, a checkpoint apart, under this operator with restarts in place and again with them off
(`DISTTRAIN_RESTART_IN_PLACE=false`), one after the other in one run, on the process node and on the real node
(the trainer image in containerd).

- **Recovered**: seconds from a kill to worker 0's first progress report of its next run, whether that is
  the same pod restarted in place or a new pod: a MultiWorkerMirrored step needs every worker, so every
  worker trains again by then. Worker 0's log is read through the API server as it is written (every 0.2 s),
  so each figure is late by that much at most, on both sides alike.
- **Same pods**: whether worker 0 and worker 1 kept their UIDs through every restart.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from harness import TRAINERS, Cluster, OperatorUnderTest, namespace

from disttrain_core.api import yaml_io
from disttrain_core.restarts.record import HEALTHY_RUN
from disttrain_dev import cluster as devcluster
from disttrain_dev import containerd, node_kinds, real_node, versions
from disttrain_kube.api_errors import LogUnreadableError, TransientApiError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "local-multi-worker-digits.yaml"
JOB = "digits-mwms"
POD = "/api/v1/namespaces/{namespace}/pods/{name}"
MODES = {"in-place": "true", "recreate": "false"}
WORKERS = (f"{JOB}-worker-0", f"{JOB}-worker-1")
T = TypeVar("T")


@dataclass(frozen=True)
class Recovery:
    """Seconds from a kill to worker 0's next run: running, `started` (TensorFlow loaded, its peers joined, the
    collective set up), `training` (the checkpoint restored) and its first progress report."""

    running: float
    started: float | None
    training: float | None
    stepping: float


@dataclass(frozen=True)
class Outcome:
    node: str
    mode: str
    recoveries: tuple[Recovery, ...]  # a kill each
    same_pods: bool
    restarts: int  # what the job's status counted

    @property
    def recovered(self) -> list[float]:
        return [recovery.stepping for recovery in self.recoveries]


def job_manifest(epochs: int, trainer: tuple[str, ...]) -> dict[str, Any]:
    """The example, with enough epochs for every kill, running `trainer`'s command."""
    (job,) = yaml_io.load_all(EXAMPLE.read_text())
    (container,) = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    args = container["args"]
    args[args.index("--epochs") + 1] = str(epochs)
    container["command"] = list(trainer)
    return dict(job)


def _pod(bench: Cluster, scope: str, name: str) -> dict[str, Any] | None:
    return bench.kube.read(POD, {"namespace": scope, "name": name})


def _run(pod: dict[str, Any] | None) -> tuple[str, int] | None:
    """The pod's uid and how often its trainer restarted in it, while its trainer runs."""
    if pod is None or pod["metadata"].get("deletionTimestamp"):
        return None
    for status in pod.get("status", {}).get("containerStatuses") or []:
        if status["name"] == "tensorflow" and "running" in (status.get("state") or {}):
            return pod["metadata"]["uid"], int(status.get("restartCount", 0))
    return None


def _events(bench: Cluster, scope: str, name: str) -> list[dict[str, Any]]:
    """The events the pod's current trainer logged so far (none where its log cannot be read yet)."""
    try:
        text = b"".join(bench.kube.pod_log_chunks(scope, name, "tensorflow")).decode(errors="replace")
    except (LogUnreadableError, TransientApiError):
        return []
    return [json.loads(line) for line in text.splitlines() if line.startswith('{"event": ')]


def _progress_steps(bench: Cluster, scope: str, name: str) -> list[int]:
    return [int(event["step"]) for event in _events(bench, scope, name) if event["event"] == "progress"]


def _kill(bench: Cluster, scope: str, node: str, pod: dict[str, Any]) -> None:
    """SIGKILL to the pod's trainer: its process group on the process node, its container's task on the real one."""
    if node == node_kinds.PROCESS:
        folder = devcluster.state_dir() / devcluster.PROCESS_NODE / "pods"
        pid = (folder / f"{scope}_{pod['metadata']['name']}_{pod['metadata']['uid']}" / "tensorflow.pid").read_text()
        os.killpg(int(pid), signal.SIGKILL)
        return
    status = next(s for s in pod["status"]["containerStatuses"] if s["name"] == "tensorflow")
    container = str(status["containerID"]).removeprefix("containerd://")
    files = real_node.NodeFiles(devcluster.state_dir())
    containerd.ctr(files, versions.node_cache_paths(), "tasks", "kill", "--signal", "SIGKILL", container)


def _wait(what: str, check: Callable[[], T | None], limit: float) -> T:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise RuntimeError(f"{what}: not within {limit:.0f} s")


def _next_run(bench: Cluster, scope: str, before: tuple[str, int], killed: float, limit: float) -> Recovery:
    """Worker 0's next run after `before`, followed until its first progress report, each step timed."""
    marks: dict[str, float] = {}
    deadline = killed + limit
    while time.monotonic() < deadline:
        now = _run(_pod(bench, scope, WORKERS[0]))
        if now is not None and now != before:
            marks.setdefault("running", time.monotonic())
            for event in _events(bench, scope, WORKERS[0]):
                marks.setdefault(event["event"], time.monotonic())
            if "progress" in marks:
                after = {key: round(at - killed, 1) for key, at in marks.items()}
                return Recovery(after["running"], after.get("started"), after.get("training"), after["progress"])
        time.sleep(0.2)
    raise RuntimeError(f"worker 0's next run: no progress within {limit:.0f} s")


def _runs(bench: Cluster, scope: str) -> dict[str, tuple[str, int]] | None:
    """Both workers' runs, once both trainers run."""
    runs = {name: _run(_pod(bench, scope, name)) for name in WORKERS}
    return {name: run for name, run in runs.items() if run is not None} if all(runs.values()) else None


def run_once(
    bench: Cluster,
    node: str,
    mode: str,
    *,
    kills: int,
    log: Path,
    limit: float,
    trainer: tuple[str, ...] = TRAINERS["tensorflow"],
) -> Outcome:
    """One job, its worker 1 killed `kills` times, each once worker 0's current run reported 60 steps (it
    restored a checkpoint at most 40 steps back and made one since) and the job ran a while since the last
    (a restart that comes sooner is a quick one, which pauses the job and recreates its pods in either mode)."""
    worker_0, worker_1 = WORKERS
    recoveries: list[Recovery] = []
    with namespace(bench, f"restarts-{mode}", node=node) as scope:
        operator = OperatorUnderTest(bench, [scope], log, env={"DISTTRAIN_RESTART_IN_PLACE": MODES[mode]})
        try:
            path = f"/apis/disttrain.io/v1alpha1/namespaces/{scope}/disttrainjobs"
            bench.kube.request("POST", path, {}, job_manifest(2000, trainer))
            first = _wait("both workers running", lambda: _runs(bench, scope), limit)
            runs, running_since = first, time.monotonic()
            for _ in range(kills):

                def trained_a_while() -> bool:
                    steps = _progress_steps(bench, scope, worker_0)
                    return len(steps) > 1 and steps[-1] - steps[0] >= 60

                _wait("worker 0 training a while", trained_a_while, limit)
                time.sleep(max(0.0, running_since + HEALTHY_RUN.total_seconds() + 5 - time.monotonic()))
                victim = _pod(bench, scope, worker_1)
                assert victim is not None
                killed = time.monotonic()
                _kill(bench, scope, node, victim)
                recovery = _next_run(bench, scope, runs[worker_0], killed, limit)
                recoveries.append(recovery)
                running_since = killed + recovery.stepping
                runs = _wait("both workers running", lambda: _runs(bench, scope), limit)
            job = bench.kube.read(f"{path}/{JOB}", {}) or {}
            same = all(runs[name][0] == first[name][0] for name in WORKERS)
            counted = int(job.get("status", {}).get("restartCount", 0))
            return Outcome(node, mode, tuple(recoveries), same, counted)
        finally:
            operator.stop()


def measure(
    bench: Cluster,
    nodes: list[str],
    kills: int,
    logs: Path,
    limit: float,
    *,
    trainer: tuple[str, ...] = TRAINERS["tensorflow"],
) -> list[Outcome]:
    """On each node, a run with restarts in place and one with pods recreated, one after the other."""
    outcomes = []
    for node in nodes:
        for mode in MODES:
            log = logs / f"restarts-{node}-{mode}.log"
            outcome = run_once(bench, node, mode, kills=kills, log=log, limit=limit, trainer=trainer)
            outcomes.append(outcome)
            print(outcome, flush=True)
    return outcomes


def summary(outcomes: list[Outcome]) -> str:
    """`restarts kills=K process_in-place=S process_recreate=S process_ratio=R ... ` with the median seconds
    from a kill to every worker training again, whether the pods stayed, and the restarts counted."""
    parts = [f"restarts kills={len(outcomes[0].recovered) if outcomes else 0}"]
    by_node: dict[str, dict[str, Outcome]] = {}
    for outcome in outcomes:
        by_node.setdefault(outcome.node, {})[outcome.mode] = outcome
        median = statistics.median(outcome.recovered)
        parts.append(f"{outcome.node}_{outcome.mode}={median:.1f}")
        parts.append(f"{outcome.node}_{outcome.mode}_same_pods={int(outcome.same_pods)}")
        parts.append(f"{outcome.node}_{outcome.mode}_counted={outcome.restarts}")
    for node, modes in by_node.items():
        if len(modes) == len(MODES):
            ratio = statistics.median(modes["in-place"].recovered) / statistics.median(modes["recreate"].recovered)
            parts.append(f"{node}_ratio={ratio:.2f}")
    return " ".join(parts)
