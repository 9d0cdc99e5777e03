"""The Python client against the local cluster: jobs from files, waits driven by watches (Kueue's
suspend-then-resume included), typed errors with the cluster's words, and logs followed through a
Pending pod and a restart on the process node; the example script from a venv without kopf."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import venv
from pathlib import Path
from typing import Any

import pytest

from disttrain import (
    Client,
    DistTrainJob,
    InvalidJobError,
    JobExistsError,
    JobFailedError,
    JobNotFoundError,
    LogsUnavailableError,
    ReplicaNotFoundError,
    WaitTimeoutError,
)
from disttrain_dev.polling import wait_for
from support.job_builder import JobBuilder
from support.kube_cluster import Cluster
from support.operator_process import OperatorProcess
from support.repository import ROOT

MWMS = ROOT / "examples" / "multi-worker-mirrored-gpu.yaml"


@pytest.fixture
def client(cluster: Cluster, namespace: str) -> Client:
    return Client(kubeconfig=cluster.kubeconfig, namespace=namespace)


def _patch(cluster: Cluster, namespace: str, spec: dict[str, Any]) -> None:
    patch = json.dumps({"spec": spec})
    cluster.kubectl("patch", "dtj", "mnist-mwms", "-n", namespace, "--type=merge", "-p", patch)


def test_a_job_from_a_file_waited_on_through_kueues_suspend_and_resume(
    cluster: Cluster, operator: OperatorProcess, namespace: str, client: Client
) -> None:
    job = client.create(MWMS)
    assert (job.metadata.namespace, job.spec.total_replicas) == (namespace, 4)
    running = client.wait(job, "Running", timeout=120)
    assert running.status.phase == "Running"
    assert [found.metadata.name for found in client.list(labels={"team": "none"})] == []
    assert [found.metadata.name for found in client.list()] == ["mnist-mwms"]

    _patch(cluster, namespace, {"runPolicy": {"suspend": True}})  # what Kueue does to preempt it
    suspended = client.wait(job, "Suspended", timeout=60)
    assert suspended.status.phase == "Suspended"
    resumed: list[DistTrainJob] = []
    waiter = threading.Thread(target=lambda: resumed.append(client.wait(job, "Running", timeout=120)))
    waiter.start()
    waiter.join(timeout=3)
    assert not resumed, "Running was True before the suspension: the wait must hold until the job runs again"
    _patch(cluster, namespace, {"runPolicy": {"suspend": False}})  # and to admit it again
    waiter.join(timeout=120)
    assert resumed and resumed[0].status.phase == "Running"

    def job_events() -> list[str] | None:  # posted beside the status writes, a moment later
        reasons = [event.reason for event in client.events(job) if event.object == "DistTrainJob/mnist-mwms"]
        return reasons if reasons.count("JobRunning") == 2 and "JobSuspended" in reasons else None

    assert "Created" in wait_for("Running, Suspended and Running again among the job's Events", job_events)
    assert any(event.object == "Pod/mnist-mwms-worker-0" for event in client.events(job))  # its pods' too
    with pytest.raises(WaitTimeoutError, match="none of Succeeded within 2s") as timed_out:
        client.wait(job, "Succeeded", timeout=2)
    assert timed_out.value.job.status.phase == "Running"

    cluster.set_pod_status(namespace, "mnist-mwms-worker-1", "Failed", exit_code=1)  # not retryable
    with pytest.raises(JobFailedError, match=r"failed: .*mnist-mwms-worker-1.*exit code 1") as failed:
        client.wait(job, "Succeeded", timeout=120)
    assert failed.value.job.status.phase == "Failed"
    client.delete(job)
    with pytest.raises(JobNotFoundError, match=f"DistTrainJob {namespace}/mnist-mwms: not found"):
        client.wait(job, "Succeeded", timeout=60)


def test_bad_calls_get_typed_errors_in_the_clusters_words(
    cluster: Cluster, operator: OperatorProcess, namespace: str, client: Client
) -> None:
    with pytest.raises(JobNotFoundError, match=f"DistTrainJob {namespace}/absent: not found"):
        client.get("absent")
    manifest = JobBuilder.from_example(MWMS).obj()
    template = manifest["spec"]["replicaSpecs"]["Worker"]["template"]
    manifest["spec"]["replicaSpecs"]["Chief"] = {"replicas": 2, "template": template}
    with pytest.raises(InvalidJobError, match="at most one Chief replica"):
        client.create(manifest)
    suspended = JobBuilder.from_example(MWMS).run_policy(suspend=True).obj()
    job = client.create(suspended)
    with pytest.raises(JobExistsError, match="already exists"):
        client.create(suspended)
    client.wait(job, "Suspended", timeout=60)
    with pytest.raises(ReplicaNotFoundError, match="it has worker-0, worker-1, worker-2, worker-3"):
        client.logs(job, "chief-0")
    with pytest.raises(LogsUnavailableError, match="worker-0 has no pod now"):
        client.logs(job, "worker-0")
    with pytest.raises(ValueError, match="unknown condition Done"):
        client.wait(job, "Done")


TWO_ATTEMPTS = """
if [ -e "$MARKER" ]; then echo "second attempt"; echo done; exit 0; fi
echo "first attempt"; touch "$MARKER"; sleep 3; exit 137
"""


def _echo_job(name: str, script: str, env: list[dict[str, str]]) -> dict[str, Any]:
    return JobBuilder(name).script(script, env=env, restartPolicy="ExitCode").obj()


def test_follow_waits_through_pending_and_goes_on_through_a_restart(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    client = Client(kubeconfig=process_cluster.kubeconfig, namespace=process_namespace)
    marker = tmp_path / "attempted"
    job = client.create(_echo_job("echo", TWO_ATTEMPTS, [{"name": "MARKER", "value": str(marker)}]))
    lines = list(client.logs(job, "worker-0", follow=True))  # starts while the pod is Pending or not yet made
    assert lines == ["first attempt", "second attempt", "done"]
    done = client.wait(job, "Succeeded", timeout=60)
    assert done.status.restart_count == 1
    assert list(client.logs(job, tail=1)) == ["done"]
    command = [sys.executable, "-m", "disttrain_cli.main", "jobs", "logs", "echo", "--replica", "worker-0"]
    command += ["--tail", "2", "-n", process_namespace]
    result = subprocess.run(command, env=process_cluster.env, capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stdout) == (0, "second attempt\ndone\n"), result.stderr


def test_the_example_script_runs_from_a_venv_without_kopf(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    """The base distribution as a notebook installs it (`pip install ./contract .`): no kopf."""
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    python = str(environment / "bin" / "python")
    install = [python, "-m", "pip", "install", "--quiet", str(ROOT / "contract"), str(ROOT)]
    subprocess.run(install, check=True, capture_output=True, timeout=600)
    absent = subprocess.run([python, "-c", "import kopf"], capture_output=True, check=False)
    assert absent.returncode != 0, "kopf came with the base distribution"
    manifest = tmp_path / "job.yaml"
    manifest.write_text(json.dumps(_echo_job("hello", "echo hello from the client", [])))
    run = [python, str(ROOT / "examples" / "client.py"), str(manifest), "--namespace", process_namespace]
    result = subprocess.run(run, env=process_cluster.env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert f"created DistTrainJob {process_namespace}/hello" in result.stdout
    assert "| hello from the client" in result.stdout and "hello: Succeeded" in result.stdout
    assert process_cluster.get("disttrainjob", "hello", process_namespace) is None  # the script deletes it
