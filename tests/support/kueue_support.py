"""Kueue, built from its source and run beside the operator, for the modules that queue jobs in it: the
process itself, a ClusterQueue of given quota with a LocalQueue in a test's namespace, and what its
Workloads say."""

from __future__ import annotations

import json
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from disttrain.local.ports import free_port
from disttrain_dev import kueue
from disttrain_dev.cluster import crd_established
from disttrain_dev.polling import wait_for
from support.kube_cluster import Cluster
from support.repository import ROOT

WORKLOADS = "workloads.kueue.x-k8s.io"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
LOCAL_QUEUE = "team"
URGENT_PRIORITY = 1000


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _crd(cluster: Cluster, plural: str) -> dict[str, Any]:
    found = cluster.kubectl("get", "crd", f"{plural}.kueue.x-k8s.io", "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else {}


@contextmanager
def kueue_running(
    cluster: Cluster, folder: Path, *, multikueue: bool = False, tfjob_integration: bool = False
) -> Iterator[None]:
    """Kueue with DistTrainJobs (and TFJobs) as external frameworks, its CRDs applied, until the block ends;
    `multikueue`: as MultiKueue's manager; `tfjob_integration`: TFJobs queued by Kueue's own integration."""
    build = kueue.ensure_kueue()
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(build.crds))
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "crds" / "tfjob"))
    for crd in (
        "workloads",
        "clusterqueues",
        "localqueues",
        "resourceflavors",
        "workloadpriorityclasses",
        "multikueueclusters",
    ):
        wait_for(f"the {crd} CRD", lambda name=crd: crd_established(_crd(cluster, name)), timeout=60)  # type: ignore[misc]
    cluster.create_namespace(kueue.NAMESPACE, exist_ok=True)
    kueue.write_certificates()
    health = free_port()
    config = folder / "config.yaml"
    ports = (health, free_port(), free_port())
    config.write_text(kueue.configuration(*ports, multikueue=multikueue, tfjob_integration=tfjob_integration))
    with (folder / "kueue.log").open("w") as log:
        process = subprocess.Popen(
            [str(build.binary), f"--config={config}", "--feature-gates=VisibilityOnDemand=false"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=cluster.env,
        )
    try:
        wait_for("Kueue ready", lambda: _ready(health) or process.poll() is not None, timeout=120)
        assert process.poll() is None, (folder / "kueue.log").read_text()[-3000:]
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)


def kueue_object(kind: str, name: str, spec: dict[str, Any] | None, **fields: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": {"name": name}}
    if spec is not None:
        manifest["spec"] = spec
    return {**manifest, **fields}


@contextmanager
def local_queue(
    cluster: Cluster, namespace: str, quota: dict[str, int | str], flavor: dict[str, Any] | None = None
) -> Iterator[str]:
    """A LocalQueue named `team` in `namespace`, on a ClusterQueue of `quota` (one flavor, its spec `flavor`)
    that preempts lower priorities, beside a WorkloadPriorityClass of 1000. Yields that class's name."""
    suffix = uuid.uuid4().hex[:6]
    flavor_name, cluster_queue, urgent = f"flavor-{suffix}", f"queue-{suffix}", f"urgent-{suffix}"
    resources = [{"name": name, "nominalQuota": amount} for name, amount in quota.items()]
    objects = [
        kueue_object("ResourceFlavor", flavor_name, flavor or {}),
        kueue_object(
            "ClusterQueue",
            cluster_queue,
            {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {"coveredResources": list(quota), "flavors": [{"name": flavor_name, "resources": resources}]}
                ],
            },
        ),
        kueue_object("WorkloadPriorityClass", urgent, None, value=URGENT_PRIORITY),
        {
            **kueue_object("LocalQueue", LOCAL_QUEUE, {"clusterQueue": cluster_queue}),
            "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
        },
    ]
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    try:
        yield urgent
    finally:
        for kind, name in (
            ("clusterqueue", cluster_queue),
            ("resourceflavor", flavor_name),
            ("workloadpriorityclass", urgent),
        ):
            cluster.kubectl("delete", f"{kind}.kueue.x-k8s.io", name, "--wait=false", check=False)


def workload_status(cluster: Cluster, namespace: str, job: str) -> dict[str, Any]:
    """The status of a DistTrainJob's Workload; empty while there is none."""
    workload = cluster.get(WORKLOADS, f"disttrainjob-{job}", namespace) or {}
    status: dict[str, Any] = workload.get("status") or {}
    return status


def workload_condition(cluster: Cluster, namespace: str, job: str, kind: str) -> str | None:
    """The status of a condition of a DistTrainJob's Workload; None before Kueue set it."""
    conditions = workload_status(cluster, namespace, job).get("conditions") or []
    found = [c["status"] for c in conditions if c["type"] == kind]
    return str(found[0]) if found else None


def what_kueue_and_the_jobs_show(cluster: Cluster, namespace: str, jobs: list[str], operator_log: str) -> str:
    """For a failure of a preemption test: each job's status and its Workload's, the namespace's pods, and the
    operator's last lines (`operator_log`: the caller reads them, from a file or from the cluster)."""
    parts = []
    for job in jobs:
        status = (cluster.get("disttrainjob", job, namespace) or {}).get("status")
        parts.append(f"{job}: job status {status}\n{job}: workload status {workload_status(cluster, namespace, job)}")
    pods = cluster.kubectl("get", "pods", "-n", namespace, "-o", "wide", check=False).stdout
    return "\n".join([*parts, f"pods:\n{pods}", f"operator:\n{operator_log}"])


def evicted_by_kueue(cluster: Cluster, namespace: str, job: str) -> None:
    """Kueue evicted the job's Workload (for a higher priority) and every pod of the job has gone."""
    wait_for(f"{job} evicted", lambda: workload_condition(cluster, namespace, job, "Evicted") == "True")
    wait_for(f"{job}'s pods gone", lambda: not cluster.job_pods(namespace, job), timeout=120)
