"""TFJobs served unchanged (`disttrain operator --serve-tfjobs`, with disttrain's TFJob CRD and the
overlay's rights): Kubeflow's own example runs as training-operator ran it, as its users see it, and
the operator refuses to serve TFJobs whose CRD is another controller's."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from disttrain import Client, JobNotFoundError
from disttrain_core.api import crd, yaml_io
from disttrain_core.images import VERSION
from disttrain_dev import cluster as devcluster
from disttrain_dev import images, kubeflow_sdk, node_kinds, peer
from disttrain_dev.build import module_dir
from disttrain_dev.cluster import crd_established
from disttrain_dev.polling import wait_for
from support.kube_cluster import Cluster, serving_operator_kubeconfig
from support.operator_process import OperatorProcess
from support.real_node_images import real_node_with_images
from support.repository import ROOT

TFJOB_CRD = "tfjobs.kubeflow.org"


@pytest.fixture(scope="module")
def tfjob_crd(cluster: Cluster) -> Cluster:
    """disttrain's TFJob CRD, in place of any other (the benchmarks' peer installs training-operator's)."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "crds" / "tfjob"))
    cluster.kubectl("label", "crd", TFJOB_CRD, f"{crd.CRD_OWNER_LABEL}=disttrain", "--overwrite")

    def established() -> bool:
        found = cluster.kubectl("get", "crd", TFJOB_CRD, "-o", "json", check=False)
        return found.returncode == 0 and crd_established(json.loads(found.stdout))

    wait_for("the TFJob CRD established", established, timeout=60)
    return cluster


