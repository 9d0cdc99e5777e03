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
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
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
    play_kubelet,
    set_pod_status,
    settle,
    wait,
)

from disttrain_operator.cli.render import render_objects
from disttrain_operator.core.builders.settings import BuildSettings

LOGS = Path(tempfile.gettempdir()) / "disttrain-bench"


def _when_all_exist(pods: Watch, services: Watch, jobs: int, timeout: float) -> float:
    """The arrival time of the last pod or Service the jobs need."""

    def arrivals(watch: Watch, needed: int) -> list[float]:
        return sorted(event.at for event in watch.snapshot() if event.type == "ADDED")[:needed]

    needed = (jobs * PODS_PER_JOB, jobs)
    wait("every pod and Service", lambda: (len(pods.added()), len(services.added())) >= needed, timeout, 0.05)
    return max(arrivals(pods, needed[0])[-1], arrivals(services, needed[1])[-1])


Tasks = list[Callable[[], object]]


def _timed_admission(
    bench: Cluster, jobs: int, prefix: str, submit: Callable[[str], Tasks], operator_source: str | None = None
) -> tuple[float, float | None]:
    """Seconds from the first request until every pod and Service of `jobs` jobs exists, and the CPU seconds
    the operator spent meanwhile; an operator runs unless the side is the floor (`operator_source`: another
    checkout's)."""
    settle(bench)
    with namespace(bench, prefix) as scope:
        operator = None
        if prefix != "floor":
            operator = OperatorUnderTest(bench, scope, LOGS / f"{scope}.log", source=operator_source)
        pods = Watch(bench, f"/api/v1/namespaces/{scope}/pods").start()
        services = Watch(bench, f"/api/v1/namespaces/{scope}/services").start()
        try:
            tasks = submit(scope)
            cpu_before = operator.usage().cpu_seconds if operator else 0.0
            start = time.monotonic()
            parallel(tasks)
            seconds = _when_all_exist(pods, services, jobs, timeout=60 + jobs) - start
            return seconds, operator.usage().cpu_seconds - cpu_before if operator else None
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
    """Rounds alternate the sides: the operator, the floor, and with --baseline another checkout's operator."""
    bench = local_cluster()
    ensure_capacity(bench, args.jobs * PODS_PER_JOB)
    sides: list[tuple[str, Callable[[Cluster, int], Callable[[str], Tasks]], str | None]] = [
        ("operator", _through_the_operator, None),
        ("floor", _by_a_plain_client, None),
    ]
    if args.baseline:
        sides.append(("baseline", _through_the_operator, args.baseline))
    measured: dict[str, list[float]] = {name: [] for name, _, _ in sides}
    for round_number in range(args.rounds):
        for side, submit, source in sides:
            seconds, cpu = _timed_admission(bench, args.jobs, side, submit(bench, args.jobs), source)
            measured[side].append(seconds)
            spent = "" if cpu is None else f" (operator CPU {cpu:.2f} s)"
            print(f"round {round_number + 1} {side}: {seconds:.2f} s{spent}", flush=True)
    median = {side: statistics.median(times) for side, times in measured.items()}
    objects = f"{args.jobs * PODS_PER_JOB} pods and {args.jobs} Services"
    print(", ".join(f"{side} {seconds:.2f} s" for side, seconds in median.items()) + f" (medians), for {objects}")
    if args.baseline:
        print(f"baseline ({args.baseline})/floor={median['baseline'] / median['floor']:.2f}")
    return f"admission jobs={args.jobs} operator/floor={median['operator'] / median['floor']:.2f}"


def _running(pods: Watch) -> int:
    return sum(event.phase == "Running" and not event.deleting for event in pods.latest().values())


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
        self.play_kubelet_until(lambda: _running(self.pods) == count * PODS_PER_JOB, timeout=60 + count)
        self.wait_for_phase("Running", count)
        return names

    def play_kubelet_until(self, done: Callable[[], bool], timeout: float = 600) -> None:
        play_kubelet(self.bench, self.scope, self.pods, done, timeout)

    def wait_for_phase(self, phase: str, count: int) -> None:
        wait(f"{count} jobs {phase}", lambda: list(_phases(self.jobs).values()).count(phase) == count, timeout=600)


