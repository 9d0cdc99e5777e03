"""What every benchmark shares: the local cluster, the job they submit, the operator under test,
watches that time what appears, and the API server's own request counters.

Times are taken on this machine's monotonic clock when a watch event arrives, so they include the
API server's delivery, never a timestamp's one-second rounding.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes import client
from urllib3.exceptions import HTTPError

from disttrain_core.builders.events import COMPONENT
from disttrain_dev import cluster as devcluster
from disttrain_dev import peer
from disttrain_dev.cluster import UNATTENDED_ANNOTATION, crd_established
from disttrain_dev.kubelet import KubeletApi
from disttrain_dev.polling import wait_for
from disttrain_dev.third_party import answers
from disttrain_dev.versions import cache_paths
from disttrain_kube.api_errors import TransientApiError
from disttrain_kube.connection import connect
from disttrain_trainer.stand_in import TRAINER_PACE

ROOT = Path(__file__).resolve().parent.parent
# The operator's reconcile threads (DISTTRAIN_RECONCILE_WORKERS), and as many threads for the floor: its
# default on 2 cores, where the figures in docs/benchmarks.md were measured.
THREADS = 6
JOB_SHAPE = {"Chief": 1, "Worker": 4, "PS": 2}
PODS_PER_JOB = sum(JOB_SHAPE.values())
BENCH_NODE_PODS = 500
HTTP_GATEWAY_TIMEOUT = 504
HTTP_NOT_FOUND = 404


@dataclass
class Cluster:
    kubeconfig: Path
    kube: KubeletApi
    api: client.ApiClient


def local_cluster(process_node: bool = False, plane: str | None = None) -> Cluster:
    """The local control plane (started if needed, with the process node if asked), or the control plane
    `plane` beside it (kwok's nodes only), as its admin."""
    kubeconfig = devcluster.up(log=False, process_node=process_node, name=plane)
    api = connect(kubeconfig, pool_size=THREADS * 2).api_client
    return Cluster(kubeconfig, KubeletApi(api), api)


# The command a benchmark's jobs run, by `--trainer`: TensorFlow's trainer, or its contract without TensorFlow
# (`disttrain-stand-in`) at the trainer's own pace on the digits on two cores, unlimited (`TRAINER_PACE`), with
# which CI's runs of the benchmarks prove their harness and the operator's decisions without TensorFlow's start in
# every pod, in the time TensorFlow's runs take.
TRAINERS = {
    "tensorflow": ("disttrain-train",),
    "stand-in": ("disttrain-stand-in", "--max-steps-per-second", str(TRAINER_PACE)),
}


def _template(kubelet: bool) -> dict[str, Any]:
    container = {"name": "tensorflow", "image": "disttrain/trainer:0.1.0", "command": ["disttrain-train"]}
    template: dict[str, Any] = {"spec": {"containers": [container], "automountServiceAccountToken": False}}
    if not kubelet:
        key, value = UNATTENDED_ANNOTATION.split("=")
        template["metadata"] = {"annotations": {key: value}}
    return template


def _replicas(kubelet: bool) -> dict[str, Any]:
    """A Chief, 4 workers and 2 PS; a failed worker (exit code 137) is replaced alone."""
    template = _template(kubelet)
    return {kind: {"replicas": n, "restartPolicy": "ExitCode", "template": template} for kind, n in JOB_SHAPE.items()}


def bench_job(name: str, scope: str, *, kubelet: bool = True, keep_logs: bool = True) -> dict[str, Any]:
    """A ParameterServer job of `_replicas`. With `kubelet=False` kwok leaves its pods alone and the
    benchmark plays the kubelet itself; `keep_logs=False` sets `logs.keep: false` (no log kept)."""
    replicas = _replicas(kubelet)
    spec = {"strategy": "ParameterServer", "replicaSpecs": replicas, "runPolicy": {"backoffLimit": 100}}
    if not keep_logs:
        spec["logs"] = {"keep": False}
    return {
        "apiVersion": "disttrain.io/v1alpha1",
        "kind": "DistTrainJob",
        "metadata": {"name": name, "namespace": scope},
        "spec": spec,
    }


def peer_job(name: str, scope: str, *, kubelet: bool = True) -> dict[str, Any]:
    """The same job as a TFJob. `cleanPodPolicy: Running` stops the pods still running once the chief
    has succeeded, as disttrain does by default (TFJob's default keeps them)."""
    replicas = _replicas(kubelet)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": scope},
        "spec": {"tfReplicaSpecs": replicas, "runPolicy": {"backoffLimit": 100, "cleanPodPolicy": "Running"}},
    }


