"""`Client.train` on the process node: a function's two workers join one collective with a package installed
at their start from a local index; a package that does not install fails the job with pip's words; the
function's ConfigMap belongs to the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from disttrain import Client, JobFailedError
from support.kube_cluster import Cluster
from support.operator_process import OperatorProcess
from support.package_index import package_index
from support.shipped_functions import nothing, reduce_across_workers, reports


@pytest.fixture
def client(process_cluster: Cluster, process_namespace: str) -> Client:
    return Client(kubeconfig=process_cluster.kubeconfig, namespace=process_namespace)


def test_two_workers_of_a_function_join_one_collective_with_a_package_from_a_local_index(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, client: Client, tmp_path: Path
) -> None:
    index = package_index(tmp_path / "index", "tiny-greeting", "1.0", "tiny_greeting", "GREETING = 'hello'\n")
    parameters = {"value": 1.5, "greeting_from": "tiny_greeting"}
    job = client.train(
        reduce_across_workers, workers=2, parameters=parameters, packages=["tiny-greeting"], index_url=index
    )
    done = client.wait(job, timeout=240)
    assert done.status.phase == "Succeeded"
    for replica in ("worker-0", "worker-1"):
        found = reports("\n".join(client.logs(job, replica=replica)))
        assert found == [{"workers": 2, "sum": 3.0, "greeting": "hello"}], replica
    function_map = process_cluster.get("configmap", f"{job.metadata.name}-function", process_namespace)
    assert function_map is not None
    owners = function_map["metadata"]["ownerReferences"]
    assert [(owner["kind"], owner["uid"]) for owner in owners] == [("DistTrainJob", job.metadata.uid)]


def test_a_package_that_does_not_install_fails_the_job_with_pip_s_words(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, client: Client, tmp_path: Path
) -> None:
    index = package_index(tmp_path / "index", "tiny-greeting", "1.0", "tiny_greeting", "")
    job = client.train(nothing, workers=1, packages=["no-such-package==1.0"], index_url=index)
    with pytest.raises(JobFailedError, match=r"pip could not install no-such-package==1\.0"):
        client.wait(job, timeout=120)
    failed = client.get(job)
    assert failed.status.restart_count == 0  # a bad package is not retried
