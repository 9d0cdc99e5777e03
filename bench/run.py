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
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

import goodput
import restarts
import trainer
from harness import (
    BESIDE_HOSTILE,
    LOGS_UNKEPT,
    OPERATOR,
    PEER,
    PEER_AS_SHIPPED,
    PODS_PER_JOB,
    TRAINERS,
    Cluster,
    ProcessUnderTest,
    Quiet,
    Request,
    Side,
    Watch,
    apiserver_requests,
    bench_job,
    delete_namespaces,
    ended_status,
    ensure_capacity,
    local_cluster,
    namespace,
    parallel,
    percentile,
    play_kubelet,
    set_pod_status,
    settle,
)

from disttrain_cli.render import render_objects
from disttrain_core.api.tenant_input import JOB_GONE_SINCE, LOG_MAX_BYTES, LOG_TTL
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.images import VERSION
from disttrain_core.kept_logs import JOB_UID_LABEL, KEPT_LOG_LABEL, OUTLIVES_JOB_LABEL
from disttrain_dev import cluster as devcluster
from disttrain_dev import images, node_kinds, real_node
from disttrain_dev.polling import wait_for

LOGS = Path(tempfile.gettempdir()) / "disttrain-bench"
ROOT = Path(__file__).resolve().parent.parent
Rotated = TypeVar("Rotated")  # a side, or None for the floor


@dataclass
class Admitted:
    """One round of one side: seconds until every pod, and every Service, existed; the operator's CPU
    seconds, peak RSS and API requests until then (none for the floor)."""

    pods_seconds: float
    services_seconds: float
    cpu_seconds: float | None = None
    peak_rss_mb: float | None = None
    requests_per_job: float | None = None
    writes_per_job: float | None = None

    @property
    def seconds(self) -> float:
        return max(self.pods_seconds, self.services_seconds)


def _last_arrival(watch: Watch, needed: int, timeout: float) -> float:
    wait_for(f"{needed} from {watch.path}", lambda: len(watch.added()) >= needed, timeout, 0.05)
    return sorted(event.at for event in watch.snapshot() if event.type == "ADDED")[needed - 1]


Submit = list[Callable[[str], object]]  # a task for each job, given the round's namespace
FLOOR = "floor"


def _timed_admission(bench: Cluster, jobs: int, side: Side | None, submit: Submit, quiet: Quiet) -> Admitted:
    """From the first request until every pod and Service of `jobs` jobs exists; `side` None is the floor.
    Each round has a namespace, and an operator, of its own."""
    settle(bench, quiet)
    with namespace(bench, side.name if side else FLOOR) as scope:
        operator = side.start(bench, scope, LOGS / f"{scope}.log") if side else None
        pods = Watch(bench, f"/api/v1/namespaces/{scope}/pods").start()
        services = Watch(bench, f"/api/v1/namespaces/{scope}/services").start()
        try:
            tasks: list[Callable[[], object]] = [partial(task, scope) for task in submit]
            cpu_before = operator.usage().cpu_seconds if operator else 0.0
            requests_before = apiserver_requests(bench)
            start = time.monotonic()
            parallel(tasks)
            timeout = 120 + jobs
            pods_at = _last_arrival(pods, jobs * PODS_PER_JOB, timeout)
            services_at = _last_arrival(services, jobs * (side.services_per_job if side else 1), timeout)
            admitted = Admitted(pods_at - start, services_at - start)
            if operator is None or side is None:
                return admitted
            delta = apiserver_requests(bench) - requests_before
            usage = operator.usage()
            admitted.cpu_seconds, admitted.peak_rss_mb = usage.cpu_seconds - cpu_before, usage.peak_rss_mb
            others = _admission_others(delta, jobs, side)
            others.update(_events_of_others(bench, scope, side, delta))
            admitted.requests_per_job, admitted.writes_per_job = _operator_requests(delta, others, jobs, side)
            return admitted
        finally:
            pods.stop()
            services.stop()
            if operator is not None:
                operator.stop()


def _submit_jobs(bench: Cluster, side: Side, jobs: int) -> Submit:
    def one_job(index: int, scope: str) -> None:
        side.create_job(bench, scope, f"job-{index}")

    return [partial(one_job, i) for i in range(jobs)]


