"""Kubernetes' container restart rules on both nodes that run pods: a container that exits with a code its
`RestartAllContainers` rule names restarts every container of its pod in place (the same pod, UID and
address, its volumes kept), on the process node as the real node's kubelet does."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from real_node_images import real_node_with_images

from disttrain_dev import cluster as devcluster
from disttrain_dev import images, node_kinds
from disttrain_dev.polling import wait_for
from kube_cluster import Cluster

ONCE = "if [ -f /data/once ]; then exec sleep 600; fi; touch /data/once; sleep 1; exit 42"


@pytest.fixture(params=[node_kinds.PROCESS, node_kinds.REAL])
def node_namespace(request: pytest.FixtureRequest, process_cluster: Cluster) -> Iterator[tuple[str, str]]:
    """A namespace whose pods run on the node of the parameter's kind, and the image its pods run."""
    kind = request.param
    image = "none"
    if kind == node_kinds.REAL:
        real_node_with_images()
        image = f"{images.TRAINER.name}:{images.VERSION}"
    name = f"rules-{uuid.uuid4().hex[:8]}"
    process_cluster.kubectl("apply", "-f", "-", stdin=json.dumps(devcluster.node_namespace(name, kind)))
    wait_for("the namespace's default ServiceAccount", lambda: process_cluster.get("serviceaccount", "default", name))
    yield name, image
    process_cluster.delete_namespace(name)


def _restarted_in_place(cluster: Cluster, namespace: str, first: dict[str, Any]) -> dict[str, Any] | None:
    pod = cluster.get("pod", "rules", namespace) or {}
    statuses = {status["name"]: status for status in pod.get("status", {}).get("containerStatuses", [])}
    restarted = all(statuses.get(name, {}).get("restartCount") == 1 for name in ("main", "side"))
    running = all("running" in statuses.get(name, {}).get("state", {}) for name in ("main", "side"))
    return pod if restarted and running and pod["metadata"]["uid"] == first["metadata"]["uid"] else None


def test_restart_all_containers_restarts_the_pod_in_place_on_either_node(
    process_cluster: Cluster, node_namespace: tuple[str, str]
) -> None:
    namespace, image = node_namespace
    rule = {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
    mount = [{"name": "data", "mountPath": "/data"}]
    main = {"name": "main", "image": image, "command": ["sh", "-c", ONCE], "volumeMounts": mount}
    main |= {"restartPolicy": "Never", "restartPolicyRules": [rule]}
    side = {"name": "side", "image": image, "command": ["sh", "-c", "exec sleep 600"]}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "rules"},
        "spec": {"restartPolicy": "Never", "containers": [main, side], "volumes": [{"name": "data", "emptyDir": {}}]},
    }
    process_cluster.apply(namespace, json.dumps(pod))
    first = wait_for(
        "the pod's address",
        lambda: (p := process_cluster.get("pod", "rules", namespace)) and p["status"].get("podIP") and p,
    )
    after = wait_for(
        "both containers restarted in place", lambda: _restarted_in_place(process_cluster, namespace, first), timeout=90
    )
    assert after["status"]["podIP"] == first["status"]["podIP"]
    assert after["status"]["phase"] == "Running"
    for status in after["status"]["containerStatuses"]:  # as the kubelet words it, main's exit 42 included
        ended = status["lastState"]["terminated"]
        assert (ended["exitCode"], ended["reason"]) == (137, "RestartingAllContainers"), status
    conditions = {condition["type"]: condition["status"] for condition in after["status"]["conditions"]}
    assert conditions["AllContainersRestarting"] == "False"