@pytest.fixture
def serving(tfjob_crd: Cluster, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    """An operator serving TFJobs, with deploy/'s and the overlay's rights; the suite's own operator serves
    none, so only this one acts on the test's TFJobs."""
    kubeconfig = serving_operator_kubeconfig(tfjob_crd, tmp_path)
    process = OperatorProcess(
        tfjob_crd, tmp_path / "operator.log", ["--all-namespaces"], kubeconfig, options=["--serve-tfjobs"]
    )
    process.start()
    yield process
    process.stop()


def _example(namespace: str) -> tuple[str, str]:
    """Kubeflow's simple TFJob example as published (two workers, OnFailure), in the test's namespace."""
    text = (module_dir(peer.MODULE, peer.VERSION) / "examples" / "tensorflow" / "simple.yaml").read_text()
    manifest = yaml_io.load_all(text)[0]
    manifest["metadata"]["namespace"] = namespace
    return manifest["metadata"]["name"], json.dumps(manifest)


def _tfjob(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(cluster.kubectl("get", "tfjob", name, "-n", namespace, "-o", "json").stdout)
    return found


def _conditions(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in job.get("status", {}).get("conditions", [])}


def test_kubeflow_s_example_runs_as_training_operator_ran_it(
    serving: OperatorProcess, cluster: Cluster, namespace: str
) -> None:
    name, manifest = _example(namespace)
    # as published, the example's pods set no securityContext, which the suite's `restricted` refuses
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline", "--overwrite")
    cluster.kubectl("apply", "-f", "-", stdin=manifest)
    selector = f"training.kubeflow.org/job-name={name}"
    pods = wait_for(
        "the TFJob's pods",
        lambda: len(cluster.items("pods", namespace, selector)) == 2 and cluster.items("pods", namespace, selector),
    )
    by_name = {pod["metadata"]["name"]: pod for pod in pods}
    worker0 = by_name[f"{name}-worker-0"]
    labels = worker0["metadata"]["labels"]
    assert labels["training.kubeflow.org/replica-type"] == "worker"
    assert labels["training.kubeflow.org/replica-index"] == "0"
    assert labels["training.kubeflow.org/job-role"] == "master"
    assert worker0["metadata"]["ownerReferences"][0]["kind"] == "TFJob"
    env = {e["name"]: e.get("value") for e in worker0["spec"]["containers"][0]["env"]}
    config = json.loads(env["TF_CONFIG"])
    assert config["task"] == {"type": "worker", "index": 0} and config["environment"] == "cloud"
    assert len(config["cluster"]["worker"]) == 2

    created = wait_for("Created", lambda: _conditions(_tfjob(cluster, namespace, name)).get("Created"))
    assert created["reason"] == "TFJobCreated" and created["lastUpdateTime"]
    for pod in by_name:
        cluster.set_pod_status(namespace, pod, "Running")
    running = wait_for("Running", lambda: _conditions(_tfjob(cluster, namespace, name)).get("Running"))
    assert running["reason"] == "TFJobRunning"
    assert _tfjob(cluster, namespace, name)["status"]["replicaStatuses"]["Worker"]["active"] == 2

    cluster.set_pod_status(namespace, f"{name}-worker-0", "Succeeded", exit_code=0)
    cluster.kubectl("wait", f"tfjob/{name}", "-n", namespace, "--for=condition=Succeeded", "--timeout=60s")
    done = _tfjob(cluster, namespace, name)["status"]
    assert _conditions({"status": done})["Succeeded"]["reason"] == "TFJobSucceeded"
    assert done["completionTime"] and done["startTime"] and done["lastReconcileTime"]
    assert done["replicaStatuses"]["Worker"]["succeeded"] == 1


def test_a_served_tfjob_s_quick_restarts_back_off_as_a_disttrainjob_s_do(
    serving: OperatorProcess, cluster: Cluster, namespace: str
) -> None:
    """Kubeflow's example, its worker failing twice, each time at once: the second restart waits, and the
    TFJob's status keeps what decided it (restartBackoff, which its CRD once pruned on every write). One worker:
    a kwok node restarts no container in place, so a second would hold each restart for the in-place grace."""
    name, manifest = _example(namespace)
    job = json.loads(manifest)
    job["spec"]["runPolicy"] = {"backoffLimit": 5}
    job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 1
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline", "--overwrite")
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(job))
    seen: set[str] = set()
    for attempt in (1, 2):

        def fresh_pods() -> dict[str, dict[str, Any]] | None:
            pods = cluster.job_pods(namespace, name)
            uids = {pod["metadata"]["uid"] for pod in pods.values()}
            return pods if len(pods) == 1 and not uids & seen else None

        pods = wait_for(f"attempt {attempt}'s pods", fresh_pods, timeout=60)
        seen.update(pod["metadata"]["uid"] for pod in pods.values())
        for pod in pods:
            cluster.set_pod_status(namespace, pod, "Running")
        cluster.set_pod_status(namespace, f"{name}-worker-0", "Failed", exit_code=1)

        def restarted(count: int = attempt) -> dict[str, Any] | None:
            status = _tfjob(cluster, namespace, name).get("status", {})
            return status if status.get("restartCount") == count else None

        status = wait_for(f"restart {attempt}", restarted, timeout=60)
    assert status["restartBackoff"]["quickRestarts"] == 1, status
    restarting = _conditions({"status": status})["Restarting"]
    assert "2 restarts in a row" in restarting["message"] and "start again in 10 s" in restarting["message"], restarting


def test_a_served_tfjob_whose_code_exits_5_is_retried_under_on_failure_and_fails_only_on_the_trainers_word(
    serving: OperatorProcess, cluster: Cluster, namespace: str
) -> None:
    """Exit code 5 is a TFJob user's own code as often as disttrain's trainer: without the trainer's word in the
    termination message it is retried under OnFailure, as training-operator retries it; with the word, the job
    fails at once as Diverged."""
    name, manifest = _example(namespace)
    job = json.loads(manifest)
    job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 1
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline", "--overwrite")
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(job))
    first = wait_for("the worker", lambda: cluster.job_pods(namespace, name).get(f"{name}-worker-0"), timeout=60)
    cluster.set_pod_status(namespace, f"{name}-worker-0", "Running")
    cluster.set_pod_status(namespace, f"{name}-worker-0", "Failed", exit_code=5, message="bad input")

    def restarted() -> dict[str, Any] | None:
        status = _tfjob(cluster, namespace, name).get("status", {})
        return status if status.get("restartCount") == 1 else None

    status = wait_for("the restart", restarted, timeout=60)
    assert "Failed" not in _conditions({"status": status}), status

    def replaced() -> dict[str, Any] | None:
        pod = cluster.job_pods(namespace, name).get(f"{name}-worker-0")
        return pod if pod and pod["metadata"]["uid"] != first["metadata"]["uid"] else None

    wait_for("the worker replaced", replaced, timeout=60)
    cluster.set_pod_status(namespace, f"{name}-worker-0", "Running")
    said = json.dumps({"step": 7, "error": "the loss became nan at step 7", "diverged": True})
    cluster.set_pod_status(namespace, f"{name}-worker-0", "Failed", exit_code=5, message=said)
    cluster.kubectl("wait", f"tfjob/{name}", "-n", namespace, "--for=condition=Failed", "--timeout=60s")
    failed = _conditions(_tfjob(cluster, namespace, name))["Failed"]
    assert failed["message"].startswith("Diverged: ") and "nan at step 7" in failed["message"], failed


