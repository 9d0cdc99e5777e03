"""A job's TensorBoard on the local cluster's fake nodes: its Deployment and Service, owned by the job and
kept after it finished, its address in the status, its readiness as a condition; a TensorBoard the
cluster refuses to run is a False condition and a Warning Event, the job runs on. That it serves the
trainer's curves is proven on the real node (test_real_node.py); that `disttrain jobs tensorboard` reaches it
on each node, as docs/tensorboard.md writes it, by the docs' tour after README's first job
(tests/e2e/test_quickstart.py)."""

from __future__ import annotations

import json
from typing import Any

from disttrain import Client
from disttrain_dev.polling import wait_for
from support.job_checks import condition, holds, job_where
from support.kube_cluster import Cluster
from support.operator_process import OperatorProcess
from support.pod_checks import running_pods
from support.repository import ROOT

MWMS = (ROOT / "examples" / "multi-worker-mirrored-gpu.yaml").read_text()
WITH_TENSORBOARD = MWMS.replace("  checkpoint:\n", "  tensorboard: {}\n  checkpoint:\n", 1)


def test_the_tensorboard_is_owned_by_the_job_kept_after_it_and_ready_in_its_status(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(namespace, WITH_TENSORBOARD)
    running_pods(cluster, namespace, "mnist-mwms", 4)
    ready = job_where(cluster, namespace, "mnist-mwms", "TensorBoardReady", lambda j: holds(j, "TensorBoardReady"))
    url = f"http://mnist-mwms-tensorboard.{namespace}.svc:6006"
    assert ready["status"]["tensorboard"] == {"service": "mnist-mwms-tensorboard", "url": url, "ready": True}
    deployment = cluster.get("deployment", "mnist-mwms-tensorboard", namespace)
    assert deployment is not None and deployment["metadata"]["ownerReferences"][0]["name"] == "mnist-mwms"
    service = cluster.get("service", "mnist-mwms-tensorboard", namespace)
    assert service is not None and service["spec"]["ports"][0]["port"] == 6006
    cluster.set_pod_status(namespace, "mnist-mwms-worker-0", "Succeeded", exit_code=0)  # the chief, without one
    job_where(cluster, namespace, "mnist-mwms", "Succeeded", lambda j: holds(j, "Succeeded"))
    board = cluster.items("pods", namespace, "disttrain.io/tensorboard-of=mnist-mwms")
    assert [pod["status"]["phase"] for pod in board] == ["Running"]  # cleanup stops the other workers, not it
    assert holds(cluster.job(namespace, "mnist-mwms"), "TensorBoardReady")
    client = Client(kubeconfig=cluster.kubeconfig, namespace=namespace)
    events = [event for event in client.events("mnist-mwms") if event.reason == "TensorBoardReady"]
    assert events and url in events[0].message


def test_a_tensorboard_the_cluster_refuses_is_a_condition_and_an_event_and_the_job_runs_on(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "four-pods"},
        "spec": {"hard": {"pods": "4"}},
    }
    cluster.apply(namespace, json.dumps(quota))
    wait_for("the quota to count", lambda: (cluster.get("resourcequota", "four-pods", namespace) or {}).get("status"))
    cluster.apply(namespace, WITH_TENSORBOARD)  # its 4 workers take the 4 pods the quota allows
    running_pods(cluster, namespace, "mnist-mwms", 4)

    def refused(job: dict[str, Any]) -> bool:
        """The board refused, and the job running on: the operator may write the refusal before it sees the
        workers run."""
        found = condition(job, "TensorBoardReady")
        return found is not None and found["reason"] == "FailedCreate" and job["status"].get("phase") == "Running"

    job = job_where(cluster, namespace, "mnist-mwms", "TensorBoardReady False: FailedCreate, Running", refused)
    said = condition(job, "TensorBoardReady")
    assert said is not None and said["status"] == "False" and "exceeded quota" in said["message"], said
    assert job["status"]["tensorboard"]["ready"] is False
    client = Client(kubeconfig=cluster.kubeconfig, namespace=namespace)

    def warned() -> list[str]:
        """The Warning is posted after the status that says the same, so it may come a moment later."""
        events = client.events("mnist-mwms")
        return [e.message for e in events if e.type == "Warning" and e.reason == "FailedCreate"]

    warnings = wait_for("a Warning FailedCreate on the job", warned, timeout=30)
    assert "exceeded quota" in warnings[0], warnings
