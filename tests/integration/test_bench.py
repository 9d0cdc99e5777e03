"""The benchmarks that run trainers on the local cluster's process node, at sizes small enough for CI and on the
stand-in trainer (`--trainer stand-in`): what runs here is each benchmark's harness and the operator's decisions,
beside the peer's. The others, of kwok's nodes, are test_kwok_benchmarks.py's. Nothing here asserts a time: the
figures come from full runs with TensorFlow (docs/benchmarks.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from support.bench_support import FIGURE, bench
from support.kube_cluster import Cluster
from support.operator_process import OperatorProcess


@pytest.fixture(scope="module")
def bench_cluster(cluster: Cluster, operator: OperatorProcess) -> Iterator[Cluster]:
    """The suite's own operator pauses meanwhile: it watches every namespace, the benchmarks' too."""
    operator.stop()
    yield cluster
    operator.start()


def test_goodput_under_evictions_beside_the_peer(bench_cluster: Cluster, process_cluster: Cluster) -> None:
    """Worker 1 evicted once, 5 s after worker 0's first step: disttrain's job goes on with the restart uncounted;
    training-operator fails the same job as a TFJob (it takes the evicted pod for a failed replica, whatever its
    restartPolicy). The job must still run then: 990 steps at 80 a second."""
    args = ("--epochs", "45", "--every", "5", "--evictions", "1", "--run-limit", "180", "--peer")
    last = bench("goodput", *args, "--trainer", "stand-in")
    pattern = rf"goodput steps=990 every=5 operator_5={FIGURE} operator_5_redone=-?{FIGURE} operator_5_evictions=1 "
    pattern += rf"operator_5_counted=0 operator_5_resumed={FIGURE} peer_5=0.00 peer_5_failed=1 peer_5_evictions=1"
    assert re.fullmatch(pattern, last), last


def test_restarts_in_place_against_recreated_on_the_process_node(
    bench_cluster: Cluster, process_cluster: Cluster
) -> None:
    """Worker 1's trainer killed once under each mode: in place the pods stay, recreated they do not; both
    count the restart. The real node's figures (`--node real`) are docs/benchmarks.md's."""
    last = bench("restarts", "--node", "process", "--kills", "1", "--trainer", "stand-in")
    pattern = rf"restarts kills=1 process_in-place={FIGURE} process_in-place_same_pods=1 process_in-place_counted=1 "
    pattern += rf"process_recreate={FIGURE} process_recreate_same_pods=0 process_recreate_counted=1 "
    pattern += rf"process_ratio={FIGURE}"
    assert re.fullmatch(pattern, last), last