def test_the_operator_refuses_to_serve_tfjobs_beside_another_controller_s_crd(tfjob_crd: Cluster) -> None:
    tfjob_crd.kubectl("label", "crd", TFJOB_CRD, f"{crd.CRD_OWNER_LABEL}-")
    try:
        command = [sys.executable, "-m", "disttrain_cli.main", "operator", "--serve-tfjobs"]
        refused = subprocess.run(command, env=tfjob_crd.env, capture_output=True, text=True, timeout=60, check=False)
    finally:
        tfjob_crd.kubectl("label", "crd", TFJOB_CRD, f"{crd.CRD_OWNER_LABEL}=disttrain", "--overwrite")
    assert refused.returncode != 0
    assert "not serving TFJobs: the CRD tfjobs.kubeflow.org is not disttrain's" in refused.stderr


@pytest.mark.real_node
def test_kubeflow_s_sdk_runs_a_real_tfjob_unchanged(tfjob_crd: Cluster, tmp_path: Path) -> None:
    """`kubeflow-training` from PyPI drives the digits model as a TFJob in the trainer image on the real
    node: create, list, get, wait for Succeeded, pods (the master among them), logs, delete; then a function
    with `create_job(train_func=...)`, its two workers in one collective, and with a chief, a ps and a
    worker, whose variable on the ps the worker's steps added to."""
    real_node_with_images()
    namespace = f"sdk-{uuid.uuid4().hex[:8]}"
    tfjob_crd.create_namespace(devcluster.node_namespace(namespace, node_kinds.REAL))
    wait_for("the namespace's default ServiceAccount", lambda: tfjob_crd.get("serviceaccount", "default", namespace))
    kubeconfig = serving_operator_kubeconfig(tfjob_crd, tmp_path)
    process = OperatorProcess(
        tfjob_crd, tmp_path / "operator.log", ["--all-namespaces"], kubeconfig, options=["--serve-tfjobs"]
    )
    process.start()
    try:
        image = f"{images.TRAINER.name}:{VERSION}"
        result = _drive(tmp_path, "drive_tfjob.py", str(tfjob_crd.kubeconfig), namespace, "digits", image)
        functions = _drive(tmp_path, "drive_train_func.py", str(tfjob_crd.kubeconfig), namespace, image)
    finally:
        process.stop()
        tfjob_crd.kubectl("delete", "namespace", namespace, "--wait=false")
    assert "digits" in result["listed"] and result["fetched"] == "digits" and result["succeeded"] is True
    assert ["Succeeded", "True", "TFJobSucceeded"] in result["conditions"]
    assert result["replica_statuses"]["Worker"] >= 1 and result["completion_time"] != "None"
    assert "digits-worker-0" in result["pods"] and result["master"] == ["digits-worker-0"]
    assert "digits-worker-0" in result["logs"] and result["logs"]["digits-worker-0"].strip()
    expected = {"mwms": [{"workers": 2, "sum": 3.0}], "ps": [{"ps": 1, "total": 4.0}]}
    assert functions["printed"] == expected, functions["logs"]


def _drive(folder: Path, script: str, *arguments: str) -> Any:
    """What a script of `sdk/` answered, run with the SDK's own Python."""
    answer = folder / f"{script}.json"
    command = [str(kubeflow_sdk.sdk_python()), str(Path(__file__).parent / "sdk" / script), *arguments, str(answer)]
    answered = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert answered.returncode == 0, answered.stderr[-3000:]
    return json.loads(answer.read_text())


def test_training_operator_s_gang_flow_holds_a_tfjob_whose_gang_is_larger_than_it_until_lowered(
    tfjob_crd: Cluster, process_cluster: Cluster, tmp_path: Path
) -> None:
    """Kubeflow's SDK drives training-operator's gang e2e flow on disttrain with Kubernetes' own gangs: a TFJob
    of one worker asking for 10 is Created, never Running and holds no pod, its GangUnavailable condition says
    why; lowered to 1 with `update_job`, it runs on the process node and succeeds."""
    namespace = f"gang-{uuid.uuid4().hex[:8]}"
    tfjob_crd.create_namespace(devcluster.process_namespace(namespace))
    wait_for("the namespace's default ServiceAccount", lambda: tfjob_crd.get("serviceaccount", "default", namespace))
    kubeconfig = serving_operator_kubeconfig(tfjob_crd, tmp_path)
    process = OperatorProcess(
        tfjob_crd,
        tmp_path / "operator.log",
        ["--namespace", namespace],
        kubeconfig,
        options=["--serve-tfjobs"],
        environment={"DISTTRAIN_GANG_SCHEDULER": "kubernetes"},
    )
    process.start()
    try:
        script = Path(__file__).parent / "sdk" / "drive_gang_tfjob.py"
        answer = tmp_path / "answered.json"
        command = [str(kubeflow_sdk.sdk_python()), str(script), str(tfjob_crd.kubeconfig), namespace, "gang"]
        answered = subprocess.run([*command, str(answer)], capture_output=True, text=True, timeout=600, check=False)
        assert answered.returncode == 0, answered.stderr[-3000:]
        result = json.loads(answer.read_text())
        events = {event["reason"]: event for event in tfjob_crd.items("events", namespace)}
    finally:
        process.stop()
        tfjob_crd.kubectl("delete", "namespace", namespace, "--wait=false")
    assert result["held"] == [{"created": True, "running": False}] * 3 and result["pods_held"] == []
    (unavailable,) = [c for c in result["conditions_held"] if c[0] == "GangUnavailable"]
    assert unavailable[1:3] == ["True", "TFJobGangUnavailable"]  # TFJob's reasons; disttrain's leads the message
    assert unavailable[3].startswith("GangTooLarge: schedulingPolicy.minAvailable 10 is more than the 1 pods")
    assert events["GangTooLarge"]["type"] == "Warning"
    assert result["succeeded"] is True


