"""What the tests wait for and ask of a job's pods: running, unschedulable, drained, bound as a gang; and a
pool of kwok GPU nodes of the test's own."""

from __future__ import annotations

import json
import uuid
from typing import Any

from disttrain_core.observed import container_status, unschedulable
from disttrain_dev.cluster import NodeShape, fake_node
from disttrain_dev.polling import wait_for
from support.kube_cluster import Cluster
from support.repository import ROOT, load_one

TRAINER = "tensorflow"  # the trainer container of every job manifest the tests submit


def trainer_state(pod: dict[str, Any]) -> dict[str, Any]:
    """The state of the pod's trainer container (`running`, `terminated` or `waiting`), empty before it has one."""
    return dict(container_status(pod.get("status", {}), TRAINER).get("state") or {})


def trainer_run(pod: dict[str, Any]) -> tuple[str, int]:
    """Which run a pod's trainer is: its pod's uid, and how often it restarted there
    (`disttrain_core.restarts.in_place`)."""
    return pod["metadata"]["uid"], int(container_status(pod.get("status", {}), TRAINER).get("restartCount") or 0)


def running_pods(cluster: Cluster, namespace: str, job: str, count: int) -> dict[str, dict[str, Any]]:
    """The job's pods once exactly `count` exist and all run."""

    def check() -> dict[str, dict[str, Any]] | None:
        pods = cluster.job_pods(namespace, job)
        live = [
            p
            for p in pods.values()
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        ]
        return pods if len(pods) == count and len(live) == count else None

    return wait_for(f"{count} running pods of {job}", check, timeout=90)


def all_unschedulable(cluster: Cluster, namespace: str, job: str, count: int) -> bool:
    """`count` pods of the job exist and the scheduler found no node for any of them (a cordon holds them)."""
    pods = cluster.job_pods(namespace, job).values()
    return len(pods) == count and all(unschedulable(pod) is not None for pod in pods)


def drain(cluster: Cluster, node: str, job: str, timeout: int) -> None:
    """`kubectl drain` of the job's pods from `node`, as an admin does it: cordoned, its pods evicted and gone."""
    selector = f"--pod-selector=disttrain.io/job-name={job}"
    cluster.kubectl("drain", node, selector, "--ignore-daemonsets", "--delete-emptydir-data", f"--timeout={timeout}s")


def drain_and_uncordon(cluster: Cluster, node: str, namespace: str, job: str, *, count: int, timeout: int) -> None:
    """`drain`, and once the operator's next `count` pods wait out the cordon, `kubectl uncordon`."""
    try:
        drain(cluster, node, job, timeout)
        wait_for("the next pods held back by the cordon", lambda: all_unschedulable(cluster, namespace, job, count))
    finally:
        cluster.kubectl("uncordon", node)


def bound_pods(cluster: Cluster, namespace: str, job: str) -> list[str]:
    """The names of the job's pods the scheduler bound to a node."""
    return sorted(name for name, pod in cluster.job_pods(namespace, job).items() if pod["spec"].get("nodeName"))


def replaced_as_a_gang(cluster: Cluster, namespace: str, job: str, before: set[str], count: int) -> bool:
    """The job has `count` pods, none of them one of `before` (uids), each in the job's gang and bound."""
    pods = cluster.job_pods(namespace, job).values()
    fresh = [
        pod
        for pod in pods
        if pod["metadata"]["uid"] not in before
        and pod["spec"].get("nodeName")
        and pod["spec"].get("schedulingGroup") == {"podGroupName": job}
    ]
    return len(fresh) == count


def gang_waits(cluster: Cluster, namespace: str, job: str, count: int) -> bool:
    """Each of the job's `count` pods was tried by the scheduler and is held back, unbound."""
    pods = cluster.job_pods(namespace, job)
    held = [
        pod
        for pod in pods.values()
        if not pod["spec"].get("nodeName")
        and any(c["type"] == "PodScheduled" and c["status"] == "False" for c in pod["status"].get("conditions", []))
    ]
    return len(pods) == count and len(held) == count


POOL_LABEL = "disttrain.io/test-pool"


class GpuPool:
    """kwok GPU nodes only the test's jobs may use (tainted, and selected by the jobs), so that the free GPU
    slots are exactly those the test counts."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.name = f"gang-{uuid.uuid4().hex[:6]}"
        self.nodes: list[str] = []

    def add(self, gpus: int, **labels: str) -> None:
        node = fake_node(f"{self.name}-{len(self.nodes)}", NodeShape(gpus=gpus))
        node["metadata"]["labels"].update({POOL_LABEL: self.name, **labels})  # type: ignore[index]
        node["spec"] = {"taints": [{"key": POOL_LABEL, "value": self.name, "effect": "NoSchedule"}]}
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(node))
        self.nodes.append(str(node["metadata"]["name"]))  # type: ignore[index]

    def remove(self) -> None:
        """The pool's nodes, and the pods bound to them: a pod left on a node that is gone waits 40 s for the
        pod garbage collector, and its namespace with it."""
        if not self.nodes:
            return
        self.cluster.kubectl("delete", "node", *self.nodes, "--wait=false")
        for node in self.nodes:
            self.cluster.kubectl(
                "delete", "pods", "--all-namespaces", f"--field-selector=spec.nodeName={node}",
                "--grace-period=0", "--force", "--wait=false", check=False,
            )  # fmt: skip

    def job(self, name: str, workers: int, labels: dict[str, str] | None = None, **policy: Any) -> dict[str, Any]:
        """The MultiWorkerMirrored example with `workers` pods of one GPU each, placed in the pool, as a gang."""
        manifest: dict[str, Any] = load_one(ROOT / "examples" / "multi-worker-mirrored-gpu.yaml")
        manifest["metadata"]["name"] = name
        if labels:
            manifest["metadata"]["labels"] = labels
        worker = manifest["spec"]["replicaSpecs"]["Worker"]
        worker["replicas"] = workers
        pod_spec = worker["template"]["spec"]
        pod_spec["nodeSelector"] = {POOL_LABEL: self.name}
        pod_spec["tolerations"] = [{"key": POOL_LABEL, "operator": "Equal", "value": self.name}]
        manifest["spec"]["runPolicy"]["schedulingPolicy"] = policy
        del manifest["spec"]["checkpoint"]
        return manifest
