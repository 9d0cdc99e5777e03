"""A node of the local cluster whose pods really run, as host processes: `disttrain dev-cluster up --process-node`.

The agent registers the Node `process-node-0` (label and NoSchedule taint
`disttrain.io/node-kind=process`, so only pods that ask for it land there), renews its Lease and
status like a kubelet, and runs each pod scheduled onto it: a network namespace and address of its
own (`pod_network`), its containers as processes (`process_pods`), and its status reported back:
phase, addresses, container states, exit codes, termination messages, restarts as the kubelet
makes them (a container's restart rules, else the restart policy; a restart within 10 minutes of the
last held back in CrashLoopBackOff, `RestartBackoff`), and readiness as its containers' readiness
probes say (`readiness`). A deleted pod's processes get SIGTERM, then SIGKILL after the grace
period; the agent reports how they ended, then confirms the deletion. Images are not pulled:
commands run in the environment the agent was started from (where the trainer is installed), as the
agent's user. Logs are in
`<state>/pods/<namespace>_<pod>_<uid>/<container>.log` (its pid in `<container>.pid`), which
`kubectl logs` reads through the API server (`node_logs`).

Like a kubelet, it acts when something changes: a watch of its pods and each container's exit wake its
loop at once; the loop also runs every `SYNC_SECONDS` (grace periods, heartbeats, a watch that broke).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from disttrain.local.containers import UnsupportedContainerError
from disttrain_contract.timestamps import format_time
from disttrain_dev import node_kinds, node_logs, pod_network
from disttrain_dev.kubelet import KubeletApi
from disttrain_dev.process_pods import (
    KILLED,
    RESTART,
    RESTART_ALL,
    ContainerState,
    PodFolders,
    ProcessSpec,
    RestartBackoff,
    backing_off_message,
    claim_names,
    config_map_files,
    config_map_sources,
    failed_status,
    host_names,
    hosts_file,
    pod_status,
    process_specs,
    restart_action,
    service_names,
)
from disttrain_dev.readiness import ReadinessProbe
from disttrain_kube.api_errors import TransientApiError
from disttrain_kube.connection import connect

logger = logging.getLogger("disttrain.process-node")

NODE_NAME = "process-node-0"
NODE_KIND_LABEL = node_kinds.NODE_KIND_LABEL
NODE_KIND = node_kinds.PROCESS
TAINT = node_kinds.taint(NODE_KIND)
SYNC_SECONDS = 0.5
WATCH_SECONDS = 300  # a watch the API server ends after this long, to be opened again
HEARTBEAT_SECONDS = 10.0
LEASE_SECONDS = 40
DEFAULT_GRACE_SECONDS = 30


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _exit_code(returncode: int) -> int:
    """A process killed by signal N ends as a container does: 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


@dataclass
class Container:
    spec: ProcessSpec
    process: subprocess.Popen[bytes] | None
    state: ContainerState
    readiness: ReadinessProbe | None = None
    backoff: RestartBackoff = field(default_factory=RestartBackoff)
    restart_at: float | None = None  # while its restart is held back: when it starts (the monotonic clock)
    ended: float = 0.0  # when its last run ended (the monotonic clock)


@dataclass
class PodRun:
    uid: str
    namespace: str
    name: str
    body: dict[str, Any]
    address: str
    network: str | None = None
    containers: list[Container] = field(default_factory=list)
    started: datetime = field(default_factory=_now)
    kill_at: float | None = None  # set once the pod is being deleted
    reported: dict[str, Any] | None = None

    @property
    def live(self) -> list[subprocess.Popen[bytes]]:
        return [c.process for c in self.containers if c.process is not None and c.process.poll() is None]


DECLARED_FEATURES = ("RestartAllContainersOnContainerExits",)  # `restart_action`'s RestartAllContainers


