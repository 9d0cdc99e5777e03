"""Helpers for tests against the local control plane: kubectl, waiting, the operator process."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from disttrain.local.ports import free_port
from disttrain_core.observed import unschedulable
from disttrain_dev.cluster import NodeShape, fake_node
from disttrain_dev.polling import wait_for
from disttrain_dev.versions import cache_paths
from support import ROOT, load_one


@dataclass(frozen=True)
class Cluster:
    kubeconfig: Path

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(cache_paths().binary("kubectl")), *args]
        result = subprocess.run(command, input=stdin, capture_output=True, text=True, env=self.env, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result

    def delete_namespace(self, name: str) -> None:
        """Delete the namespace, and wait until its pods are gone: the next test finds the nodes free. Its
        other content goes meanwhile: the namespace controller starts 5 s after a deletion (time for every
        API server to see it) and looks again 5 s later while pods remain, where a pod deleted goes at
        once (or as its grace period lets its processes end). No object can be made in it once deleting."""
        self.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=false")
        self.kubectl("delete", "pods", "--all", "-n", name, "--ignore-not-found", "--wait=true", "--timeout=120s")

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        result = self.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def items(self, kind: str, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        args = ["get", kind, "-n", namespace, "-o", "json", *(["-l", selector] if selector else [])]
        items: list[dict[str, Any]] = json.loads(self.kubectl(*args).stdout)["items"]
        return items

    def set_pod_status(
        self,
        namespace: str,
        name: str,
        phase: str,
        exit_code: int | None = None,
        message: str | None = None,
        *,
        finished_at: str | None = None,
    ) -> None:
        """Play the kubelet: end a pod with a phase, the tensorflow container's exit code, termination message
        and end time."""
        status: dict[str, Any] = {"phase": phase}
        if exit_code is not None:
            terminated: dict[str, Any] = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}
            if message is not None:
                terminated["message"] = message
            if finished_at is not None:
                terminated["finishedAt"] = finished_at
            status["containerStatuses"] = [
                {
                    "name": "tensorflow",
                    "image": "disttrain/trainer:0.1.0",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": terminated},
                }
            ]
        self.patch_pod_status(namespace, name, status)

    def patch_pod_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        patch = json.dumps({"status": status})
        self.kubectl("patch", "pod", name, "-n", namespace, "--subresource=status", "--type=merge", "-p", patch)

    def evict(self, namespace: str, name: str) -> None:
        """Evict a pod through the Eviction API, as `kubectl drain` and the cluster autoscaler do."""
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
        self.kubectl("create", "--raw", path, "-f", "-", stdin=json.dumps(eviction))

    def apply(self, namespace: str, text: str) -> None:
        self.kubectl("apply", "-n", namespace, "-f", "-", stdin=text)

    def create_claim(self, namespace: str, name: str) -> None:
        """An existing PVC, as a job's `checkpoint.claimName` expects (the parameter server example's)."""
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        }
        self.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(claim))

    def job_pods(self, namespace: str, job: str) -> dict[str, dict[str, Any]]:
        return {pod["metadata"]["name"]: pod for pod in self.items("pods", namespace, f"disttrain.io/job-name={job}")}

    def has_event(self, namespace: str, reason: str) -> bool:
        return any(event["reason"] == reason for event in self.items("events", namespace))

    def job(self, namespace: str, name: str) -> dict[str, Any]:
        job = self.get("disttrainjob", name, namespace)
        assert job is not None, f"job {namespace}/{name} is gone"
        return job


def condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in job.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def holds(job: dict[str, Any], kind: str) -> bool:
    found = condition(job, kind)
    return found is not None and found["status"] == "True"


OPERATOR_TEST_NAMESPACE = "disttrain-operator-under-test"


def running_pods(cluster: Cluster, namespace: str, job: str, count: int) -> dict[str, dict[str, Any]]:
    """The job's pods once exactly `count` exist and all run."""

    def check() -> dict[str, dict[str, Any]] | None:
        pods = cluster.job_pods(namespace, job)
        live = [
            p
            for p in pods.values()
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        ]
        return pods if len(pods) == count and len(live) == count else None

    return wait_for(f"{count} running pods of {job}", check, timeout=90)


def all_unschedulable(cluster: Cluster, namespace: str, job: str, count: int) -> bool:
    """`count` pods of the job exist and the scheduler found no node for any of them (a cordon holds them)."""
    pods = cluster.job_pods(namespace, job).values()
    return len(pods) == count and all(unschedulable(pod) is not None for pod in pods)


