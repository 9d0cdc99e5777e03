"""Kubernetes' container restart rules on both nodes that run pods, the process node as the real node's kubelet:
a container that exits with a code its `Restart` rule names starts again alone, in its pod, and its last run's
exit code and log stay readable (what a restart in place of a job's trainer keeps, `disttrain_core.restarts.in_place`);
one whose `RestartAllContainers` rule matches restarts every container of its pod in place (the same pod, UID
and address, its volumes kept), and the kubelet then reports neither its exit code nor its last run's log."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from disttrain_core.images import VERSION
from disttrain_dev import cluster as devcluster
from disttrain_dev import images, node_kinds
from disttrain_dev.polling import wait_for
from support.kube_cluster import Cluster
from support.real_node_images import real_node_with_images

ONCE = "if [ -f /data/once ]; then echo again; exec sleep 600; fi; echo first; touch /data/once; sleep 1; exit 42"


@pytest.fixture(params=[node_kinds.PROCESS, node_kinds.REAL])
def node_namespace(request: pytest.FixtureRequest, process_cluster: Cluster) -> Iterator[tuple[str, str]]:
    """A namespace whose pods run on the node of the parameter's kind, and the image its pods run."""
    kind = request.param
    image = "none"
    if kind == node_kinds.REAL:
        real_node_with_images()
        image = f"{images.TRAINER.name}:{VERSION}"
    name = f"rules-{uuid.uuid4().hex[:8]}"
    process_cluster.create_namespace(devcluster.node_namespace(name, kind))
    wait_for("the namespace's default ServiceAccount", lambda: process_cluster.get("serviceaccount", "default", name))
    yield name, image
    process_cluster.delete_namespace(name)


def _restarted_in_place(
    cluster: Cluster, namespace: str, first: dict[str, Any], restarts: dict[str, int]
) -> dict[str, Any] | None:
    """The pod once its containers restarted as often as `restarts` says, each running again, the same pod."""
    pod = cluster.get("pod", "rules", namespace) or {}
    statuses = {status["name"]: status for status in pod.get("status", {}).get("containerStatuses", [])}
    restarted = all(statuses.get(name, {}).get("restartCount") == count for name, count in restarts.items())
    running = all("running" in statuses.get(name, {}).get("state", {}) for name in restarts)
    return pod if restarted and running and pod["metadata"]["uid"] == first["metadata"]["uid"] else None


def _pod(image: str, rule: dict[str, Any]) -> dict[str, Any]:
    """A pod whose container `main` exits 42 once, under `rule`, beside a container `side` that sleeps."""
    mount = [{"name": "data", "mountPath": "/data"}]
    main = {"name": "main", "image": image, "command": ["sh", "-c", ONCE], "volumeMounts": mount}
    main |= {"restartPolicy": "Never", "restartPolicyRules": [rule]}
    side = {"name": "side", "image": image, "command": ["sh", "-c", "exec sleep 600"]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "rules"},
        "spec": {"restartPolicy": "Never", "containers": [main, side], "volumes": [{"name": "data", "emptyDir": {}}]},
    }


def _restarted_under(
    cluster: Cluster, namespace: str, image: str, rule: dict[str, Any], restarts: dict[str, int]
) -> dict[str, Any]:
    """The pod of `_pod` under `rule`, once its containers restarted as `restarts` says: the same pod, at the
    same address."""
    cluster.apply(namespace, json.dumps(_pod(image, rule)))
    first = wait_for(
        "the pod's address", lambda: (p := cluster.get("pod", "rules", namespace)) and p["status"].get("podIP") and p
    )
    after = wait_for(
        f"{restarts} restarted in place", lambda: _restarted_in_place(cluster, namespace, first, restarts), timeout=90
    )
    assert after["status"]["podIP"] == first["status"]["podIP"]
    return after


def test_a_restart_rule_restarts_the_container_alone_in_its_pod_keeping_its_exit_code_and_last_log(
    process_cluster: Cluster, node_namespace: tuple[str, str]
) -> None:
    namespace, image = node_namespace
    rule = {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}
    after = _restarted_under(process_cluster, namespace, image, rule, {"main": 1, "side": 0})
    main = next(status for status in after["status"]["containerStatuses"] if status["name"] == "main")
    assert main["lastState"]["terminated"]["exitCode"] == 42, main
    previous = process_cluster.kubectl("logs", "-n", namespace, "rules", "-c", "main", "--previous")
    assert previous.stdout == "first\n"
    current = wait_for(
        "main's second run logged",
        lambda: (out := process_cluster.kubectl("logs", "-n", namespace, "rules", "-c", "main").stdout) and out,
    )
    assert current == "again\n"


def test_restart_all_containers_restarts_the_pod_in_place_on_either_node(
    process_cluster: Cluster, node_namespace: tuple[str, str]
) -> None:
    namespace, image = node_namespace
    rule = {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
    after = _restarted_under(process_cluster, namespace, image, rule, {"main": 1, "side": 1})
    assert after["status"]["phase"] == "Running"
    for status in after["status"]["containerStatuses"]:  # as the kubelet words it, main's exit 42 included
        ended = status["lastState"]["terminated"]
        assert (ended["exitCode"], ended["reason"]) == (137, "RestartingAllContainers"), status
    conditions = {condition["type"]: condition["status"] for condition in after["status"]["conditions"]}
    assert conditions["AllContainersRestarting"] == "False"
    previous = process_cluster.kubectl("logs", "-n", namespace, "rules", "-c", "main", "--previous", check=False)
    assert previous.returncode != 0 and "previous terminated container" in previous.stderr, previous
