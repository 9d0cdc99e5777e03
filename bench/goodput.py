"""Goodput under preemption: a MultiWorkerMirrored job whose worker 1 is evicted every N seconds, counted from
worker 0's first step (at most a given number of times, so that a job that loses all its steps at each still
ends), on the process node, with real TensorFlow: under disttrain, and the same trainer and job as a TFJob
under training-operator, one after the other in one run.

- **Goodput**: the uninterrupted run's time (creation to success) over the preempted run's: the share of
  the preempted run's time that went into the final model; 1.0 means the preemptions cost nothing.
- **Steps redone per preemption**: the steps worker 0 trained over all its attempts, less the job's
  steps, over the evictions (from its log: each attempt's start step and the last step it reached).
- **Where a restart's time goes**, from each eviction to worker 0's next attempt on the node (the old
  pods saved, left and were replaced, or its container started again in place), to its `started`
  (TensorFlow loaded, the peers joined, the collective set up), to its `training` (the checkpoint
  restored) and to its first step's report; the benchmark reads worker 0's log as it is written.

Periodic checkpoints are beyond the job (every 100,000 steps), as on a job whose checkpoints are costly: what a
preemption costs is whatever the trainer and the operator make of it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import TRAINERS, Cluster, Side, namespace

from disttrain_dev import cluster as devcluster
from disttrain_dev import node_kinds

STEPS_PER_EPOCH = 1437 // 64  # the bundled digits' training split at the default batch
JOB = "goodput"
CHECKPOINT_MOUNT = "/checkpoints"


@dataclass(frozen=True)
class Setup:
    epochs: int  # the job's length
    most: int  # evictions in one run, at most
    limit: float = 1800.0  # seconds a run may take before the benchmark gives up on it
    trainer: tuple[str, ...] = TRAINERS["tensorflow"]  # the trainer's command (`--trainer`)


@dataclass(frozen=True)
class Restart:
    """Seconds from an eviction to worker 0's next attempt: on the node, started, training, stepping."""

    placed: float
    started: float | None
    training: float | None
    stepping: float | None


@dataclass(frozen=True)
class Outcome:
    seconds: float  # creation to its end
    evictions: int
    trained: int  # steps worker 0 trained, over all its attempts
    restarts: int | None  # what the job's status counts against its backoffLimit (training-operator keeps none)
    failed: bool = False  # the job failed instead: its time counts for nothing
    timings: tuple[Restart, ...] = ()


@dataclass
class _Attempt:
    seen: float  # when its log appeared on the node
    read: int = 0  # how far its log was read
    marks: dict[str, float] = field(default_factory=dict)  # the first time of each event of interest
    runs: list[tuple[int, int]] = field(default_factory=list)  # (start step, last step reached) in its log


_MARKS = {"started": "started", "training": "training", "progress": "stepping"}


class Follower:
    """Worker 0's attempts on the process node, followed as they run: when each appeared, started, restored
    and reported its first step (the trainer's log lines carry no time), and the steps each trained. An attempt
    is one log file: a new pod's, or a run of the same pod's container (the node moves the run before a restart
    to `tensorflow.previous.log`, where its last lines are read)."""

    def __init__(self, scope: str) -> None:
        self._pattern = f"{scope}_{JOB}-worker-0_*"
        self._attempts: list[_Attempt] = []
        self._current: dict[Path, tuple[int, _Attempt]] = {}  # each pod folder's log now: its inode, its attempt

    def poll(self) -> None:
        now = time.monotonic()
        for folder in (devcluster.state_dir() / devcluster.PROCESS_NODE / "pods").glob(self._pattern):
            try:
                inode = (folder / "tensorflow.log").stat().st_ino
            except FileNotFoundError:
                continue
            current = self._current.get(folder)
            if current is not None and current[0] != inode:  # the container ran again: read its last run's end
                self._read(folder / "tensorflow.previous.log", current, now)
                current = None
            if current is None:
                current = self._current[folder] = (inode, _Attempt(now))
                self._attempts.append(current[1])
            self._read(folder / "tensorflow.log", current, now)

    def _read(self, path: Path, current: tuple[int, _Attempt], now: float) -> None:
        inode, attempt = current
        try:
            with path.open("rb") as log:
                if os.fstat(log.fileno()).st_ino != inode:
                    return
                log.seek(attempt.read)
                text = log.read()
        except FileNotFoundError:
            return
        complete = text[: text.rfind(b"\n") + 1]
        attempt.read += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            record = json.loads(line) if line.startswith("{") else {}
            event = record.get("event")
            if event in _MARKS:
                attempt.marks.setdefault(_MARKS[event], now)
            if event == "training":
                attempt.runs.append((int(record["start"]), int(record["start"])))
            elif event in ("progress", "finished") and attempt.runs:
                step = int(record.get("step", record.get("steps", 0)))
                attempt.runs[-1] = (attempt.runs[-1][0], max(attempt.runs[-1][1], step))

    def stepping(self) -> bool:
        """Whether worker 0 reported a step yet: before it, an eviction may cost nothing (its peer still starting)."""
        return any("stepping" in attempt.marks for attempt in self._attempts)

    def trained(self) -> int:
        """The steps worker 0 trained over all its attempts (poll once more after the job ended)."""
        return sum(reached - first for attempt in self._attempts for first, reached in attempt.runs)

    def restarts(self, evictions: list[float]) -> tuple[Restart, ...]:
        """Each eviction's next attempt, as seconds after the eviction."""
        found = []
        attempts = sorted(self._attempts, key=lambda attempt: attempt.seen)
        for evicted in evictions:
            after = next((attempt for attempt in attempts if attempt.seen > evicted), None)
            if after is not None:
                marks = [_since(after.marks.get(mark), evicted) for mark in ("started", "training", "stepping")]
                found.append(Restart(round(after.seen - evicted, 1), *marks))
        return tuple(found)


