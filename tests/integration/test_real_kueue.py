"""Kueue itself, built from its source and run beside the operator: queued jobs are admitted within
quota, wait while it is used, start when it is freed, and a job of a higher WorkloadPriorityClass
preempts a lower one, which is suspended, gets its templates back and resumes once readmitted.
Served TFJobs take the same path."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from disttrain import Client, DistTrainJob
from disttrain_dev.polling import wait_for
from support.job_builder import JobBuilder
from support.job_checks import holds, job_where
from support.kube_cluster import Cluster, serving_operator_kubeconfig
from support.kueue_support import (
    LOCAL_QUEUE,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    URGENT_PRIORITY,
    WORKLOADS,
    local_queue,
    workload_condition,
)
from support.operator_process import OperatorProcess
from support.pod_checks import GpuPool, bound_pods, gang_waits, replaced_as_a_gang, running_pods

FLAVOR_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
GPU = {"nvidia.com/gpu": 1}


@pytest.fixture
def queue(cluster: Cluster, kueue_process: None, namespace: str) -> Iterator[str]:
    """A LocalQueue in the test's namespace, on a ClusterQueue of 4 GPUs (on the kwok nodes) that preempts
    lower priorities; yields the name of its higher WorkloadPriorityClass."""
    quota: dict[str, int | str] = {"nvidia.com/gpu": 4, "cpu": 100, "memory": "400Gi"}
    flavor = {"nodeLabels": {"type": "kwok"}, "tolerations": [FLAVOR_TOLERATION]}
    with local_queue(cluster, namespace, quota, flavor) as urgent:
        yield urgent


def _job(name: str, labels: dict[str, str]) -> str:
    """The 4-GPU multi-worker example, named and labelled for a queue."""
    return json.dumps(
        JobBuilder.from_example("multi-worker-mirrored-gpu.yaml").metadata(name=name, labels=labels).obj()
    )


def _workload(cluster: Cluster, namespace: str, job: str) -> dict[str, Any]:
    return wait_for(f"the Workload of {job}", lambda: cluster.get(WORKLOADS, f"disttrainjob-{job}", namespace))


def _suspended(cluster: Cluster, namespace: str, job: str) -> dict[str, Any]:
    return job_where(cluster, namespace, job, "suspended", lambda j: j["status"].get("phase") == "Suspended")


def _succeed(cluster: Cluster, namespace: str, job: str) -> None:
    cluster.set_pod_status(namespace, f"{job}-worker-0", "Succeeded", exit_code=0)
    job_where(cluster, namespace, job, "Succeeded", lambda j: holds(j, "Succeeded"))
    wait_for(f"{job}'s Workload Finished", lambda: workload_condition(cluster, namespace, job, "Finished") == "True")


def test_jobs_are_admitted_within_quota_queue_and_start_when_it_frees(
    cluster: Cluster, operator: OperatorProcess, namespace: str, queue: str
) -> None:
    cluster.apply(namespace, _job("first", {QUEUE_LABEL: LOCAL_QUEUE}))
    pods = running_pods(cluster, namespace, "first", 4)
    for pod in pods.values():
        assert pod["spec"]["nodeSelector"] == {"type": "kwok"}
        assert FLAVOR_TOLERATION in pod["spec"]["tolerations"]
    cluster.wait_for_event(namespace, "Admitted")

    cluster.apply(namespace, _job("second", {QUEUE_LABEL: LOCAL_QUEUE}))
    wait_for(
        "second waits for quota", lambda: workload_condition(cluster, namespace, "second", "QuotaReserved") == "False"
    )
    assert _suspended(cluster, namespace, "second")["spec"]["runPolicy"]["suspend"] is True
    assert cluster.job_pods(namespace, "second") == {}

    _succeed(cluster, namespace, "first")
    running_pods(cluster, namespace, "second", 4)
    _succeed(cluster, namespace, "second")


def test_a_higher_workload_priority_class_preempts_and_the_lower_job_resumes(
    cluster: Cluster, operator: OperatorProcess, namespace: str, queue: str
) -> None:
    cluster.apply(namespace, _job("low", {QUEUE_LABEL: LOCAL_QUEUE}))
    running_pods(cluster, namespace, "low", 4)
    assert "priority" not in _workload(cluster, namespace, "low")["spec"]

    urgent = queue  # the higher WorkloadPriorityClass
    cluster.apply(namespace, _job("high", {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: urgent}))
    workload = _workload(cluster, namespace, "high")
    assert workload["spec"]["priority"] == URGENT_PRIORITY
    assert workload["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": urgent,
    }

    wait_for("low evicted", lambda: workload_condition(cluster, namespace, "low", "Evicted") == "True")
    low = _suspended(cluster, namespace, "low")
    template = low["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    assert "nodeSelector" not in template and not template.get("tolerations")  # restored from the Workload
    cluster.wait_for_event(namespace, "Evicted")
    # The Python client's wait for Running, started while low is suspended (it ran before): it must hold
    # until Kueue admits low again, not return on the Running it had before the preemption.
    client = Client(kubeconfig=cluster.kubeconfig, namespace=namespace)
    resumed: list[DistTrainJob] = []
    waiter = threading.Thread(target=lambda: resumed.append(client.wait("low", "Running", timeout=180)))
    waiter.start()
    running_pods(cluster, namespace, "high", 4)
    wait_for("low's pods gone", lambda: not cluster.job_pods(namespace, "low"), timeout=60)
    assert not resumed, "the wait returned while low was suspended"

    _succeed(cluster, namespace, "high")
    running_pods(cluster, namespace, "low", 4)
    waiter.join(timeout=120)
    assert resumed and resumed[0].status.phase == "Running"
    _succeed(cluster, namespace, "low")


def test_a_job_of_its_own_service_account_is_preempted_releases_its_quota_and_resumes_on_its_flavor(
    cluster: Cluster, operator: OperatorProcess, namespace: str, queue: str, admission_policy: None
) -> None:
    """A job that names a ServiceAccount of its namespace (its creator may make tokens for it, as `edit` may),
    under the admission policy, on a flavor with node labels: admitted, it starts there; preempted, the
    operator's suspend, which puts the templates back, passes the policy (the operator makes no tokens), the
    quota goes to the higher job, and the job resumes on its flavor once that ends."""
    cluster.kubectl("create", "serviceaccount", "trainer", "-n", namespace)
    own = JobBuilder.from_example("multi-worker-mirrored-gpu.yaml").metadata(
        name="low", labels={QUEUE_LABEL: LOCAL_QUEUE}
    )
    cluster.apply(namespace, json.dumps(own.pod_spec(serviceAccountName="trainer").obj()))
    for pod in running_pods(cluster, namespace, "low", 4).values():
        assert pod["spec"]["serviceAccountName"] == "trainer" and pod["spec"]["nodeSelector"] == {"type": "kwok"}
    cluster.apply(namespace, _job("high", {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: queue}))
    wait_for("low evicted", lambda: workload_condition(cluster, namespace, "low", "Evicted") == "True")
    low = _suspended(cluster, namespace, "low")
    assert "nodeSelector" not in low["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]  # put back
    running_pods(cluster, namespace, "high", 4)  # the quota low released
    _succeed(cluster, namespace, "high")
    for pod in running_pods(cluster, namespace, "low", 4).values():
        assert pod["spec"]["serviceAccountName"] == "trainer" and pod["spec"]["nodeSelector"] == {"type": "kwok"}
    _succeed(cluster, namespace, "low")


def test_a_served_tfjob_waits_for_quota_starts_when_it_frees_and_releases_it(
    cluster: Cluster, operator: OperatorProcess, namespace: str, queue: str, tmp_path: Path
) -> None:
    kubeconfig = serving_operator_kubeconfig(cluster, tmp_path)
    serving = OperatorProcess(cluster, tmp_path / "serving.log", kubeconfig=kubeconfig, options=["--serve-tfjobs"])
    operator.stop()  # the serving operator acts on the DistTrainJob too: one operator at a time
    serving.start()
    try:
        cluster.apply(namespace, _job("first", {QUEUE_LABEL: LOCAL_QUEUE}))
        running_pods(cluster, namespace, "first", 4)
        template = {"spec": {"containers": [{"name": "tensorflow", "image": "i", "resources": {"limits": GPU}}]}}
        tfjob = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "second", "namespace": namespace, "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
            "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 4, "restartPolicy": "OnFailure", "template": template}}},
        }
        cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline", "--overwrite")
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(tfjob))
        wait_for(
            "the TFJob waits",
            lambda: workload_condition(cluster, namespace, "second", "QuotaReserved") == "False",
        )
        held = json.loads(cluster.kubectl("get", "tfjob", "second", "-n", namespace, "-o", "json").stdout)
        assert held["spec"]["runPolicy"]["suspend"] is True
        assert _workload(cluster, namespace, "second")["metadata"]["ownerReferences"][0]["kind"] == "TFJob"

        _succeed(cluster, namespace, "first")
        pods = running_pods(cluster, namespace, "second", 4)
        assert all(pod["spec"]["nodeSelector"] == {"type": "kwok"} for pod in pods.values())
        cluster.set_pod_status(namespace, "second-worker-0", "Succeeded", exit_code=0)
        wait_for(
            "the TFJob's Workload Finished",
            lambda: workload_condition(cluster, namespace, "second", "Finished") == "True",
        )
    finally:
        serving.stop()
        operator.start()


def test_a_job_kueue_admits_is_then_placed_by_kube_scheduler_as_a_gang(
    cluster: Cluster, native_operator: OperatorProcess, namespace: str, queue: str, pool: GpuPool
) -> None:
    """Kueue admits against quota (4 GPUs), not against free nodes: with 3 GPU slots free, the admitted
    4-pod job holds none of them until a fourth appears, and then all 4 are bound together."""
    pool.add(gpus=3)
    cluster.apply(namespace, json.dumps(pool.job("admitted", 4, labels={QUEUE_LABEL: LOCAL_QUEUE})))
    wait_for("Kueue to admit it", lambda: workload_condition(cluster, namespace, "admitted", "Admitted") == "True")
    group = wait_for("its PodGroup", lambda: cluster.get("podgroups.scheduling.k8s.io", "admitted", namespace))
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}

    wait_for("the scheduler to hold back all 4 pods", lambda: gang_waits(cluster, namespace, "admitted", 4), timeout=90)
    pods = cluster.job_pods(namespace, "admitted").values()
    assert all(pod["spec"]["nodeSelector"]["type"] == "kwok" for pod in pods)  # Kueue's flavor, injected
    assert all(pod["spec"]["schedulingGroup"] == {"podGroupName": "admitted"} for pod in pods)
    assert bound_pods(cluster, namespace, "admitted") == []

    pool.add(gpus=1)
    wait_for("all 4 bound", lambda: len(bound_pods(cluster, namespace, "admitted")) == 4, timeout=120)

    # Evicted (its Workload deactivated) and admitted again: the resumed pods join the same PodGroup as a gang.
    before = {pod["metadata"]["uid"] for pod in cluster.job_pods(namespace, "admitted").values()}
    workload = "disttrainjob-admitted"
    cluster.kubectl("patch", WORKLOADS, workload, "-n", namespace, "--type=merge", "-p", '{"spec":{"active":false}}')
    _suspended(cluster, namespace, "admitted")
    wait_for("its pods gone", lambda: not cluster.job_pods(namespace, "admitted"), timeout=60)
    cluster.kubectl("patch", WORKLOADS, workload, "-n", namespace, "--type=merge", "-p", '{"spec":{"active":true}}')

    wait_for(
        "4 resumed pods, all bound as a gang",
        lambda: replaced_as_a_gang(cluster, namespace, "admitted", before, 4),
        timeout=120,
    )
    _succeed(cluster, namespace, "admitted")
