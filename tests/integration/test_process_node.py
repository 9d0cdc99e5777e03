"""The process node: pods of the local cluster running as real processes, reported as a kubelet would."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from disttrain_dev.polling import wait_for
from disttrain_dev.versions import cache_paths
from support.kube_cluster import Cluster
from support.network_faults import bridged_traffic_through_iptables


def _pod(name: str, script: str, restart_policy: str = "Never", **spec: Any) -> str:
    container = {"name": "main", "image": "none", "command": ["sh", "-c", script]}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": restart_policy, "containers": [container], **spec},
    }
    return json.dumps(pod)


def _ended(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        pod = cluster.get("pod", name, namespace)
        return pod if pod and pod["status"].get("phase") in ("Succeeded", "Failed") else None

    return wait_for(f"pod {name} to end", check, timeout=60)


def test_a_pod_runs_in_its_own_network_and_reports_its_exit(cluster: Cluster, process_namespace: str) -> None:
    headless = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "peers"}}
    headless["spec"] = {"clusterIP": "None", "selector": {"app": "peers"}, "ports": [{"port": 2222}]}
    cluster.apply(process_namespace, json.dumps(headless))
    peer = json.loads(_pod("b", "sleep 30", hostname="b", subdomain="peers"))
    cluster.apply(process_namespace, json.dumps(peer))
    script = (
        f"getent hosts b.peers.{process_namespace}.svc || exit 7; "
        "ip -4 -o addr show eth0 | grep -q 10.250. || exit 8; "
        'echo "{\\"step\\": 5}" > "$DISTTRAIN_TERMINATION_MESSAGE_PATH"; exit 3'
    )
    pod = json.loads(_pod("a", script, hostname="a", subdomain="peers"))
    pod["spec"]["containers"][0]["env"] = [
        {"name": "DISTTRAIN_TERMINATION_MESSAGE_PATH", "value": "/dev/termination-log"}
    ]
    wait_for("pod b to run", lambda: (cluster.get("pod", "b", process_namespace) or {}).get("status", {}).get("podIP"))
    cluster.apply(process_namespace, json.dumps(pod))

    ended = _ended(cluster, process_namespace, "a")
    terminated = ended["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (ended["status"]["phase"], terminated["exitCode"]) == ("Failed", 3), terminated
    assert terminated["message"].strip() == '{"step": 5}'
    assert ended["status"]["podIP"].startswith("10.250.")
    assert ended["spec"]["nodeName"] == "process-node-0"


class _PodWatch:
    """`kubectl get pod --watch`'s events, read on a thread of their own as they come."""

    def __init__(self, cluster: Cluster, namespace: str, name: str) -> None:
        command = [str(cache_paths().binary("kubectl")), "get", "pod", name, "-n", namespace, "--watch"]
        command += ["--output-watch-events", "-o", "json"]
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=cluster.env)
        self._text = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._text += line

    def events(self) -> list[dict[str, Any]]:
        decoder, text, found = json.JSONDecoder(), self._text.strip(), []
        while text:
            try:
                event, end = decoder.raw_decode(text)
            except json.JSONDecodeError:  # an event still being written
                break
            found.append(event)
            text = text[end:].strip()
        return found

    def stop(self) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)


def test_deleting_a_pod_stops_its_process_with_sigterm_first_and_reports_how_it_ended(
    cluster: Cluster, process_namespace: str
) -> None:
    """As a kubelet does, the node's last status of a deleted pod says how its container ended: a log's
    reader that followed it to its end learns its exit code from the watch."""
    marker = Path("/tmp") / f"disttrain-sigterm-{process_namespace}"
    script = f"trap 'echo stopped > {marker}; exit 0' TERM; while true; do sleep 0.1; done"
    cluster.apply(process_namespace, _pod("sleeper", script))
    wait_for(
        "the pod to run",
        lambda: (cluster.get("pod", "sleeper", process_namespace) or {}).get("status", {}).get("phase") == "Running",
    )
    watch = _PodWatch(cluster, process_namespace, "sleeper")
    try:
        wait_for("the watch to list the pod", watch.events)
        started = time.monotonic()
        cluster.kubectl("delete", "pod", "sleeper", "-n", process_namespace, "--grace-period=20", "--wait=true")
        assert time.monotonic() - started < 15  # the process ended on SIGTERM, well before the grace period
        deleted = wait_for(
            "the pod's DELETED event",
            lambda: next((event["object"] for event in watch.events() if event["type"] == "DELETED"), None),
        )
    finally:
        watch.stop()
    assert marker.read_text().strip() == "stopped"
    marker.unlink()
    terminated = deleted["status"]["containerStatuses"][0]["state"].get("terminated")
    assert terminated is not None and terminated["exitCode"] == 0, deleted["status"]