def _plain_client(bench: Cluster, jobs: int) -> Submit:
    """The floor: the same job objects, then the same Services and pods, from as many threads as the
    operator reconciles with."""

    def one_job(index: int, scope: str) -> None:
        job = bench_job(f"job-{index}", scope)
        bench.kube.create(job)
        for item in render_objects(json.dumps(job), BuildSettings(), namespace=scope):
            item["metadata"].pop("ownerReferences", None)  # no uid to point at without reading the job back
            bench.kube.create(item)

    return [partial(one_job, i) for i in range(jobs)]


def _sides(args: argparse.Namespace) -> list[Side]:
    """The operators a benchmark runs, in the order of each round: this checkout's, another checkout's
    (--baseline), this checkout's with jobs that keep no logs (--logs-unkept), this checkout's beside a hostile
    tenant (latency --hostile-neighbour), the peer unthrottled
    (--peer) and as shipped (--peer-as-shipped)."""
    sides = [OPERATOR]
    if args.baseline:
        sides.append(Side("baseline", source=args.baseline))
    if args.logs_unkept:
        sides.append(LOGS_UNKEPT)
    if getattr(args, "hostile_neighbour", False):
        sides.append(BESIDE_HOSTILE)
    if args.peer or args.peer_as_shipped:
        sides.append(PEER)
    if args.peer_as_shipped:
        sides.append(PEER_AS_SHIPPED)
    return sides


def _with_floor(args: argparse.Namespace) -> list[Side | None]:
    """The sides of an admission round: the operator, the floor (None) unless --no-floor, then the other
    operators."""
    return [OPERATOR, *([] if getattr(args, "no_floor", False) else [None]), *_sides(args)[1:]]


def _rotated(sides: list[Rotated], shift: int) -> list[Rotated]:
    """The sides in the order of round `shift`: each round starts one side later, so that no side always
    runs first, right after the quiet start. (The cyclic order stays: a side follows the same one.)"""
    shift %= len(sides)
    return sides[shift:] + sides[:shift]


def _admission_round(bench: Cluster, jobs: int, side: Side | None, quiet: Quiet) -> Admitted:
    submit = _submit_jobs(bench, side, jobs) if side else _plain_client(bench, jobs)
    return _timed_admission(bench, jobs, side, submit, quiet)


def admission(args: argparse.Namespace) -> str:
    """Rounds alternate the sides: the operator, the floor, and whichever other operators are asked for."""
    bench = local_cluster(plane=args.plane)
    ensure_capacity(bench, args.jobs * PODS_PER_JOB)
    sides = _with_floor(args)
    measured: dict[str, list[Admitted]] = {side.name if side else FLOOR: [] for side in sides}
    for round_number in range(args.rounds):
        for side in _rotated(sides, round_number):
            admitted = _admission_round(bench, args.jobs, side, _quiet(args))
            name = side.name if side else FLOOR
            measured[name].append(admitted)
            spent = ""
            if admitted.cpu_seconds is not None:
                spent = f" (CPU {admitted.cpu_seconds:.2f} s, {admitted.requests_per_job:.1f} requests/job)"
            times = f"pods {admitted.pods_seconds:.2f} s, Services {admitted.services_seconds:.2f} s"
            print(f"round {round_number + 1} {name}: {admitted.seconds:.2f} s: {times}{spent}", flush=True)
    _record(args, f"admission-{args.jobs}", {name: [vars(a) for a in rounds] for name, rounds in measured.items()})
    median = {name: statistics.median(a.seconds for a in rounds) for name, rounds in measured.items()}
    pods_median = {name: statistics.median(a.pods_seconds for a in rounds) for name, rounds in measured.items()}
    spread = {
        name: (min(a.seconds for a in rounds), max(a.seconds for a in rounds)) for name, rounds in measured.items()
    }
    for name in measured:
        low, high = spread[name]
        rounds = f"rounds {low:.2f} to {high:.2f} s"
        print(f"{name}: median {median[name]:.2f} s ({rounds}), pods alone {pods_median[name]:.2f} s")
    for name in measured:
        if name not in ("operator", FLOOR):
            alone = pods_median["operator"] / pods_median[name]
            print(f"operator/{name}: {median['operator'] / median[name]:.2f}, pods alone {alone:.2f}")
    summary = f"admission jobs={args.jobs} operator/floor={median['operator'] / median[FLOOR]:.2f}"
    return summary + (f" operator/peer={median['operator'] / median['peer']:.2f}" if "peer" in median else "")


def _running(pods: Watch) -> int:
    return sum(event.phase == "Running" and not event.deleting for event in pods.latest().values())


