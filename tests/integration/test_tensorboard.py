"""A job's TensorBoard on the local cluster's fake nodes: its Deployment and Service, owned by the job and
kept after it finished, its address in the status, its readiness as a condition; a TensorBoard the
cluster refuses to run is a False condition and a Warning Event, the job runs on. That it serves the
trainer's curves is proven on the real node (test_real_node.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from disttrain import Client
from disttrain_dev.polling import wait_for
from job_builder import JobBuilder
from job_checks import condition, holds, job_where
from kube_cluster import Cluster
from operator_process import OperatorProcess
from pod_checks import running_pods
from repository import ROOT

MWMS = (ROOT / "examples" / "multi-worker-mirrored-gpu.yaml").read_text()
WITH_TENSORBOARD = MWMS.replace("  checkpoint:\n", "  tensorboard: {}\n  checkpoint:\n", 1)


def test_the_tensorboard_is_owned_by_the_job_kept_after_it_and_ready_in_its_status(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(namespace, WITH_TENSORBOARD)
    running_pods(cluster, namespace, "mnist-mwms", 4)
    ready = job_where(cluster, namespace, "mnist-mwms", "TensorBoardReady", lambda j: holds(j, "TensorBoardReady"))
    url = f"http://mnist-mwms-tensorboard.{namespace}.svc:6006"
    assert ready["status"]["tensorboard"] == {"service": "mnist-mwms-tensorboard", "url": url, "ready": True}
    deployment = cluster.get("deployment", "mnist-mwms-tensorboard", namespace)
    assert deployment is not None and deployment["metadata"]["ownerReferences"][0]["name"] == "mnist-mwms"
    service = cluster.get("service", "mnist-mwms-tensorboard", namespace)
    assert service is not None and service["spec"]["ports"][0]["port"] == 6006
    cluster.set_pod_status(namespace, "mnist-mwms-worker-0", "Succeeded", exit_code=0)  # the chief, without one
    job_where(cluster, namespace, "mnist-mwms", "Succeeded", lambda j: holds(j, "Succeeded"))
    board = cluster.items("pods", namespace, "disttrain.io/tensorboard-of=mnist-mwms")
    assert [pod["status"]["phase"] for pod in board] == ["Running"]  # cleanup stops the other workers, not it
    assert holds(cluster.job(namespace, "mnist-mwms"), "TensorBoardReady")
    client = Client(kubeconfig=cluster.kubeconfig, namespace=namespace)
    events = [event for event in client.events("mnist-mwms") if event.reason == "TensorBoardReady"]
    assert events and url in events[0].message


def test_a_tensorboard_the_cluster_refuses_is_a_condition_and_an_event_and_the_job_runs_on(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "four-pods"},
        "spec": {"hard": {"pods": "4"}},
    }
    cluster.apply(namespace, json.dumps(quota))
    wait_for("the quota to count", lambda: (cluster.get("resourcequota", "four-pods", namespace) or {}).get("status"))
    cluster.apply(namespace, WITH_TENSORBOARD)  # its 4 workers take the 4 pods the quota allows
    running_pods(cluster, namespace, "mnist-mwms", 4)

    def refused(job: dict[str, Any]) -> bool:
        found = condition(job, "TensorBoardReady")
        return found is not None and found["reason"] == "FailedCreate"

    job = job_where(cluster, namespace, "mnist-mwms", "TensorBoardReady False: FailedCreate", refused)
    said = condition(job, "TensorBoardReady")
    assert said is not None and said["status"] == "False" and "exceeded quota" in said["message"], said
    assert job["status"]["phase"] == "Running" and job["status"]["tensorboard"]["ready"] is False
    client = Client(kubeconfig=cluster.kubeconfig, namespace=namespace)
    warnings = [e for e in client.events("mnist-mwms") if e.type == "Warning" and e.reason == "FailedCreate"]
    assert warnings and "exceeded quota" in warnings[0].message


@pytest.mark.tensorflow
def test_disttrain_jobs_tensorboard_answers_on_the_process_node(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    """The process node serves no port-forward: `disttrain jobs tensorboard` relays through the Service proxy,
    to the TensorBoard the operator runs over a job's volume (here a job that writes no summaries)."""
    pytest.importorskip("tensorboard")
    manifest = JobBuilder("board").script("sleep 600").spec(checkpoint={"size": "1Gi"}, tensorboard={}).obj()
    process_cluster.apply(process_namespace, json.dumps(manifest))
    job_where(process_cluster, process_namespace, "board", "TensorBoardReady", lambda j: holds(j, "TensorBoardReady"))
    command = [
        sys.executable,
        "-m",
        "disttrain_cli.main",
        "jobs",
        "tensorboard",
        "board",
        "-n",
        process_namespace,
    ]
    forward = subprocess.Popen(
        command, env=process_cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert forward.stdout is not None
        url = forward.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), forward.stderr.read() if forward.stderr else url

        def runs() -> Any:
            try:
                with urllib.request.urlopen(f"{url}data/runs", timeout=30) as answer:
                    return {"runs": json.loads(answer.read())}
            except urllib.error.HTTPError as error:  # 503 until TensorBoard listens
                return None if error.code >= 500 else error

        assert wait_for("TensorBoard's runs through the local port", runs, timeout=120) == {"runs": []}
    finally:
        forward.terminate()
        _, said = forward.communicate(timeout=30)
    assert "Traceback" not in said, said
