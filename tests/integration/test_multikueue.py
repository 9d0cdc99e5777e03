"""MultiKueue with three control planes on this machine: a DistTrainJob queued on the manager is admitted
there, created by Kueue on the worker cluster that has quota (the local cluster, whose process node trains it
for real), run by the operator there, and its status (phase, conditions, progress, evaluation) shows on the
manager's copy; a worker cluster without quota, connected all along, is never chosen; deleting the manager's
copy removes the worker's. A served TFJob goes the same way, queued by Kueue's own TFJob integration. Kueue
runs on each cluster, built from shared/third_party, the manager's with DistTrainJob registered for
MultiKueue's generic adapter; docs/multi-cluster.md's blocks make the worker identities and the manager's
objects, run as a user runs them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from disttrain_core.kueue import MULTIKUEUE, PREBUILT_WORKLOAD, QUEUE_LABEL
from disttrain_dev import kueue
from disttrain_dev.polling import wait_for
from support.job_builder import JobBuilder
from support.job_checks import holds
from support.kube_cluster import Cluster, admission_policy_installed, operator_kubeconfig, serving_operator_kubeconfig
from support.kueue_support import LOCAL_QUEUE, WORKLOADS, kueue_running, local_queue
from support.multikueue_support import control_plane, page_block, run_page_block
from support.operator_process import OperatorProcess

pytestmark = pytest.mark.integration

STEPS_PER_EPOCH = 1437 // 64  # the bundled digits' training split at the default batch
EPOCHS = 4
EACH_POD = {"cpu": "100m"}  # the worker's queue holds the pods; the spare's holds none


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The manager cluster: Kueue with MultiKueue, and an operator that does Kueue's part of its jobs."""
    problem = kueue.missing_source()
    if problem:
        pytest.skip(problem)
    folder = tmp_path_factory.mktemp("manager")
    with control_plane("manager") as plane, kueue_running(plane, folder, multikueue=True, tfjob_integration=True):
        operator = OperatorProcess(plane, folder / "operator.log", kubeconfig=operator_kubeconfig(plane, folder))
        operator.start()
        yield plane
        operator.stop()


@pytest.fixture(scope="module")
def spare(tmp_path_factory: pytest.TempPathFactory, manager: Cluster) -> Iterator[Cluster]:
    """A second worker cluster, with Kueue and a queue of no quota."""
    with (
        control_plane("spare") as plane,
        kueue_running(plane, tmp_path_factory.mktemp("spare"), tfjob_integration=True),
    ):
        yield plane


@pytest.fixture(scope="module")
def worker_kueue(
    process_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, manager: Cluster
) -> Iterator[None]:
    """Kueue on the local cluster, the worker that runs the jobs on its process node."""
    with kueue_running(process_cluster, tmp_path_factory.mktemp("worker-kueue"), tfjob_integration=True):
        yield


