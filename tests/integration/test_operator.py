"""The operator against the real control plane: children, scheduling, status, garbage collection."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from disttrain_cli.render import render_objects
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_dev.polling import wait_for
from disttrain_dev.versions import cache_paths
from support.job_builder import JobBuilder
from support.job_checks import condition, holds
from support.kube_cluster import Cluster, account_kubeconfig, apply_rbac, operator_kubeconfig
from support.operator_process import OperatorProcess
from support.repository import ROOT

MWMS = ROOT / "examples" / "multi-worker-mirrored-gpu.yaml"
PS = ROOT / "examples" / "parameter-server.yaml"
NAMESPACED = ROOT / "deploy" / "namespaced"
GPU = "nvidia.com/gpu"


def _contains(expected: Any, actual: Any, path: str = "") -> None:
    """Everything render printed is in the live object.

    The API server only adds: defaults, and admission's additions at the end of lists (the
    ServiceAccount token volume and its mount).
    """
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        for key, value in expected.items():
            assert key in actual, f"{path}.{key} missing"
            _contains(value, actual[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) >= len(expected), path
        for index, (left, right) in enumerate(zip(expected, actual[: len(expected)], strict=True)):
            _contains(left, right, f"{path}[{index}]")
    elif isinstance(expected, int) and isinstance(actual, str):
        assert str(expected) == actual, path  # quantities come back as strings
    else:
        assert expected == actual, f"{path}: {expected!r} != {actual!r}"


def _pods(cluster: Cluster, namespace: str, job: str) -> list[dict[str, Any]]:
    return list(cluster.job_pods(namespace, job).values())


def _wait_pods(
    cluster: Cluster, namespace: str, job: str, count: int, phase: str | None = None
) -> list[dict[str, Any]]:
    def ready() -> list[dict[str, Any]] | None:
        pods = _pods(cluster, namespace, job)
        if len(pods) != count or (phase and any(pod["status"].get("phase") != phase for pod in pods)):
            return None
        return pods

    return wait_for(f"{count} pods of {job}" + (f" {phase}" if phase else ""), ready, timeout=60)


def _wait_condition(cluster: Cluster, namespace: str, job: str, kind: str, timeout: float = 60) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        current = cluster.job(namespace, job)
        return current if holds(current, kind) else None

    return wait_for(f"{job} {kind}", reached, timeout=timeout)


def _check_created_as_rendered(cluster: Cluster, namespace: str, example_text: str) -> None:
    rendered = render_objects(example_text, BuildSettings(), namespace=namespace)
    job_name = rendered[0]["metadata"]["name"]
    job = cluster.job(namespace, job_name)
    pods = [item for item in rendered if item["kind"] == "Pod"]
    _wait_pods(cluster, namespace, job_name, len(pods), "Running")
    for expected in rendered:
        live = cluster.get(expected["kind"], expected["metadata"]["name"], namespace)
        assert live is not None, f"{expected['kind']} {expected['metadata']['name']} was not created"
        _contains(expected, live, expected["kind"])
        (owner,) = live["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("DistTrainJob", job["metadata"]["uid"], True)
    names = {pod["metadata"]["name"] for pod in _pods(cluster, namespace, job_name)}
    assert names == {pod["metadata"]["name"] for pod in pods}


def test_multi_worker_job_creates_what_render_prints(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(namespace, MWMS.read_text())
    _check_created_as_rendered(cluster, namespace, MWMS.read_text())
    claim = cluster.get("pvc", "mnist-mwms-checkpoint", namespace)
    assert claim is not None and claim["spec"]["resources"]["requests"]["storage"] == "10Gi"

    job = cluster.job(namespace, "mnist-mwms")
    assert not job["metadata"].get("finalizers")  # the garbage collector needs none
    annotations = job["metadata"].get("annotations", {})
    assert list(annotations) == ["kubectl.kubernetes.io/last-applied-configuration"]  # kopf keeps no state here

    def created_event() -> bool:
        events = cluster.items("events", namespace)
        return any(e["reason"] == "Created" and e["involvedObject"]["kind"] == "DistTrainJob" for e in events)

    wait_for("a Created event on the job", created_event)


def test_parameter_server_job_creates_what_render_prints(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.create_claim(namespace, "team-checkpoints")
    cluster.apply(namespace, PS.read_text())
    _check_created_as_rendered(cluster, namespace, PS.read_text())


def _gpus_requested(pod: dict[str, Any]) -> int:
    return sum(int(c.get("resources", {}).get("requests", {}).get(GPU, 0)) for c in pod["spec"]["containers"])


def _free_gpus(cluster: Cluster) -> dict[str, int]:
    """Allocatable GPUs per node less what running and pending pods already requested.

    Pods of earlier tests' namespaces still terminating would free their GPUs mid-test, so the
    count waits until none holding GPUs is left.
    """

    def settled() -> tuple[list[dict[str, Any]]] | None:
        pods: list[dict[str, Any]] = json.loads(cluster.kubectl("get", "pods", "-A", "-o", "json").stdout)["items"]
        leaving = any(pod["metadata"].get("deletionTimestamp") and _gpus_requested(pod) for pod in pods)
        return None if leaving else (pods,)

    (pods,) = wait_for("no pod holding GPUs still terminating", settled, timeout=60)
    nodes = cluster.items("nodes", "")
    free = {node["metadata"]["name"]: int(node["status"]["allocatable"].get(GPU, 0)) for node in nodes}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node in free and pod["status"].get("phase") in ("Pending", "Running"):
            free[node] -= _gpus_requested(pod)
    return free


def _scheduling_seen(cluster: Cluster, namespace: str) -> str:
    """What the scheduler said of the job's pods, where they went, and each node's conditions and taints."""
    events = [f"{event['reason']}: {event['message']}" for event in cluster.items("events", namespace)]
    pods = [(pod["metadata"]["name"], pod["spec"].get("nodeName")) for pod in _pods(cluster, namespace, "gpu-hungry")]
    nodes = [
        (node["metadata"]["name"], {c["type"]: c["status"] for c in node["status"]["conditions"]}, node["spec"])
        for node in cluster.items("nodes", "")
    ]
    return f"events: {events}\npods: {pods}\nnodes: {nodes}"


def test_pods_are_scheduled_by_their_gpu_requests(cluster: Cluster, operator: OperatorProcess, namespace: str) -> None:
    """Pods of 8 GPUs each fit one per node with 8 free GPUs; one pod more waits as unschedulable."""
    room = sum(count >= 8 for count in _free_gpus(cluster).values())
    assert room >= 1, "no node has 8 free GPUs; stop the jobs left on the local cluster"
    hungry = MWMS.read_text().replace("name: mnist-mwms", "name: gpu-hungry")
    hungry = hungry.replace("replicas: 4", f"replicas: {room + 1}").replace("nvidia.com/gpu: 1 ", "nvidia.com/gpu: 8 ")
    cluster.apply(namespace, hungry)
    _wait_pods(cluster, namespace, "gpu-hungry", room + 1)

    def unschedulable() -> bool:
        events = cluster.items("events", namespace)
        return any(e["reason"] == "FailedScheduling" and GPU in e["message"] for e in events)

    def placed() -> list[dict[str, Any]] | None:
        pods = [pod for pod in _pods(cluster, namespace, "gpu-hungry") if pod["spec"].get("nodeName")]
        return pods if len(pods) == room else None

    try:
        wait_for("a FailedScheduling event naming nvidia.com/gpu", unschedulable)
    except TimeoutError as error:  # what the scheduler said instead, and the nodes it saw
        raise AssertionError(_scheduling_seen(cluster, namespace)) from error
    scheduled = wait_for(f"{room} pods placed", placed)
    assert len({pod["spec"]["nodeName"] for pod in scheduled}) == room


def test_status_follows_the_pods_to_success(cluster: Cluster, operator: OperatorProcess, namespace: str) -> None:
    cluster.apply(namespace, MWMS.read_text())
    _wait_pods(cluster, namespace, "mnist-mwms", 4, "Running")
    running = _wait_condition(cluster, namespace, "mnist-mwms", "Running")
    assert running["status"]["phase"] == "Running"
    assert running["status"]["ready"] == "4/4"
    assert running["status"]["replicaStatuses"]["Worker"]["active"] == 4
    assert running["status"]["observedGeneration"] == running["metadata"]["generation"]
    assert "startTime" in running["status"]

    # Status is written only when it changes: a new label brings a reconcile, which finds nothing to write.
    reconciles = operator.reconciles()
    cluster.kubectl("label", "dtj", "mnist-mwms", "-n", namespace, "team=vision")
    version = cluster.job(namespace, "mnist-mwms")["metadata"]["resourceVersion"]
    wait_for("a reconcile of the labelled job", lambda: operator.reconciles() > reconciles)
    assert cluster.job(namespace, "mnist-mwms")["metadata"]["resourceVersion"] == version

    table = cluster.kubectl("get", "dtj", "-n", namespace).stdout.splitlines()
    assert table[0].split() == ["NAME", "PHASE", "STRATEGY", "READY", "RESTARTS", "STEP", "ETA", "AGE"]
    assert table[1].split()[:5] == ["mnist-mwms", "Running", "MultiWorkerMirrored", "4/4", "0"]

    cluster.set_pod_status(namespace, "mnist-mwms-worker-0", "Succeeded", exit_code=0)
    cluster.kubectl("wait", "--for=condition=Succeeded", "dtj/mnist-mwms", "-n", namespace, "--timeout=60s")
    done = cluster.job(namespace, "mnist-mwms")
    assert done["status"]["phase"] == "Succeeded"
    assert "completionTime" in done["status"]
    assert condition(done, "Running")["status"] == "False"  # type: ignore[index]


def test_worker_failure_with_restart_policy_never_fails_the_job(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    text = MWMS.read_text().replace("restartPolicy: ExitCode", "restartPolicy: Never")
    cluster.apply(namespace, text)
    _wait_pods(cluster, namespace, "mnist-mwms", 4, "Running")
    cluster.set_pod_status(namespace, "mnist-mwms-worker-2", "Failed", exit_code=1)
    failed = _wait_condition(cluster, namespace, "mnist-mwms", "Failed")
    assert failed["status"]["phase"] == "Failed"
    message = condition(failed, "Failed")["message"]  # type: ignore[index]
    assert "mnist-mwms-worker-2 failed with exit code 1" in message


def test_deleting_a_job_garbage_collects_its_children(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(namespace, MWMS.read_text())
    _wait_pods(cluster, namespace, "mnist-mwms", 4)
    wait_for("the Service", lambda: cluster.get("service", "mnist-mwms", namespace))
    wait_for("the PVC", lambda: cluster.get("pvc", "mnist-mwms-checkpoint", namespace))
    cluster.kubectl("delete", "dtj", "mnist-mwms", "-n", namespace, "--wait=true", "--timeout=60s")

    def all_gone() -> bool:
        return not (
            _pods(cluster, namespace, "mnist-mwms")
            or cluster.get("service", "mnist-mwms", namespace)
            or cluster.get("pvc", "mnist-mwms-checkpoint", namespace)
        )

    wait_for("the garbage collector to remove pods, Service and PVC", all_gone, timeout=90)


def test_operator_restart_mid_job_creates_no_duplicates_and_keeps_status(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(namespace, MWMS.read_text())
    _wait_pods(cluster, namespace, "mnist-mwms", 4, "Running")
    before = _wait_condition(cluster, namespace, "mnist-mwms", "Running")
    uids = {pod["metadata"]["uid"] for pod in _pods(cluster, namespace, "mnist-mwms")}

    operator.stop(signal.SIGKILL)
    operator.start()
    wait_for("the restarted operator to reconcile the job", lambda: operator.reconciles() > 0)
    assert {pod["metadata"]["uid"] for pod in _pods(cluster, namespace, "mnist-mwms")} == uids

    cluster.set_pod_status(namespace, "mnist-mwms-worker-0", "Succeeded", exit_code=0)
    after = _wait_condition(cluster, namespace, "mnist-mwms", "Succeeded")
    assert {pod["metadata"]["uid"] for pod in _pods(cluster, namespace, "mnist-mwms")} <= uids
    assert after["status"]["startTime"] == before["status"]["startTime"]
    for kind in ("Created", "Running"):
        was, now = condition(before, kind), condition(after, kind)
        assert was is not None and now is not None
        if kind == "Created":
            assert now["lastTransitionTime"] == was["lastTransitionTime"]


def test_a_pod_the_api_server_refuses_fails_the_job_with_a_warning(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    text = MWMS.read_text().replace("- name: tensorflow ", "- name: Not_A_DNS_Label ")
    cluster.apply(namespace, text)
    failed = _wait_condition(cluster, namespace, "mnist-mwms", "Failed")
    assert condition(failed, "Failed")["reason"] == "ChildRejected"  # type: ignore[index]

    def warning() -> bool:
        events = cluster.items("events", namespace)
        return any(e["type"] == "Warning" and e["reason"] == "CreateFailed" for e in events)

    wait_for("a CreateFailed Warning event", warning)
    assert not _pods(cluster, namespace, "mnist-mwms")


def test_namespaced_operator_leaves_other_namespaces_alone(
    cluster: Cluster, operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    """deploy/namespaced's operator: its account in a namespace of its own, its rights in the jobs' alone."""
    other, own = f"{namespace}-other", f"{namespace}-system"
    cluster.create_namespace(other)
    kubeconfig = account_kubeconfig(cluster, tmp_path, NAMESPACED / "operator" / "rbac.yaml", "disttrain-operator", own)
    apply_rbac(cluster, NAMESPACED / "jobs" / "rbac.yaml", namespace, own)
    scoped = OperatorProcess(
        cluster, tmp_path / "scoped.log", ["--namespace", namespace], kubeconfig, environment={"POD_NAMESPACE": own}
    )
    with operator.stopped():
        scoped.start()
        try:
            cluster.apply(other, MWMS.read_text())
            cluster.apply(namespace, MWMS.read_text())
            _wait_pods(cluster, namespace, "mnist-mwms", 4)
            wait_for("its status", lambda: cluster.job(namespace, "mnist-mwms").get("status", {}).get("conditions"))
            assert not _pods(cluster, other, "mnist-mwms")
            assert "status" not in cluster.job(other, "mnist-mwms")
        finally:
            scoped.stop()
    assert not scoped.rights_refused(), "deploy/namespaced/ lacks rights its operator uses"
    _wait_pods(cluster, other, "mnist-mwms", 4)  # the cluster-wide operator picks it up
    cluster.delete_namespace(other)
    cluster.delete_namespace(own)


def test_the_admin_cli_lists_and_describes_jobs(cluster: Cluster, operator: OperatorProcess, namespace: str) -> None:
    """`disttrain jobs` and `kubectl disttrain` (the same program, found by kubectl as a plugin): outputs,
    selectors, a watch in a pipe, and shell completion of job names."""
    cluster.apply(namespace, MWMS.read_text())
    cluster.apply(namespace, MWMS.read_text().replace("name: mnist-mwms", "name: other\n  labels: {team: other}", 1))
    _wait_condition(cluster, namespace, "mnist-mwms", "Running")
    env = {**cluster.env, "PATH": f"{Path(sys.executable).parent}:{cluster.env.get('PATH', '')}"}
    jobs = [sys.executable, "-m", "disttrain_cli.main", "jobs"]

    def run(*args: str) -> str:
        result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        return result.stdout

    listed = run(*jobs, "list", "-A").splitlines()
    assert listed[0].split() == ["NAMESPACE", "NAME", "PHASE", "READY", "RESTARTS", "PROGRESS", "ETA", "AGE"]
    row = next(line for line in listed if namespace in line and "mnist-mwms" in line)
    assert row.split()[1:5] == ["mnist-mwms", "Running", "4/4", "0"]
    wide = run(*jobs, "get", "mnist-mwms", "-n", namespace, "-o", "wide").splitlines()
    assert wide[0].split()[-4:] == ["STRATEGY", "REPLICAS", "QUEUE", "EVALUATION"] and "Worker 4/4" in wide[1]
    assert run(*jobs, "get", "-n", namespace, "-o", "name").split() == [
        "disttrainjob.disttrain.io/mnist-mwms",
        "disttrainjob.disttrain.io/other",
    ]
    selected = json.loads(run(*jobs, "get", "-n", namespace, "-l", "team=other", "-o", "json"))
    assert (selected["kind"], [item["metadata"]["name"] for item in selected["items"]]) == ("List", ["other"])
    one = yaml.safe_load(run(*jobs, "get", "other", "-n", namespace, "-o", "yaml"))
    assert (one["kind"], one["metadata"]["labels"]) == ("DistTrainJob", {"team": "other"})

    watching = subprocess.Popen([*jobs, "get", "-w", "-n", namespace], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert watching.stdout is not None
        first = [watching.stdout.readline() for _ in range(3)]  # the header, then each job as it is
        assert first[0].split()[:2] == ["NAME", "PHASE"] and {line.split()[0] for line in first[1:]} == {
            "mnist-mwms",
            "other",
        }
        cluster.kubectl("delete", "dtj", "other", "-n", namespace, "--wait=false")
        changes = iter(watching.stdout.readline, "")
        assert next(line for line in changes if line.split()[:2] == ["other", "Deleted"])
    finally:
        watching.kill()
        watching.wait()

    described = run(*jobs, "describe", "mnist-mwms", "-n", namespace)
    assert "JobRunning" in described and "mnist-mwms-worker-3" in described and "Created" in described
    kubectl = str(cache_paths().binary("kubectl"))  # finds kubectl-disttrain, a console script beside this Python
    assert "mnist-mwms" in run(kubectl, "disttrain", "get", "-n", namespace)
    completed = run("kubectl_complete-disttrain", "describe", "-n", namespace, "mn").splitlines()
    assert completed == ["mnist-mwms", ":4"]


def test_the_admin_cli_prints_a_replicas_log(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """`disttrain jobs logs` through the API server, from the process node's log endpoint."""
    job = JobBuilder("echo").script("for i in 1 2 3; do echo line $i; done").obj()
    process_cluster.apply(process_namespace, json.dumps(job))
    _wait_condition(process_cluster, process_namespace, "echo", "Succeeded")
    command = [sys.executable, "-m", "disttrain_cli.main", "jobs", "logs", "echo", "--replica", "worker-0"]
    command += ["--tail", "2", "-n", process_namespace]
    result = subprocess.run(command, env=process_cluster.env, capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stdout) == (0, "line 2\nline 3\n"), result.stderr