def parallel(tasks: list[Callable[[], object]], threads: int = THREADS) -> None:
    with ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(task) for task in tasks]:
            future.result()


# On the benchmarks' own nodes and namespaces.
BENCH_LABEL = "disttrain.io/bench"


@contextmanager
def namespace(bench: Cluster, prefix: str, *, node: str | None = None) -> Iterator[str]:
    """A namespace of the benchmark's own (whose pods run on the node of that kind, `node_kinds`, if one is
    named), emptied of its pods, Services and jobs afterwards. It is deleted with the benchmark's others at its end
    (`delete_namespaces`): the namespace controller waits 5 s before it empties a deleted namespace, however
    little it holds, and what it deletes then would count against the next round's quiet (`settle`)."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    labels = {BENCH_LABEL: "true"}
    if node is not None:
        bench.kube.create(devcluster.node_namespace(name, node, labels))
    else:
        bench.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    try:
        yield name
    finally:
        empty_namespace(bench, name)


def delete_namespaces(bench: Cluster) -> None:
    """Delete every namespace a benchmark made (this run's and any an interrupted run left). Each was emptied
    as its round ended: the namespace controller removes it 5 s on, and the next run's first `settle` waits
    out any write that makes."""
    selector = {"labelSelector": f"{BENCH_LABEL}=true"}
    for item in bench.kube.list_metadata("/api/v1/namespaces", selector):
        _delete(bench, f"/api/v1/namespaces/{item['metadata']['name']}")


def release_pods(bench: Cluster, scope: str) -> None:
    """Drop the finalizers of the pods left in `scope`: a `--baseline` checkout of a version before
    2026-11-26 held every pod with one until it kept its log, and its operator is stopped by now."""
    pods = bench.kube.list_metadata(f"/api/v1/namespaces/{scope}/pods", {})
    drop = [{"op": "remove", "path": "/metadata/finalizers"}]
    held = [pod["metadata"]["name"] for pod in pods if pod["metadata"].get("finalizers")]
    parallel([partial(bench.kube.patch_pod, scope, name, drop) for name in held])


def empty_namespace(bench: Cluster, scope: str) -> None:
    """What a round leaves in `scope` that would live on without an operator: its pods, its Services (the peer
    makes thousands) and its jobs, one collection delete each, pods at once (no kubelet tends the benchmark's
    own): the namespace controller would delete them one by one at its client's 20 requests/s, minutes for
    thousands."""
    release_pods(bench, scope)
    now = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    for path in (f"/api/v1/namespaces/{scope}/pods", f"/api/v1/namespaces/{scope}/services"):
        _delete(bench, path, now)
    for side in (OPERATOR, PEER):
        _delete(bench, side.jobs_path(scope), now)


def _delete(bench: Cluster, path: str, options: dict[str, Any] | None = None) -> None:
    """A DELETE, sent again while the API server times out on it (a collection of thousands outlasts one
    request's 60 s: each call deletes more). Not found is as good: gone, or a kind not served (TFJobs before
    the peer's definition is installed)."""
    for _ in range(20):
        status, text = bench.kube.request("DELETE", path, {}, options)
        if status != HTTP_GATEWAY_TIMEOUT:
            break
    if status >= 300 and status != HTTP_NOT_FOUND:
        raise RuntimeError(f"deleting {path}: {status} {text[:300]}")


def devcluster_kubectl(bench: Cluster, *args: str) -> str:
    kubectl = cache_paths().binary("kubectl")
    command = [str(kubectl), "--kubeconfig", str(bench.kubeconfig), *args]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr.strip()[:500]}")
    return result.stdout


def ensure_capacity(bench: Cluster, pods: int) -> None:
    """Enough fake nodes (kwok) for `pods` more pods: the default four hold 440."""
    nodes = _bench_nodes(bench)
    shape = devcluster.NodeShape(cpu="4000", memory="16Ti", pods=BENCH_NODE_PODS)
    for index in range(len(nodes), -(-pods // BENCH_NODE_PODS)):
        node = devcluster.fake_node(f"bench-node-{index}", shape)
        node["metadata"]["labels"][BENCH_LABEL] = "true"  # type: ignore[index]
        bench.kube.create(node)
    wait_for("bench nodes ready", lambda: all(_ready(node) for node in _bench_nodes(bench)), timeout=120, interval=0.5)


def _bench_nodes(bench: Cluster) -> list[dict[str, Any]]:
    return bench.kube.list_items("/api/v1/nodes", {"labelSelector": f"{BENCH_LABEL}=true"})


def _ready(node: dict[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def post(bench: Cluster, collection: str, manifest: dict[str, Any]) -> None:
    """Create an object of any kind, in the collection at that path."""
    status, text = bench.kube.request("POST", collection, {}, manifest)
    if status >= 300:
        raise RuntimeError(f"POST {collection}: {status} {text[:300]}")


@dataclass(frozen=True)
class Side:
    """Who turns the benchmark's jobs into pods and Services: disttrain's operator (this checkout's, or
    another's), or the peer, training-operator, as shipped or unthrottled."""

    name: str
    peer: bool = False
    unthrottled: bool = True
    source: str | None = None  # another checkout whose operator runs
    keep_logs: bool = True  # False: its jobs keep no logs (`logs.keep: false`)
    hostile_neighbour: bool = False  # its operator serves a second namespace, where a hostile tenant acts
    trainer_source: str | None = None  # another checkout whose trainer its jobs run (on the process node)

    @property
    def services_per_job(self) -> int:
        return PODS_PER_JOB if self.peer else 1  # the peer makes a Service per pod

    @property
    def jobs(self) -> tuple[str, str]:
        """The jobs' API group and version, and resource."""
        return ("kubeflow.org/v1", "tfjobs") if self.peer else ("disttrain.io/v1alpha1", "disttrainjobs")

    @property
    def group(self) -> str:
        return self.jobs[0].split("/")[0]

    def jobs_path(self, scope: str) -> str:
        version, resource = self.jobs
        return f"/apis/{version}/namespaces/{scope}/{resource}"

    @property
    def event_components(self) -> frozenset[str]:
        """Who its Events name as their source: disttrain's operator as itself, or through kopf before
        it posted its own (another checkout's, `--baseline`)."""
        return frozenset({peer.CONTROLLER_NAME} if self.peer else {COMPONENT, "kopf"})

    def job(self, name: str, scope: str, *, kubelet: bool = True) -> dict[str, Any]:
        if self.peer:
            return peer_job(name, scope, kubelet=kubelet)
        return bench_job(name, scope, kubelet=kubelet, keep_logs=self.keep_logs)

    def create_job(self, bench: Cluster, scope: str, name: str, *, kubelet: bool = True) -> None:
        post(bench, self.jobs_path(scope), self.job(name, scope, kubelet=kubelet))

    def start(self, bench: Cluster, scope: str, log: Path, also: Sequence[str] = ()) -> ProcessUnderTest:
        """Its operator for `scope`, and for the namespaces `also` (disttrain's only)."""
        if self.peer:
            return PeerUnderTest(bench, scope, log, unthrottled=self.unthrottled)
        return OperatorUnderTest(bench, [scope, *also], log, source=self.source)

    def delete_job(self, bench: Cluster, scope: str, name: str) -> None:
        background = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        status, text = bench.kube.request("DELETE", f"{self.jobs_path(scope)}/{name}", {}, background)
        if status >= 300:
            raise RuntimeError(f"deleting {name}: {status} {text[:300]}")


OPERATOR = Side("operator")
LOGS_UNKEPT = Side("operator-logs-unkept", keep_logs=False)
BESIDE_HOSTILE = Side("operator-beside-hostile", hostile_neighbour=True)
PEER = Side("peer", peer=True)
PEER_AS_SHIPPED = Side("peer-as-shipped", peer=True, unthrottled=False)


@dataclass
class Event:
    at: float  # time.monotonic() when it arrived
    type: str
    name: str
    uid: str
    phase: str | None
    deleting: bool = False  # a deletionTimestamp: waiting for its kubelet's last word


@dataclass
class Watch:
    """Every event of one kind of object in a namespace, from a thread, timestamped on arrival."""

    bench: Cluster
    path: str  # e.g. /api/v1/namespaces/{ns}/pods
    events: list[Event] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Watch:
        listed = self.bench.api.call_api(*self._serialize({"limit": "1"})).read()  # type: ignore[no-untyped-call]
        self._version = json.loads(listed)["metadata"]["resourceVersion"]
        self._connect()
        threading.Thread(target=self._read, name=f"watch {self.path}", daemon=True).start()
        return self

    def _connect(self) -> None:
        query = {"watch": "true", "resourceVersion": self._version, "timeoutSeconds": "3600"}
        self._response = self.bench.api.call_api(*self._serialize(query))

    def _serialize(self, query: dict[str, str]) -> tuple[str, str, dict[str, str], None]:
        method, url, headers, _, _ = self.bench.api.param_serialize(
            method="GET",
            resource_path=self.path,
            query_params=list(query.items()),
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        return method, url, headers, None

    def _read(self) -> None:
        """Read until stopped. The API server ends the watch of a reader that falls behind a burst (its
        buffer full); the next one goes on from the last version read, so no event is missed."""
        while not self._stop.is_set():
            try:
                self._read_events()
            except (HTTPError, OSError, AttributeError):  # AttributeError: urllib3 after close()
                if not self._stop.is_set():  # stopping cuts the stream mid-read, on purpose
                    raise
            if not self._stop.is_set():
                print(f"watch of {self.path} ended by the API server; going on from {self._version}", file=sys.stderr)
                self._connect()

    def _read_events(self) -> None:
        buffer = b""
        for chunk in self._response.response.stream(65536):
            if self._stop.is_set():
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            now = time.monotonic()
            for line in lines:
                if line.strip():
                    self._record(now, json.loads(line))

    def _record(self, now: float, event: dict[str, Any]) -> None:
        body = event["object"]
        metadata = body.get("metadata", {})
        if event["type"] == "ERROR":
            raise RuntimeError(f"watch of {self.path}: {body.get('message')}")
        self._version = metadata.get("resourceVersion", self._version)
        phase = _phase(body.get("status") or {})
        name, uid, deleting = metadata.get("name", ""), metadata.get("uid", ""), "deletionTimestamp" in metadata
        with self._lock:
            self.events.append(Event(now, event["type"], name, uid, phase, deleting))

    def snapshot(self) -> list[Event]:
        with self._lock:
            return list(self.events)

    def added(self) -> set[str]:
        return {event.uid for event in self.snapshot() if event.type == "ADDED"}

    def latest(self) -> dict[str, Event]:
        """The newest event of each object still there, by uid."""
        newest: dict[str, Event] = {}
        for event in self.snapshot():
            newest[event.uid] = event
        return {uid: event for uid, event in newest.items() if event.type != "DELETED"}

    def stop(self) -> None:
        """Interrupt the reading thread's blocked read, then drop the connection."""
        self._stop.set()
        with suppress(OSError):  # the API server may have ended this watch already
            self._response.response.shutdown()
        self._response.response.close()


def _phase(status: dict[str, Any]) -> str | None:
    """A DistTrainJob's or a pod's phase; a TFJob has none, and its newest true condition says it."""
    if status.get("phase"):
        return str(status["phase"])
    true = [c["type"] for c in status.get("conditions") or [] if c.get("status") == "True"]
    return true[-1] if true else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Usage:
    rss_mb: float
    peak_rss_mb: float
    cpu_seconds: float


def _cli_module(source: str | None) -> str:
    """The `disttrain` command's module in a checkout: `disttrain_cli.main` (under `src/`, or `operator/` in
    checkouts from before); in checkouts from before the command was a package of its own,
    `disttrain_operator.cli.main`, and from before the operator's layers were folders, `disttrain_operator.cli`."""
    if source is None or any(
        (Path(source) / top / "disttrain_cli" / "main.py").exists() for top in ("src", "operator")
    ):
        return "disttrain_cli.main"
    if (Path(source) / "operator" / "disttrain_operator" / "cli" / "main.py").exists():
        return "disttrain_operator.cli.main"
    return "disttrain_operator.cli"


def source_path(source: str) -> str:
    """PYTHONPATH for another checkout's operator: its packages, under `src/` (`operator/` in checkouts from
    before), its contract and its trainer."""
    return ":".join(f"{source}/{top}" for top in ("src", "operator", "contract", "trainer_image"))


class ProcessUnderTest:
    """An operator as a process whose memory and CPU can be read."""

    process: subprocess.Popen[bytes]

    def usage(self) -> Usage:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        stat = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return Usage(
            rss_mb=int(fields["VmRSS"].split()[0]) / 1024,
            peak_rss_mb=int(fields["VmHWM"].split()[0]) / 1024,
            cpu_seconds=(int(stat[11]) + int(stat[12])) / ticks,  # utime and stime
        )

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGINT)  # py-spy, when profiling, writes its stacks on SIGINT only
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


class OperatorUnderTest(ProcessUnderTest):
    """`disttrain operator` for the benchmark's namespaces, as a process whose memory and CPU can be read."""

    def __init__(
        self,
        bench: Cluster,
        scopes: Sequence[str],
        log: Path,
        env: dict[str, str] | None = None,
        source: str | None = None,
    ) -> None:
        """`source`: another checkout whose operator runs instead (before/after); by default
        DISTTRAIN_BENCH_OPERATOR_SOURCE, or this one."""
        port, metrics = free_port(), free_port()
        source = source or os.environ.get("DISTTRAIN_BENCH_OPERATOR_SOURCE")
        command = [sys.executable, "-m", _cli_module(source), "operator", *(f"--namespace={s}" for s in scopes)]
        command.append(f"--liveness=http://127.0.0.1:{port}/healthz")
        if os.environ.get("DISTTRAIN_BENCH_PROFILE"):  # collapsed stacks of every thread, for bench/profile.py
            profile = log.with_suffix(".stacks")
            gil = ["--gil"] if os.environ["DISTTRAIN_BENCH_PROFILE"] == "gil" else []  # CPU only, not waits
            command = ["py-spy", "record", "--format", "raw", "--rate", "200", *gil, "-o", str(profile), "--", *command]
        environment = {
            **os.environ,
            **(
                {"PYTHONPATH": f"{source}/src:{source}/operator:{source}/contract:{source}/trainer_image"}
                if source
                else {}
            ),
            "KUBECONFIG": str(bench.kubeconfig),
            "DISTTRAIN_METRICS_PORT": str(metrics),
            "DISTTRAIN_RECONCILE_WORKERS": str(THREADS),
            **(env or {}),
        }
        self.metrics_url = f"http://127.0.0.1:{metrics}/metrics"
        with log.open("ab") as output:  # a session of its own: a signal reaches py-spy and the operator alike
            self.process = subprocess.Popen(
                command, stdout=output, stderr=subprocess.STDOUT, env=environment, start_new_session=True
            )
        wait_for(
            "the operator's liveness endpoint",
            lambda: answers(f"http://127.0.0.1:{port}/healthz"),
            timeout=60,
            interval=0.5,
        )


def _install_tfjob_crd(bench: Cluster, crd: Path) -> None:
    """The peer's own TFJob CRD, unless the cluster serves TFJobs already."""
    selector = {"fieldSelector": "metadata.name=tfjobs.kubeflow.org"}
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    if not bench.kube.list_items(path, selector):
        devcluster_kubectl(bench, "apply", "--server-side", "-f", str(crd))

    def established() -> bool:
        return any(crd_established(item) for item in bench.kube.list_items(path, selector))

    wait_for("the TFJob CRD established", established, timeout=60, interval=0.2)


def _started(log: Path, line: str) -> bool:
    return log.is_file() and line in log.read_text(errors="replace")


class PeerUnderTest(ProcessUnderTest):
    """training-operator for one namespace, TFJobs only, no gang scheduler. As shipped, with its default
    flags (one controller thread); unthrottled, its unthrottled build with as many controller threads as
    the operator has reconcile threads."""

    def __init__(self, bench: Cluster, scope: str, log: Path, *, unthrottled: bool) -> None:
        build = peer.ensure_peer()
        _install_tfjob_crd(bench, build.tfjob_crd)
        peer.write_serving_certificates()
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": peer.WEBHOOK_SECRET, "namespace": scope}}
        post(bench, f"/api/v1/namespaces/{scope}/secrets", secret)
        binary = build.binary(peer.UNTHROTTLED if unthrottled else peer.SHIPPED)
        command = [str(binary), "--enable-scheme=tfjob", f"--namespace={scope}"]
        command += [f"--metrics-bind-address=127.0.0.1:{free_port()}", f"--webhook-server-port={free_port()}"]
        command += [f"--health-probe-bind-address=127.0.0.1:{free_port()}"]
        command += [f"--controller-threads={THREADS}"] if unthrottled else []
        environment = {**os.environ, "KUBECONFIG": str(bench.kubeconfig), "MY_POD_NAMESPACE": scope}
        with log.open("ab") as output:
            self.process = subprocess.Popen(
                command, stdout=output, stderr=subprocess.STDOUT, env=environment, start_new_session=True
            )
        # Its controller's workers start once the certificates are in place and its caches synced.
        wait_for("the peer's controller workers", lambda: _started(log, "Starting workers"), timeout=60, interval=0.2)


_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


Request = tuple[str, str, str, str]  # verb, API group, resource, subresource


def apiserver_requests(bench: Cluster) -> Counter[Request]:
    """kube-apiserver's own `apiserver_request_total`, summed by verb, group, resource and subresource."""
    counts: Counter[Request] = Counter()
    for sample in _SAMPLE.finditer(bench.kube.get_text("/metrics", {})):
        labels = dict(_LABEL.findall(sample["labels"]))
        verb, group = labels.get("verb", ""), labels.get("group", "")
        key: Request = (verb, group, labels.get("resource", ""), labels.get("subresource", ""))
        counts[key] += int(float(sample["value"]))
    return counts


# The machine counts as idle below this share of its CPU busy: a quiet cluster with a few dozen kwok nodes
# keeps 2 cores about 6 % busy with leases and heartbeats.
IDLE_BUSY_SHARE = 0.2


@dataclass(frozen=True)
class Quiet:
    """What `settle` waits for: `seconds` without a settling write, and then the CPU idle for at most
    `busy_wait` seconds more (a machine that stays busier has other work on it)."""

    seconds: float = 3.0
    busy_wait: float = 30.0


def _cpu_times() -> tuple[int, int]:
    """The machine's CPU time since boot, in all and idle (idle and iowait), from /proc/stat's first line."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return sum(fields), fields[3] + fields[4]


# Written by the controllers, the scheduler and kwok in the wake of a round; nodes and Leases are
# written all the time.
SETTLING = frozenset({"pods", "services", "endpoints", "endpointslices"})


def settle(bench: Cluster, quiet: Quiet = Quiet(), timeout: float = 900) -> None:
    """Wait until the API server serves no write on pods, Services and their endpoints for
    `quiet.seconds` and the machine's CPU is mostly idle meanwhile (or `quiet.busy_wait` has passed): the
    controllers, the scheduler and kwok have caught up with what came before, which would otherwise count
    or compete. (Reads go on: the process node lists its pods twice a second.) After a round of the peer's,
    the endpoints controller goes on deleting the endpoints of its thousands of Services for over a minute."""

    def settling_writes() -> int:
        writes = ("POST", "PUT", "PATCH", "DELETE")
        counts = apiserver_requests(bench).items()
        return sum(count for (verb, _, resource, _), count in counts if resource in SETTLING and verb in writes)

    last = settling_writes()
    quiet_since: float | None = None

    def settled() -> bool:
        nonlocal last, quiet_since
        total, idle = _cpu_times()
        time.sleep(quiet.seconds)
        now, before = settling_writes(), last
        total_after, idle_after = _cpu_times()
        last = now
        if now != before:
            quiet_since = None
            return False
        quiet_since = quiet_since or time.monotonic()
        busy = 1 - (idle_after - idle) / max(1, total_after - total)
        return busy < IDLE_BUSY_SHARE or time.monotonic() - quiet_since >= quiet.busy_wait

    wait_for("a quiet cluster", settled, timeout=timeout, interval=0)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


_CONTAINER = {"name": "tensorflow", "restartCount": 0, "image": "", "imageID": ""}


def running_status() -> dict[str, Any]:
    """What a kubelet reports for a started, ready trainer pod; the address makes the operator poll its
    progress endpoint, where nothing listens (a refused connection, as for a trainer still starting)."""
    container = {**_CONTAINER, "ready": True, "state": {"running": {}}}
    ready = [{"type": "Ready", "status": "True"}]
    return {"phase": "Running", "podIP": "127.0.0.1", "conditions": ready, "containerStatuses": [container]}


def ended_status(exit_code: int) -> dict[str, Any]:
    """A trainer container that ended with `exit_code` (0: Succeeded; 137: killed, which ExitCode restarts)."""
    container = {**_CONTAINER, "ready": False, "state": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}
    return {"phase": "Failed" if exit_code else "Succeeded", "containerStatuses": [container]}


def set_pod_status(bench: Cluster, scope: str, pod: str, status: dict[str, Any]) -> None:
    bench.kube.patch_status(f"/api/v1/namespaces/{scope}/pods/{pod}/status", status)


def play_kubelet(bench: Cluster, scope: str, pods: Watch, done: Callable[[], bool], timeout: float) -> None:
    """Do a kubelet's part for pods kwok leaves alone, until `done`: report each new pod Running, and
    remove each pod being deleted for good (a kubelet's last word once its containers stopped).
    Each pod is acted on once per state, as a kubelet would: the watch may not show the result yet."""
    done_to: set[tuple[str, bool]] = set()  # (uid, deleting)

    def act(event: Event) -> None:
        try:
            if event.deleting:
                bench.kube.confirm_pod_deletion(scope, event.name, event.uid)
            elif event.phase in (None, "Pending"):
                set_pod_status(bench, scope, event.name, running_status())
        except TransientApiError:  # replaced or deleted meanwhile: the next round sees what is there now
            pass

    def step() -> bool:
        todo = [e for e in pods.latest().values() if e.deleting or e.phase in (None, "Pending")]
        todo = [e for e in todo if (e.uid, e.deleting) not in done_to]
        parallel([partial(act, event) for event in todo])
        done_to.update((e.uid, e.deleting) for e in todo)
        return done()

    wait_for("the pods' kubelet work", step, timeout=timeout, interval=0.2)