def _replacement_latency(pods: Watch, victim: str, old_uid: str, timeout: float = 30) -> float:
    """From the watch's sight of the victim Failed to its replacement's creation, both on the same stream."""

    def seen() -> tuple[float, float] | None:
        events = pods.snapshot()
        failed = next((e.at for e in events if e.uid == old_uid and e.phase == "Failed"), None)
        added = next((e.at for e in events if e.name == victim and e.type == "ADDED" and e.uid != old_uid), None)
        return (failed, added) if failed is not None and added is not None else None

    wait_for(f"{victim} replaced", seen, timeout=timeout, interval=0.05)
    failed, added = seen()  # type: ignore[misc]
    return added - failed


# Notes a tenant with `edit` in its own namespace can write where the operator reads them, out of every
# bound (tests/integration/test_hostile_tenants.py tries each): on its pods, and on kept logs it forges.
HOSTILE_POD_NOTES = {LOG_MAX_BYTES: "-1"}
HOSTILE_KEPT_LOG_NOTES = (
    {LOG_TTL: "99999999999999999999"},
    {JOB_GONE_SINCE: "9999-12-31T23:59:59Z", LOG_TTL: "2147483647"},
    {JOB_GONE_SINCE: "yesterday", LOG_TTL: "-5"},
)
FORGED_KEPT_LOGS = 30


@dataclass
class _HostileNeighbour:
    """Tenant A, in a namespace the same operator serves: as many jobs as the measured side, failing as
    often, on pods told to keep -1 bytes of log, beside kept logs forged with notes out of every bound."""

    bench: Cluster
    scope: str
    pods: Watch

    def start(self, jobs: int) -> None:
        names = [f"job-{i}" for i in range(jobs)]
        parallel([partial(OPERATOR.create_job, self.bench, self.scope, name, kubelet=False) for name in names])
        running = jobs * PODS_PER_JOB
        play_kubelet(self.bench, self.scope, self.pods, lambda: _running(self.pods) == running, timeout=120 + jobs)
        noted = {"metadata": {"annotations": HOSTILE_POD_NOTES}}
        pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": self.scope}}
                for name in self.pods.latest()]  # fmt: skip
        parallel([partial(self.bench.kube.merge_patch, pod, noted) for pod in pods])
        parallel([partial(self.bench.kube.create, self._forged(index)) for index in range(FORGED_KEPT_LOGS)])

    def _forged(self, index: int) -> dict[str, Any]:
        labels = {OUTLIVES_JOB_LABEL: "true", JOB_UID_LABEL: f"forged-{index}", KEPT_LOG_LABEL: "worker-0"}
        notes = HOSTILE_KEPT_LOG_NOTES[index % len(HOSTILE_KEPT_LOG_NOTES)]
        metadata = {"name": f"forged-{index}", "namespace": self.scope, "labels": labels, "annotations": notes}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"log": "x"}}

    def fail(self, pod: str) -> None:
        set_pod_status(self.bench, self.scope, pod, ended_status(137))


@dataclass
class _Scene:
    """A namespace with room for the jobs, one side's operator for it, and watches on its pods and jobs;
    the side's hostile neighbour, if it has one."""

    bench: Cluster
    scope: str
    side: Side
    operator: ProcessUnderTest
    pods: Watch
    jobs: Watch
    neighbour: _HostileNeighbour | None = None

    def start_jobs(self, count: int) -> list[str]:
        """Submit `count` jobs, play the kubelet until their pods run, and wait until the operator
        has seen it all (every job Running); returns their names."""
        names = [f"job-{i}" for i in range(count)]
        create = partial(self.side.create_job, self.bench, self.scope, kubelet=False)
        parallel([partial(create, name) for name in names])
        self.play_kubelet_until(lambda: _running(self.pods) == count * PODS_PER_JOB, timeout=120 + count)
        self.wait_for_phase("Running", count)
        return names

    def play_kubelet_until(self, done: Callable[[], bool], timeout: float = 600) -> None:
        play_kubelet(self.bench, self.scope, self.pods, done, timeout)

    def wait_for_phase(self, phase: str, count: int) -> None:
        wait_for(
            f"{count} jobs {phase}",
            lambda: list(_phases(self.jobs).values()).count(phase) == count,
            timeout=600,
            interval=0.5,
        )


