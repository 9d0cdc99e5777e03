"""Kubernetes' own gang scheduling, enforced by the real kube-scheduler: with the operator's gang scheduler
`kubernetes`, a job gets a Workload and its PodGroup, and its pods are bound all together or not at all.

The jobs run on kwok nodes of the test's own (a GPU pool, tainted so that nothing else lands there), so
that the free GPU slots are exactly those the test counts, in two zones where `topologyKey` is tried. The
real node's gangs are test_native_gangs_on_the_real_node.py's."""

from __future__ import annotations

import json

from disttrain_dev.polling import wait_for
from support.job_builder import JobBuilder
from support.job_checks import condition, holds, job_where
from support.kube_cluster import Cluster
from support.operator_process import OperatorProcess
from support.pod_checks import GpuPool, bound_pods, gang_waits, replaced_as_a_gang

ZONE = "topology.kubernetes.io/zone"


def _group_condition(cluster: Cluster, namespace: str, name: str) -> str | None:
    group = cluster.get("podgroups.scheduling.k8s.io", name, namespace) or {}
    # 1.37 names it PodGroupInitiallyScheduled; 1.36 named it PodGroupScheduled
    kinds = ("PodGroupInitiallyScheduled", "PodGroupScheduled")
    found = [c for c in group.get("status", {}).get("conditions", []) if c["type"] in kinds]
    return str(found[0]["status"]) if found else None


def test_a_gang_binds_all_its_pods_together_or_none_and_never_blocks_a_smaller_job(
    cluster: Cluster, native_operator: OperatorProcess, namespace: str, pool: GpuPool
) -> None:
    pool.add(gpus=3)
    pool.add(gpus=3)  # 6 free GPU slots
    cluster.apply(namespace, json.dumps(pool.job("seven", 7)))
    workload = wait_for("the Workload", lambda: cluster.get("workloads.scheduling.k8s.io", "seven", namespace))
    group = wait_for("the PodGroup", lambda: cluster.get("podgroups.scheduling.k8s.io", "seven", namespace))
    assert workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 7}}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "DistTrainJob"
    wait_for("the scheduler to hold back all 7 pods", lambda: gang_waits(cluster, namespace, "seven", 7), timeout=90)
    assert bound_pods(cluster, namespace, "seven") == []  # no partial placement: no GPU held
    wait_for("the PodGroup to say so", lambda: _group_condition(cluster, namespace, "seven") == "False")
    pods = cluster.job_pods(namespace, "seven").values()
    assert all(pod["spec"]["schedulingGroup"] == {"podGroupName": "seven"} for pod in pods)

    cluster.apply(namespace, json.dumps(pool.job("two", 2)))
    wait_for("the smaller job to be placed", lambda: len(bound_pods(cluster, namespace, "two")) == 2, timeout=90)
    assert bound_pods(cluster, namespace, "seven") == []

    pool.add(gpus=3)  # 9 slots: 2 taken, 7 free
    wait_for("all 7 bound", lambda: len(bound_pods(cluster, namespace, "seven")) == 7, timeout=120)

    # A whole-job restart replaces every pod; the new ones join the same PodGroup and are placed as a gang.
    before = {pod["metadata"]["uid"] for pod in cluster.job_pods(namespace, "seven").values()}
    cluster.set_pod_status(namespace, "seven-worker-3", "Failed", exit_code=137)

    wait_for(
        "7 new pods, all bound as a gang",
        lambda: replaced_as_a_gang(cluster, namespace, "seven", before, 7),
        timeout=120,
    )
    assert _group_condition(cluster, namespace, "seven") == "True"


def _zones(cluster: Cluster, namespace: str, job: str) -> list[str]:
    """The zone of each of the job's bound pods."""
    zones = []
    for pod in cluster.job_pods(namespace, job).values():
        if pod["spec"].get("nodeName"):
            node = cluster.get("node", pod["spec"]["nodeName"], "default") or {}
            zones.append(node.get("metadata", {}).get("labels", {}).get(ZONE, "none"))
    return sorted(zones)


