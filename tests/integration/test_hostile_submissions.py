"""Hostile input against the real API server and a running operator.

The API server refuses every manifest of `hostile.REFUSED` with the message `render` gives (or its
own wording where the layers differ). What it accepts but cannot judge reaches the operator, which
runs it or fails it with a reason, and goes on serving the jobs submitted around it.
"""

from __future__ import annotations

import json
from functools import partial

import pytest

from disttrain_dev.polling import wait_for
from support.hostile import ACCEPTED_BY_THE_API_SERVER, REFUSED, Hostile, job
from support.job_checks import condition, holds
from support.kube_cluster import Cluster
from support.operator_process import OperatorProcess


@pytest.mark.parametrize("hostile", REFUSED, ids=lambda hostile: hostile.name)
def test_the_api_server_refuses_hostile_manifests(cluster: Cluster, dry_run_namespace: str, hostile: Hostile) -> None:
    command = ("create", "--dry-run=server", "-n", dry_run_namespace, "-f", "-")
    result = cluster.kubectl(*command, stdin=hostile.text, check=False)
    assert result.returncode != 0, f"the API server accepted {hostile.name}"
    assert hostile.api_server_message in result.stderr, result.stderr[:2000]


def _create(cluster: Cluster, namespace: str, text: str) -> bool:
    return cluster.kubectl("create", "-n", namespace, "-f", "-", stdin=text, check=False).returncode == 0


def _holds_now(cluster: Cluster, namespace: str, name: str, outcome: str) -> bool:
    return holds(cluster.job(namespace, name), outcome)


def _running(cluster: Cluster, namespace: str, name: str) -> bool:
    return holds(cluster.job(namespace, name), "Running") and len(cluster.job_pods(namespace, name)) == 2


def test_a_running_operator_serves_good_jobs_while_hostile_ones_arrive(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    log_start = len(operator.log())
    assert _create(cluster, namespace, json.dumps(job("before")))
    for hostile in REFUSED:
        assert not _create(cluster, namespace, hostile.text), hostile.name
    for manifest, _ in ACCEPTED_BY_THE_API_SERVER.values():
        assert _create(cluster, namespace, json.dumps(manifest))
    assert _create(cluster, namespace, json.dumps(job("after")))

    for name in ("before", "after"):
        wait_for(f"{name} running with both pods", partial(_running, cluster, namespace, name), timeout=60)
    for manifest, outcome in ACCEPTED_BY_THE_API_SERVER.values():
        name = manifest["metadata"]["name"]
        wait_for(f"{name} {outcome}", partial(_holds_now, cluster, namespace, name, outcome))
    failed = condition(cluster.job(namespace, "as-root"), "Failed")
    assert failed is not None and "violates PodSecurity" in failed["message"], failed
    failed = condition(cluster.job(namespace, "big-note"), "Failed")
    assert failed is not None and "metadata.annotations: Too long" in failed["message"], failed
    cluster.wait_for_event(namespace, "CreateFailed")

    assert operator.running()
    assert "Traceback" not in operator.log()[log_start:]
