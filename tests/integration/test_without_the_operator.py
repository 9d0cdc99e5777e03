"""Nothing of disttrain holds a pod, on the process node: with the operator killed, a namespace of running
and finished jobs is deleted within the pods' grace period and a bound; started again on a namespace half
deleted, the operator makes nothing there; an attempt that went while it was away is named in the job's
status once a later one is kept; and a pod an earlier version held by its finalizer is let go once its
log is kept. The real node's eviction, drain and uninstall are in test_real_node.py."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from disttrain import Client
from disttrain_core.api.spec import ReplicaType
from disttrain_core.kept_logs import LEGACY_LOG_FINALIZER  # what earlier versions put on pods
from disttrain_dev import cluster as devcluster
from disttrain_dev.polling import wait_for
from support.job_builder import JobBuilder
from support.job_checks import job_where
from support.kube_cluster import OPERATOR_TEST_NAMESPACE, Cluster
from support.operator_process import OperatorProcess
from support.rbac_rights import AUDIT_TIME, audit_events

# How long a deletion may take past the pods' grace period with no operator at all (docs/architecture.md).
BEYOND_GRACE_SECONDS = 30
GRACE_SECONDS = 30  # the pods' own: Kubernetes' default, which the jobs here keep
DELETION_BOUND = GRACE_SECONDS + BEYOND_GRACE_SECONDS
RUNS_UNTIL_STOPPED = "echo started; trap 'echo stopped; exit 143' TERM; while true; do sleep 0.2; done"
# Its first attempt runs until it is stopped, its second ends at once.
SECOND_ENDS = f'if [ -e "$MARKER" ]; then echo second; exit 0; fi; touch "$MARKER"; {RUNS_UNTIL_STOPPED}'
HELD = "disttrain.test/held"  # another controller's finalizer, which keeps a namespace half deleted


def _gone(cluster: Cluster, namespace: str) -> bool:
    return cluster.get("namespace", namespace, "") is None


def _pods(cluster: Cluster, namespace: str, job: str) -> list[dict[str, Any]]:
    return cluster.items("pods", namespace, f"disttrain.io/job-name={job}")


def _running(cluster: Cluster, namespace: str, job: str, count: int) -> bool:
    pods = _pods(cluster, namespace, job)
    return len(pods) == count and all(pod["status"].get("phase") == "Running" for pod in pods)


def test_with_the_operator_killed_a_namespace_of_running_and_finished_jobs_goes_within_the_bound(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    client = Client(kubeconfig=process_cluster.kubeconfig, namespace=process_namespace)
    client.create(JobBuilder("running").script(RUNS_UNTIL_STOPPED, 2).obj())
    finished = client.create(JobBuilder("finished").script("echo done").obj())  # its pod stays: cleanPodPolicy Running
    client.wait(finished, "Succeeded", timeout=120)
    wait_for("the running job's pods", lambda: _running(process_cluster, process_namespace, "running", 2), timeout=90)
    operator.stop(signal.SIGKILL)
    try:
        process_cluster.kubectl("delete", "namespace", process_namespace, "--wait=false")
        wait_for("the namespace gone", lambda: _gone(process_cluster, process_namespace), timeout=DELETION_BOUND)
    finally:
        operator.start()


def test_started_again_on_a_namespace_half_deleted_the_operator_makes_nothing_there(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """A job another controller's finalizer holds while its namespace goes: the operator, back, writes its
    status (a sign it saw it) and asks for no pod, which the API server would refuse there anyway."""
    manifest = JobBuilder("held").script(RUNS_UNTIL_STOPPED).obj()
    manifest["metadata"]["finalizers"] = [HELD]
    process_cluster.apply(process_namespace, json.dumps(manifest))
    job_where(process_cluster, process_namespace, "held", "its worker active", _active(1))
    operator.stop(signal.SIGKILL)
    restarted = False
    try:
        process_cluster.kubectl("delete", "namespace", process_namespace, "--wait=false")
        wait_for(
            "its pods gone, the job held",
            lambda: (
                not _pods(process_cluster, process_namespace, "held")
                and process_cluster.job(process_namespace, "held")["metadata"].get("deletionTimestamp")
            ),
            timeout=DELETION_BOUND,
        )
        since = datetime.now(UTC).strftime(AUDIT_TIME)
        operator.start()
        restarted = True
        job_where(process_cluster, process_namespace, "held", "no worker active", _active(0))
        account = f"system:serviceaccount:{OPERATOR_TEST_NAMESPACE}:disttrain-operator"
        creates = [
            event["objectRef"]
            for event in audit_events(devcluster.audit_logs(), account, since)
            if event["verb"] == "create" and event["objectRef"].get("namespace") == process_namespace
        ]
        assert not [made for made in creates if made["resource"] != "events"], creates
        assert not _pods(process_cluster, process_namespace, "held")
    finally:
        if not restarted:
            operator.start()
        drop = '[{"op": "remove", "path": "/metadata/finalizers"}]'
        process_cluster.kubectl("patch", "disttrainjob", "held", "-n", process_namespace, "--type=json", "-p", drop)
    wait_for("the namespace gone", lambda: _gone(process_cluster, process_namespace), timeout=DELETION_BOUND)


def _active(count: int) -> Callable[[dict[str, Any]], bool]:
    """Its one worker's status: `count` active, on its first attempt."""

    def test(job: dict[str, Any]) -> bool:
        worker = job["status"].get("replicaStatuses", {}).get("Worker", {})
        return bool(worker.get("active") == count and worker.get("attempts") == [1])

    return test