@contextmanager
def _scene(prefix: str, side: Side, args: argparse.Namespace) -> Iterator[_Scene]:
    """`args.jobs` jobs of the side's, on the benchmark's cluster once it is quiet."""
    jobs, quiet = args.jobs, _quiet(args)
    bench = local_cluster(plane=args.plane)
    ensure_capacity(bench, jobs * PODS_PER_JOB * (2 if side.hostile_neighbour else 1))
    settle(bench, quiet)
    with namespace(bench, f"{prefix}-{side.name}") as scope, ExitStack() as teardown:  # the operator always stops
        also = [teardown.enter_context(namespace(bench, f"{prefix}-tenant-a"))] if side.hostile_neighbour else []
        operator = side.start(bench, scope, LOGS / f"{scope}.log", also)
        teardown.callback(operator.stop)
        pods = Watch(bench, f"/api/v1/namespaces/{scope}/pods").start()
        teardown.callback(pods.stop)
        watched = Watch(bench, side.jobs_path(scope)).start()
        teardown.callback(watched.stop)
        neighbour = None
        for other in also:
            neighbour = _HostileNeighbour(bench, other, Watch(bench, f"/api/v1/namespaces/{other}/pods").start())
            teardown.callback(neighbour.pods.stop)
        yield _Scene(bench, scope, side, operator, pods, watched, neighbour)


def _beside(figures: dict[str, list[str]]) -> str:
    """The other sides' figures for a last line, each named after its side: ` peer_p99=0.1s`."""
    return "".join(f" {side}_{figure}" for side, named in figures.items() if side != "operator" for figure in named)


def latency(args: argparse.Namespace) -> str:
    """Pods fail one after another across `jobs` running jobs; each replacement is timed. The sides
    alternate round by round, and each side's p50 and p99 are of its replacements over every round: a
    p99 of one round's 100 is its second slowest, and one stall of the machine moves it."""
    sides = _sides(args)
    seconds: dict[str, list[list[float]]] = {side.name: [] for side in sides}
    for number in range(args.rounds):
        for side in _rotated(sides, number):
            seconds[side.name].append(_latency_round(args, side))
            print(f"{side.name} round {number + 1}: p99 {percentile(seconds[side.name][-1], 0.99):.3f} s")
    figures: dict[str, list[str]] = {}
    p99s: dict[str, float] = {}
    for side in sides:
        pooled = [value for rounds in seconds[side.name] for value in rounds]
        p50, p99 = percentile(pooled, 0.5), percentile(pooled, 0.99)
        _record(args, f"latency-{side.name}", {"seconds": pooled, "rounds": seconds[side.name]})
        print(f"{side.name}: {len(pooled)} replacements among {args.jobs} jobs at {args.rate}/s: ", end="")
        print(f"p50 {p50:.3f} s, p99 {p99:.3f} s, max {max(pooled):.3f} s")
        figures[side.name] = [f"p50={p50:.3f}s", f"p99={p99:.3f}s"]
        p99s[side.name] = p99
    if BESIDE_HOSTILE.name in figures:  # the same operator, quiet and beside a hostile tenant
        figures[BESIDE_HOSTILE.name].append(f"p99_ratio={p99s[BESIDE_HOSTILE.name] / p99s[OPERATOR.name]:.2f}")
    return f"latency jobs={args.jobs} {' '.join(figures['operator'])}{_beside(figures)}"


def _latency_round(args: argparse.Namespace, side: Side) -> list[float]:
    """One side's round: its jobs running and quiet, then `failures` workers Failed at `rate` per second."""
    with _scene("latency", side, args) as scene:
        scene.start_jobs(args.jobs)
        if scene.neighbour is not None:
            scene.neighbour.start(args.jobs)
        time.sleep(5)  # quiet: the operator has nothing left to do
        uids = {event.name: event.uid for event in scene.pods.snapshot() if event.type == "ADDED"}
        victims = [f"job-{(i * 7) % args.jobs}-worker-{i % 4}" for i in range(args.failures)]
        for victim in victims:
            set_pod_status(scene.bench, scene.scope, victim, ended_status(137))
            if scene.neighbour is not None:
                scene.neighbour.fail(victim)  # its namesake, as often
            time.sleep(1 / args.rate)
        seconds = [_replacement_latency(scene.pods, victim, uids[victim]) for victim in victims]
        usage = scene.operator.usage()
    print(f"{side.name}: {usage.peak_rss_mb:.0f} MB peak RSS, {usage.cpu_seconds:.1f} CPU s")
    return seconds


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
WRITES = ("POST", "PATCH", "PUT", "DELETE")


