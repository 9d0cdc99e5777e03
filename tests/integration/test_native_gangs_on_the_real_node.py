"""Kubernetes' own gang scheduling on the real node (kubelet and containerd): with the operator's gang scheduler
`kubernetes`, a CPU gang that cannot fit on the node starts no container while one that fits runs. The kwok
nodes' gangs are test_native_gangs.py's."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from disttrain_dev import cluster as devcluster
from disttrain_dev import node_kinds, real_node
from disttrain_dev.polling import wait_for
from support.job_builder import JobBuilder
from support.kube_cluster import Cluster
from support.operator_process import OperatorProcess
from support.pod_checks import bound_pods, gang_waits
from support.real_node_images import real_node_with_images


@pytest.fixture
def real_namespace(cluster: Cluster) -> Iterator[str]:
    """A namespace whose pods run on the real node, the trainer image loaded into its containerd."""
    real_node_with_images()
    name = f"gang-{uuid.uuid4().hex[:8]}"
    cluster.create_namespace(devcluster.node_namespace(name, node_kinds.REAL))
    wait_for("the namespace's default ServiceAccount", lambda: cluster.get("serviceaccount", "default", name))
    yield name
    cluster.delete_namespace(name)


def _cpu_job(name: str, workers: int, cpu: str) -> dict[str, Any]:
    """Workers that sleep in the trainer image, each asking for `cpu`, as a gang."""
    sleep = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); time.sleep(600)"
    job = (
        JobBuilder.from_example("local-multi-worker-digits.yaml")
        .metadata(name=name)
        .replica("Worker", replicas=workers)
    )
    # as PID 1 it must handle SIGTERM to stop at once
    job.container(command=["python3", "-c", sleep], args=[], resources={"requests": {"cpu": cpu, "memory": "64Mi"}})
    return job.spec(runPolicy={"schedulingPolicy": {}}).without("checkpoint").obj()


def test_on_the_real_node_a_cpu_gang_larger_than_the_node_starts_no_container_while_one_that_fits_runs(
    cluster: Cluster, real_namespace: str, native_operator: OperatorProcess
) -> None:
    node = cluster.get("node", real_node.NODE_NAME, "default")  # cluster-scoped: the namespace is unused
    assert node is not None
    cpu = str(node["status"]["allocatable"]["cpu"])
    millicores = int(cpu.removesuffix("m")) if cpu.endswith("m") else int(cpu) * 1000
    each = f"{millicores * 6 // 10}m"  # one fits, two never do
    cluster.apply(real_namespace, json.dumps(_cpu_job("wide", 2, each)))
    wait_for("the scheduler to hold back both pods", lambda: gang_waits(cluster, real_namespace, "wide", 2), timeout=90)
    cluster.apply(real_namespace, json.dumps(_cpu_job("narrow", 2, "50m")))

    def running() -> bool:
        pods = cluster.job_pods(real_namespace, "narrow").values()
        return len(pods) == 2 and all(pod["status"].get("phase") == "Running" for pod in pods)

    wait_for("the gang that fits to run in containerd", running, timeout=120)
    assert bound_pods(cluster, real_namespace, "wide") == []  # a gang larger than the node holds nothing
