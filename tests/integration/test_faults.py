"""Fault injection through the real operator, API server and process node, with real TensorFlow.

Every scenario breaks something mid-training and must still end Succeeded with exactly the step
count of an uninterrupted run: nothing lost, nothing repeated past the last checkpoint.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from trainer_support import events, job_manifest

from cluster_support import (
    OPERATOR_TEST_NAMESPACE,
    Cluster,
    OperatorProcess,
    bridged_traffic_through_iptables,
    holds,
    operator_kubeconfig,
    says_a_worker_is_unreachable,
)
from disttrain_dev import cluster as devcluster
from disttrain_dev.polling import wait_for

pytestmark = [
    pytest.mark.tensorflow,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs the trainer extra"),
]

STEPS_PER_EPOCH = 1437 // 64  # the bundled digits' training split at the default batch
JOB = "faulty"


def _submit(
    cluster: Cluster,
    namespace: str,
    strategy: str,
    counts: dict[str, int],
    epochs: int,
    *,
    every_worker: bool = False,
    extra: tuple[str, ...] = (),
    checkpoint_every: int = 50,
    backoff_limit: int = 4,
) -> int:
    """A job that checkpoints every 50 steps; returns its total step count. `every_worker`: the job succeeds
    once every worker did, so that none still running at the chief's end is stopped by the cleanup. `extra`:
    more of the trainer's arguments."""
    args = ["--model", "mlp", "--dataset", "digits", "--epochs", str(epochs)]
    args += ["--checkpoint-every", str(checkpoint_every), *extra]
    manifest = job_manifest(JOB, strategy, counts, [*args, "--log-every", "5"])
    for spec in manifest["spec"]["replicaSpecs"].values():
        spec["restartPolicy"] = "ExitCode"
        spec["template"]["spec"]["automountServiceAccountToken"] = False
    manifest["spec"]["runPolicy"] = {"backoffLimit": backoff_limit}
    manifest["spec"]["checkpoint"] = {"size": "1Gi"}
    if every_worker:
        manifest["spec"]["successPolicy"] = "AllWorkers"
    cluster.apply(namespace, json.dumps(manifest))
    return epochs * STEPS_PER_EPOCH


def _job(cluster: Cluster, namespace: str) -> dict[str, Any]:
    return cluster.job(namespace, JOB)


def _at_step(cluster: Cluster, namespace: str, step: int) -> dict[str, Any]:
    """The job once its status reports at least `step` (the operator polls the chief every second here)."""

    def check() -> dict[str, Any] | None:
        job = _job(cluster, namespace)
        return job if job.get("status", {}).get("progress", {}).get("step", 0) >= step else None

    return wait_for(f"step {step}", check, timeout=240, interval=0.5)


def _succeeded(cluster: Cluster, namespace: str, total: int) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        job = _job(cluster, namespace)
        return job if holds(job, "Succeeded") else None

    job = wait_for("Succeeded", check, timeout=300)
    assert job["status"]["progress"]["step"] == total
    assert job["status"]["progress"]["totalSteps"] == total
    return job


def _pod_folder(cluster: Cluster, namespace: str, pod: str) -> Path:
    uid = cluster.get("pod", pod, namespace)["metadata"]["uid"]  # type: ignore[index]
    return devcluster.state_dir() / devcluster.PROCESS_NODE / "pods" / f"{namespace}_{pod}_{uid}"


def _kill(cluster: Cluster, namespace: str, pod: str) -> None:
    """The container's process dies at once, as on an OOM kill or a crash (exit 137)."""
    pid = int((_pod_folder(cluster, namespace, pod) / "tensorflow.pid").read_text())
    os.killpg(pid, signal.SIGKILL)


def _chief_log(cluster: Cluster, namespace: str, pod: str) -> str:
    return (_pod_folder(cluster, namespace, pod) / "tensorflow.log").read_text(errors="replace")


def _uids(cluster: Cluster, namespace: str) -> dict[str, str]:
    return {name: pod["metadata"]["uid"] for name, pod in cluster.job_pods(namespace, JOB).items()}


