"""What one plan of a large job costs: a ParameterServer job of PS and workers at the spec's bounds
(1000 and 1000 by default), planned as the operator plans it (`disttrain_core.planner.plan`), running
with no pod yet and suspended, beside every object built at once (`desired_objects`, what
`disttrain render` prints) and beside each pod's TF_CONFIG alone written with its own cluster (as the
builders did before `TFConfigs`), side by side in one run; with `--baseline DIR`, that checkout's plans too.

Each side runs in a fresh Python process, which reports its CPU seconds and how far its peak RSS rose
over the process's RSS before the job was planned; the median of ROUNDS rounds is kept.
Run: `python bench/plan_cost.py [--ps N --workers N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROUNDS = 3
PROGRAM = """
import json, resource, sys, time
from datetime import UTC, datetime
from disttrain_core.api.job import DistTrainJob
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.api.spec import ReplicaType
from disttrain_core.builders.objects import desired_objects
from disttrain_core.builders.tfconfig import tf_config
from disttrain_core.planner import plan

side, ps, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
template = {"spec": {"containers": [{"name": "tensorflow", "image": "trainer:1", "command": ["python", "-m", "t"]}]}}
job = DistTrainJob.model_validate({
    "apiVersion": "disttrain.io/v1alpha1", "kind": "DistTrainJob",
    "metadata": {"name": "large", "namespace": "team-a", "uid": "u1", "generation": 1},
    "spec": {
        "strategy": "ParameterServer",
        "runPolicy": {"suspend": side == "a plan, suspended"},
        "replicaSpecs": {
            "Chief": {"replicas": 1, "template": template},
            "PS": {"replicas": ps, "template": template},
            "Worker": {"replicas": workers, "template": template},
        },
    },
})
settings = BuildSettings()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu = time.process_time()
if side == "every object":
    built = len(desired_objects(job, settings))
elif side == "TF_CONFIG per pod":  # each pod's cluster written anew, as the builders did before TFConfigs
    texts = [
        json.dumps(tf_config(job, kind, index, settings), separators=(",", ":"))
        for kind in ReplicaType for index in range(job.spec.replicas(kind))
    ]
    built = len(texts)
else:
    built = len(plan(job, [], [], settings, now=datetime.now(UTC)).create)
cpu = time.process_time() - cpu
rise = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"built": built, "cpu_seconds": cpu, "rss_rise_mib": rise / 1024}))
"""
SIDES = ("TF_CONFIG per pod", "every object", "a plan, running", "a plan, suspended")


def _side(side: str, ps: int, workers: int, source: str | None = None) -> dict[str, float]:
    """One side's figures, in a fresh process; `source`: another checkout whose builders it runs."""
    env = {**os.environ, **({"PYTHONPATH": f"{source}/src:{source}/contract"} if source else {})}
    ran = subprocess.run(
        [sys.executable, "-c", PROGRAM, side, str(ps), str(workers)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    result: dict[str, float] = json.loads(ran.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="bench/plan_cost.py", description=__doc__.split("\n")[0])
    parser.add_argument("--ps", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--baseline", help="another checkout, whose plans run as sides too")
    args = parser.parse_args(argv)
    sides = [(side, side, None) for side in SIDES]
    if args.baseline:
        sides += [(f"baseline: {side}", side, args.baseline) for side in SIDES[2:]]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in sides}
    for _ in range(args.rounds):
        for name, side, source in sides:  # alternating, so that a noisy moment falls on every side alike
            runs[name].append(_side(side, args.ps, args.workers, source))
    lines = [f"a ParameterServer job of 1 chief, {args.ps} PS and {args.workers} workers; medians of {args.rounds}"]
    lines.append(f"{'side':<30} {'objects built':>14} {'CPU s':>8} {'RSS rise MiB':>13}")
    for side, results in runs.items():
        built = int(results[0]["built"])
        cpu = statistics.median(result["cpu_seconds"] for result in results)
        rise = statistics.median(result["rss_rise_mib"] for result in results)
        lines.append(f"{side:<30} {built:>14} {cpu:>8.2f} {rise:>13.1f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
