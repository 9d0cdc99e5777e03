"""What the tests wait for and ask of a job: its conditions, a field that passes a test, the messages a
condition showed; a job suspended or resumed; a stand-in for the trainer's progress endpoint."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from disttrain_dev.polling import wait_for
from disttrain_dev.versions import cache_paths
from support.kube_cluster import Cluster


def condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in job.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def holds(job: dict[str, Any], kind: str) -> bool:
    found = condition(job, kind)
    return found is not None and found["status"] == "True"


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


def restart_events(cluster: Cluster, namespace: str, timeout: float = 120) -> list[str]:
    """The messages of the namespace's restart Events (reason Restarting, or Stalled for a stall), once there is
    one."""

    def said() -> list[str]:
        events = cluster.items("events", namespace)
        return [event["message"] for event in events if event["reason"] in ("Restarting", "Stalled")]

    found: list[str] = wait_for("the restart's Event", said, timeout=timeout)
    return found


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


class TrainerProgress:
    """Stands in for the reporting trainer's progress endpoint, at an address a pod status can name: 204 until
    it has a record, as the trainer answers before its first report."""

    def __init__(self) -> None:
        self.record: dict[str, Any] = {}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps(owner.record).encode() if owner.record else b""
                self.send_response(200 if body else 204)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