def test_a_gang_with_a_topology_key_is_placed_in_one_domain_or_not_at_all(
    cluster: Cluster, native_operator: OperatorProcess, namespace: str, pool: GpuPool
) -> None:
    """Zone a has 4 GPU slots on two nodes, zone b 3 on one: 7 in all, no zone with 5."""
    pool.add(gpus=2, **{ZONE: "a"})
    pool.add(gpus=2, **{ZONE: "a"})
    pool.add(gpus=3, **{ZONE: "b"})
    cluster.apply(namespace, json.dumps(pool.job("five", 5, topologyKey=ZONE)))
    group = wait_for("the PodGroup", lambda: cluster.get("podgroups.scheduling.k8s.io", "five", namespace))
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": ZONE}]}  # served: the gate is on
    wait_for("the scheduler to hold back all 5 pods", lambda: gang_waits(cluster, namespace, "five", 5), timeout=90)
    assert bound_pods(cluster, namespace, "five") == []  # 7 free slots, but split over two zones
    cluster.apply(namespace, json.dumps(pool.job("anywhere", 5)))  # the same gang without the key
    wait_for("its 5 pods bound", lambda: len(bound_pods(cluster, namespace, "anywhere")) == 5, timeout=90)
    assert set(_zones(cluster, namespace, "anywhere")) == {"a", "b"}
    cluster.kubectl("delete", "dtj", "anywhere", "-n", namespace)
    wait_for("its pods gone", lambda: not cluster.job_pods(namespace, "anywhere"), timeout=60)

    cluster.apply(namespace, json.dumps(pool.job("four", 4, topologyKey=ZONE)))
    wait_for("the 4 pods bound", lambda: len(bound_pods(cluster, namespace, "four")) == 4, timeout=90)
    assert _zones(cluster, namespace, "four") == ["a"] * 4  # the one zone that holds them all
    cluster.apply(namespace, json.dumps(pool.job("three", 3, topologyKey=ZONE)))
    wait_for("the 3 pods bound", lambda: len(bound_pods(cluster, namespace, "three")) == 3, timeout=90)
    assert _zones(cluster, namespace, "three") == ["b"] * 3
    assert bound_pods(cluster, namespace, "five") == []


def test_a_topology_key_the_operators_gang_scheduler_cannot_honour_fails_the_job_before_any_pod(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    """The suite's operator uses scheduler-plugins' PodGroups, which know no topology."""
    job = JobBuilder.from_example("multi-worker-mirrored-gpu.yaml").run_policy(schedulingPolicy={"topologyKey": ZONE})
    manifest = job.obj()
    cluster.apply(namespace, json.dumps(manifest))
    name = manifest["metadata"]["name"]
    failed = job_where(cluster, namespace, name, "Failed", lambda job: holds(job, "Failed"))
    reason = condition(failed, "Failed")
    assert reason is not None and reason["reason"] == "InvalidSpec", reason
    assert "topologyKey needs the operator's gang scheduler to be kubernetes" in reason["message"]
    cluster.wait_for_event(namespace, "InvalidSpec")
    assert not cluster.job_pods(namespace, name)


def test_the_gang_fields_are_explained_by_kubectl(cluster: Cluster) -> None:
    explained = cluster.kubectl("explain", "dtj.spec.runPolicy.schedulingPolicy").stdout
    for field in ("minAvailable", "priorityClass", "scheduleTimeoutSeconds", "queue", "topologyKey"):
        assert field in explained, explained
    assert (
        "ScheduleTimeout"
        in cluster.kubectl("explain", "dtj.spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds").stdout
    )


def test_a_gang_that_can_never_fit_fails_after_its_schedule_timeout_having_held_nothing(
    cluster: Cluster, native_operator: OperatorProcess, namespace: str, pool: GpuPool
) -> None:
    pool.add(gpus=3)
    cluster.apply(namespace, json.dumps(pool.job("huge", 4, scheduleTimeoutSeconds=15)))
    wait_for("the scheduler to hold back all 4 pods", lambda: gang_waits(cluster, namespace, "huge", 4), timeout=10)
    assert bound_pods(cluster, namespace, "huge") == []  # no GPU held while it waits
    failed = job_where(cluster, namespace, "huge", "Failed", lambda job: holds(job, "Failed"))
    reason = condition(failed, "Failed")
    assert reason is not None and reason["reason"] == "ScheduleTimeout", reason
    assert "4 of its pods found no place within scheduleTimeoutSeconds 15" in reason["message"]
    cluster.wait_for_event(namespace, "ScheduleTimeout")
    wait_for("its pods to go", lambda: not cluster.job_pods(namespace, "huge"))
