"""Benchmarks of the operator against the local cluster: `python bench/run.py admission --jobs 50`.

Each prints what it measured and, as its last line, one summary the README and docs/benchmarks.md
quote. Ratios are taken side by side in one run, rounds alternating, so a noisy machine slows both
sides alike. Nothing here asserts a time: tests never do.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trainer
from harness import (
    PODS_PER_JOB,
    Cluster,
    OperatorUnderTest,
    Watch,
    apiserver_requests,
    bench_job,
    ended_status,
    ensure_capacity,
    local_cluster,
    namespace,
    parallel,
    percentile,
    running_status,
    set_pod_status,
    wait,
)

from disttrain_operator.builders.settings import BuildSettings
from disttrain_operator.render import render_objects

LOGS = Path(tempfile.gettempdir()) / "disttrain-bench"


def _when_all_exist(pods: Watch, services: Watch, jobs: int, timeout: float) -> float:
    """The arrival time of the last pod or Service the jobs need."""

    def arrivals(watch: Watch, needed: int) -> list[float]:
        return sorted(event.at for event in watch.snapshot() if event.type == "ADDED")[:needed]

    needed = (jobs * PODS_PER_JOB, jobs)
    wait("every pod and Service", lambda: (len(pods.added()), len(services.added())) >= needed, timeout, 0.05)
    return max(arrivals(pods, needed[0])[-1], arrivals(services, needed[1])[-1])


Tasks = list[Callable[[], object]]


def _timed_admission(bench: Cluster, jobs: int, prefix: str, submit: Callable[[str], Tasks]) -> float:
    """Seconds from the first request until every pod and Service of `jobs` jobs exists."""
    with namespace(bench, prefix) as scope:
        operator = OperatorUnderTest(bench, scope, LOGS / f"{scope}.log") if prefix == "operator" else None
        pods = Watch(bench, f"/api/v1/namespaces/{scope}/pods").start()
        services = Watch(bench, f"/api/v1/namespaces/{scope}/services").start()
        try:
            tasks = submit(scope)
            start = time.monotonic()
            parallel(tasks)
            return _when_all_exist(pods, services, jobs, timeout=60 + jobs) - start
        finally:
            pods.stop()
            services.stop()
            if operator is not None:
                operator.stop()


def _through_the_operator(bench: Cluster, jobs: int) -> Callable[[str], Tasks]:
    return lambda scope: [partial(bench.kube.create, bench_job(f"job-{i}", scope)) for i in range(jobs)]


def _by_a_plain_client(bench: Cluster, jobs: int) -> Callable[[str], Tasks]:
    """The floor: the same job objects, then the same Services and pods, from as many threads as kopf has."""

    def one_job(scope: str, index: int) -> None:
        job = bench_job(f"job-{index}", scope)
        bench.kube.create(job)
        for item in render_objects(json.dumps(job), BuildSettings(), namespace=scope):
            item["metadata"].pop("ownerReferences", None)  # no uid to point at without reading the job back
            bench.kube.create(item)

    return lambda scope: [partial(one_job, scope, i) for i in range(jobs)]


def admission(args: argparse.Namespace) -> str:
    bench = local_cluster()
    ensure_capacity(bench, args.jobs * PODS_PER_JOB)
    measured: dict[str, list[float]] = {"operator": [], "floor": []}
    for round_number in range(args.rounds):
        for side, submit in (("operator", _through_the_operator), ("floor", _by_a_plain_client)):
            seconds = _timed_admission(bench, args.jobs, side, submit(bench, args.jobs))
            measured[side].append(seconds)
            print(f"round {round_number + 1} {side}: {seconds:.2f} s", flush=True)
    operator, floor = (statistics.median(measured[side]) for side in ("operator", "floor"))
    objects = f"{args.jobs * PODS_PER_JOB} pods and {args.jobs} Services"
    print(f"median: operator {operator:.2f} s, floor {floor:.2f} s, for {objects}")
    return f"admission jobs={args.jobs} operator/floor={operator / floor:.2f}"


def _play_kubelet_start(bench: Cluster, scope: str, pods: Watch, expected: int) -> None:
    """Report every pod Running as it is created, until `expected` pods have run."""
    started: set[str] = set()

    def start_new() -> bool:
        fresh = {(event.name, event.uid) for event in pods.snapshot() if event.type == "ADDED"}
        todo = [name for name, uid in fresh if uid not in started]
        parallel([partial(set_pod_status, bench, scope, name, running_status()) for name in todo])
        started.update(uid for _, uid in fresh)
        return len(started) >= expected

    wait("every pod running", start_new, timeout=60 + expected / 5, interval=0.2)


def _replacement_latency(pods: Watch, victim: str, old_uid: str, timeout: float = 30) -> float:
    """From the watch's sight of the victim Failed to its replacement's creation, both on the same stream."""

    def seen() -> tuple[float, float] | None:
        events = pods.snapshot()
        failed = next((e.at for e in events if e.uid == old_uid and e.phase == "Failed"), None)
        added = next((e.at for e in events if e.name == victim and e.type == "ADDED" and e.uid != old_uid), None)
        return (failed, added) if failed is not None and added is not None else None

    wait(f"{victim} replaced", seen, timeout=timeout, interval=0.05)
    failed, added = seen()  # type: ignore[misc]
    return added - failed


@dataclass
class _Scene:
    """A namespace with room for the jobs, the operator for it, and watches on its pods and jobs."""

    bench: Cluster
    scope: str
    operator: OperatorUnderTest
    pods: Watch
    jobs: Watch

    def start_jobs(self, count: int) -> list[str]:
        """Submit `count` jobs, play the kubelet until their pods run, and wait until the operator
        has seen it all (every job Running); returns their names."""
        names = [f"job-{i}" for i in range(count)]
        parallel([partial(self.bench.kube.create, bench_job(name, self.scope, kubelet=False)) for name in names])
        _play_kubelet_start(self.bench, self.scope, self.pods, count * PODS_PER_JOB)
        self.wait_for_phase("Running", count)
        return names

    def wait_for_phase(self, phase: str, count: int) -> None:
        wait(f"{count} jobs {phase}", lambda: list(_phases(self.jobs).values()).count(phase) == count, timeout=600)


@contextmanager
def _scene(prefix: str, jobs: int) -> Iterator[_Scene]:
    bench = local_cluster()
    ensure_capacity(bench, jobs * PODS_PER_JOB)
    with namespace(bench, prefix) as scope:
        operator = OperatorUnderTest(bench, scope, LOGS / f"{scope}.log")
        pods = Watch(bench, f"/api/v1/namespaces/{scope}/pods").start()
        watched = Watch(bench, f"/apis/disttrain.io/v1alpha1/namespaces/{scope}/disttrainjobs").start()
        try:
            yield _Scene(bench, scope, operator, pods, watched)
        finally:
            pods.stop()
            watched.stop()
            operator.stop()


def latency(args: argparse.Namespace) -> str:
    """Pods fail one after another across `jobs` running jobs; each replacement is timed."""
    with _scene("latency", args.jobs) as scene:
        scene.start_jobs(args.jobs)
        time.sleep(5)  # quiet: the operator has nothing left to do
        uids = {event.name: event.uid for event in scene.pods.snapshot() if event.type == "ADDED"}
        victims = [f"job-{(i * 7) % args.jobs}-worker-{i % 4}" for i in range(args.failures)]
        for victim in victims:
            set_pod_status(scene.bench, scene.scope, victim, ended_status(137))
            time.sleep(1 / args.rate)
        seconds = [_replacement_latency(scene.pods, victim, uids[victim]) for victim in victims]
        usage = scene.operator.usage()
    p50, p99 = percentile(seconds, 0.5), percentile(seconds, 0.99)
    print(f"{len(seconds)} replacements among {args.jobs} jobs at {args.rate}/s: max {max(seconds):.3f} s")
    print(f"operator: {usage.peak_rss_mb:.0f} MB peak RSS, {usage.cpu_seconds:.1f} CPU s")
    return f"latency jobs={args.jobs} p50={p50:.3f}s p99={p99:.3f}s"


def _phases(watch: Watch) -> dict[str, str]:
    """The latest phase the watch saw of each object, by name."""
    latest: dict[str, str] = {}
    for event in watch.snapshot():
        if event.phase:
            latest[event.name] = event.phase
    return latest


def _deleted(watch: Watch) -> int:
    return sum(event.type == "DELETED" for event in watch.snapshot())


# The fewest writes one job's lifecycle needs: its Service and 7 pods; 3 status writes (Created,
# Running, Succeeded); at the end, the 6 pods still running (4 workers, 2 PS) deleted.
MINIMUM_WRITES = 1 + PODS_PER_JOB + 3 + (PODS_PER_JOB - 1)
OBJECTS = {("", "pods"), ("", "services"), ("", "events"), ("disttrain.io", "disttrainjobs")}


def api(args: argparse.Namespace) -> str:
    """Requests per job from create to Succeeded to deleted, from kube-apiserver's own counters."""
    with _scene("api", args.jobs) as scene:
        bench, scope = scene.bench, scene.scope
        time.sleep(2)
        before = apiserver_requests(bench)
        names = scene.start_jobs(args.jobs)
        parallel([partial(set_pod_status, bench, scope, f"{name}-chief-0", ended_status(0)) for name in names])
        scene.wait_for_phase("Succeeded", args.jobs)
        wait("running pods cleaned up", lambda: _deleted(scene.pods) == args.jobs * (PODS_PER_JOB - 1))
        parallel([partial(bench.kube.delete_job, scope, name) for name in names])
        wait("every pod gone", lambda: _deleted(scene.pods) == args.jobs * PODS_PER_JOB)
        time.sleep(2)  # the operator's last writes land
        delta = apiserver_requests(bench) - before
    # Requests the benchmark made itself, and the garbage collector's deletion of each finished chief.
    others = {
        ("POST", "disttrain.io", "disttrainjobs", ""): args.jobs,
        ("DELETE", "disttrain.io", "disttrainjobs", ""): args.jobs,
        ("PATCH", "", "pods", "status"): args.jobs * (PODS_PER_JOB + 1),
        ("DELETE", "", "pods", ""): args.jobs,
    }
    print(f"{'verb':8} {'resource':32} {'all':>6} {'operator':>9} {'per job':>8}")
    operator_total = writes = 0.0
    for (verb, group, resource, subresource), count in sorted(delta.items()):
        if (group, resource) not in OBJECTS or (verb in ("WATCH", "LIST") and count == 0):
            continue
        own = count - others.get((verb, group, resource, subresource), 0)
        per_job = own / args.jobs
        operator_total += per_job
        writes += per_job if verb in ("POST", "PATCH", "PUT", "DELETE") and resource != "events" else 0
        name = f"{resource}/{subresource}" if subresource else resource
        print(f"{verb:8} {name:32} {count:6} {own:9} {per_job:8.2f}")
    print(f"operator per job: {operator_total:.1f} requests, {writes:.1f} writes besides Events")
    return f"api jobs={args.jobs} requests/job={operator_total:.1f} writes/job={writes:.1f} minimum={MINIMUM_WRITES}"