def drain(cluster: Cluster, node: str, job: str, timeout: int) -> None:
    """`kubectl drain` of the job's pods from `node`, as an admin does it: cordoned, its pods evicted and gone."""
    selector = f"--pod-selector=disttrain.io/job-name={job}"
    cluster.kubectl("drain", node, selector, "--ignore-daemonsets", "--delete-emptydir-data", f"--timeout={timeout}s")


def drain_and_uncordon(cluster: Cluster, node: str, namespace: str, job: str, *, count: int, timeout: int) -> None:
    """`drain`, and once the operator's next `count` pods wait out the cordon, `kubectl uncordon`."""
    try:
        drain(cluster, node, job, timeout)
        wait_for("the next pods held back by the cordon", lambda: all_unschedulable(cluster, namespace, job, count))
    finally:
        cluster.kubectl("uncordon", node)


def suspend(cluster: Cluster, namespace: str, job: str, value: bool) -> None:
    """`spec.runPolicy.suspend` set as a user (or Kueue) sets it."""
    patch = json.dumps({"spec": {"runPolicy": {"suspend": value}}})
    cluster.kubectl("patch", "dtj", job, "-n", namespace, "--type=merge", "-p", patch)


def job_where(cluster: Cluster, namespace: str, job: str, what: str, test: Any) -> dict[str, Any]:
    """The job once `test` holds of it. A job whose first status is not written yet (the operator holds
    it back up to 2 s, for its pods to run) reads with an empty one."""

    def check() -> dict[str, Any] | None:
        current = cluster.job(namespace, job)
        current.setdefault("status", {})
        return current if test(current) else None

    return wait_for(f"{job}: {what}", check, timeout=90)


def operator_kubeconfig(cluster: Cluster, folder: Path, rbac: Path = ROOT / "deploy" / "rbac.yaml") -> Path:
    """Credentials of the operator's own ServiceAccount with deploy/rbac.yaml's rules (or another file's,
    such as an overlay's additions), not an admin's."""
    return account_kubeconfig(cluster, folder, rbac, "disttrain-operator")


def account_kubeconfig(
    cluster: Cluster, folder: Path, rbac: Path, account: str, namespace: str = OPERATOR_TEST_NAMESPACE
) -> Path:
    """Credentials of `account`, a ServiceAccount with the rules of an RBAC file of deploy/.

    The cluster-wide objects are the file's, renamed, and the namespaced ones (the ServiceAccount and
    any Role) move to `namespace`, so that tests installing deploy/ itself leave them alone.
    """
    cluster.kubectl("create", "namespace", namespace, check=False)
    documents = [doc for doc in yaml.safe_load_all(rbac.read_text()) if doc]
    for document in documents:
        if document["kind"] in {"ServiceAccount", "Role", "RoleBinding"}:
            document["metadata"]["namespace"] = namespace
        else:
            document["metadata"]["name"] = f"{OPERATOR_TEST_NAMESPACE}-{document['metadata']['name']}"
        if document["kind"] == "ClusterRoleBinding":
            document["roleRef"]["name"] = f"{OPERATOR_TEST_NAMESPACE}-{document['roleRef']['name']}"
        if document["kind"].endswith("RoleBinding"):
            document["subjects"][0]["namespace"] = namespace
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}))
    return token_kubeconfig(cluster, folder, namespace, account)


