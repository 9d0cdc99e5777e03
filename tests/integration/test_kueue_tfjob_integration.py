"""Served TFJobs queued by Kueue's own TFJob integration, on kwok's GPU nodes: Kueue's controller, not the
operator, suspends and resumes them and writes its flavor into their templates, past deploy/'s admission
policy. Kueue is built from shared/third_party and runs with that integration for this module alone, with
the suite's credentials; test_api_server_validation.py holds the policy to Kueue's own rights, which create
neither pods nor tokens."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from disttrain_dev import kueue
from disttrain_dev.polling import wait_for
from support.kube_cluster import Cluster, serving_operator_kubeconfig
from support.kueue_support import LOCAL_QUEUE, PRIORITY_LABEL, QUEUE_LABEL, WORKLOADS, kueue_running, local_queue
from support.operator_process import OperatorProcess
from support.pod_checks import running_pods

FLAVOR_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
FLAVOR = {"nodeLabels": {"type": "kwok"}, "tolerations": [FLAVOR_TOLERATION]}


@pytest.fixture(scope="module")
def serving(
    cluster: Cluster, operator: OperatorProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """Kueue with its TFJob integration, and an operator that serves the TFJobs it queues with deploy/'s and
    the TFJob overlay's rights; the suite's own operator pauses meanwhile, as both would act on every job."""
    problem = kueue.missing_source()
    if problem:
        pytest.skip(problem)
    folder = tmp_path_factory.mktemp("tfjob-integration")
    kubeconfig = serving_operator_kubeconfig(cluster, folder)
    operator.stop()
    serving = OperatorProcess(
        cluster,
        folder / "operator.log",
        kubeconfig=kubeconfig,
        options=["--serve-tfjobs"],
        environment={"DISTTRAIN_KUEUE_TFJOB_INTEGRATION": "true"},
    )
    with kueue_running(cluster, tmp_path_factory.mktemp("kueue"), tfjob_integration=True):
        serving.start()
        yield serving
        serving.stop()
    operator.start()


@pytest.fixture
def urgent(cluster: Cluster, serving: OperatorProcess, namespace: str) -> Iterator[str]:
    """A LocalQueue of 4 GPUs on the kwok nodes' flavor; yields its higher WorkloadPriorityClass."""
    quota: dict[str, int | str] = {"nvidia.com/gpu": 4, "cpu": 100, "memory": "400Gi"}
    with local_queue(cluster, namespace, quota, FLAVOR) as name:
        yield name


def _tfjob(name: str, labels: dict[str, str], **pod_spec: Any) -> str:
    """A queued TFJob, created suspended: Kueue's webhook suspends each at its creation, and Kueue runs here as a
    host process with no webhook on the API server's path. (Created running, its pods were made at once from the
    templates without the flavor, and one whose deletion met a 409 outlived Kueue's suspension and admission.)"""
    container = {"name": "tensorflow", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    template = {"spec": {"containers": [container], **pod_spec}}
    return json.dumps(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: LOCAL_QUEUE, **labels}},
            "spec": {
                "runPolicy": {"suspend": True},
                "tfReplicaSpecs": {"Worker": {"replicas": 4, "restartPolicy": "OnFailure", "template": template}},
            },
        }
    )


def _tfjob_body(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(cluster.kubectl("get", "tfjob", name, "-n", namespace, "-o", "json").stdout)
    return body


def _workload_condition(cluster: Cluster, namespace: str, tfjob: str, kind: str) -> str | None:
    """A condition of the Workload Kueue made for the TFJob (it names it after the job, with a hash)."""
    for workload in cluster.items(WORKLOADS, namespace):
        if any(owner["name"] == tfjob for owner in workload["metadata"].get("ownerReferences", [])):
            found = [c["status"] for c in (workload.get("status") or {}).get("conditions", []) if c["type"] == kind]
            return str(found[0]) if found else None
    return None


def _succeed(cluster: Cluster, namespace: str, tfjob: str) -> None:
    cluster.set_pod_status(namespace, f"{tfjob}-worker-0", "Succeeded", exit_code=0)
    wait_for(
        f"{tfjob}'s Workload Finished", lambda: _workload_condition(cluster, namespace, tfjob, "Finished") == "True"
    )


def test_a_served_tfjob_of_its_own_service_account_is_preempted_releases_its_quota_and_resumes_on_its_flavor(
    cluster: Cluster, namespace: str, urgent: str, admission_policy: None
) -> None:
    """A TFJob that names a ServiceAccount of its namespace, under the admission policy: Kueue's controller
    admits it (writing its flavor's node selector into the templates), preempts it for a TFJob of a higher
    priority (suspending it and putting the templates back), and admits it again once that one ends; it
    runs on its flavor each time, as its own account."""
    cluster.kubectl("create", "serviceaccount", "trainer", "-n", namespace)
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline", "--overwrite")
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=_tfjob("low", {}, serviceAccountName="trainer"))
    for pod in running_pods(cluster, namespace, "low", 4).values():
        assert pod["spec"]["serviceAccountName"] == "trainer" and pod["spec"]["nodeSelector"] == {"type": "kwok"}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=_tfjob("high", {PRIORITY_LABEL: urgent}))
    wait_for("low evicted", lambda: _workload_condition(cluster, namespace, "low", "Evicted") == "True")
    wait_for("low suspended", lambda: _tfjob_body(cluster, namespace, "low")["spec"]["runPolicy"].get("suspend"))
    worker = _tfjob_body(cluster, namespace, "low")["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    assert "nodeSelector" not in worker and worker["serviceAccountName"] == "trainer"  # put back
    running_pods(cluster, namespace, "high", 4)  # on the quota low released
    _succeed(cluster, namespace, "high")
    for pod in running_pods(cluster, namespace, "low", 4).values():
        assert pod["spec"]["serviceAccountName"] == "trainer" and pod["spec"]["nodeSelector"] == {"type": "kwok"}
    _succeed(cluster, namespace, "low")