# A user's own image on the process node: it serves no progress port, and its first attempt exits 5.
OWN_IMAGE = """
if [ -e "$MARKER" ]; then sleep 25; exit 0; fi
touch "$MARKER"; sleep 2; exit 5
"""


def test_a_users_own_image_is_retried_on_exit_code_5_and_runs_unjudged_by_the_operator_s_deadline(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    """A plain shell program, not disttrain's trainer, under `DISTTRAIN_PROGRESS_DEADLINE_SECONDS` as an admin sets
    it and a job that names only its first step's allowance (10 s): its exit code 5 (no trainer's word) is retried
    under OnFailure, and its second attempt, which reports no step for longer than that allowance, runs to its end,
    the job saying why the operator's deadline does not judge it."""
    cluster, namespace = process_cluster, process_namespace
    env = [{"name": "MARKER", "value": str(tmp_path / "first-attempt")}]
    policy = {"startupDeadlineSeconds": 10, "backoffLimit": 2}
    job = JobBuilder("own").script(OWN_IMAGE, 1, env, restartPolicy="OnFailure").run_policy(**policy).obj()
    kubeconfig, scope = operator_kubeconfig(cluster, tmp_path), ["--namespace", namespace]
    defaulted = OperatorProcess(
        cluster, tmp_path / "operator.log", scope, kubeconfig, environment={"DISTTRAIN_PROGRESS_DEADLINE_SECONDS": "10"}
    )
    with operator.stopped():
        defaulted.start()
        try:
            cluster.apply(namespace, json.dumps(job))
            cluster.wait_for_event(namespace, "ProgressNotReported", timeout=60)
            said = condition(cluster.job(namespace, "own"), "Stalled")
            assert said is not None and said["status"] == "False" and said["reason"] == "ProgressNotReported", said
            assert "progressDeadlineSeconds (10 s, the operator's default) does not apply" in said["message"], said
            done = _wait_condition(cluster, namespace, "own", "Succeeded", timeout=90)
        finally:
            defaulted.stop()
    assert done["status"]["restartCount"] == 1, done["status"]
    restarts = [event["message"] for event in cluster.items("events", namespace) if event["reason"] == "Restarting"]
    assert any("own-worker-0 failed with exit code 5" in message for message in restarts), restarts
    assert not holds(done, "Stalled") and not holds(done, "Failed")
