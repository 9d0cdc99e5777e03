"""Logs that outlive their pods, on the process node: every attempt of every replica is kept once its
container ended (a failure, a pod deleted by a restart while it ran, a success), read by number from
the client and `disttrain jobs logs --attempt` after cleanup removed every pod, and, with a TTL, after
the job is deleted, until the TTL runs out. The real node's share is in test_real_node.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from disttrain import AttemptNotFoundError, Client, InvalidJobError, JobNotFoundError
from disttrain_dev.polling import wait_for
from support.job_builder import JobBuilder, two_attempts_job
from support.kube_cluster import Cluster
from support.operator_process import OperatorProcess


def _kept(cluster: Cluster, namespace: str, job: str) -> list[str]:
    return sorted(
        item["metadata"]["name"] for item in cluster.items("configmaps", namespace, f"disttrain.io/job-name={job}")
    )


def _cli(cluster: Cluster, *arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "disttrain_cli.main", "jobs", "logs", *arguments]
    return subprocess.run(command, env=cluster.env, capture_output=True, text=True, timeout=60, check=False)


def test_every_attempt_is_kept_after_cleanup_and_after_the_job_until_its_ttl(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    client = Client(kubeconfig=process_cluster.kubeconfig, namespace=process_namespace)
    job = client.create(two_attempts_job("kept", tmp_path / "attempted", {"ttlSecondsAfterJobDeleted": 5}))
    done = client.wait(job, "Succeeded", timeout=120)
    assert done.status.restart_count == 1
    wait_for("cleanPodPolicy All to remove every pod", lambda: not client.pods(job))

    worker_1 = client.attempts(job, "worker-1")
    assert [(a.number, a.kept, a.exit_code) for a in worker_1] == [(1, True, 137), (2, True, 0)]
    assert list(client.logs(job, "worker-1", attempt=1)) == ["kept-worker-1 first attempt", "kept-worker-1 fails"]
    stopped = list(client.logs(job, "worker-0", attempt=1))  # its shell may say its sleep was terminated too
    assert (stopped[0], stopped[-1]) == ("kept-worker-0 first attempt", "kept-worker-0 stopped")
    assert list(client.logs(job, "worker-0")) == ["kept-worker-0 second attempt"]  # the last attempt by default
    with pytest.raises(
        AttemptNotFoundError, match=r"no attempt 3; its attempts: 1 \(kept.*\), 2 \(kept, exit code 0\)"
    ):
        client.logs(job, "worker-0", attempt=3)
    result = _cli(process_cluster, "kept", "--replica", "worker-1", "--attempt", "1", "-n", process_namespace)
    assert (result.returncode, result.stdout) == (0, "kept-worker-1 first attempt\nkept-worker-1 fails\n"), result
    result = _cli(process_cluster, "kept", "--replica", "worker-1", "--attempt", "7", "-n", process_namespace)
    assert result.returncode == 1 and "worker-1 of kept has no attempt 7" in result.stderr

    client.delete(job)
    wait_for("the job to be gone", lambda: process_cluster.get("disttrainjob", "kept", process_namespace) is None)
    assert list(client.logs("kept", "worker-1", attempt=1)) == ["kept-worker-1 first attempt", "kept-worker-1 fails"]
    assert list(client.logs("kept", tail=1)) == ["kept-worker-0 second attempt"]  # worker-0: no chief
    wait_for("the kept logs to go 5 s after their job", lambda: not _kept(process_cluster, process_namespace, "kept"))
    with pytest.raises(JobNotFoundError, match="no log of it is kept"):
        client.logs("kept", "worker-1")


def test_a_restart_keeps_the_log_of_every_peer_it_stops(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    """Worker 1 fails and the whole job restarts: its 7 peers are deleted at once, each followed as it stops."""
    client = Client(kubeconfig=process_cluster.kubeconfig, namespace=process_namespace)
    job = client.create(two_attempts_job("many", tmp_path / "attempted", {}, workers=8))
    client.wait(job, "Succeeded", timeout=180)
    wait_for("cleanPodPolicy All to remove every pod", lambda: not client.pods(job), timeout=60)
    for index in range(8):
        attempts = [(a.number, a.kept) for a in client.attempts(job, f"worker-{index}")]
        assert attempts == [(1, True), (2, True)], (index, attempts)
    stopped = list(client.logs(job, "worker-7", attempt=1))
    assert (stopped[0], stopped[-1]) == ("many-worker-7 first attempt", "many-worker-7 stopped")


def test_a_pod_gone_between_its_read_and_its_log_s_is_read_from_its_kept_log(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """`logs` picks the replica's pod at once and opens its log when first iterated: a pod deleted in between,
    as a job's cleanup does just after it succeeds, is read from the log kept as its container ended."""
    client = Client(kubeconfig=process_cluster.kubeconfig, namespace=process_namespace)
    builder = JobBuilder("gone").script("echo gone-worker-0 done").run_policy(cleanPodPolicy="None")
    job = client.create(builder.obj())
    client.wait(job, "Succeeded", timeout=120)
    wait_for("its log kept", lambda: _kept(process_cluster, process_namespace, "gone"))
    lines = client.logs(job, "worker-0")  # its pod is there: its log is read from it
    process_cluster.kubectl("delete", "pod", "gone-worker-0", "-n", process_namespace, "--wait=true")
    assert list(lines) == ["gone-worker-0 done"]