def _events_of_others(
    bench: Cluster, scope: str, side: Side, delta: Counter[Request], show: bool = False
) -> Counter[Request]:
    """The Event requests not the side's: its own are one POST per Event, and a PATCH per repeat
    (`count`), under its component's name; the scheduler's and the controllers' are the rest."""
    seen: Counter[tuple[str, str]] = Counter()
    posts = patches = 0
    for event in bench.kube.list_items(f"/api/v1/namespaces/{scope}/events", {}):
        source = event.get("reportingComponent") or (event.get("source") or {}).get("component", "")
        seen[source, event.get("reason", "")] += event.get("count") or 1
        if source in side.event_components:
            posts += 1
            patches += (event.get("count") or 1) - 1
    for (source, reason), count in sorted(seen.items()) if show else ():
        print(f"event {source:26} {reason:28} {count:6}")
    return Counter(
        {
            ("POST", "", "events", ""): delta[("POST", "", "events", "")] - posts,
            ("PATCH", "", "events", ""): delta[("PATCH", "", "events", "")] - patches,
        }
    )


def _admission_others(delta: Counter[Request], jobs: int, side: Side) -> Counter[Request]:
    """Requests of others while jobs are admitted, kwok running their pods: the user's job creations,
    kube-scheduler's bindings, kwok's pod status reports, and the process node's pod listings."""
    others = Counter({("POST", side.group, side.jobs[1], ""): jobs})
    for key, count in delta.items():
        verb, _, resource, subresource = key
        if (resource, subresource) in (("pods", "binding"), ("pods", "status")) or (verb, resource) == ("LIST", "pods"):
            others[key] = count
    return others


def _operator_requests(
    delta: Counter[Request], others: Counter[Request], jobs: int, side: Side, show: bool = False
) -> tuple[float, float]:
    """Requests and writes (besides Events) per job on the jobs, pods, Services and Events, once the
    requests of others are taken off."""
    objects = {("", "pods"), ("", "services"), ("", "events"), (side.group, side.jobs[1])}
    if show:
        print(f"{'verb':8} {'resource':32} {'all':>6} {side.name:>9} {'per job':>8}")
    total = writes = 0.0
    for key, count in sorted(delta.items()):
        verb, group, name, subresource = key
        if (group, name) not in objects or (verb in ("WATCH", "LIST") and count == 0):
            continue
        own = count - others.get(key, 0)
        total += own / jobs
        writes += own / jobs if verb in WRITES and name != "events" else 0
        if show:
            print(
                f"{verb:8} {name + ('/' + subresource if subresource else ''):32} {count:6} {own:9} {own / jobs:8.2f}"
            )
    return total, writes


def _lifecycle_others(delta: Counter[Request], jobs: int, side: Side, left: tuple[int, int]) -> Counter[Request]:
    """Requests of others over a lifecycle the benchmark plays the kubelet in: the user's create and delete
    of each job; the kubelet's status reports (each pod Running, the chief Succeeded) and last word on each
    pod the side deleted (all but the chief); kube-scheduler's bindings; the process node's pod listings;
    and the garbage collector's read and delete of what was `left` (pods, Services) at the job's deletion."""
    group, resource = side.group, side.jobs[1]
    pods_left, services_left = left
    return Counter(
        {
            ("POST", group, resource, ""): jobs,
            ("DELETE", group, resource, ""): jobs,
            ("PATCH", "", "pods", "status"): jobs * (PODS_PER_JOB + 1),
            ("DELETE", "", "pods", ""): jobs * (PODS_PER_JOB - 1) + pods_left,
            ("POST", "", "pods", "binding"): jobs * PODS_PER_JOB,
            ("GET", "", "pods", ""): pods_left,
            ("GET", "", "services", ""): services_left,
            ("DELETE", "", "services", ""): services_left,
            ("LIST", "", "pods", ""): delta[("LIST", "", "pods", "")],
            ("LIST", "", "services", ""): 1,  # the benchmark's own listing
        }
    )