def footprint(args: argparse.Namespace) -> str:
    """The operator's memory and CPU while `jobs` jobs are created, run, lose pods and run on."""
    with _scene("footprint", args.jobs) as scene:
        phases: list[tuple[str, float, float, float]] = []
        start = scene.operator.usage()

        def phase(name: str, began: float) -> None:
            usage = scene.operator.usage()
            phases.append((name, time.monotonic() - began, usage.rss_mb, usage.cpu_seconds))
            took = phases[-1][1]
            print(f"{name:8} {took:7.1f} s  RSS {usage.rss_mb:6.1f} MB  CPU {usage.cpu_seconds:6.1f} s", flush=True)

        began = time.monotonic()
        scene.start_jobs(args.jobs)
        phase("created", began)
        began = time.monotonic()
        time.sleep(args.steady)
        phase("steady", began)
        began = time.monotonic()
        victims = [f"job-{i}-worker-{i % 4}" for i in range(0, args.jobs, 10)]
        parallel([partial(set_pod_status, scene.bench, scene.scope, victim, ended_status(137)) for victim in victims])
        _play_kubelet_start(scene.bench, scene.scope, scene.pods, args.jobs * PODS_PER_JOB + len(victims))
        phase("changed", began)
        peak = scene.operator.usage().peak_rss_mb
    cpu = phases[-1][3] - start.cpu_seconds
    print(f"peak RSS {peak:.0f} MB; CPU {cpu:.1f} s in all, from {start.rss_mb:.0f} MB at start")
    return f"footprint jobs={args.jobs} pods={args.jobs * PODS_PER_JOB} peak_rss_mb={peak:.0f} cpu_s={cpu:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.split("\n")[0])
    benchmarks = parser.add_subparsers(dest="benchmark", required=True)
    admission_parser = benchmarks.add_parser("admission", help="N jobs at once: operator against a plain client")
    admission_parser.add_argument("--jobs", type=int, default=50)
    admission_parser.add_argument("--rounds", type=int, default=3)
    admission_parser.set_defaults(run=admission)
    latency_parser = benchmarks.add_parser("latency", help="a failed pod's replacement, with many jobs running")
    latency_parser.add_argument("--jobs", type=int, default=200)
    latency_parser.add_argument("--failures", type=int, default=100)
    latency_parser.add_argument("--rate", type=float, default=5.0, help="failures per second")
    latency_parser.set_defaults(run=latency)
    api_parser = benchmarks.add_parser("api", help="API requests per job lifecycle")
    api_parser.add_argument("--jobs", type=int, default=20)
    api_parser.set_defaults(run=api)
    footprint_parser = benchmarks.add_parser("footprint", help="the operator's memory and CPU with many jobs")
    footprint_parser.add_argument("--jobs", type=int, default=1000)
    footprint_parser.add_argument("--steady", type=float, default=30.0, help="seconds of running jobs to watch")
    footprint_parser.set_defaults(run=footprint)
    trainer_parser = benchmarks.add_parser("trainer", help="MultiWorkerMirrored against one process (TensorFlow)")
    trainer_parser.add_argument("--batch", type=int, default=256, help="global batch size")
    trainer_parser.add_argument("--steps", type=int, default=60)
    trainer_parser.set_defaults(run=lambda args: trainer.main(args.batch, args.steps))
    args = parser.parse_args(argv)
    LOGS.mkdir(parents=True, exist_ok=True)
    print(args.run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