@contextmanager
def _scene(prefix: str, jobs: int) -> Iterator[_Scene]:
    bench = local_cluster()
    ensure_capacity(bench, jobs * PODS_PER_JOB)
    settle(bench)
    with namespace(bench, prefix) as scope, ExitStack() as teardown:  # the operator stops whatever else fails
        operator = OperatorUnderTest(bench, scope, LOGS / f"{scope}.log")
        teardown.callback(operator.stop)
        pods = Watch(bench, f"/api/v1/namespaces/{scope}/pods").start()
        teardown.callback(pods.stop)
        watched = Watch(bench, f"/apis/disttrain.io/v1alpha1/namespaces/{scope}/disttrainjobs").start()
        teardown.callback(watched.stop)
        yield _Scene(bench, scope, operator, pods, watched)


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


# The fewest writes one job's lifecycle needs: its Service and 7 pods; 2 status writes (Running, which
# carries Created when the pods run within the batch window, and Succeeded); at the end, the 6 pods
# still running (4 workers, 2 PS) deleted.
MINIMUM_WRITES = 1 + PODS_PER_JOB + 2 + (PODS_PER_JOB - 1)
OBJECTS = {("", "pods"), ("", "services"), ("", "events"), ("disttrain.io", "disttrainjobs")}


def _events_by_source(bench: Cluster, scope: str, jobs: int) -> Counter[str]:
    """The namespace's Events by who reported them, printed by reason per job too; repeats (`count`) counted."""
    seen: Counter[tuple[str, str]] = Counter()
    for event in bench.kube.list_items(f"/api/v1/namespaces/{scope}/events", {}):
        source = event.get("reportingComponent") or (event.get("source") or {}).get("component", "")
        seen[source, event.get("reason", "")] += event.get("count") or 1
    for (source, reason), count in sorted(seen.items()):
        print(f"event {source:26} {reason:28} {count / jobs:6.2f} per job")
    by_source: Counter[str] = Counter()
    for (source, _), count in seen.items():
        by_source[source] += count
    return by_source


def api(args: argparse.Namespace) -> str:
    """Requests per job from create to Succeeded to deleted, from kube-apiserver's own counters."""
    with _scene("api", args.jobs) as scene:
        bench, scope = scene.bench, scene.scope
        settle(bench)
        before = apiserver_requests(bench)
        names = scene.start_jobs(args.jobs)
        parallel([partial(set_pod_status, bench, scope, f"{name}-chief-0", ended_status(0)) for name in names])
        scene.wait_for_phase("Succeeded", args.jobs)
        scene.play_kubelet_until(lambda: _deleted(scene.pods) == args.jobs * (PODS_PER_JOB - 1))
        events = _events_by_source(bench, scope, args.jobs)
        parallel([partial(bench.kube.delete_job, scope, name) for name in names])
        wait("every pod gone", lambda: _deleted(scene.pods) == args.jobs * PODS_PER_JOB)
        time.sleep(2)  # the operator's last writes land
        delta = apiserver_requests(bench) - before
    # Requests of others: the process node (it lists its pods twice a second); the benchmark itself (as the
    # jobs' user, and as the kubelet: status reports and the last word on each of the 6 pods the operator
    # deletes); kube-scheduler (a binding per pod); the garbage collector (at the job's deletion, a read and
    # a delete of the chief pod and the Service).
    others = {
        ("POST", "disttrain.io", "disttrainjobs", ""): args.jobs,
        ("DELETE", "disttrain.io", "disttrainjobs", ""): args.jobs,
        ("PATCH", "", "pods", "status"): args.jobs * (PODS_PER_JOB + 1),
        ("DELETE", "", "pods", ""): args.jobs * PODS_PER_JOB,
        ("POST", "", "pods", "binding"): args.jobs * PODS_PER_JOB,
        ("GET", "", "pods", ""): args.jobs,
        ("GET", "", "services", ""): args.jobs,
        ("DELETE", "", "services", ""): args.jobs,
        ("LIST", "", "pods", ""): delta[("LIST", "", "pods", "")],
    }
    # Events: the operator posts through kopf, a POST each; the rest are the scheduler's and the controllers',
    # whose repeats are PATCHes. The benchmark listed them once.
    others[("POST", "", "events", "")] = delta[("POST", "", "events", "")] - events["kopf"]
    others[("PATCH", "", "events", "")] = delta[("PATCH", "", "events", "")]
    others[("LIST", "", "events", "")] = 1
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
    print(f"operator (and unattributed) per job: {operator_total:.1f} requests, {writes:.1f} writes besides Events")
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
        scene.play_kubelet_until(lambda: _running(scene.pods) == args.jobs * PODS_PER_JOB)
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
    admission_parser.add_argument("--baseline", help="another checkout whose operator runs as a third side")
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