def api(args: argparse.Namespace) -> str:
    """Requests per job from create to Succeeded to deleted, from kube-apiserver's own counters."""
    figures: dict[str, list[str]] = {}
    for side in _sides(args):
        with _scene("api", side, args) as scene:
            bench, scope = scene.bench, scene.scope
            settle(bench, _quiet(args))
            before = apiserver_requests(bench)
            names = scene.start_jobs(args.jobs)
            parallel([partial(set_pod_status, bench, scope, f"{name}-chief-0", ended_status(0)) for name in names])
            scene.wait_for_phase("Succeeded", args.jobs)
            scene.play_kubelet_until(lambda: _deleted(scene.pods) == args.jobs * (PODS_PER_JOB - 1))
            time.sleep(2)  # the side's last writes of the finished jobs land
            left = (
                len(bench.kube.list_items(f"/api/v1/namespaces/{scope}/pods", {})),
                len(bench.kube.list_items(f"/api/v1/namespaces/{scope}/services", {})),
            )
            parallel([partial(side.delete_job, bench, scope, name) for name in names])
            wait_for(
                "every pod gone", lambda: _deleted(scene.pods) == args.jobs * PODS_PER_JOB, timeout=600, interval=0.5
            )
            time.sleep(2)  # the garbage collector's last deletions land
            delta = apiserver_requests(bench) - before
            others = _events_of_others(bench, scope, side, delta, show=True)  # Events stay until the namespace goes
        others.update(_lifecycle_others(delta, args.jobs, side, left))
        requests, writes = _operator_requests(delta, others, args.jobs, side, show=True)
        print(f"{side.name} per job: {requests:.1f} requests, {writes:.1f} writes besides Events")
        _record(args, f"api-{side.name}", {"requests_per_job": requests, "writes_per_job": writes})
        figures[side.name] = [f"requests/job={requests:.1f}", f"writes/job={writes:.1f}"]
    return f"api jobs={args.jobs} {' '.join(figures['operator'])} minimum={MINIMUM_WRITES}{_beside(figures)}"


def footprint(args: argparse.Namespace) -> str:
    """Each side's memory and CPU while `jobs` jobs are created, run, lose pods and run on."""
    figures: dict[str, list[str]] = {}
    for side in _sides(args):
        with _scene("footprint", side, args) as scene:
            start = scene.operator.usage()
            last = start.cpu_seconds

            def phase(name: str, began: float, side: Side = side) -> None:
                nonlocal last
                usage = scene.operator.usage()
                took, cpu = time.monotonic() - began, usage.cpu_seconds - last
                last = usage.cpu_seconds
                print(f"{side.name} {name:8} {took:7.1f} s  RSS {usage.rss_mb:6.1f} MB  CPU {cpu:6.1f} s", flush=True)

            began = time.monotonic()
            scene.start_jobs(args.jobs)
            phase("created", began)
            began = time.monotonic()
            time.sleep(args.steady)
            phase("steady", began)
            began = time.monotonic()
            victims = [f"job-{i}-worker-{i % 4}" for i in range(0, args.jobs, 10)]
            parallel([partial(set_pod_status, scene.bench, scene.scope, v, ended_status(137)) for v in victims])
            time.sleep(1)  # the side sees the failures before the kubelet's part counts the pods running
            scene.play_kubelet_until(lambda: _running(scene.pods) == args.jobs * PODS_PER_JOB)
            phase("changed", began)
            end = scene.operator.usage()
        cpu = end.cpu_seconds - start.cpu_seconds
        print(f"{side.name}: peak RSS {end.peak_rss_mb:.0f} MB; CPU {cpu:.1f} s in all, ", end="")
        print(f"from {start.rss_mb:.0f} MB at start")
        _record(
            args,
            f"footprint-{side.name}",
            {"peak_rss_mb": end.peak_rss_mb, "cpu_seconds": cpu, "start_rss_mb": start.rss_mb},
        )
        figures[side.name] = [f"peak_rss_mb={end.peak_rss_mb:.0f}", f"cpu_s={cpu:.1f}"]
    ours = " ".join(figures["operator"])
    return f"footprint jobs={args.jobs} pods={args.jobs * PODS_PER_JOB} {ours}{_beside(figures)}"


