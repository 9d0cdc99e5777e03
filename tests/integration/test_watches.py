"""The operator's own watches against the real API server, in the cases client-go is built for: a
resourceVersion compacted away while the operator could not read, and a connection that went silent;
and what the liveness endpoint says of them.

Each test runs an operator of its own, scoped to its namespace, in place of the session's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from disttrain_dev import cluster as devcluster
from disttrain_dev.polling import wait_for
from disttrain_operator.watched import CLAIMS, DISTTRAIN_JOBS, PODS, SERVICES, TENSORBOARDS, WORKLOADS
from support.job_builder import JobBuilder
from support.kube_cluster import Cluster, operator_kubeconfig
from support.network_faults import SilencingProxy
from support.operator_process import OperatorProcess
from support.repository import ROOT

EXAMPLE = ROOT / "examples" / "multi-worker-mirrored-gpu.yaml"
WORKERS = 4


def _job(name: str) -> dict[str, Any]:
    return JobBuilder.from_example(EXAMPLE).metadata(name=name).obj()


def _create(cluster: Cluster, namespace: str, jobs: list[dict[str, Any]]) -> None:
    listed = {"apiVersion": "v1", "kind": "List", "items": jobs}
    cluster.kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(listed))


def _has_pods(cluster: Cluster, namespace: str, job: str) -> dict[str, dict[str, Any]] | None:
    pods = cluster.job_pods(namespace, job)
    return pods if len(pods) == WORKERS else None


@pytest.fixture
def own_operator(
    cluster: Cluster, operator: OperatorProcess, namespace: str, tmp_path: Path
) -> Iterator[tuple[OperatorProcess, Path]]:
    """The session's operator stopped, and the kubeconfig for one scoped to the namespace; started again after."""
    with operator.stopped():
        yield operator, operator_kubeconfig(cluster, tmp_path)


def test_what_changed_while_the_operator_was_frozen_and_etcd_compacted_is_all_reconciled(
    cluster: Cluster, own_operator: tuple[OperatorProcess, Path], namespace: str, tmp_path: Path
) -> None:
    """Frozen (SIGSTOP) with its watches open, the operator misses a job created and a pod deleted; etcd
    is compacted and the API server restarted, so its watch cache starts after the operator's last
    version (as after an upgrade of the control plane). Resumed, the operator reconnects and reconciles all
    of it. (Whether the API server then answers 410 or serves the old version is its choice: both shapes
    of the 410 are held in the unit tests.)"""
    _, kubeconfig = own_operator
    frozen = OperatorProcess(cluster, tmp_path / "operator.log", ["--namespace", namespace], kubeconfig)
    frozen.start()
    try:
        _create(cluster, namespace, [_job("before")])
        before = wait_for("the first job's pods", lambda: _has_pods(cluster, namespace, "before"), timeout=60)
        frozen.pause()
        try:
            _create(cluster, namespace, [_job("meanwhile")])
            cluster.kubectl("delete", "pod", "-n", namespace, "before-worker-1", "--wait=false")
            devcluster.compact_etcd(cluster.state_folder)
            devcluster.restart_component("kube-apiserver", folder=cluster.state_folder)
        finally:
            frozen.resume()

        wait_for("the job created meanwhile reconciled", lambda: _has_pods(cluster, namespace, "meanwhile"), timeout=90)

        def replaced() -> bool:
            pod = cluster.job_pods(namespace, "before").get("before-worker-1")
            return pod is not None and pod["metadata"]["uid"] != before["before-worker-1"]["metadata"]["uid"]

        wait_for("the pod deleted meanwhile replaced", replaced, timeout=60)
    finally:
        frozen.stop()


def test_a_watch_that_went_silent_is_noticed_and_started_again(
    cluster: Cluster, own_operator: tuple[OperatorProcess, Path], namespace: str, tmp_path: Path
) -> None:
    """Every connection the operator holds to the API server goes silent without closing. With the API
    server ending each watch after 5 s here (60 s by default), the operator gives up on the silent stream
    10 s past that, connects again, and reconciles the job created meanwhile."""
    _, kubeconfig = own_operator
    state = devcluster.running_state(cluster.state_folder)
    assert state is not None
    proxy = SilencingProxy(state.address, state.apiserver_port)
    config = json.loads(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://{state.address}:{proxy.port}"
    kubeconfig.write_text(json.dumps(config))
    scope, environment = ["--namespace", namespace], {"DISTTRAIN_WATCH_SECONDS": "5"}
    watched = OperatorProcess(cluster, tmp_path / "operator.log", scope, kubeconfig, environment=environment)
    watched.start()
    try:
        _create(cluster, namespace, [_job("before")])
        wait_for("the first job's pods", lambda: _has_pods(cluster, namespace, "before"), timeout=60)
        proxy.silence()
        _create(cluster, namespace, [_job("meanwhile")])
        wait_for("the job created after the silence", lambda: _has_pods(cluster, namespace, "meanwhile"), timeout=60)
        assert "Read timed out" in watched.log(), watched.log()[-3000:]
    finally:
        watched.stop()
        proxy.close()


def test_the_liveness_endpoint_names_every_watch_once_listed_the_parts_running_and_the_queue_depth(
    operator: OperatorProcess,
) -> None:
    def all_listed() -> dict[str, Any] | None:
        health = operator.health()
        return health if health["watches"] and all(health["watches"].values()) else None

    health = wait_for("every watch listed", all_listed)
    watched = (DISTTRAIN_JOBS, PODS, SERVICES, CLAIMS, WORKLOADS, TENSORBOARDS)
    expected = {resource.path(None) for resource in watched}
    assert set(health["watches"]) == expected, health
    assert isinstance(health["queue_depth"], int), health
    # the watches but kopf's, then the queue, wakeups, progress poller, claim checker, events, logs and sweeper
    assert health["threads"] == len(watched) - 1 + 7, health