def test_an_attempt_that_went_while_no_operator_ran_is_named_in_the_job_s_status(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    env = [{"name": "MARKER", "value": str(tmp_path / "attempted")}]
    manifest = JobBuilder("missed").script(SECOND_ENDS, env=env, restartPolicy="OnFailure").obj()
    client = Client(kubeconfig=process_cluster.kubeconfig, namespace=process_namespace)
    job = client.create(manifest)
    job_where(process_cluster, process_namespace, "missed", "its first attempt active", _active(1))
    operator.stop(signal.SIGKILL)
    try:  # deleted with no operator to keep its log, and gone all the same
        process_cluster.kubectl("delete", "pod", "missed-worker-0", "-n", process_namespace, "--timeout=60s")
    finally:
        operator.start()
    done = client.wait(job, "Succeeded", timeout=120)
    assert done.status.replica_statuses[ReplicaType.WORKER].attempts == [2]
    said = job_where(process_cluster, process_namespace, "missed", "its lost attempt named", _unkept)
    assert said["status"]["unkeptLogs"] == [
        {
            "replica": "worker-0",
            "firstAttempt": 1,
            "lastAttempt": 1,
            "reason": "their pods went while no operator ran, or before their log could be read",
        }
    ]
    assert [(a.number, a.kept, a.exit_code) for a in client.attempts(job, "worker-0")] == [(2, True, 0)]
    events = process_cluster.items("events", process_namespace, None)
    assert any(event["reason"] == "LogNotKept" and "worker-0, attempt 1" in event["message"] for event in events)


def _unkept(job: dict[str, Any]) -> bool:
    return bool(job["status"].get("unkeptLogs"))


def test_a_pod_an_earlier_version_held_is_let_go_once_its_log_is_kept(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    client = Client(kubeconfig=process_cluster.kubeconfig, namespace=process_namespace)
    job = client.create(JobBuilder("upgraded").script("echo from before the upgrade; sleep 3").obj())
    wait_for("its pod running", lambda: _running(process_cluster, process_namespace, "upgraded", 1), timeout=90)
    hold = json.dumps([{"op": "add", "path": "/metadata/finalizers", "value": [LEGACY_LOG_FINALIZER]}])
    process_cluster.kubectl("patch", "pod", "upgraded-worker-0", "-n", process_namespace, "--type=json", "-p", hold)
    client.wait(job, "Succeeded", timeout=120)

    def let_go() -> bool:
        (pod,) = _pods(process_cluster, process_namespace, "upgraded")
        return not pod["metadata"].get("finalizers")

    wait_for("the pod let go", let_go, timeout=60)
    assert list(client.logs(job, "worker-0", attempt=1)) == ["from before the upgrade"]
