"""What a steady reconcile's pure steps cost: `decide_next` and `status_after_acts` (`disttrain_core.job_step`)
over a running MultiWorkerMirrored job of N ready workers whose pods changed nothing, with a new progress
report, as the operator runs them on every report it polls; with `--baseline DIR`, that checkout's steps too.

Each side runs in a fresh Python process and times REPEATS steps, a round after the other sides' (a noisy
moment falls on every side alike); the median of ROUNDS rounds is kept.
Run: `python bench/reconcile_step.py [--workers N] [--baseline DIR]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROUNDS = 5
REPEATS = 50
PROGRAM = """
import json, sys, time
from datetime import UTC, datetime, timedelta
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.status import Progress
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.job_step import Acts, Observed, Remembered, decide_next, status_after_acts
from disttrain_core.observed import PodPhase, PodView
from disttrain_core.progress import Report
from disttrain_core import status_from_pods

workers, repeats = int(sys.argv[1]), int(sys.argv[2])
template = {"spec": {"containers": [{"name": "tensorflow", "image": "trainer:1"}]}}
job = DistTrainJob.model_validate({
    "apiVersion": "disttrain.io/v1alpha1", "kind": "DistTrainJob",
    "metadata": {"name": "steady", "namespace": "team-a", "uid": "u1", "generation": 1},
    "spec": {
        "strategy": "MultiWorkerMirrored",
        "replicaSpecs": {"Worker": {"replicas": workers, "template": template}},
    },
})
start = datetime(2026, 1, 1, tzinfo=UTC)
pods = [
    PodView(f"steady-worker-{index}", ReplicaType.WORKER, index, PodPhase.RUNNING, uid=f"u-{index}", ready=True)
    for index in range(workers)
]
if hasattr(status_from_pods, "aggregated"):
    first = status_from_pods.aggregated(job, pods, created=True, now=start).status
else:  # a baseline checkout from before the aggregation returned its stall reading too
    first = status_from_pods.aggregate(job, pods, created=True, now=start)
job = job.model_copy(update={"status": first})
settings = BuildSettings()
cpu = time.process_time()
for step in range(repeats):
    now = start + timedelta(seconds=step + 1)
    report = Report(Progress(step=step + 1, total_steps=10_000, loss=0.5, update_time=now))
    observed = Observed(pods, [], reported=report, answered=now)
    status, plan = decide_next(job, observed, Remembered(), settings, now=now)
    status = status_after_acts(job, status, plan, observed, Acts(created_all=True), settings=settings, now=now)
    job = job.model_copy(update={"status": status})
print(json.dumps({"ms_per_step": (time.process_time() - cpu) / repeats * 1000}))
"""


def _side(workers: int, repeats: int, source: str | None = None) -> float:
    """One side's CPU milliseconds a step, in a fresh process; `source`: another checkout whose core it runs."""
    env = {**os.environ, **({"PYTHONPATH": f"{source}/src:{source}/contract"} if source else {})}
    ran = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(workers), str(repeats)], capture_output=True, text=True, check=True, env=env
    )
    return float(json.loads(ran.stdout.strip().splitlines()[-1])["ms_per_step"])


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="bench/reconcile_step.py", description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--baseline", help="another checkout, whose steps run as a side too")
    args = parser.parse_args(argv)
    sides: list[tuple[str, str | None]] = [("this checkout", None)]
    if args.baseline:
        sides.append((f"baseline {args.baseline}", args.baseline))
    runs: dict[str, list[float]] = {name: [] for name, _ in sides}
    for _ in range(args.rounds):
        for name, source in sides:
            runs[name].append(_side(args.workers, args.repeats, source))
    medians = {name: statistics.median(results) for name, results in runs.items()}
    lines = [f"a steady MultiWorkerMirrored job of {args.workers} ready workers; medians of {args.rounds} rounds"]
    lines += [f"{name:<40} {ms:>8.2f} CPU ms a step" for name, ms in medians.items()]
    if args.baseline:
        lines.append(f"this checkout / baseline: {medians['this checkout'] / medians[sides[1][0]]:.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