def _since(at: float | None, evicted: float) -> float | None:
    return None if at is None else round(at - evicted, 1)


def _trainer_args(epochs: int) -> list[str]:
    return ["--epochs", str(epochs), "--checkpoint-every", "100000", "--log-every", "5", "--collective", "RING"]


def _template(side: Side, setup: Setup, checkpoints: Path) -> dict[str, Any]:
    args = _trainer_args(setup.epochs)
    container: dict[str, Any] = {
        "name": "tensorflow",
        "image": "disttrain/trainer:0.1.0",
        "command": list(setup.trainer),
    }
    # Both sides' checkpoints go to a folder of the node (training-operator makes no volume; a claim would
    # add its binding to disttrain's start-up alone).
    args += ["--checkpoint-dir", CHECKPOINT_MOUNT]
    container["volumeMounts"] = [{"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT}]
    spec: dict[str, Any] = {"containers": [container], "automountServiceAccountToken": False}
    spec["volumes"] = [{"name": "checkpoints", "hostPath": {"path": str(checkpoints)}}]
    container["args"] = args
    if side.trainer_source:  # the process node runs the command from this environment: the checkout's modules first
        path = f"{side.trainer_source}/trainer_image:{side.trainer_source}/contract"
        container["env"] = [{"name": "PYTHONPATH", "value": path}]
    return {"spec": spec}


def job(side: Side, setup: Setup, checkpoints: Path) -> dict[str, Any]:
    """Two workers, restarted on the trainer's retryable exit codes (as training-operator does for an evicted
    pod under ExitCode alone: under OnFailure it fails the job) and without end."""
    template = _template(side, setup, checkpoints)
    replicas = {"Worker": {"replicas": 2, "restartPolicy": "ExitCode", "template": template}}
    run_policy = {"backoffLimit": 1000, "cleanPodPolicy": "Running"}
    if side.peer:
        spec = {"tfReplicaSpecs": replicas, "runPolicy": run_policy}
        return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": JOB}, "spec": spec}
    spec = {"strategy": "MultiWorkerMirrored", "replicaSpecs": replicas, "runPolicy": run_policy}
    return {"apiVersion": "disttrain.io/v1alpha1", "kind": "DistTrainJob", "metadata": {"name": JOB}, "spec": spec}


def _ended(body: dict[str, Any] | None) -> str | None:
    """Succeeded or Failed, once the job's condition says so."""
    conditions = ((body or {}).get("status") or {}).get("conditions") or []
    held = {c.get("type") for c in conditions if c.get("status") == "True"}
    return next((kind for kind in ("Succeeded", "Failed") if kind in held), None)


def _evictable(bench: Cluster, scope: str, pod: str) -> bool:
    body = bench.kube.read("/api/v1/namespaces/{namespace}/pods/{name}", {"namespace": scope, "name": pod})
    status = (body or {}).get("status") or {}
    return body is not None and status.get("phase") == "Running" and not body["metadata"].get("deletionTimestamp")


def _evict(bench: Cluster, scope: str, pod: str) -> bool:
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": scope}}
    status, _ = bench.kube.request("POST", f"/api/v1/namespaces/{scope}/pods/{pod}/eviction", {}, eviction)
    return status < 300


def run_once(bench: Cluster, side: Side, setup: Setup, every: float | None, log: Path) -> Outcome:
    """One job from creation to its end, worker 1 evicted every `every` seconds (None: never)."""
    version, resource = side.jobs
    with namespace(bench, "goodput", node=node_kinds.PROCESS) as scope:
        under_test = side.start(bench, scope, log)
        try:
            checkpoints = log.parent / f"checkpoints-{scope}"
            checkpoints.mkdir(parents=True, exist_ok=True)
            path = f"/apis/{version}/namespaces/{scope}/{resource}"
            follower = Follower(scope)
            began = time.monotonic()
            bench.kube.request("POST", path, {}, job(side, setup, checkpoints))
            interval = every or 0.0
            evicted: list[float] = []
            next_at: float | None = None
            while (ended := _ended(bench.kube.read(f"{path}/{JOB}", {}))) is None:
                now = time.monotonic()
                follower.poll()
                if now - began > setup.limit:
                    raise RuntimeError(f"{side.name}: the job did not end within {setup.limit:.0f} s")
                if next_at is None and follower.stepping():
                    next_at = now + interval
                due = every is not None and len(evicted) < setup.most and next_at is not None and now >= next_at
                if due and _evictable(bench, scope, f"{JOB}-worker-1") and _evict(bench, scope, f"{JOB}-worker-1"):
                    evicted.append(now)
                    next_at = now + interval
                time.sleep(0.2)
            seconds = time.monotonic() - began
            status = (bench.kube.read(f"{path}/{JOB}", {}) or {}).get("status") or {}
        finally:
            under_test.stop()
        follower.poll()  # the lines written since the last poll, the last attempt's end among them
        trained = follower.trained()
        counted = None if side.peer else int(status.get("restartCount", 0))
        failed = ended == "Failed"
        return Outcome(seconds, len(evicted), trained, counted, failed, follower.restarts(evicted))


def measure(
    bench: Cluster, setup: Setup, intervals: list[float], sides: list[Side], logs: Path
) -> tuple[dict[str, dict[str, Outcome]], int]:
    """Each side's uninterrupted run and one run per interval, sides alternating."""
    outcomes: dict[str, dict[str, Outcome]] = {side.name: {} for side in sides}
    for label, every in [("clean", None), *((f"{int(n)}", n) for n in intervals)]:
        for side in sides:
            outcome = run_once(bench, side, setup, every, logs / f"goodput-{side.name}-{label}.log")
            outcomes[side.name][label] = outcome
            print(f"{side.name} {label}: {outcome}", flush=True)
    return outcomes, setup.epochs * STEPS_PER_EPOCH


def summary(outcomes: dict[str, dict[str, Outcome]], total: int, intervals: list[float]) -> str:
    """`goodput steps=S every=30,60 operator_30=G operator_30_redone=R operator_30_evictions=E ...`, and the
    mean seconds from an eviction to worker 0's next first step (`_resumed`); a job that failed instead shows
    goodput 0 and `_failed=1`."""
    parts = [f"goodput steps={total} every={','.join(str(int(n)) for n in intervals)}"]
    for side, runs in outcomes.items():
        clean = runs["clean"]
        for label, outcome in runs.items():
            if label == "clean":
                continue
            parts.append(f"{side}_{label}={0.0 if outcome.failed else clean.seconds / outcome.seconds:.2f}")
            if outcome.failed:  # what it trained is lost with the job
                parts.append(f"{side}_{label}_failed=1 {side}_{label}_evictions={outcome.evictions}")
                continue
            redone = (outcome.trained - total) / outcome.evictions if outcome.evictions else 0.0
            parts.append(f"{side}_{label}_redone={redone:.1f} {side}_{label}_evictions={outcome.evictions}")
            if outcome.restarts is not None:
                parts.append(f"{side}_{label}_counted={outcome.restarts}")
            stepping = [timing.stepping for timing in outcome.timings if timing.stepping is not None]
            if stepping:
                parts.append(f"{side}_{label}_resumed={sum(stepping) / len(stepping):.1f}")
    return " ".join(parts)