def test_the_python_client_creates_waits_on_and_lists_a_served_tfjob(
    serving: OperatorProcess, cluster: Cluster, namespace: str
) -> None:
    name, manifest = _example(namespace)
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline", "--overwrite")
    client = Client(kubeconfig=cluster.kubeconfig, namespace=namespace)
    job = client.create(json.loads(manifest))
    assert (job.kind, job.spec.total_replicas) == ("TFJob", 2)  # in DistTrainJob's terms, its kind kept
    selector = f"training.kubeflow.org/job-name={name}"
    wait_for("the TFJob's pods", lambda: len(cluster.items("pods", namespace, selector)) == 2)
    for index in range(2):
        cluster.set_pod_status(namespace, f"{name}-worker-{index}", "Running")
    assert client.wait(job, "Running", timeout=60).status.phase == "Running"
    assert [found.metadata.name for found in client.list(kind="TFJob")] == [name]
    cluster.set_pod_status(namespace, f"{name}-worker-0", "Succeeded", exit_code=0)
    done = client.wait(name, "Succeeded", kind="TFJob", timeout=60)
    assert done.kind == "TFJob" and done.status.phase == "Succeeded"
    client.delete(done)
    with pytest.raises(JobNotFoundError):
        client.get(name, kind="TFJob")


MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def test_jobs_another_manager_runs_are_left_alone(serving: OperatorProcess, cluster: Cluster, namespace: str) -> None:
    """A TFJob and a DistTrainJob whose managedBy names MultiKueue get no pod, Service, status or Event, and the
    operator's log says so once for each; the TFJob created after them, the operator's, runs. managedBy is
    set once."""
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline", "--overwrite")
    name, manifest = _example(namespace)
    dispatched = json.loads(manifest)
    dispatched["metadata"]["name"] = "dispatched-tfjob"
    dispatched["spec"]["runPolicy"] = {**dispatched["spec"].get("runPolicy", {}), "managedBy": MULTIKUEUE}
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(dispatched))
    cluster.apply(namespace, (ROOT / "tests" / "corpus" / "valid" / "managed-by-multikueue.yaml").read_text())
    cluster.kubectl("apply", "-f", "-", stdin=manifest)
    wait_for("the later TFJob Created", lambda: _conditions(_tfjob(cluster, namespace, name)).get("Created"))

    left = {"TFJob": "dispatched-tfjob", "DistTrainJob": "dispatched"}
    for kind, job in left.items():
        found = json.loads(cluster.kubectl("get", kind.lower(), job, "-n", namespace, "-o", "json").stdout)
        assert not found.get("status"), found.get("status")
        assert not cluster.items("pods", namespace, f"training.kubeflow.org/job-name={job}")
        assert not cluster.items("pods", namespace, f"disttrain.io/job-name={job}")
        assert cluster.get("service", job, namespace) is None
        events = cluster.items("events", namespace)
        assert not [event for event in events if event["involvedObject"]["name"] == job]
        assert serving.log().count(f"leaving {kind} {namespace}/{job} to {MULTIKUEUE}") == 1

    change = json.dumps({"spec": {"runPolicy": {"managedBy": "kubeflow.org/training-operator"}}})
    patch = ["patch", "tfjob", "dispatched-tfjob", "-n", namespace, "--type=merge", "-p", change]
    result = cluster.kubectl(*patch, check=False)
    assert result.returncode != 0 and "runPolicy.managedBy cannot change" in result.stderr, result.stderr
    scaled = json.dumps({"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 7}}}})
    result = cluster.kubectl(
        "patch", "tfjob", "dispatched-tfjob", "-n", namespace, "--type=merge", "-p", scaled, check=False
    )
    assert result.returncode != 0 and "replica types and counts cannot change" in result.stderr, result.stderr