def test_a_pod_is_ready_once_its_readiness_probe_answers(cluster: Cluster, process_namespace: str) -> None:
    """As a kubelet does: Running at once, Ready once the HTTP server its probe asks starts, 5 s later."""
    pod = json.loads(_pod("server", "sleep 5; exec python3 -m http.server 8080"))
    container = pod["spec"]["containers"][0]
    container["ports"] = [{"name": "http", "containerPort": 8080}]
    container["readinessProbe"] = {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1}
    cluster.apply(process_namespace, json.dumps(pod))

    def status() -> dict[str, Any]:
        found: dict[str, Any] = (cluster.get("pod", "server", process_namespace) or {}).get("status", {})
        return found

    def ready(found: dict[str, Any]) -> str | None:
        return next((c["status"] for c in found.get("conditions", []) if c["type"] == "Ready"), None)

    running = wait_for("the pod to run", lambda: (found := status()).get("phase") == "Running" and found)
    assert ready(running) == "False" and running["containerStatuses"][0]["ready"] is False
    wait_for("the pod to be Ready", lambda: ready(status()) == "True", timeout=60)


def test_kubectl_logs_reads_a_pods_output_through_the_api_server(cluster: Cluster, process_namespace: str) -> None:
    cluster.apply(process_namespace, _pod("talker", "echo first; echo second; echo third >&2"))
    _ended(cluster, process_namespace, "talker")
    logs = cluster.kubectl("logs", "talker", "-n", process_namespace)
    assert logs.stdout == "first\nsecond\nthird\n"
    assert cluster.kubectl("logs", "talker", "-n", process_namespace, "--tail=1").stdout == "third\n"
    assert cluster.kubectl("logs", "talker", "-n", process_namespace, "--limit-bytes=3").stdout == "fir"


def test_on_failure_restarts_in_place_and_counts(cluster: Cluster, process_namespace: str) -> None:
    script = "if [ -e /scratch/once ]; then exit 0; fi; touch /scratch/once; exit 1"
    pod = json.loads(_pod("flaky", script, restart_policy="OnFailure", volumes=[{"name": "s", "emptyDir": {}}]))
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "s", "mountPath": "/scratch"}]
    cluster.apply(process_namespace, json.dumps(pod))
    ended = _ended(cluster, process_namespace, "flaky")
    assert ended["status"]["phase"] == "Succeeded"
    assert ended["status"]["containerStatuses"][0]["restartCount"] == 1


def test_a_pod_without_a_command_fails_with_a_reason(cluster: Cluster, process_namespace: str) -> None:
    pod = json.loads(_pod("image-only", "true"))
    del pod["spec"]["containers"][0]["command"]
    cluster.apply(process_namespace, json.dumps(pod))
    ended = _ended(cluster, process_namespace, "image-only")
    assert ended["status"]["reason"] == "UnsupportedPod"
    assert "run commands, not images" in ended["status"]["message"]


def test_pods_reach_each_other_where_the_forward_chain_drops(cluster: Cluster, process_namespace: str) -> None:
    """Beside a Docker engine, the FORWARD policy is DROP and bridged traffic passes through iptables; the
    node's own rule keeps its pods talking. Set up here as Docker leaves it, and put back after."""
    with bridged_traffic_through_iptables():
        rules = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True, check=True).stdout
        policy = rules.splitlines()[0].split()[-1]
        subprocess.run(["iptables", "-P", "FORWARD", "DROP"], check=True)
        try:
            listen = (
                "import socket; s = socket.create_server(('0.0.0.0', 5000)); c, _ = s.accept(); c.sendall(b'hello')"
            )
            cluster.apply(process_namespace, _pod("listener", f'python3 -c "{listen}"'))

            def listening() -> str | None:
                address = (cluster.get("pod", "listener", process_namespace) or {}).get("status", {}).get("podIP")
                return str(address) if address else None

            address = wait_for("the listener's address", listening)
            call = f"import socket; s = socket.create_connection(('{address}', 5000), 10); assert s.recv(5) == b'hello'"
            cluster.apply(process_namespace, _pod("caller", f'python3 -c "{call}"'))
            ended = _ended(cluster, process_namespace, "caller")
            assert ended["status"]["phase"] == "Succeeded", ended["status"]
            assert _ended(cluster, process_namespace, "listener")["status"]["phase"] == "Succeeded"
        finally:
            subprocess.run(["iptables", "-P", "FORWARD", policy], check=True)