def test_a_killed_multi_worker_restarts_the_job_and_resumes(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    total = _submit(process_cluster, process_namespace, "MultiWorkerMirrored", {"Worker": 2}, epochs=60)
    _at_step(process_cluster, process_namespace, 200)
    _kill(process_cluster, process_namespace, f"{JOB}-worker-1")

    done = _succeeded(process_cluster, process_namespace, total)
    assert done["status"]["restartCount"] == 1
    log = _chief_log(process_cluster, process_namespace, f"{JOB}-worker-0")
    restored = events(log, "restored")
    assert restored and restored[-1]["step"] >= 200 - 50  # resumed from a checkpoint, not from zero
    assert events(log, "finished")[-1]["steps"] == total


def test_parameter_server_absorbs_an_evicted_worker_and_resumes_an_evicted_ps_where_it_stopped(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """Periodic checkpoints far apart and no restart allowed: neither eviction costs a step or the job."""
    counts = {"Chief": 1, "Worker": 2, "PS": 1}
    # The status shows progress up to 3 s late (a poll a second, count-only writes every 2 s): 60 epochs leave
    # over a thousand steps after the evictions, so that the job cannot finish before the PS's reaches it.
    total = _submit(
        process_cluster, process_namespace, "ParameterServer", counts, epochs=60, checkpoint_every=5000, backoff_limit=0
    )
    _at_step(process_cluster, process_namespace, 40)
    chief_uid = _uids(process_cluster, process_namespace)[f"{JOB}-chief-0"]
    process_cluster.evict(process_namespace, f"{JOB}-worker-0")
    wait_for("worker 0 replaced", lambda: _job(process_cluster, process_namespace)["status"].get("disruptions") == 1)
    _at_step(process_cluster, process_namespace, 120)
    assert _uids(process_cluster, process_namespace)[f"{JOB}-chief-0"] == chief_uid  # the coordinator carried on

    shown = _at_step(process_cluster, process_namespace, 160)["status"]["progress"]["step"]
    process_cluster.evict(process_namespace, f"{JOB}-ps-0")
    done = _succeeded(process_cluster, process_namespace, total)
    assert (done["status"].get("restartCount", 0), done["status"]["disruptions"]) == (0, 2)
    log = _chief_log(process_cluster, process_namespace, f"{JOB}-chief-0")
    assert events(log, "restored")[-1]["step"] >= shown  # saved on the way out, not a periodic checkpoint
    assert events(log, "finished")[-1]["steps"] == total


def _restart_operator(operator: OperatorProcess) -> None:
    operator.stop(signal.SIGKILL)
    time.sleep(2)
    operator.start()


def _restart_api_server(operator: OperatorProcess) -> None:
    devcluster.restart_component("kube-apiserver", pause=5)


@pytest.mark.parametrize("disruption", [_restart_operator, _restart_api_server], ids=["operator", "api-server"])
def test_the_control_plane_going_away_mid_job_costs_nothing(
    process_cluster: Cluster,
    operator: OperatorProcess,
    process_namespace: str,
    disruption: Callable[[OperatorProcess], None],
) -> None:
    """The operator killed and restarted, or the API server restarted: no duplicate pod, no restart."""
    total = _submit(
        process_cluster, process_namespace, "MultiWorkerMirrored", {"Worker": 2}, epochs=80, every_worker=True
    )
    _at_step(process_cluster, process_namespace, 100)
    before = _uids(process_cluster, process_namespace)
    disruption(operator)

    done = _succeeded(process_cluster, process_namespace, total)
    assert _uids(process_cluster, process_namespace) == before  # the same two pods, never recreated
    assert done["status"].get("restartCount", 0) == 0


def test_an_evicted_multi_worker_saves_with_its_peers_and_the_job_resumes_at_that_step(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """Through the Eviction API, as `kubectl drain` and the autoscaler evict: no periodic checkpoint since the
    start, and no restart allowed; the job still succeeds with exactly the steps of an uninterrupted run."""
    total = _submit(
        process_cluster,
        process_namespace,
        "MultiWorkerMirrored",
        {"Worker": 2},
        epochs=60,
        checkpoint_every=5000,
        backoff_limit=0,
    )
    shown = _at_step(process_cluster, process_namespace, 200)["status"]["progress"]["step"]
    process_cluster.evict(process_namespace, f"{JOB}-worker-1")

    done = _succeeded(process_cluster, process_namespace, total)
    assert (done["status"].get("restartCount", 0), done["status"]["disruptions"]) == (0, 1)
    assert done["status"]["lastDisruption"]["reason"] == "EvictionByEvictionAPI"
    log = _chief_log(process_cluster, process_namespace, f"{JOB}-worker-0")
    assert events(log, "restored")[-1]["step"] >= shown
    assert events(log, "finished")[-1]["steps"] == total


def test_a_suspended_job_saves_first_and_resumes_at_that_step(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """`runPolicy.suspend` on a running job, as a user or Kueue's preemption sets it, then cleared."""
    total = _submit(
        process_cluster, process_namespace, "MultiWorkerMirrored", {"Worker": 2}, epochs=60, checkpoint_every=5000
    )
    shown = _at_step(process_cluster, process_namespace, 200)["status"]["progress"]["step"]

    def suspend(value: bool) -> None:
        patch = json.dumps({"spec": {"runPolicy": {"suspend": value}}})
        process_cluster.kubectl("patch", "dtj", JOB, "-n", process_namespace, "--type=merge", "-p", patch)

    suspend(True)
    wait_for("no pods", lambda: not process_cluster.job_pods(process_namespace, JOB), timeout=120)
    assert holds(_job(process_cluster, process_namespace), "Suspended")
    suspend(False)

    done = _succeeded(process_cluster, process_namespace, total)
    assert done["status"].get("restartCount", 0) == 0
    log = _chief_log(process_cluster, process_namespace, f"{JOB}-worker-0")
    assert events(log, "restored")[-1]["step"] >= shown  # saved as the workers left
    assert events(log, "finished")[-1]["steps"] == total


LEADER_ELECTION = ["--leader-elect", "--lease-seconds", "4", "--renew-seconds", "3", "--retry-seconds", "0.5"]


def _lease_holder(cluster: Cluster) -> str:
    lease = cluster.get("lease", "disttrain-operator", OPERATOR_TEST_NAMESPACE) or {}
    return str(lease.get("spec", {}).get("holderIdentity") or "")


def test_the_standby_replica_takes_over_mid_job_without_duplicates(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    """Two replicas with leader election, as deploy/ runs them; the active one is killed mid-job."""
    operator.stop()  # the suite's own operator would act on this job too
    process_cluster.kubectl("delete", "lease", "disttrain-operator", "-n", OPERATOR_TEST_NAMESPACE, check=False)
    kubeconfig = operator_kubeconfig(process_cluster, tmp_path)
    active, standby = (
        OperatorProcess(
            process_cluster,
            tmp_path / f"{name}.log",
            kubeconfig=kubeconfig,
            pod_name=name,
            leader_election=LEADER_ELECTION,
        )
        for name in ("operator-a", "operator-b")
    )
    try:
        active.start()
        wait_for("operator-a to lead", lambda: _lease_holder(process_cluster).startswith("operator-a_"))
        standby.start()
        total = _submit(
            process_cluster, process_namespace, "MultiWorkerMirrored", {"Worker": 2}, epochs=80, every_worker=True
        )
        _at_step(process_cluster, process_namespace, 100)
        before = _uids(process_cluster, process_namespace)
        assert JOB not in standby.log()  # the standby has not touched the job

        active.stop(signal.SIGKILL)
        wait_for("operator-b to lead", lambda: _lease_holder(process_cluster).startswith("operator-b_"), timeout=30)
        done = _succeeded(process_cluster, process_namespace, total)
        assert _uids(process_cluster, process_namespace) == before  # the same two pods, never recreated
        assert done["status"].get("restartCount", 0) == 0
        lease = process_cluster.get("lease", "disttrain-operator", OPERATOR_TEST_NAMESPACE)
        assert lease is not None and lease["spec"]["leaseTransitions"] == 1

        standby.stop()  # a clean shutdown hands the lease back at once
        assert _lease_holder(process_cluster) == ""
    finally:
        active.stop(signal.SIGKILL)
        standby.stop(signal.SIGKILL)
        operator.start()


def test_workers_cut_off_from_each_other_say_whom_they_wait_for_then_resume_once_joined(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """TensorFlow alone waits for an unreachable peer in silence. The port TF_CONFIG names is cut between the
    pods (a rule dropping it on the node's bridge, above the node's own): each worker's log names the peer it
    waits for, and after its bounded wait the job's status and an Event name the unreachable replica."""
    cut = ["FORWARD", "-i", "dtbr0", "-o", "dtbr0", "-p", "tcp", "--dport", "2222", "-j", "DROP"]
    with bridged_traffic_through_iptables():
        subprocess.run(["iptables", "-I", *cut], check=True)
        try:
            patience = ("--peer-wait-seconds", "15")
            total = _submit(process_cluster, process_namespace, "MultiWorkerMirrored", {"Worker": 2}, 2, extra=patience)
            peer = f"{JOB}-worker-1.{JOB}.{process_namespace}.svc:2222"

            def waiting_logged() -> bool:
                try:
                    log = _chief_log(process_cluster, process_namespace, f"{JOB}-worker-0")
                except (OSError, TypeError):  # no pod or no log yet
                    return False
                return any(wait["peers"] == [peer] for wait in events(log, "waiting for peers"))

            wait_for("worker 0's log naming the peer it waits for", waiting_logged, timeout=60)

            says_a_worker_is_unreachable(process_cluster, process_namespace, JOB, 15, timeout=90)
        finally:
            subprocess.run(["iptables", "-D", *cut], check=True)
    _succeeded(process_cluster, process_namespace, total)