def test_logs_without_a_ttl_go_with_their_job_and_a_job_may_keep_none(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    client = Client(kubeconfig=process_cluster.kubeconfig, namespace=process_namespace)
    kept = client.create(two_attempts_job("owned", tmp_path / "owned", {}))
    unkept = client.create(two_attempts_job("unkept", tmp_path / "unkept", {"keep": False}))
    client.wait(kept, "Succeeded", timeout=120)
    client.wait(unkept, "Succeeded", timeout=120)
    wait_for("every pod gone", lambda: not client.pods(kept) and not client.pods(unkept))
    assert len(_kept(process_cluster, process_namespace, "owned")) == 4
    assert _kept(process_cluster, process_namespace, "unkept") == []
    client.delete(kept)
    wait_for(
        "the garbage collector to take the kept logs with the job",
        lambda: not _kept(process_cluster, process_namespace, "owned"),
    )


# The program a pod of one's own runs to keep its log on the volume as the trainer does
# (disttrain_contract.kept_logs): its first attempt prints more than it may keep and fails.
ON_VOLUME = """
import os, sys, time
from disttrain_trainer import log_copy
copy = log_copy.from_environment()
marker = os.environ["MARKER"]
first = not os.path.exists(marker)
open(marker, "a").close()
if first:
    os.write(2, b"from fd 2\\n")
    time.sleep(0.5)  # each stream is copied by a thread of its own: their order is that of moments apart
    for number in range(100):
        print(f"line {number:03d} of the first attempt")
    print("the first attempt fails", flush=True)
else:
    print("the second attempt", flush=True)
sys.stderr.flush()
copy.finish()
os._exit(137 if first else 0)
"""


def test_logs_kept_on_the_checkpoint_volume_are_read_back_through_a_pod_after_cleanup(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    client = Client(kubeconfig=process_cluster.kubeconfig, namespace=process_namespace)
    logs = {"destination": "CheckpointVolume", "maxBytesPerAttempt": 1024}
    manifest = JobBuilder("vol").script("").run_policy(cleanPodPolicy="All").spec(logs=logs).obj()
    worker = manifest["spec"]["replicaSpecs"]["Worker"]
    worker["restartPolicy"] = "ExitCode"
    container = worker["template"]["spec"]["containers"][0]
    container.update(command=[sys.executable, "-c", ON_VOLUME], env=[{"name": "MARKER", "value": str(tmp_path / "m")}])
    with pytest.raises(InvalidJobError, match="needs a checkpoint volume"):
        client.create(manifest)
    manifest["spec"]["checkpoint"] = {"size": "1Gi"}
    job = client.create(manifest)
    assert client.wait(job, "Succeeded", timeout=120).status.restart_count == 1
    wait_for("cleanPodPolicy All to remove every pod", lambda: not client.pods(job))
    assert _kept(process_cluster, process_namespace, "vol") == []  # nothing in ConfigMaps

    attempts = client.attempts(job, "worker-0")
    assert [(a.number, a.kept) for a in attempts] == [(1, True), (2, True)]
    first = list(client.logs(job, "worker-0", attempt=1))
    assert first[-1] == "the first attempt fails", first
    assert first[0].startswith("line ") and first[0].endswith(" of the first attempt"), first  # whole lines
    assert 512 - 30 <= len("\n".join(first).encode()) <= 1024  # at least the last half of maxBytesPerAttempt
    assert list(client.logs(job, "worker-0")) == ["the second attempt"]
    result = _cli(process_cluster, "vol", "--attempt", "1", "--tail", "1", "-n", process_namespace)
    assert (result.returncode, result.stdout) == (0, "the first attempt fails\n"), result
    readers = process_cluster.items("pods", process_namespace, "disttrain.io/log-reader-of=vol")
    assert readers == [], "a reader pod was left behind"
