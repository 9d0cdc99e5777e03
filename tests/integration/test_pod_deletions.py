"""What the operator's pod deletions rely on from the real API server. A pod that has ended is removed at
once, log and all, where a running one is stopped gracefully (its log read as it stops), so each deletion
names the version of the pod the operator saw: the API server refuses it when the pod changed since (it
may have just ended, its log not kept yet)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from disttrain_dev.polling import wait_for
from disttrain_kube.api_errors import ConflictError
from disttrain_kube.connection import connect
from disttrain_kube.rest import Kube
from support.kube_cluster import Cluster

NODE = "gpu-node-0"  # a kwok node: it reports the pod Running, and the test plays its end


def _pod(name: str) -> dict[str, Any]:
    container = {
        "name": "tensorflow",
        "image": "disttrain/trainer:0.1.0",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    spec = {"nodeName": NODE, "tolerations": [{"operator": "Exists"}], "containers": [container]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _phase(cluster: Cluster, namespace: str, name: str) -> str | None:
    pod = cluster.get("pod", name, namespace)
    return None if pod is None else (pod.get("status") or {}).get("phase")


def test_a_deletion_of_a_pod_seen_running_is_refused_once_it_ended(cluster: Cluster, namespace: str) -> None:
    kube = Kube(connect(cluster.kubeconfig).api_client)
    cluster.kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(_pod("trainer")))
    wait_for("the pod to run", lambda: _phase(cluster, namespace, "trainer") == "Running", 60)
    seen = (cluster.get("pod", "trainer", namespace) or {})["metadata"]["resourceVersion"]
    cluster.set_pod_status(namespace, "trainer", "Succeeded", exit_code=0)

    with pytest.raises(ConflictError):
        kube.delete_pod(namespace, "trainer", resource_version=seen)
    ended = cluster.get("pod", "trainer", namespace) or {}
    assert (ended["status"]["phase"], ended["metadata"].get("deletionTimestamp")) == ("Succeeded", None)

    assert kube.delete_pod(namespace, "trainer", resource_version=ended["metadata"]["resourceVersion"])