@pytest.fixture(scope="module")
def worker_operator(
    process_cluster: Cluster, operator: OperatorProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The worker's operator, serving TFJobs that Kueue's own TFJob integration queues, with deploy/'s and the
    TFJob overlay's rights; the suite's own pauses meanwhile, as both would act on every DistTrainJob."""
    folder = tmp_path_factory.mktemp("worker-operator")
    kubeconfig = serving_operator_kubeconfig(process_cluster, folder)
    operator.stop()
    serving = OperatorProcess(
        process_cluster,
        folder / "operator.log",
        kubeconfig=kubeconfig,
        options=["--serve-tfjobs"],
        environment={"DISTTRAIN_KUEUE_TFJOB_INTEGRATION": "true"},
    )
    serving.start()
    yield serving
    serving.stop()
    operator.start()


def test_the_manager_s_kueue_registers_what_the_page_says() -> None:
    page = yaml.safe_load(page_block("multikueue-kueue-config"))
    configured = json.loads(kueue.configuration(1, 2, 3, multikueue=True, tfjob_integration=True))
    assert page["integrations"] == configured["integrations"]
    assert page["multiKueue"] == configured["multiKueue"]


def _job(name: str, epochs: int, evaluator: bool) -> dict[str, Any]:
    """A MultiWorkerMirrored digits job (and an Evaluator), queued and left to MultiKueue: the stand-in trainer, as
    where it runs is what is tested."""
    args = ["--model", "mlp", "--dataset", "digits", "--epochs", str(epochs), "--checkpoint-every", "40"]
    job = JobBuilder(name).counts({"Worker": 1, **({"Evaluator": 1} if evaluator else {})})
    job.container(image="trainer", command=["disttrain-stand-in"], args=[*args, "--log-every", "5"])
    job.container(resources={"requests": EACH_POD}).pod_spec(automountServiceAccountToken=False)
    job.metadata(labels={QUEUE_LABEL: LOCAL_QUEUE}).spec(managedBy=MULTIKUEUE, checkpoint={"size": "1Gi"})
    return job.obj()


def _active(manager: Cluster, name: str) -> bool:
    found = manager.get("multikueuecluster.kueue.x-k8s.io", name, "") or {}
    return any(
        c["type"] == "Active" and c["status"] == "True" for c in (found.get("status") or {}).get("conditions", [])
    )


def _get(cluster: Cluster, kind: str, name: str, namespace: str) -> dict[str, Any]:
    found = cluster.get(kind, name, namespace)
    return found or {}


def _where(
    cluster: Cluster, name: str, namespace: str, what: str, test: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The DistTrainJob once `test` holds of it."""

    def check() -> dict[str, Any] | None:
        found = cluster.get("disttrainjob", name, namespace)
        return found if found is not None and test(found) else None

    return wait_for(f"{name} {what}", check, timeout=300)


def _cluster_of(manager: Cluster, job: str, namespace: str) -> str | None:
    """The worker cluster MultiKueue placed the job's Workload on, once it did."""
    return (_get(manager, WORKLOADS, f"disttrainjob-{job}", namespace).get("status") or {}).get("clusterName")


def _step(job: dict[str, Any]) -> int:
    return int((job.get("status") or {}).get("progress", {}).get("step", 0))


@pytest.mark.usefixtures("worker_kueue", "worker_operator")
def test_a_job_queued_on_the_manager_trains_on_the_worker_with_quota_and_reports_back(
    manager: Cluster, spare: Cluster, process_cluster: Cluster, process_namespace: str, tmp_path: Path
) -> None:
    namespace, worker = process_namespace, process_cluster
    for plane in (manager, spare):
        plane.create_namespace(namespace)
    with (
        local_queue(worker, namespace, {"cpu": 2}),
        local_queue(spare, namespace, {"cpu": 0}),
        admission_policy_installed(worker),  # as installed: MultiKueue's identity must pass it
    ):
        for name, plane in (("worker-a", worker), ("worker-b", spare)):
            run_page_block("multikueue-worker", plane, tmp_path, namespace, WORKER=name)
        run_page_block("multikueue-manager", manager, tmp_path, namespace)
        for name in ("worker-a", "worker-b"):  # both connected: either could be chosen
            try:
                wait_for(f"MultiKueueCluster {name} active", partial(_active, manager, name), timeout=60)
            except TimeoutError as error:
                found = manager.get("multikueuecluster.kueue.x-k8s.io", name, "") or {}
                raise AssertionError(f"{error}: {found.get('status')}") from None
        manager.apply(namespace, json.dumps(_job("trained", EPOCHS, evaluator=True)))
        manager.apply(namespace, json.dumps(_job("removed", 1000, evaluator=False)))

        # Both went to the worker with quota: Kueue made each there, naming the Workload it admitted.
        for name in ("trained", "removed"):
            copy = _where(worker, name, namespace, "on the worker", lambda _: True)
            assert copy["metadata"]["annotations"][PREBUILT_WORKLOAD] == f"disttrainjob-{name}"
            assert "managedBy" not in copy["spec"]
            placed = wait_for(f"{name}'s cluster on the manager", partial(_cluster_of, manager, name, namespace))
            assert placed == "worker-a"

        # The manager's copy shows the worker's training as it goes, then its end.
        running = _where(manager, "removed", namespace, "training, as the manager shows it", lambda j: _step(j) > 0)
        assert running["status"]["phase"] == "Running"
        assert worker.items("pods", namespace, "disttrain.io/job-name=removed")

        manager.kubectl("delete", "disttrainjob", "removed", "-n", namespace)
        wait_for(
            "removed gone from the worker",
            lambda: worker.get("disttrainjob", "removed", namespace) is None,
            timeout=120,
        )
        wait_for(
            "its pods gone from the worker",
            lambda: not worker.items("pods", namespace, "disttrain.io/job-name=removed"),
            timeout=120,
        )

        done = _where(manager, "trained", namespace, "Succeeded on the manager", lambda j: holds(j, "Succeeded"))
        status = done["status"]
        assert status["phase"] == "Succeeded"
        assert status["progress"]["step"] == status["progress"]["totalSteps"] == EPOCHS * STEPS_PER_EPOCH
        assert status["evaluation"]["final"] is True and status["evaluation"]["step"] == EPOCHS * STEPS_PER_EPOCH

        def workload_finished() -> bool:  # the manager's Kueue marks it once it reads the job's end, a moment later
            finished = _get(manager, WORKLOADS, "disttrainjob-trained", namespace)
            conditions = (finished.get("status") or {}).get("conditions", [])
            return any(c["type"] == "Finished" and c["status"] == "True" for c in conditions)

        wait_for("the manager's Workload Finished", workload_finished, timeout=60)

        # The spare, connected all along, was never chosen.
        assert spare.items("disttrainjobs", namespace) == []
        assert manager.items("pods", namespace) == []


def _served_tfjob(name: str) -> dict[str, Any]:
    """A TFJob as Kubeflow's SDK writes one (a MultiWorkerMirrored digits worker), queued, left to MultiKueue and
    created suspended, as Kueue's TFJob integration wants where no webhook of Kueue's suspends it."""
    args = ["--model", "mlp", "--dataset", "digits", "--epochs", "2", "--checkpoint-dir", "/checkpoints"]
    container: dict[str, Any] = {"image": "disttrain/trainer:0.1.0", "command": ["disttrain-train"], "args": args}
    container |= {"resources": {"requests": EACH_POD}}
    container |= {"volumeMounts": [{"name": "checkpoints", "mountPath": "/checkpoints"}]}
    pod = {"automountServiceAccountToken": False, "volumes": [{"name": "checkpoints", "emptyDir": {}}]}
    job = (
        JobBuilder(name)
        .metadata(labels={QUEUE_LABEL: LOCAL_QUEUE})
        .workers(1, container, pod=pod, restartPolicy="Never")
    )
    return job.run_policy(managedBy=MULTIKUEUE, suspend=True).tfjob()


def _tfjob_succeeded(job: dict[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Succeeded" and c.get("status") == "True" for c in conditions)


@pytest.mark.usefixtures("worker_kueue", "worker_operator")
def test_a_served_tfjob_goes_the_same_way(
    manager: Cluster, spare: Cluster, process_cluster: Cluster, process_namespace: str, tmp_path: Path
) -> None:
    """A TFJob naming MultiKueue in `runPolicy.managedBy` is queued by Kueue's own TFJob integration, run on the
    worker by the operator serving TFJobs, and its TFJob status shows on the manager's copy."""
    namespace, worker = process_namespace, process_cluster
    for plane in (manager, spare):
        plane.create_namespace(namespace)
    with local_queue(worker, namespace, {"cpu": 2}), local_queue(spare, namespace, {"cpu": 0}):
        for name, plane in (("worker-a", worker), ("worker-b", spare)):
            run_page_block("multikueue-worker", plane, tmp_path, namespace, WORKER=name)
        run_page_block("multikueue-manager", manager, tmp_path, namespace)
        manager.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(_served_tfjob("served")))

        def tfjob_on(cluster: Cluster, test: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
            found = cluster.get("tfjob", "served", namespace)
            return found if found is not None and test(found) else None

        copy = wait_for("the TFJob on the worker", partial(tfjob_on, worker, lambda _: True), timeout=180)
        assert "managedBy" not in copy["spec"]["runPolicy"]
        done = wait_for("the TFJob Succeeded on the manager", partial(tfjob_on, manager, _tfjob_succeeded), timeout=300)
        assert done["status"]["replicaStatuses"]["Worker"].get("succeeded") == 1, done["status"]
        assert manager.items("pods", namespace) == []
        assert spare.items("tfjobs", namespace) == []