def growth(args: argparse.Namespace) -> str:
    """Admission at each size in turn, one round per side: seconds, the operators' CPU seconds, peak RSS
    and requests per job, for the plots of docs/benchmarks.md."""
    bench = local_cluster(plane=args.plane)
    ensure_capacity(bench, max(args.jobs) * PODS_PER_JOB)
    sides = _with_floor(args)
    rows: list[dict[str, Any]] = []
    # Sizes measured by an earlier run stay in the record: a size is measured whole, its sides side by
    # side, and the largest can take a session of their own.
    kept = [row for row in _recorded(args).get("growth", []) if row["jobs"] not in args.jobs]
    for size_number, jobs in enumerate(args.jobs):
        for side in _rotated(sides, size_number):
            admitted = _admission_round(bench, jobs, side, _quiet(args))
            rows.append({"jobs": jobs, "side": side.name if side else FLOOR, **vars(admitted)})
            _record(args, "growth", kept + rows)
            print(json.dumps(rows[-1]), flush=True)
    largest = [row for row in rows if row["jobs"] == max(args.jobs)]
    figures = " ".join(f"{row['side']}={max(row['pods_seconds'], row['services_seconds']):.1f}s" for row in largest)
    return f"growth jobs={','.join(map(str, args.jobs))} at {max(args.jobs)}: {figures}"


def goodput_benchmark(args: argparse.Namespace) -> str:
    bench = local_cluster(process_node=True)
    before = [Side("trainer-before", trainer_source=args.trainer_before)] if args.trainer_before else []
    sides = [OPERATOR, *before, *([PEER] if args.peer else [])]
    setup = goodput.Setup(args.epochs, args.evictions, args.run_limit, TRAINERS[args.trainer])
    outcomes, total = goodput.measure(bench, setup, args.every, sides, LOGS)
    _record(args, "goodput", {side: {label: asdict(o) for label, o in runs.items()} for side, runs in outcomes.items()})
    return goodput.summary(outcomes, total, args.every)


def restarts_benchmark(args: argparse.Namespace) -> str:
    if node_kinds.REAL in args.node:
        missing = real_node.missing_requirement()
        if missing is not None:
            raise SystemExit(f"the real node cannot run here: {missing}")
        devcluster.up(log=False, real_node=True)
        devcluster.load_images([f"{name}:{VERSION}" for name in images.ensure_images(ROOT)])
    bench = local_cluster(process_node=True)
    outcomes = restarts.measure(bench, args.node, args.kills, LOGS, args.run_limit, trainer=TRAINERS[args.trainer])
    _record(args, "restarts", [asdict(outcome) for outcome in outcomes])
    return restarts.summary(outcomes)


def _recorded(args: argparse.Namespace) -> dict[str, Any]:
    """What the JSON file --record names holds so far (nothing without one)."""
    path = Path(args.record) if args.record else None
    return json.loads(path.read_text()) if path is not None and path.is_file() else {}


def _record(args: argparse.Namespace, name: str, data: object) -> None:
    """The run's raw numbers, by benchmark, in the JSON file --record names (plots are made from it)."""
    if not args.record:
        return
    recorded = _recorded(args)
    recorded[name] = data
    Path(args.record).write_text(json.dumps(recorded, indent=1) + "\n")


def _quiet(args: argparse.Namespace) -> Quiet:
    return Quiet(args.quiet, args.busy_wait)


def _on_the_cluster(benchmark: Callable[[argparse.Namespace], str]) -> Callable[[argparse.Namespace], str]:
    """A benchmark of the local cluster, which deletes its namespaces at its end."""

    def run(args: argparse.Namespace) -> str:
        try:
            return benchmark(args)
        finally:
            delete_namespaces(local_cluster(plane=args.plane))

    return run


def _trainer_choice(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trainer", choices=sorted(TRAINERS), default="tensorflow", help="what the jobs run (harness.TRAINERS)"
    )