def token_kubeconfig(cluster: Cluster, folder: Path, namespace: str, account: str) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount, with a token of a day."""
    token = cluster.kubectl("create", "token", account, "-n", namespace, "--duration=24h").stdout.strip()
    config = json.loads(cluster.kubeconfig.read_text())
    config["users"] = [{"name": "admin", "user": {"token": token}}]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{account}.kubeconfig"
    path.write_text(json.dumps(config))
    return path


RECONCILE_COUNT = "controller_runtime_reconcile_time_seconds_count"
BRIDGE_NETFILTER = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


@contextmanager
def condition_messages(cluster: Cluster, namespace: str, job: str, kind: str) -> Iterator[list[str]]:
    """The messages of the job's condition `kind` in every version of the job a watch sees, as they come: a
    condition that holds for a moment (Restarting, until the restarted pods run) is not missed between reads."""
    # One line of JSON per version: kubectl's watch fails on a jsonpath `range` after the first object.
    template = '{.status.conditions}{"\\n"}'
    command = [str(cache_paths().binary("kubectl")), "get", "disttrainjobs", "-n", namespace, "--watch"]
    command += ["--field-selector", f"metadata.name={job}", "-o", f"jsonpath={template}"]
    messages: list[str] = []
    watch = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=cluster.env)

    def read() -> None:
        assert watch.stdout is not None
        for line in watch.stdout:
            conditions = json.loads(line) if line.strip() else []
            messages.extend(str(c.get("message", "")) for c in conditions if c.get("type") == kind)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield messages
    finally:
        watch.terminate()
        watch.wait()
        reader.join()


def says_a_worker_is_unreachable(cluster: Cluster, namespace: str, job: str, seconds: int, timeout: float) -> None:
    """Two workers cut off from each other both wait; whichever gives up first names the other, on the job's
    Restarting condition and in an Event. Call it while they wait: the watch sees the job from then on."""
    with condition_messages(cluster, namespace, job, "Restarting") as messages:

        def said_on_the_job() -> str | None:
            return next((message for message in messages if "unreachable" in message), None)

        message = wait_for("the job to say which replica is unreachable", said_on_the_job, timeout=timeout)
    # Both may give up within moments of each other and fail in the same restart: each then names the other.
    named = re.findall(
        rf"{job}-worker-(\d) failed [^;]*?peers unreachable after {seconds}s: {job}-worker-(\d)\.", message
    )
    assert named and all(failed != waited_for for failed, waited_for in named), message

    def said_in_an_event() -> bool:
        return any(e["reason"] == "Restarting" and message in e["message"] for e in cluster.items("events", namespace))

    wait_for("an Event saying the same", said_in_an_event, timeout=30)


class SilencingProxy:
    """A TCP proxy in front of the API server. `silence` stops every connection open now in both directions
    without closing it, as a dead peer behind a NAT or a half-open connection does; connections made
    afterwards pass as before."""

    def __init__(self, address: str, port: int) -> None:
        self._target = (address, port)
        self._listener = socket.create_server((address, 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._open: list[threading.Event] = []  # per connection: set once it is silenced
        threading.Thread(target=self._accept, daemon=True).start()

    def silence(self) -> None:
        with self._lock:
            for silenced in self._open:
                silenced.set()
            self._open = []

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            upstream = socket.create_connection(self._target)
            silenced = threading.Event()
            with self._lock:
                self._open.append(silenced)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink, silenced), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket, silenced: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if not silenced.is_set():  # else dropped, and the socket stays open
                    sink.sendall(data)
            if not silenced.is_set():
                sink.shutdown(socket.SHUT_WR)


@contextmanager
def bridged_traffic_through_iptables() -> Iterator[None]:
    """Bridged traffic passes iptables inside, as beside a Docker engine; as it was after. Skips the test
    where there is no iptables or bridge netfilter (br_netfilter) to turn on."""
    if shutil.which("iptables") is None or not BRIDGE_NETFILTER.exists():
        pytest.skip("needs iptables and bridge netfilter (br_netfilter), which a Docker engine brings")
    before = BRIDGE_NETFILTER.read_text().strip()
    BRIDGE_NETFILTER.write_text("1")
    try:
        yield
    finally:
        BRIDGE_NETFILTER.write_text(before)


# How the API server words a refusal by RBAC (a Pod Security refusal, also a 403, is worded otherwise). An
# API server that a fault test restarts refuses once or twice while its authorizer warms up; a right the
# rules lack is refused at every retry.
RBAC_DENIAL = re.compile(r'cannot \w+ resource "[^"]+"(?: in API group "[^"]*")?')
REPEATED_DENIAL = 3


class OperatorProcess:
    """`disttrain operator` as a real process: startable, stoppable and killable mid-job."""

    def __init__(
        self,
        cluster: Cluster,
        log_path: Path,
        scope: list[str] | None = None,
        kubeconfig: Path | None = None,
        *,
        leader_election: list[str] | None = None,
        pod_name: str = "operator",
        options: list[str] | None = None,
        environment: dict[str, str] | None = None,
    ) -> None:
        """`environment`: more of the operator's variables (its settings)."""
        self._cluster = cluster
        self._environment = environment or {}
        self._kubeconfig = kubeconfig
        self.log_path = log_path
        self._scope = scope or ["--all-namespaces"]
        self._leader_election = leader_election or []
        self._options = options or []
        self.pod_name = pod_name
        self._process: subprocess.Popen[bytes] | None = None
        self._port = free_port()
        self.metrics_url = f"http://127.0.0.1:{free_port()}/metrics"

    def start(self) -> None:
        command = [
            sys.executable,
            "-m",
            "disttrain_cli.main",
            "operator",
            *self._scope,
            *self._leader_election,
            *self._options,
            f"--liveness=http://127.0.0.1:{self._port}/healthz",
        ]
        log = self.log_path.open("ab")
        metrics_port = self.metrics_url.rsplit(":", 1)[1].split("/")[0]
        # A pod is "stuck terminating" after 3 s here and progress is polled every second, so tests wait little.
        env = {
            **self._cluster.env,
            **({"KUBECONFIG": str(self._kubeconfig)} if self._kubeconfig else {}),
            "DISTTRAIN_METRICS_PORT": metrics_port,
            "DISTTRAIN_STUCK_POD_SECONDS": "3",
            "DISTTRAIN_PROGRESS_SECONDS": "1",
            "POD_NAME": self.pod_name,
            "POD_NAMESPACE": OPERATOR_TEST_NAMESPACE,
            **self._environment,
        }
        self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_for("the operator's liveness endpoint", self._healthy, timeout=60)
        except TimeoutError as error:
            raise TimeoutError(f"{error}; its log ends:\n{self._log_tail()}") from None

    def _healthy(self) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            code = self._process.returncode
            raise AssertionError(f"the operator exited with {code}; its log ends:\n{self._log_tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self._port}/healthz", timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def rights_refused(self) -> list[str]:
        """The rights the API server refused the operator at every retry, as its log says them."""
        denials = Counter(RBAC_DENIAL.findall(self.log_path.read_text(errors="replace")))
        return sorted(denial for denial, times in denials.items() if times >= REPEATED_DENIAL)

    def running(self) -> bool:
        """The process is up and its liveness endpoint answers."""
        return self._process is not None and self._healthy()

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self._process is None:
            return
        self._process.send_signal(sig)
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def health(self) -> dict[str, Any]:
        """What the liveness endpoint answers: kopf's probes by id."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self._port}/healthz", timeout=5) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer

    def pause(self) -> None:
        """Freeze the process (SIGSTOP): its connections stay open and unread, as in a long GC pause or a
        node under memory pressure."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def reconciles(self) -> int:
        """Reconciles this process has finished (`controller_runtime_reconcile_time_seconds`): a sign that it
        acted, to wait for before asserting that something did not happen."""
        with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
            text = response.read().decode()
        counts = [line.split()[-1] for line in text.splitlines() if line.startswith(RECONCILE_COUNT)]
        return int(float(counts[0])) if counts else 0

    def identity(self) -> str:
        """The user the operator's credentials authenticate as."""
        kubeconfig = str(self._kubeconfig or self._cluster.kubeconfig)
        command = [str(cache_paths().binary("kubectl")), "--kubeconfig", kubeconfig, "auth", "whoami", "-o", "json"]
        answer = subprocess.run(command, capture_output=True, text=True, check=True)
        return str(json.loads(answer.stdout)["status"]["userInfo"]["username"])


class TrainerProgress:
    """Stands in for the reporting trainer's progress endpoint, at an address a pod status can name."""

    def __init__(self) -> None:
        self.record: dict[str, Any] = {}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps(owner.record).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def script_job(
    name: str,
    script: str,
    *,
    replicas: int = 1,
    env: list[dict[str, str]] | None = None,
    worker: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A DistTrainJob whose workers run a shell script, which the process node runs for real; `worker` and
    `spec` add fields to the worker's replica spec and to the job's spec."""
    container = {
        "name": "tensorflow",
        "image": "none",
        "command": ["sh", "-c", script],
        **({"env": env} if env else {}),
    }
    replica = {"replicas": replicas, **(worker or {}), "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "disttrain.io/v1alpha1",
        "kind": "DistTrainJob",
        "metadata": {"name": name},
        "spec": {"replicaSpecs": {"Worker": replica}, **(spec or {})},
    }


POOL_LABEL = "disttrain.io/test-pool"


class GpuPool:
    """kwok GPU nodes only the test's jobs may use (tainted, and selected by the jobs), so that the free GPU
    slots are exactly those the test counts."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.name = f"gang-{uuid.uuid4().hex[:6]}"
        self.nodes: list[str] = []

    def add(self, gpus: int, **labels: str) -> None:
        node = fake_node(f"{self.name}-{len(self.nodes)}", NodeShape(gpus=gpus))
        node["metadata"]["labels"].update({POOL_LABEL: self.name, **labels})  # type: ignore[index]
        node["spec"] = {"taints": [{"key": POOL_LABEL, "value": self.name, "effect": "NoSchedule"}]}
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(node))
        self.nodes.append(str(node["metadata"]["name"]))  # type: ignore[index]

    def remove(self) -> None:
        """The pool's nodes, and the pods bound to them: a pod left on a node that is gone waits 40 s for the
        pod garbage collector, and its namespace with it."""
        if not self.nodes:
            return
        self.cluster.kubectl("delete", "node", *self.nodes, "--wait=false")
        for node in self.nodes:
            self.cluster.kubectl(
                "delete", "pods", "--all-namespaces", f"--field-selector=spec.nodeName={node}",
                "--grace-period=0", "--force", "--wait=false", check=False,
            )  # fmt: skip

    def job(self, name: str, workers: int, labels: dict[str, str] | None = None, **policy: Any) -> dict[str, Any]:
        """The MultiWorkerMirrored example with `workers` pods of one GPU each, placed in the pool, as a gang."""
        manifest: dict[str, Any] = load_one(ROOT / "examples" / "multi-worker-mirrored-gpu.yaml")
        manifest["metadata"]["name"] = name
        if labels:
            manifest["metadata"]["labels"] = labels
        worker = manifest["spec"]["replicaSpecs"]["Worker"]
        worker["replicas"] = workers
        pod_spec = worker["template"]["spec"]
        pod_spec["nodeSelector"] = {POOL_LABEL: self.name}
        pod_spec["tolerations"] = [{"key": POOL_LABEL, "operator": "Equal", "value": self.name}]
        manifest["spec"]["runPolicy"]["schedulingPolicy"] = policy
        del manifest["spec"]["checkpoint"]
        return manifest


def bound_pods(cluster: Cluster, namespace: str, job: str) -> list[str]:
    """The names of the job's pods the scheduler bound to a node."""
    return sorted(name for name, pod in cluster.job_pods(namespace, job).items() if pod["spec"].get("nodeName"))


def replaced_as_a_gang(cluster: Cluster, namespace: str, job: str, before: set[str], count: int) -> bool:
    """The job has `count` pods, none of them one of `before` (uids), each in the job's gang and bound."""
    pods = cluster.job_pods(namespace, job).values()
    fresh = [
        pod
        for pod in pods
        if pod["metadata"]["uid"] not in before
        and pod["spec"].get("nodeName")
        and pod["spec"].get("schedulingGroup") == {"podGroupName": job}
    ]
    return len(fresh) == count


def gang_waits(cluster: Cluster, namespace: str, job: str, count: int) -> bool:
    """Each of the job's `count` pods was tried by the scheduler and is held back, unbound."""
    pods = cluster.job_pods(namespace, job)
    held = [
        pod
        for pod in pods.values()
        if not pod["spec"].get("nodeName")
        and any(c["type"] == "PodScheduled" and c["status"] == "False" for c in pod["status"].get("conditions", []))
    ]
    return len(pods) == count and len(held) == count


# worker-1's first attempt fails (137, retried); the whole job restarts, so worker-0's first attempt is
# deleted while it runs and says so on SIGTERM; both succeed the second time.
# The job succeeds with worker 0: its second attempt waits (30 s at most) until every peer's second attempt ran,
# or a fast node could end the job, and remove its pods, before a peer's second attempt started.
TWO_ATTEMPTS = """
marker="$MARKER-$HOSTNAME"
if [ -e "$marker" ]; then
  echo "$HOSTNAME second attempt"; touch "$marker-again"
  case "$HOSTNAME" in
    *worker-0) for _ in $(seq 1 300); do
        [ "$(ls "$MARKER"-*-again 2>/dev/null | wc -l)" -ge "$WORKERS" ] && break; sleep 0.1
      done ;;
  esac
  exit 0
fi
touch "$marker"; echo "$HOSTNAME first attempt"
case "$HOSTNAME" in
  *worker-1) sleep 2; echo "$HOSTNAME fails"; exit 137 ;;
  *) trap 'echo "$HOSTNAME stopped"; exit 143' TERM; while true; do sleep 0.2; done ;;
esac
"""


def two_attempts_job(name: str, marker: Path, logs: dict[str, Any], workers: int = 2) -> dict[str, Any]:
    """Workers that each run twice (TWO_ATTEMPTS), their pods removed once the job ends."""
    env = [{"name": "MARKER", "value": str(marker)}, {"name": "WORKERS", "value": str(workers)}]
    spec = {"runPolicy": {"cleanPodPolicy": "All"}, "logs": logs}
    return script_job(name, TWO_ATTEMPTS, replicas=workers, env=env, worker={"restartPolicy": "ExitCode"}, spec=spec)
