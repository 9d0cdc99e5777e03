"""`disttrain operator` as a real process the tests start, stop, kill and pause, and the rights the API
server refused it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from disttrain.local.ports import free_port
from disttrain_dev.polling import wait_for
from support.kube_cluster import OPERATOR_TEST_NAMESPACE, Cluster

# How the API server words a refusal by RBAC (a Pod Security refusal, also a 403, is worded otherwise): the
# verb, the resource and its subresource, the group, and the namespace (none at the cluster scope).
RBAC_DENIAL = re.compile(
    r'cannot (\w+) resource "([^"/]+)(?:/([^"]+))?"(?: in API group "([^"]*)")?(?: in the namespace "([^"]+)")?'
)

RECONCILE_COUNT = "controller_runtime_reconcile_time_seconds_count"


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

    def memory_mib(self, field: str = "VmHWM") -> float:
        """The process's memory as /proc says it: its peak resident size (VmHWM), or now (VmRSS)."""
        assert self._process is not None
        for line in Path(f"/proc/{self._process.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
        raise AssertionError(f"no {field} for the operator's process")

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
        """The rights the API server refused the operator, as its log says them, that the operator's rules
        still lack. Each is asked of the API server again: one that a fault test restarted refuses requests
        its rules allow until its authorizer's informers have synced (a second or two), which a real lack
        outlives."""
        operator, lacking = self._as_operator(), []
        for verb, resource, subresource, group, namespace in sorted(
            set(RBAC_DENIAL.findall(self.log_path.read_text(errors="replace")))
        ):
            named = f"{resource}.{group}" if group else resource
            question = ["auth", "can-i", "--quiet", verb, named]
            question += [f"--subresource={subresource}"] if subresource else []
            question += ["-n", namespace] if namespace else ["--all-namespaces"]
            if operator.kubectl(*question, check=False).returncode != 0:
                where = f"in the namespace {namespace}" if namespace else "at the cluster scope"
                lacking.append(f"{verb} {named}{'/' + subresource if subresource else ''} {where}")
        return lacking

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

    @contextmanager
    def stopped(self) -> Iterator[None]:
        """Stopped for the block, started again after it: another operator acts on the jobs meanwhile, and two
        would both act on each."""
        self.stop()
        try:
            yield
        finally:
            self.start()

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
        answer = self._as_operator().kubectl("auth", "whoami", "-o", "json")
        return str(json.loads(answer.stdout)["status"]["userInfo"]["username"])

    def _as_operator(self) -> Cluster:
        """The cluster as the operator's credentials reach it."""
        return Cluster(self._kubeconfig) if self._kubeconfig else self._cluster