def _tensorflow_benchmarks(benchmarks: Any) -> None:
    """The benchmarks that run real trainers: they need the trainer extra."""
    goodput_parser = benchmarks.add_parser("goodput", help="a job preempted every N seconds (TensorFlow)")
    goodput_parser.add_argument("--epochs", type=int, default=240, help="the job's length (22 steps an epoch)")
    goodput_parser.add_argument(
        "--every", type=float, nargs="+", default=[30.0, 60.0], help="seconds between evictions"
    )
    goodput_parser.add_argument("--peer", action="store_true", help="the same job as a TFJob under training-operator")
    goodput_parser.add_argument("--evictions", type=int, default=4, help="at most this many evictions a run")
    goodput_parser.add_argument("--run-limit", type=float, default=1800.0, help="seconds a run may take at most")
    goodput_parser.add_argument("--trainer-before", help="another checkout whose trainer runs the job too, as a side")
    _trainer_choice(goodput_parser)
    goodput_parser.set_defaults(run=_on_the_cluster(goodput_benchmark))
    restarts_parser = benchmarks.add_parser(
        "restarts", help="whole-job restarts in place against recreated (TensorFlow)"
    )
    restarts_parser.add_argument(
        "--node",
        nargs="+",
        choices=[node_kinds.PROCESS, node_kinds.REAL],
        default=[node_kinds.PROCESS, node_kinds.REAL],
    )
    restarts_parser.add_argument("--kills", type=int, default=3, help="worker 1's trainer killed this often a run")
    restarts_parser.add_argument("--run-limit", type=float, default=300.0, help="seconds each wait may take at most")
    _trainer_choice(restarts_parser)
    restarts_parser.set_defaults(run=_on_the_cluster(restarts_benchmark))
    trainer_parser = benchmarks.add_parser("trainer", help="MultiWorkerMirrored against one process (TensorFlow)")
    trainer_parser.add_argument("--batch", type=int, default=256, help="global batch size")
    trainer_parser.add_argument("--steps", type=int, default=60)
    trainer_parser.set_defaults(run=lambda args: trainer.main(args.batch, args.steps))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.split("\n")[0])
    parser.add_argument("--record", help="a JSON file to keep the run's raw numbers in, by benchmark")
    parser.set_defaults(plane=None)  # the local cluster, for the benchmarks that take no --plane
    sides = argparse.ArgumentParser(add_help=False)
    sides.add_argument("--peer", action="store_true", help="training-operator v1.8.1, unthrottled, as a side")
    sides.add_argument("--peer-as-shipped", action="store_true", help="and training-operator as shipped")
    sides.add_argument("--baseline", help="another checkout whose operator runs as a side")
    sides.add_argument("--logs-unkept", action="store_true", help="this operator again, its jobs keeping no logs")
    sides.add_argument(
        "--quiet",
        type=float,
        default=3.0,
        help="seconds without a write to pods or Services before each round (a shorter wait lets the last round's "
        "deletions count against the next: CI's small runs, whose figures nothing reads, take 1)",
    )
    sides.add_argument(
        "--plane",
        help="run on the control plane of this name beside the local cluster (started if needed, left running), "
        "whose kwok nodes no other test shares: CI's small runs, beside the local cluster's tests",
    )
    sides.add_argument(
        "--busy-wait",
        type=float,
        default=30.0,
        help="seconds the CPU is then waited for at most to be idle (CI's small runs, beside other tests, take 0)",
    )
    benchmarks = parser.add_subparsers(dest="benchmark", required=True)
    admission_parser = benchmarks.add_parser("admission", parents=[sides], help="N jobs at once, side by side")
    admission_parser.add_argument("--jobs", type=int, default=50)
    admission_parser.add_argument("--rounds", type=int, default=3)
    admission_parser.set_defaults(run=_on_the_cluster(admission))
    latency_parser = benchmarks.add_parser("latency", parents=[sides], help="a failed pod's replacement")
    latency_parser.add_argument("--jobs", type=int, default=200)
    latency_parser.add_argument("--failures", type=int, default=100)
    latency_parser.add_argument("--rate", type=float, default=5.0, help="failures per second")
    latency_parser.add_argument("--rounds", type=int, default=3)
    latency_parser.add_argument(
        "--hostile-neighbour",
        action="store_true",
        help="this operator again, serving also a hostile tenant's namespace with as many jobs failing as often",
    )
    latency_parser.set_defaults(run=_on_the_cluster(latency))
    api_parser = benchmarks.add_parser("api", parents=[sides], help="API requests per job lifecycle")
    api_parser.add_argument("--jobs", type=int, default=20)
    api_parser.set_defaults(run=_on_the_cluster(api))
    footprint_parser = benchmarks.add_parser("footprint", parents=[sides], help="memory and CPU with many jobs")
    footprint_parser.add_argument("--jobs", type=int, default=1000)
    footprint_parser.add_argument("--steady", type=float, default=30.0, help="seconds of running jobs to watch")
    footprint_parser.set_defaults(run=_on_the_cluster(footprint))
    growth_parser = benchmarks.add_parser("growth", parents=[sides], help="admission at growing numbers of jobs")
    growth_parser.add_argument("--jobs", type=int, nargs="+", default=[250, 1000, 2500, 5000])
    growth_parser.add_argument("--no-floor", action="store_true", help="the operators alone: a size's run is shorter")
    growth_parser.set_defaults(run=_on_the_cluster(growth))
    _tensorflow_benchmarks(benchmarks)
    args = parser.parse_args(argv)
    LOGS.mkdir(parents=True, exist_ok=True)
    print(args.run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