class ProcessNode:
    def __init__(self, kube: KubeletApi, folder: Path, name: str = NODE_NAME) -> None:
        self.wake = threading.Event()  # set when a pod of the node changed or one of its processes ended
        self._kube = kube
        self._folder = folder
        self.name = name
        self._runs: dict[str, PodRun] = {}
        self._finished: set[str] = set()  # uids of pods whose end was reported
        self._free = [str(address) for address in pod_network.PROCESS_POOL.hosts()][1:]  # the first is the bridge's
        self._last_heartbeat = 0.0
        self._logs: ThreadingHTTPServer | None = None  # the kubelet's log endpoint, for `kubectl logs`
        self._hosts = ""  # the current hosts file, and the namespaces that have it
        self._hosts_in: set[str] = set()
        self._services: list[dict[str, Any]] = []  # the headless Services of the node's pods' namespaces
        self._environment = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "GRPC_DNS_RESOLVER": "native",  # resolve through the pod's hosts file
        }

    # The node

    def register(self) -> None:
        pod_network.remove_all()
        pod_network.ensure_bridge()
        if self._logs is None:
            self._logs = node_logs.serve(self._folder, pod_network.GATEWAY)
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    NODE_KIND_LABEL: NODE_KIND,
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                },
            },
            "spec": {"taints": [TAINT]},
        }
        self._kube.create(node)
        self.heartbeat()

    def heartbeat(self) -> None:
        now = format_time(_now())
        capacity = {"cpu": str(os.cpu_count() or 1), "memory": _memory(), "pods": "110"}
        conditions = [
            {"type": kind, "status": "False", "reason": f"No{kind}", "lastHeartbeatTime": now}
            for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")
        ]
        conditions.append({"type": "Ready", "status": "True", "reason": "ProcessNodeReady", "lastHeartbeatTime": now})
        status = {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": pod_network.GATEWAY},
                {"type": "Hostname", "address": self.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self._logs.server_address[1] if self._logs else 0}},
            # what a kubelet declares of the features this node implements, which the scheduler matches pods to
            "declaredFeatures": list(DECLARED_FEATURES),
        }
        self._kube.patch_status(f"/api/v1/nodes/{self.name}/status", status)
        self._kube.renew_node_lease(self.name, LEASE_SECONDS)
        pod_network.allow_forwarding(pod_network.BRIDGE)  # a Docker engine may have started since
        self._last_heartbeat = time.monotonic()

    # One round

    def step(self) -> None:
        if time.monotonic() - self._last_heartbeat >= HEARTBEAT_SECONDS:
            self.heartbeat()
        listed = self._kube.list_items("/api/v1/pods", {"fieldSelector": f"spec.nodeName={self.name}"})
        pods = {pod["metadata"]["uid"]: pod for pod in listed}
        namespaces = sorted({pod["metadata"]["namespace"] for pod in listed})
        self._services = [
            service
            for namespace in namespaces
            for service in self._kube.list_items(f"/api/v1/namespaces/{namespace}/services", {})
        ]
        for uid in [uid for uid in self._runs if uid not in pods]:  # removed by force: nothing to report
            self._stop(self._runs.pop(uid), signal.SIGKILL)
        prepared = []
        for uid, pod in pods.items():
            bound = self._bound(pod) if self._is_new(uid, pod) else None
            config_maps = self._config_maps(pod) if bound is not None else None
            run = self._prepare(pod, bound, config_maps) if bound is not None and config_maps is not None else None
            if run is not None:
                prepared.append(run)
        self._refresh_hosts()
        for run in prepared:
            self._launch(run)
        for uid, pod in pods.items():
            known = self._runs.get(uid)
            if known is not None:
                known.body = pod
                self._follow(known)
            elif pod["metadata"].get("deletionTimestamp"):
                self._confirm_deletion(pod)
        self._refresh_hosts()

    def _is_new(self, uid: str, pod: dict[str, Any]) -> bool:
        if uid in self._runs or uid in self._finished:
            return False
        if pod["metadata"].get("deletionTimestamp"):
            return False
        phase = str(pod.get("status", {}).get("phase", "Pending"))
        if phase == "Running":  # started by an agent before this one: its processes are gone
            message = "the process node restarted and its processes are gone"
            self._report(pod, failed_status("NodeRestarted", message))
            self._finished.add(uid)
            return False
        return phase == "Pending"

    def _bound(self, pod: dict[str, Any]) -> dict[str, str] | None:
        """The PersistentVolume of each claim the pod mounts; None (wait) while one is not bound."""
        bound = {}
        for claim in claim_names(pod):
            path = "/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}"
            found = self._kube.read(path, {"namespace": pod["metadata"]["namespace"], "name": claim})
            volume = (found or {}).get("spec", {}).get("volumeName")
            if not volume:
                return None
            bound[claim] = str(volume)
        return bound

    def _config_maps(self, pod: dict[str, Any]) -> dict[str, dict[str, str]] | None:
        """The data of each ConfigMap the pod mounts; None (wait, as the kubelet does) while one that is not
        optional is missing."""
        found_maps = {}
        for source in config_map_sources(pod):
            path = "/api/v1/namespaces/{namespace}/configmaps/{name}"
            found = self._kube.read(path, {"namespace": pod["metadata"]["namespace"], "name": source["name"]})
            if found is None and not source.get("optional"):
                return None
            found_maps[source["name"]] = dict((found or {}).get("data") or {})
        return found_maps

    def _prepare(
        self, pod: dict[str, Any], bound: dict[str, str], config_maps: dict[str, dict[str, str]]
    ) -> PodRun | None:
        metadata = pod["metadata"]
        run = PodRun(metadata["uid"], metadata["namespace"], metadata["name"], pod, self._free.pop(0))
        folders = PodFolders(self._folder / "pods" / f"{run.namespace}_{run.name}_{run.uid}", self._folder / "volumes")
        try:
            specs = process_specs(pod, run.address, folders, bound)
            run.network = pod_network.add(run.uid[:8], run.address)
        except (UnsupportedContainerError, pod_network.PodNetworkError) as error:
            self._free.insert(0, run.address)
            self._report(pod, failed_status("UnsupportedPod", str(error)))
            self._finished.add(run.uid)
            return None
        folders.pod.mkdir(parents=True, exist_ok=True)
        for path, text in config_map_files(pod, folders, config_maps).items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        manifests = {container["name"]: container for container in pod["spec"]["containers"]}
        for spec in specs:
            readiness = ReadinessProbe.of(manifests[spec.container], time.monotonic())
            state = ContainerState(spec.container, run.started, ready=readiness is None)
            run.containers.append(Container(spec, None, state, readiness))
        self._runs[run.uid] = run
        return run

    def _launch(self, run: PodRun) -> None:
        for container in run.containers:
            container.process = self._start_process(run, container.spec)
        self._report_run(run)

    def _start_process(self, run: PodRun, spec: ProcessSpec) -> subprocess.Popen[bytes]:
        assert run.network is not None
        for mount in spec.mounts:
            mount.source.mkdir(parents=True, exist_ok=True)
        spec.termination_message.unlink(missing_ok=True)
        hostname = run.body["spec"].get("hostname") or run.name
        environment = {**self._environment, "HOME": str(spec.log.parent), "HOSTNAME": hostname, **spec.env}
        command = pod_network.command_in(run.network, spec.argv, spec.mounts, spec.working_dir)
        with spec.log.open("ab") as log:
            process = subprocess.Popen(
                command, env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        spec.log.with_suffix(".pid").write_text(f"{process.pid}\n")  # for fault tests and debugging
        threading.Thread(
            target=_wake_on_exit, args=(process, self.wake), name=f"exit of {process.pid}", daemon=True
        ).start()
        return process

    def _follow(self, run: PodRun) -> None:
        """Collect exits, restart per policy, carry out a deletion, and report what changed."""
        deleting = bool(run.body["metadata"].get("deletionTimestamp"))
        self._collect_exits(run, restart=not deleting)
        if not deleting:
            self._restart_due(run)
        self._probe(run)
        if deleting:
            self._delete(run)
            return
        self._report_run(run)
        if run.reported is not None and run.reported["phase"] in ("Succeeded", "Failed"):
            self._release(run)

    def _collect_exits(self, run: PodRun, *, restart: bool) -> None:
        """Note how each ended container ended, and start again those the kubelet would (`restart_action`): the
        container alone, or, for `RestartAllContainers`, every container of the pod, in place."""
        policy = run.body["spec"].get("restartPolicy", "Always")
        manifests = {container["name"]: container for container in run.body["spec"]["containers"]}
        for container in run.containers:
            if container.process is None or (code := container.process.poll()) is None:
                continue
            action = restart_action(policy, manifests[container.spec.container], _exit_code(code)) if restart else None
            if action == RESTART_ALL:
                self._restart_all(run)
                return
            message = _read(container.spec.termination_message)
            container.process, container.ended = None, time.monotonic()
            container.state = replace(container.state, exit_code=_exit_code(code), finished=_now(), message=message)
            if action == RESTART:
                self._schedule_restart(run, container)

    def _schedule_restart(self, run: PodRun, container: Container) -> None:
        """When the ended container starts again (`_restart_due`): at once, or held back (`RestartBackoff`) as
        CrashLoopBackOff."""
        wait = container.backoff.wait(container.ended)
        container.restart_at = container.ended + wait
        if wait:
            words = backing_off_message(wait, container.spec.container, run.body)
            container.state = replace(container.state, backing_off=words)

    def _restart_due(self, run: PodRun) -> None:
        """Start the containers whose restart is due (`_follow` calls it right after collecting the exits)."""
        for container in run.containers:
            if container.restart_at is not None and time.monotonic() >= container.restart_at:
                container.restart_at = None
                container.backoff = container.backoff.next(container.ended)
                self._restart(run, container)

    def _restart(self, run: PodRun, container: Container, *, with_all: bool = False) -> None:
        """The ended container started again; its last run's log kept beside it, as the kubelet keeps one, and
        served as `previous`, except after `RestartAllContainers`, whose runs the kubelet no longer serves."""
        ended = container.state
        assert ended.exit_code is not None
        ready = container.readiness is None
        log, previous = container.spec.log, node_logs.previous_log(container.spec.log)
        if log.exists():
            removed = log.with_name(f"{log.stem}.removed-{container.state.restarts}{log.suffix}")
            log.replace(removed if with_all else previous)
            if with_all:
                previous.unlink(missing_ok=True)
        container.state = replace(
            container.state,
            started=_now(),
            restarts=ended.restarts + 1,
            last_exit_code=ended.exit_code,
            last_started=ended.started,
            last_finished=ended.finished,
            last_message=ended.message,
            restarted_with_all=with_all,
            ready=ready,
            exit_code=None,
            finished=None,
            message="",
            backing_off="",
        )
        container.process = self._start_process(run, container.spec)
        if container.readiness is not None:
            container.readiness.restart(time.monotonic())

    def _restart_all(self, run: PodRun) -> None:
        """Every container of the pod started again, in place, as the kubelet does for `RestartAllContainers`:
        those still running killed first, those that ended too; the pod keeps its UID, address and volumes."""
        _signal(run.live, signal.SIGKILL)
        for container in run.containers:
            if container.process is not None:
                container.process.wait(timeout=10)
            container.process, container.restart_at = None, None
            container.state = replace(container.state, exit_code=KILLED, finished=_now())
            self._restart(run, container, with_all=True)

    def _probe(self, run: PodRun) -> None:
        """Run the readiness probes that are due of the containers that run."""
        for container in run.containers:
            if container.readiness is None or container.process is None or container.state.exit_code is not None:
                continue
            ready = container.readiness.check(run.address, time.monotonic())
            if ready is not None and ready != container.state.ready:
                container.state = replace(container.state, ready=ready)

    def _delete(self, run: PodRun) -> None:
        """Stop a deleted pod's processes (SIGTERM, SIGKILL once its grace is spent), report how they ended, as
        a kubelet does before its last word, and remove the pod."""
        if run.kill_at is None:
            grace = run.body["metadata"].get("deletionGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
            run.kill_at = time.monotonic() + float(grace)
            _signal(run.live, signal.SIGTERM)
        if run.live and time.monotonic() < run.kill_at:
            return
        self._stop(run, signal.SIGKILL)
        self._collect_exits(run, restart=False)
        self._report_run(run)
        self._confirm_deletion(run.body)
        self._runs.pop(run.uid, None)
        self._finished.add(run.uid)

    def _confirm_deletion(self, pod: dict[str, Any]) -> None:
        metadata = pod["metadata"]
        self._kube.confirm_pod_deletion(metadata["namespace"], metadata["name"], metadata["uid"])

    def _stop(self, run: PodRun, sig: signal.Signals) -> None:
        _signal(run.live, sig)
        for process in run.live:
            process.wait(timeout=10)
        self._release(run)

    def _release(self, run: PodRun) -> None:
        if run.network is not None:
            pod_network.remove(run.uid[:8])
            run.network = None
            self._free.insert(0, run.address)

    def _refresh_hosts(self) -> None:
        """Give every pod the current hosts file: all of them when it changed, else only new namespaces."""
        networked = [run for run in self._runs.values() if run.network is not None]
        text = hosts_file(
            (run.address, host_names(run.body) + service_names(run.body, self._services)) for run in networked
        )
        if text != self._hosts:
            self._hosts, self._hosts_in = text, set()
        for run in networked:
            if run.network is not None and run.network not in self._hosts_in:
                pod_network.write_hosts(run.network, text)
                self._hosts_in.add(run.network)

    def _report_run(self, run: PodRun) -> None:
        states = [container.state for container in run.containers]
        status = pod_status(run.body, states, run.address, pod_network.GATEWAY, run.started)
        if status != run.reported and self._report(run.body, status):
            run.reported = status
            if status["phase"] in ("Succeeded", "Failed"):
                self._finished.add(run.uid)

    def _report(self, pod: dict[str, Any], status: dict[str, Any]) -> bool:
        metadata = pod["metadata"]
        path = f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}/status"
        return self._kube.patch_status(path, status)

    def shutdown(self) -> None:
        for run in list(self._runs.values()):
            _signal(run.live, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(run.live for run in self._runs.values()):
            time.sleep(0.1)
        for run in list(self._runs.values()):
            self._stop(run, signal.SIGKILL)
        pod_network.remove_all()
        if self._logs is not None:
            self._logs.shutdown()


def _wake_on_exit(process: subprocess.Popen[bytes], wake: threading.Event) -> None:
    process.wait()
    wake.set()


def _watch_pods(kube: KubeletApi, node: str, wake: threading.Event, stop: threading.Event) -> None:
    """Set `wake` at every change to a pod bound to `node`, as long as the node runs; a broken watch is opened
    again a second later (the loop's own period covers the gap)."""
    query = {"watch": "true", "fieldSelector": f"spec.nodeName={node}", "timeoutSeconds": str(WATCH_SECONDS)}
    while not stop.is_set():
        try:
            for _ in kube.stream_lines("/api/v1/pods", query, read_timeout=WATCH_SECONDS + 30):
                wake.set()
                if stop.is_set():
                    return
        except TransientApiError as error:
            logger.info("watch of the node's pods: %s", error)
            stop.wait(1)


def _signal(processes: list[subprocess.Popen[bytes]], sig: signal.Signals) -> None:
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _memory() -> str:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return f"{line.split()[1]}Ki"
    return "8Gi"


def serve(kube: KubeletApi, folder: Path, stop: threading.Event) -> None:
    node = ProcessNode(kube, folder)
    while not stop.is_set():
        try:
            node.register()
            break
        except TransientApiError as error:
            logger.warning("registering the node: %s", error)
            stop.wait(1)
    logger.info("node %s ready", node.name)
    watch = threading.Thread(target=_watch_pods, args=(kube, node.name, node.wake, stop), name="watch", daemon=True)
    watch.start()
    while not stop.is_set():
        try:
            node.step()
        except TransientApiError as error:  # the API server restarting: the pods run on
            logger.warning("%s", error)
        node.wake.wait(SYNC_SECONDS)
        node.wake.clear()  # what woke it is in the next step's list
    node.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="disttrain-process-node", description=__doc__.split("\n")[0])
    parser.add_argument("--state", required=True, help="folder for pod logs, volumes and termination messages")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    serve(KubeletApi(connect(in_cluster_first=True).api_client), Path(args.state), stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
