"""The path users take, on the local cluster's real node (a kubelet and containerd): both images built
here and loaded into containerd, the operator installed from overlays/local-images (deploy/ with its
ServiceAccount, RBAC, two replicas and leader election), the digits examples trained in the trainer
image in namespaces enforcing `restricted` Pod Security, and faults that clusters really have: a
container killed, a pod deleted, the leading operator lost, the kubelet restarted. Each faulted job
must end with exactly the steps of an uninterrupted run.

Skipped where the machine cannot run the real node (root, a Docker engine, Debian's CNI plugins)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from disttrain import Client
from disttrain_contract.progress import DEFAULT_PROGRESS_PORT
from disttrain_core import naming
from disttrain_core.api.crd import KEPT_ON_UNINSTALL
from disttrain_core.images import VERSION
from disttrain_dev import cluster as devcluster
from disttrain_dev import containerd, images, network_policy_controller, node_kinds, readme, real_node, versions
from disttrain_dev.polling import wait_for
from support.example_notebook import run_example_notebook
from support.job_checks import condition, holds, job_where, restart_events, says_a_worker_is_unreachable, suspend
from support.kube_cluster import Cluster
from support.kueue_support import (
    LOCAL_QUEUE,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    evicted_by_kueue,
    local_queue,
    what_kueue_and_the_jobs_show,
)
from support.network_faults import bridged_traffic_through_iptables
from support.operator_process import OperatorProcess
from support.pod_checks import drain, drain_and_uncordon, trainer_run, trainer_state
from support.rbac_rights import AUDIT_TIME, refused_rights
from support.repository import ROOT
from support.trainer_support import PACED_STAND_IN, TRAINER, events

pytestmark = pytest.mark.real_node
MWMS = ROOT / "examples" / "local-multi-worker-digits.yaml"
PS = ROOT / "examples" / "local-parameter-server-digits.yaml"
STEPS_PER_EPOCH = 22  # the digits training split at a global batch of 64
OPERATOR_NAMESPACE = "disttrain-system"
OPERATOR_LABEL = "app.kubernetes.io/name=disttrain-operator"
POLL_SECONDS = 2  # how often overlays/local-images' operator reads each trainer's progress


@pytest.fixture(scope="module")
def real_cluster(cluster: Cluster) -> Cluster:
    missing = real_node.missing_requirement()
    if missing is not None:
        pytest.skip(missing)
    devcluster.up(real_node=True)
    return cluster


# When the uninstall's test removed the operator's rules: its last requests meet 403s from then on, which
# says nothing of what the rules lack.
UNINSTALLED_AT: list[str] = []


@pytest.fixture(scope="module")
def installed(real_cluster: Cluster, operator: OperatorProcess) -> Iterator[Cluster]:
    """The operator as users install it; the suite's own operator process pauses meanwhile, since both
    would act on every namespace."""
    operator.stop()
    built = images.ensure_images(ROOT)
    devcluster.load_images([f"{name}:{VERSION}" for name in built])
    devcluster.apply_namespaces([OPERATOR_NAMESPACE], node_kinds.REAL)  # after an earlier test's deploy/ went
    real_cluster.kubectl("apply", "--server-side", "-k", str(ROOT / "overlays" / "local-images"))
    since = datetime.now(UTC).strftime(AUDIT_TIME)
    real_cluster.kubectl("rollout", "status", "-n", OPERATOR_NAMESPACE, "deploy/disttrain-operator", "--timeout=180s")
    yield real_cluster
    account = f"system:serviceaccount:{OPERATOR_NAMESPACE}:disttrain-operator"
    refused = refused_rights(devcluster.audit_logs(), account, since, min(UNINSTALLED_AT, default=None))
    real_cluster.delete_namespace(OPERATOR_NAMESPACE)
    operator.start()
    assert not refused, f"the installed operator was refused rights: {sorted(refused)}"


def _node_namespace(cluster: Cluster, labels: dict[str, str]) -> Iterator[str]:
    """A namespace whose pods run on the real node, as `disttrain dev-cluster namespace` makes them."""
    name = f"real-{uuid.uuid4().hex[:8]}"
    namespace = devcluster.node_namespace(name, node_kinds.REAL, labels=labels)
    cluster.create_namespace(namespace)
    wait_for("the namespace's default ServiceAccount", lambda: cluster.get("serviceaccount", "default", name))
    yield name
    cluster.delete_namespace(name)


@pytest.fixture
def real_namespace(installed: Cluster) -> Iterator[str]:
    """A namespace enforcing `restricted` whose pods run on the real node."""
    yield from _node_namespace(installed, {"pod-security.kubernetes.io/enforce": "restricted"})


@pytest.fixture
def plain_namespace(installed: Cluster) -> Iterator[str]:
    """A namespace as a user creates one, whose pods run on the real node."""
    yield from _node_namespace(installed, {})


def _submit(
    cluster: Cluster,
    namespace: str,
    example: Path,
    epochs: int,
    *extra: str,
    logs_on_volume: bool = False,
    suffix: str = "",
    checkpoint_every: int | None = None,
    backoff_limit: int | None = None,
    every_worker: bool = False,
    labels: dict[str, str] | None = None,
    run_policy: dict[str, int] | None = None,
    trainer: tuple[str, ...] = (TRAINER,),
) -> str:
    """The example with more epochs (a fault then lands mid-run) and `extra` trainer flags, its logs kept on its
    checkpoint volume with `logs_on_volume`, its name ending in `suffix`, its checkpoints, restarts, labels and
    more `run_policy` fields as given; with `every_worker` it succeeds once every worker did (none is stopped
    still running by the cleanup at worker 0's end); running `trainer` (the stand-in for the operator's decisions).
    Returns its name."""
    flags = "".join(f', "{flag}"' for flag in extra)
    text = re.sub(r'"--epochs", "\d+"', f'"--epochs", "{epochs}"{flags}', example.read_text())
    command = f'command: ["{TRAINER}"]'
    assert command in text, f"{example.name} names no {command}"
    text = text.replace(command, f"command: {json.dumps(list(trainer))}")
    if checkpoint_every is not None:
        text = re.sub(r'"--checkpoint-every", "\d+"', f'"--checkpoint-every", "{checkpoint_every}"', text)
    policy = {**({} if backoff_limit is None else {"backoffLimit": backoff_limit}), **(run_policy or {})}
    if policy:
        fields = "".join(f"    {key}: {value}\n" for key, value in policy.items())
        text = text.replace("\nspec:\n", f"\nspec:\n  runPolicy:\n{fields}", 1)
    if every_worker:
        text = text.replace("\nspec:\n", "\nspec:\n  successPolicy: AllWorkers\n", 1)
    text = re.sub(r"^  name: (\S+)$", rf"  name: \g<1>{suffix}", text, count=1, flags=re.MULTILINE)
    if labels:
        rendered = "".join(f"    {key}: {value}\n" for key, value in labels.items())
        text = re.sub(r"^(  name: \S+\n)", rf"\g<1>  labels:\n{rendered}", text, count=1, flags=re.MULTILINE)
    if logs_on_volume:
        text = text.replace("\nspec:\n", "\nspec:\n  logs:\n    destination: CheckpointVolume\n", 1)
    cluster.apply(namespace, text)
    return str(re.search(r"^  name: (\S+)$", text, re.MULTILINE).group(1))  # type: ignore[union-attr]


def _step(cluster: Cluster, namespace: str, job: str) -> int:
    return int(cluster.job(namespace, job).get("status", {}).get("progress", {}).get("step", 0))


# Some 15 s of training here (multi-worker at 90 steps/s): a fault that follows the trainer's log lands well
# before the end, where the job's status, polled every 2 s, may come too late. The ParameterServer job (150
# steps/s, half that while a worker is replaced) takes two faults, the second after the worker's return.
FAULTED_EPOCHS = 60
PS_FAULTED_EPOCHS = 200
LONG_EPOCHS = 90  # some 22 s of training, for a run that takes two or three faults
STALLED_EPOCHS = 100  # some 25 s (ParameterServer: 15): the status, polled every 2 s, shows a step well before the end
ETA_EPOCHS = 100  # 2,200 steps, some 55 s at the trainer's cap: its halfway point some 27 s of steady steps in
ETA_STEPS_PER_SECOND = 40  # well below its speed here, unlimited (130) or held to 600m (44 to 80)


def _logged_step(cluster: Cluster, namespace: str, pod: str) -> int:
    """The last step a pod's trainer logged: read as it happens, where the job's status is polled every 2 s."""
    logs = cluster.kubectl("logs", "-n", namespace, pod, "--tail=20", check=False).stdout
    steps = [int(json.loads(line)["step"]) for line in logs.splitlines() if line.startswith('{"event": "progress"')]
    return max(steps, default=0)


def _past_first_checkpoint(cluster: Cluster, namespace: str, pod: str) -> None:
    """The examples checkpoint every 40 steps: a fault after step 50 has something to resume from."""
    wait_for(f"{pod} past step 50", lambda: _logged_step(cluster, namespace, pod) > 50, timeout=180)


def _still_running(cluster: Cluster, namespace: str, job: str, epochs: int = FAULTED_EPOCHS) -> None:
    """Right after a fault: the job had not finished, so the fault landed mid-run."""
    current = cluster.job(namespace, job)
    assert not holds(current, "Succeeded"), "the job finished before the fault"
    assert _step(cluster, namespace, job) < epochs * STEPS_PER_EPOCH


def _wait_succeeded(cluster: Cluster, namespace: str, job: str) -> dict[str, Any]:
    """`kubectl wait`, as users do it."""
    cluster.kubectl("wait", "-n", namespace, "--for=condition=Succeeded", f"dtj/{job}", "--timeout=300s")
    finished = cluster.job(namespace, job)
    assert holds(finished, "Succeeded")
    return finished


def _finished_line(cluster: Cluster, namespace: str, pod: str) -> dict[str, Any]:
    """The trainer's last report, read through the kubelet with `kubectl logs`."""
    logs = cluster.kubectl("logs", "-n", namespace, pod).stdout
    lines: list[dict[str, Any]] = [
        json.loads(line) for line in logs.splitlines() if line.startswith('{"event": "finished"')
    ]
    assert lines, logs[-2000:]
    return lines[-1]


def _running_container_id(cluster: Cluster, namespace: str, job: str, pod: str) -> str:
    """The id of the pod's running container, once it has one (a pod of a restarted job may still be going);
    if it never has one, what the pod and the job last showed."""
    last_seen: dict[str, Any] = {}

    def running() -> str | None:
        found = cluster.get("pod", pod, namespace)
        if found is None:
            last_seen["pod"] = "not found"
            return None
        statuses = found["status"].get("containerStatuses") or []
        last_seen["pod"] = {
            "uid": found["metadata"]["uid"],
            "deletionTimestamp": found["metadata"].get("deletionTimestamp"),
            "phase": found["status"].get("phase"),
            "containers": [status.get("state") for status in statuses],
        }
        if found["metadata"].get("deletionTimestamp") or len(statuses) != 1 or "running" not in statuses[0]["state"]:
            return None
        return str(statuses[0]["containerID"]).removeprefix("containerd://")

    try:
        return wait_for(f"{pod}'s running container", running, timeout=60)
    except TimeoutError as error:
        status = cluster.job(namespace, job).get("status", {})
        shown = {key: status.get(key) for key in ("phase", "restartCount", "progress", "conditions")}
        raise AssertionError(f"{error}; the pod last showed {last_seen}; the job shows {shown}") from None


def _host_folder(cluster: Cluster, namespace: str, claim: str) -> Path:
    """Where local-path keeps a claim's volume on this machine."""
    bound = cluster.get("pvc", claim, namespace)
    assert bound is not None and bound["spec"]["storageClassName"] == real_node.STORAGE_CLASS
    volume = cluster.get("pv", bound["spec"]["volumeName"], "")
    assert volume is not None
    source = volume["spec"].get("hostPath") or volume["spec"]["local"]
    return Path(source["path"])


def test_the_installed_operator_leads_with_one_replica_and_serves_metrics(installed: Cluster) -> None:
    def ready_pods() -> list[dict[str, Any]] | None:  # an earlier test may have replaced a pod
        pods = installed.items("pods", OPERATOR_NAMESPACE, OPERATOR_LABEL)
        return pods if len(pods) == 2 and all(holds(pod, "Ready") for pod in pods) else None

    pods = wait_for("both operator pods Ready, serving /metrics", ready_pods, timeout=60)
    assert {pod["spec"]["nodeName"] for pod in pods} == {real_node.NODE_NAME}
    names = {pod["metadata"]["name"] for pod in pods}

    def holder() -> str | None:
        lease = installed.get("lease", "disttrain-operator", OPERATOR_NAMESPACE)
        identity = (lease or {}).get("spec", {}).get("holderIdentity") or ""
        return identity.rsplit("_", 1)[0] if identity.rsplit("_", 1)[0] in names else None

    wait_for("one operator pod holding the Lease", holder, timeout=60)
    path = f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/services/disttrain-operator-metrics:metrics/proxy/metrics"
    scraped = installed.kubectl("get", "--raw", path).stdout
    assert re.search(r"^disttrain_leader [01]\.0$", scraped, re.MULTILINE), scraped[-2000:]


def test_readme_s_first_job_succeeds_as_written(installed: Cluster, plain_namespace: str) -> None:
    """README's first job, applied, waited for and read as README shows it."""
    installed.apply(plain_namespace, readme.block("first-job"))
    _wait_succeeded(installed, plain_namespace, "digits")
    assert _finished_line(installed, plain_namespace, "digits-worker-0")["steps"] == 5 * STEPS_PER_EPOCH
    table = installed.kubectl("get", "dtj", "-n", plain_namespace).stdout.split()
    assert table[:8] == ["NAME", "PHASE", "STRATEGY", "READY", "RESTARTS", "STEP", "ETA", "AGE"], table


def test_the_example_notebook_runs_as_written_in_the_install_s_trainer_image_under_restricted(
    installed: Cluster, real_namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notebook's `Client.train` names no image: its functions run in the trainer image the install names
    (overlays/local-images), in pods a namespace enforcing `restricted` admits, their checkpoint on a claim
    local-path binds (ReadWriteOnce, as the notebook asks)."""
    run_example_notebook(installed, real_namespace, tmp_path, monkeypatch)


def test_a_finished_job_s_tensorboard_serves_its_loss_curve_through_a_port_forward(
    installed: Cluster, real_namespace: str
) -> None:
    """The trainer image's TensorBoard, run by the operator over the summaries the trainer wrote to the
    checkpoint volume, in a namespace enforcing `restricted`; read through the API server's Service proxy
    and through `disttrain jobs tensorboard`."""
    text = MWMS.read_text().replace("  checkpoint:\n", "  tensorboard: {}\n  checkpoint:\n", 1)
    installed.apply(real_namespace, re.sub(r'"--epochs", "\d+"', '"--epochs", "3"', text))
    job = "digits-mwms"
    _wait_succeeded(installed, real_namespace, job)
    wait_for("TensorBoardReady", lambda: holds(installed.job(real_namespace, job), "TensorBoardReady"), timeout=180)
    proxy = f"/api/v1/namespaces/{real_namespace}/services/{job}-tensorboard:http/proxy/data/plugin/scalars/tags"

    def loss_curve() -> dict[str, Any] | None:  # TensorBoard reloads its logdir every few seconds
        tags: dict[str, Any] = json.loads(installed.kubectl("get", "--raw", proxy).stdout)
        return tags if "loss" in tags.get(job, {}) else None

    wait_for("the job's run and its loss scalar in TensorBoard", loss_curve, timeout=120)
    command = [sys.executable, "-m", "disttrain_cli.main", "jobs", "tensorboard", job, "-n", real_namespace]
    forward = subprocess.Popen(command, env=installed.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert forward.stdout is not None
        url = forward.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), forward.stderr.read() if forward.stderr else url
        with urllib.request.urlopen(f"{url}data/runs", timeout=60) as answer:
            assert job in json.loads(answer.read())
    finally:
        forward.terminate()
        forward.wait(timeout=30)


def test_the_dashboard_component_installs_and_answers_through_a_port_forward(
    installed: Cluster, plain_namespace: str, tmp_path: Path
) -> None:
    """deploy/components/dashboard added to the install (the operator's image, its own ServiceAccount that
    may only review tokens), opened as docs/admins.md says: `kubectl port-forward` to its Service, and a
    viewer's token bound to `disttrain-viewer` in the job's namespace; without a token it answers 401."""
    never_pull = "- op: add\n  path: /spec/template/spec/containers/0/imagePullPolicy\n  value: Never"
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": OPERATOR_NAMESPACE,
        "resources": [os.path.relpath(ROOT / "overlays" / "local-images", tmp_path)],  # kustomize takes no absolute
        "components": [os.path.relpath(ROOT / "deploy" / "components" / "dashboard", tmp_path)],
        "patches": [{"target": {"kind": "Deployment", "name": "disttrain-dashboard"}, "patch": never_pull}],
    }
    (tmp_path / "kustomization.yaml").write_text(json.dumps(kustomization))
    installed.kubectl("apply", "--server-side", "-k", str(tmp_path))
    installed.kubectl("rollout", "status", "-n", OPERATOR_NAMESPACE, "deploy/disttrain-dashboard", "--timeout=180s")
    installed.apply(plain_namespace, MWMS.read_text().replace("spec:\n", "spec:\n  runPolicy: {suspend: true}\n", 1))
    kubectl = str(versions.cache_paths().binary("kubectl"))
    command = [kubectl, "port-forward", "-n", OPERATOR_NAMESPACE, "svc/disttrain-dashboard", ":80"]
    forward = subprocess.Popen(command, env=installed.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert forward.stdout is not None
        said = forward.stdout.readline()  # Forwarding from 127.0.0.1:PORT -> 8080
        port = re.search(r"127\.0\.0\.1:(\d+)", said)
        assert port, said + (forward.stderr.read() if forward.stderr else "")
        url = f"http://127.0.0.1:{port.group(1)}/?namespace={plain_namespace}"
        installed.kubectl("create", "serviceaccount", "viewer", "-n", plain_namespace)
        installed.kubectl(
            "create", "rolebinding", "viewer-views", "-n", plain_namespace, "--clusterrole=disttrain-viewer",
            f"--serviceaccount={plain_namespace}:viewer",
        )  # fmt: skip
        token = installed.kubectl("create", "token", "viewer", "-n", plain_namespace).stdout.strip()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=30)
        assert refused.value.code == 401

        def listed() -> str | None:
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=30) as answer:
                page = answer.read().decode()
            return page if "digits-mwms" in page and "Suspended" in page else None

        wait_for("the suspended job on the dashboard's list", listed, timeout=90)
    finally:
        forward.terminate()
        forward.wait(timeout=30)


def test_a_worker_killed_through_containerd_resumes_to_the_exact_step(installed: Cluster, real_namespace: str) -> None:
    """The job restarts in place (its pods, their UIDs, kept: `disttrain_core.restarts.in_place`). And the Python
    client, following worker-1 from before its pod runs, reads every attempt's log, and once every pod is deleted, each
    attempt's kept log: the killed one's to its last line."""
    job = _submit(installed, real_namespace, MWMS, epochs=FAULTED_EPOCHS)
    client = Client(kubeconfig=installed.kubeconfig, namespace=real_namespace)
    followed: list[str] = []
    follower = threading.Thread(target=lambda: followed.extend(client.logs(job, "worker-1", follow=True)))
    follower.start()
    _past_first_checkpoint(installed, real_namespace, f"{job}-worker-0")
    container = _running_container_id(installed, real_namespace, job, f"{job}-worker-1")
    pods = {name: pod["metadata"]["uid"] for name, pod in installed.job_pods(real_namespace, job).items()}
    files = real_node.NodeFiles(devcluster.state_dir())
    containerd.ctr(files, versions.node_cache_paths(), "tasks", "kill", "--signal", "SIGKILL", container)
    _still_running(installed, real_namespace, job)
    finished = _wait_succeeded(installed, real_namespace, job)
    assert finished["status"]["restartCount"] >= 1
    assert {name: pod["metadata"]["uid"] for name, pod in installed.job_pods(real_namespace, job).items()} == pods
    assert _finished_line(installed, real_namespace, f"{job}-worker-0")["steps"] == FAULTED_EPOCHS * STEPS_PER_EPOCH
    follower.join(timeout=120)
    assert not follower.is_alive(), "the follow did not end with the job"
    events = [json.loads(line)["event"] for line in followed if line.startswith('{"event": ')]
    assert events.count("started") == finished["status"]["restartCount"] + 1, followed[-20:]
    assert "restored" in events and events[-1] == "finished", followed[-20:]

    installed.kubectl("delete", "pods", "-n", real_namespace, "-l", f"disttrain.io/job-name={job}", "--wait=true")
    attempts = client.attempts(job, "worker-1")  # every pod is gone: what is left is what was kept
    assert (attempts[0].kept, attempts[0].exit_code) == (True, 137), attempts
    assert len(attempts) == finished["status"]["restartCount"] + 1 and all(attempt.kept for attempt in attempts)
    first = [json.loads(line)["event"] for line in client.logs(job, "worker-1", attempt=1) if line.startswith("{")]
    assert first[0] == "started" and "finished" not in first, first[-5:]  # killed mid-run, its log to the end
    last = [json.loads(line)["event"] for line in client.logs(job, "worker-1") if line.startswith("{")]
    assert "restored" in last and last[-1] == "finished", last[-5:]


def _freeze(cluster: Cluster, namespace: str, job: str, pod: str) -> None:
    """SIGSTOP to every process of the pod's running container, through containerd, as a hung node does it."""
    container = _running_container_id(cluster, namespace, job, pod)
    files = real_node.NodeFiles(devcluster.state_dir())
    containerd.ctr(files, versions.node_cache_paths(), "tasks", "kill", "--all", "--signal", "SIGSTOP", container)


def _frozen_mid_run(cluster: Cluster, namespace: str, example: Path, frozen: list[str] | None) -> str:
    """The example under a 30 s deadline, its `frozen` pods (all of them for None) frozen once the status shows a
    step past the first checkpoint (the installed operator polls every 2 s): until then the run's first step is
    owed within the startup allowance (300 s), not the deadline. Returns the job's name."""
    policy = {"progressDeadlineSeconds": 30, "terminationGracePeriodSeconds": 5}
    job = _submit(cluster, namespace, example, epochs=STALLED_EPOCHS, run_policy=policy)
    wait_for("a step past the first checkpoint in the status", lambda: _step(cluster, namespace, job) > 50, 60)
    for pod in cluster.job_pods(namespace, job) if frozen is None else [f"{job}-{name}" for name in frozen]:
        _freeze(cluster, namespace, job, pod)
    _still_running(cluster, namespace, job, STALLED_EPOCHS)
    return job


def test_a_job_frozen_through_containerd_is_named_stalled_and_restarts_from_its_checkpoint(
    installed: Cluster, real_namespace: str
) -> None:
    """Every process of the trainer image's MultiWorkerMirrored job frozen, its reporting worker too, with
    progressDeadlineSeconds 30: Stalled within the deadline and one poll (2 s) of its last step, restarted,
    resumed from a checkpoint, and finished with every step. (The process node freezes a ParameterServer job
    whole; here one of its workers is frozen, below.)"""
    job, coordinator = _frozen_mid_run(installed, real_namespace, MWMS, None), "worker-0"

    def stalled() -> dict[str, Any] | None:
        found = installed.job(real_namespace, job)
        return found if holds(found, "Stalled") else None

    seen = wait_for("Stalled", stalled, timeout=120)
    named = next(c for c in seen["status"]["conditions"] if c["type"] == "Stalled")
    advanced = datetime.fromisoformat(seen["status"]["progress"]["lastAdvanceTime"])
    since = (datetime.fromisoformat(named["lastTransitionTime"]) - advanced).total_seconds()
    assert since <= 30 + POLL_SECONDS + 2  # the deadline, one poll, a reconcile's write
    finished = _wait_succeeded(installed, real_namespace, job)
    assert finished["status"]["restartCount"] == 1
    restarting = next(c for c in finished["status"]["conditions"] if c["type"] == "Restarting")
    assert "the job stalled" in restarting["message"] and "from the last checkpoint reported" in restarting["message"]
    logs = installed.kubectl("logs", "-n", real_namespace, f"{job}-{coordinator}").stdout
    assert '"event": "restored"' in logs
    assert (
        _finished_line(installed, real_namespace, f"{job}-{coordinator}")["steps"] == STALLED_EPOCHS * STEPS_PER_EPOCH
    )


@pytest.mark.parametrize(
    ("example", "restarted_for"),
    [(MWMS, "-worker-0 failed with exit code 130 (Error): a peer was lost"), (PS, "the job stalled: step")],
    ids=["multi-worker-mirrored", "parameter-server"],
)
def test_one_process_frozen_through_containerd_restarts_the_job_as_tensorflow_lets_it_and_it_finishes(
    installed: Cluster, real_namespace: str, example: Path, restarted_for: str
) -> None:
    """The process node's scenario in containers: worker-1 alone frozen, the reporting task still answering its
    polls, under a 30 s deadline. MultiWorkerMirrored's worker 0 loses its frozen peer and exits PEER_LOST;
    ParameterServer's coordinator waits for the steps it scheduled on the frozen worker, so no step comes and the
    job restarts as Stalled. Either way one restart, counted, and every step done."""
    job = _frozen_mid_run(installed, real_namespace, example, ["worker-1"])

    said = restart_events(installed, real_namespace)
    assert any(restarted_for in message for message in said), said
    done = _wait_succeeded(installed, real_namespace, job)
    assert done["status"]["restartCount"] == 1 and done["status"]["progressAnswerTime"], done["status"]
    coordinator = f"{job}-chief-0" if example == PS else f"{job}-worker-0"
    assert _finished_line(installed, real_namespace, coordinator)["steps"] == STALLED_EPOCHS * STEPS_PER_EPOCH


def test_a_nan_in_the_trainer_image_fails_the_job_as_diverged_at_its_step(
    installed: Cluster, real_namespace: str
) -> None:
    """The trainer image's loss NaN from step 60 (--nan-at-step): the job fails at once as Diverged, not
    retried, naming step 60 and the last finite checkpoint (step 40), from the container's termination
    message as the kubelet wrote it."""
    job = _submit(installed, real_namespace, MWMS, FAULTED_EPOCHS, "--nan-at-step", "60")

    def failed() -> dict[str, Any] | None:
        found = installed.job(real_namespace, job)
        return found if holds(found, "Failed") else None

    verdict = next(c for c in wait_for("Failed", failed, timeout=240)["status"]["conditions"] if c["type"] == "Failed")
    assert verdict["reason"] == "Diverged", verdict
    assert "at step 60" in verdict["message"] and "ckpt/ckpt-40" in verdict["message"], verdict
    # the failure may come from worker 1's exit: the checkpoint comes with worker 0's final report, read once it ends
    saved = job_where(installed, real_namespace, job, "a checkpoint", lambda found: "checkpoint" in found["status"])
    assert (saved["status"].get("restartCount", 0), saved["status"]["checkpoint"]["step"]) == (0, 40), saved["status"]


def test_a_checkpoint_claim_local_path_cannot_bind_shows_in_the_status_with_its_words(
    installed: Cluster, real_namespace: str
) -> None:
    """The checkpoint's default access mode, ReadWriteMany (workers on several nodes share it), which
    local-path, the real node's StorageClass, does not provision: the provisioner's refusal is the job's
    VolumeUnbound condition, as `kubectl wait` sees it, and its pods wait."""
    text = MWMS.read_text().replace("    accessModes: [ReadWriteOnce]", "")
    text = re.sub(r"^  name: (\S+)$", "  name: shared", text, count=1, flags=re.MULTILINE)
    installed.apply(real_namespace, text)
    installed.kubectl("wait", "-n", real_namespace, "--for=condition=VolumeUnbound", "dtj/shared", "--timeout=120s")
    said = next(
        c for c in installed.job(real_namespace, "shared")["status"]["conditions"] if c["type"] == "VolumeUnbound"
    )
    assert said["reason"] == "ClaimUnbound" and said["message"].startswith(
        "the PersistentVolumeClaim shared-checkpoint is not bound: ProvisioningFailed: "
    ), said
    assert "ReadWriteOnce" in said["message"], said  # local-path's words: the modes it provisions
    assert all(pod["status"]["phase"] == "Pending" for pod in installed.job_pods(real_namespace, "shared").values())
    installed.kubectl("delete", "dtj", "shared", "-n", real_namespace)


# A program of the user's own in a container (the trainer image's shell, not its trainer): it serves no progress
# port, and its first attempt exits 5 (a marker on the checkpoint volume, which outlives the pod, says which).
OWN_PROGRAM = (
    'if [ -e "$DISTTRAIN_CHECKPOINT_DIR/first-attempt" ]; then sleep 25; exit 0; fi; '
    'touch "$DISTTRAIN_CHECKPOINT_DIR/first-attempt"; sleep 2; exit 5'
)


@contextmanager
def _operator_setting(cluster: Cluster, name: str, value: str) -> Iterator[None]:
    """An admin's setting of the installed operator, `kubectl set env` on its Deployment, taken off after: each
    time the rollout ends once the replaced pod is gone, so one operator acts at a time."""
    deployment = ["-n", OPERATOR_NAMESPACE, "deploy/disttrain-operator"]
    cluster.kubectl("set", "env", *deployment, f"{name}={value}")
    cluster.kubectl("rollout", "status", *deployment, "--timeout=180s")
    try:
        yield
    finally:
        cluster.kubectl("set", "env", *deployment, f"{name}-")
        cluster.kubectl("rollout", "status", *deployment, "--timeout=180s")


def test_a_users_own_program_in_a_container_is_retried_on_5_and_runs_unjudged_by_the_operator_s_deadline(
    installed: Cluster, real_namespace: str
) -> None:
    """The process node's scenario in containers, under `DISTTRAIN_PROGRESS_DEADLINE_SECONDS` as an admin sets it
    and a job that names only its first step's allowance (10 s): exit code 5 without the trainer's word restarts
    the job under OnFailure, and the second attempt, which reports no step for longer than that allowance, runs to
    its end while the job says why the operator's deadline does not judge it. Its success restarts nothing: the
    kubelet shows the run ended a moment before the pod's phase does, and a run its rule does not restart is no
    run in place."""
    manifest = yaml.safe_load(MWMS.read_text())
    manifest["metadata"]["name"] = "own"
    manifest["spec"]["runPolicy"] = {"startupDeadlineSeconds": 10, "backoffLimit": 2}
    worker = manifest["spec"]["replicaSpecs"]["Worker"]
    worker.update(replicas=1, restartPolicy="OnFailure")
    (container,) = worker["template"]["spec"]["containers"]
    container.update(command=["sh", "-c", OWN_PROGRAM], args=[])
    with _operator_setting(installed, "DISTTRAIN_PROGRESS_DEADLINE_SECONDS", "600"):
        installed.apply(real_namespace, json.dumps(manifest))
        installed.wait_for_event(real_namespace, "ProgressNotReported", timeout=120)
        said = condition(installed.job(real_namespace, "own"), "Stalled")
        assert said is not None and said["status"] == "False" and said["reason"] == "ProgressNotReported", said
        assert "progressDeadlineSeconds (600 s, the operator's default) does not apply" in said["message"], said
        done = _wait_succeeded(installed, real_namespace, "own")
    assert done["status"]["restartCount"] == 1 and not holds(done, "Stalled"), done["status"]
    events = installed.items("events", real_namespace)
    assert any("own-worker-0 failed with exit code 5" in e["message"] for e in events if e["reason"] == "Restarting")


def test_at_mid_run_the_trainer_image_s_time_left_is_within_a_fifth_of_the_time_it_took(
    installed: Cluster, real_namespace: str
) -> None:
    """status.progress.estimatedRemainingSeconds read once half the steps are done (the installed operator
    polls every 2 s), against the time the trainer then took to its last step, both on the trainer's clock.
    The stand-in in the trainer image keeps to 40 steps a second, as a GPU job's steps keep their time (what is
    tested is the operator's estimate: on this shared two-core machine TensorFlow's own speed drifted by up to a
    third within a minute, 10 runs held to 600m each: from 62 to 44 steps/s in one, 52 to 76 in another)."""
    pace = ("--max-steps-per-second", str(ETA_STEPS_PER_SECOND))
    job = _submit(installed, real_namespace, MWMS, ETA_EPOCHS, *pace, trainer=PACED_STAND_IN)
    total = ETA_EPOCHS * STEPS_PER_EPOCH

    def halfway() -> dict[str, Any] | None:
        progress = installed.job(real_namespace, job).get("status", {}).get("progress", {})
        return progress if progress.get("fractionDone", 0) >= 0.5 and "estimatedRemainingSeconds" in progress else None

    mid = wait_for("half the steps done, with a time left", halfway, timeout=240, interval=0.5)
    _wait_succeeded(installed, real_namespace, job)
    reports = events(installed.kubectl("logs", "-n", real_namespace, f"{job}-worker-0").stdout, "progress")
    last_step = next(report for report in reports if report["step"] == total)
    took = (datetime.fromisoformat(last_step["updateTime"]) - datetime.fromisoformat(mid["updateTime"])).total_seconds()
    assert abs(mid["estimatedRemainingSeconds"] - took) <= 0.2 * took, (mid, last_step, took)


def test_parameter_server_absorbs_an_evicted_worker_and_resumes_an_evicted_ps_at_its_step(
    installed: Cluster, real_namespace: str
) -> None:
    """The ParameterServer example (the MultiWorkerMirrored one is trained by README's first command, by
    scripts/e2e.sh and under the faults below), with no periodic checkpoint since the start and no restart
    allowed: the chief carries on past the worker, saves as the PS leaves, the job resumes there and exports
    its model to the volume's folder. Its logs, kept on the checkpoint volume by the trainer image, are read
    back through a pod of that image."""
    job = _submit(
        installed, real_namespace, PS, PS_FAULTED_EPOCHS, logs_on_volume=True, checkpoint_every=5000, backoff_limit=0
    )
    chief = f"{job}-chief-0"
    _past_first_checkpoint(installed, real_namespace, chief)
    chief_uid = _uid(installed, real_namespace, chief)
    installed.evict(real_namespace, f"{job}-worker-0")
    wait_for("worker 0 replaced", lambda: installed.job(real_namespace, job)["status"].get("disruptions") == 1)
    past = _logged_step(installed, real_namespace, chief) + 100
    wait_for(f"the chief past step {past}", lambda: _logged_step(installed, real_namespace, chief) > past, timeout=120)
    assert _uid(installed, real_namespace, chief) == chief_uid  # the coordinator carried on

    shown = _logged_step(installed, real_namespace, chief)
    installed.evict(real_namespace, f"{job}-ps-0")
    _still_running(installed, real_namespace, job, PS_FAULTED_EPOCHS)
    finished = _wait_succeeded(installed, real_namespace, job)
    assert (finished["status"].get("restartCount", 0), finished["status"]["disruptions"]) == (0, 2)
    restored = _restored(installed, real_namespace, chief)
    assert restored is not None and restored >= shown  # saved as the PS left, not a periodic checkpoint
    assert _finished_line(installed, real_namespace, chief)["steps"] == PS_FAULTED_EPOCHS * STEPS_PER_EPOCH
    volume = _host_folder(installed, real_namespace, f"{job}-checkpoint")
    assert (volume / "export" / "saved_model.pb").is_file(), sorted(p.name for p in volume.iterdir())
    assert any(path.name.startswith("ckpt") for path in volume.rglob("*")), sorted(p.name for p in volume.iterdir())
    installed.kubectl("delete", "pods", "-n", real_namespace, "-l", f"disttrain.io/job-name={job}", "--wait=true")
    client = Client(kubeconfig=installed.kubeconfig, namespace=real_namespace)
    attempts = client.attempts(job, "ps-0")  # every pod is gone: all there is, is on the volume
    assert len(attempts) >= 2 and all(attempt.kept for attempt in attempts), attempts
    evicted = [json.loads(line) for line in client.logs(job, "ps-0", attempt=1) if line.startswith("{")]
    assert evicted[-1]["event"] == "serving", evicted  # what it said before it was evicted
    assert not installed.items("configmaps", real_namespace, f"disttrain.io/job-name={job}")
    assert not installed.items("pods", real_namespace, f"disttrain.io/log-reader-of={job}")


def test_the_leading_operator_pod_deleted_and_the_kubelet_restarted_mid_job(
    installed: Cluster, real_namespace: str
) -> None:
    """One after the other under one running job (the stand-in in the trainer image): the standby operator takes
    over, and the containers outlive their kubelet; nothing restarts."""
    job = _submit(installed, real_namespace, MWMS, epochs=LONG_EPOCHS, trainer=PACED_STAND_IN)
    worker = f"{job}-worker-0"
    _past_first_checkpoint(installed, real_namespace, worker)
    lease = installed.get("lease", "disttrain-operator", OPERATOR_NAMESPACE)
    assert lease is not None
    leader = lease["spec"]["holderIdentity"].rsplit("_", 1)[0]
    installed.kubectl("delete", "pod", "-n", OPERATOR_NAMESPACE, leader, "--wait=false")
    past = _logged_step(installed, real_namespace, worker) + 300
    wait_for(f"past step {past}", lambda: _logged_step(installed, real_namespace, worker) > past, timeout=120)
    _still_running(installed, real_namespace, job, LONG_EPOCHS)  # checked first: the kubelet's stop waits for it
    devcluster.restart_component("kubelet", pause=2)
    finished = _wait_succeeded(installed, real_namespace, job)
    assert finished["status"]["restartCount"] == 0  # the training pods never noticed
    assert _finished_line(installed, real_namespace, worker)["steps"] == LONG_EPOCHS * STEPS_PER_EPOCH
    installed.kubectl("rollout", "status", "-n", OPERATOR_NAMESPACE, "deploy/disttrain-operator", "--timeout=120s")


def test_workers_cut_off_from_each_other_say_so_on_the_job_then_finish(installed: Cluster, real_namespace: str) -> None:
    """The port TF_CONFIG names, dropped between the node's pods: worker 0's log names the peer it waits
    for, and after its bounded wait the job's status and an Event name the unreachable replica."""
    cut = ["FORWARD", "-i", "dtbr0", "-o", "dtbr0", "-p", "tcp", "--dport", "2222", "-j", "DROP"]
    with bridged_traffic_through_iptables():
        subprocess.run(["iptables", "-I", *cut], check=True)
        try:
            job = _submit(installed, real_namespace, MWMS, 8, "--peer-wait-seconds", "15")
            peer = f"{job}-worker-1.{job}.{real_namespace}.svc:2222"

            def waiting_logged() -> bool:
                logs = installed.kubectl("logs", "-n", real_namespace, f"{job}-worker-0", check=False).stdout
                return any(
                    event.get("event") == "waiting for peers" and event.get("peers") == [peer]
                    for event in (json.loads(line) for line in logs.splitlines() if line.startswith("{"))
                )

            wait_for("worker 0's log naming the peer it waits for", waiting_logged, timeout=90)

            says_a_worker_is_unreachable(installed, real_namespace, job, 15, timeout=120)
        finally:
            subprocess.run(["iptables", "-D", *cut], check=True)
    _wait_succeeded(installed, real_namespace, job)
    assert _finished_line(installed, real_namespace, f"{job}-worker-0")["steps"] == 8 * STEPS_PER_EPOCH


# A pod's tries at each port, side by side: a TCP connection within 10 s of tries, or none. A NetworkPolicy
# controller admits a new pod's address a moment after the pod starts (kube-router once it has synced).
CONNECT = """
import json, socket, sys, threading, time
reached = {}
def attempt(port):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection((sys.argv[1], int(port)), timeout=2).close()
            reached[port] = True
            return
        except OSError:
            time.sleep(0.5)
    reached[port] = False
tries = [threading.Thread(target=attempt, args=(port,)) for port in sys.argv[2:]]
for each in tries:
    each.start()
for each in tries:
    each.join()
print(json.dumps(reached))
"""


def _reached(cluster: Cluster, namespace: str, pod: dict[str, Any], address: str, ports: list[int]) -> Any:
    """Which of `ports` at `address` a pod of the trainer image connects to, the pod's metadata as given."""
    restricted = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    name = pod["name"]
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod,
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "connect",
                    "image": f"{images.TRAINER.name}:{VERSION}",
                    "command": ["python", "-c", CONNECT, address, *map(str, ports)],
                    "securityContext": restricted,
                }
            ],
        },
    }
    cluster.apply(namespace, json.dumps(manifest))

    def ended() -> str | None:
        phase = ((cluster.get("pod", name, namespace) or {}).get("status") or {}).get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    assert wait_for(f"{name} to end", ended, timeout=90) == "Succeeded"
    return json.loads(cluster.kubectl("logs", "-n", namespace, name).stdout)


def test_a_job_s_network_policy_admits_its_own_pods_and_the_operator_and_no_other_pod(
    installed: Cluster, real_namespace: str, plain_namespace: str
) -> None:
    """With a NetworkPolicy controller enforcing (kube-router's firewall): the job's workers connect to each
    other and train to the last step, and the installed operator's polls move its status's step, while a pod
    of another namespace reaches neither the TensorFlow port nor the progress port of a worker that a pod
    bearing the job's label reaches, at the same time."""
    missing = network_policy_controller.missing_requirement()
    if missing is not None:
        pytest.skip(missing)
    epochs = 200  # some 50 s of training: both pods' tries and an operator's poll land mid-run
    ports = [2222, DEFAULT_PROGRESS_PORT]
    with bridged_traffic_through_iptables(), network_policy_controller.enforcing():
        job = _submit(installed, real_namespace, MWMS, epochs)
        worker = f"{job}-worker-0"
        wait_for(f"{worker} training", lambda: _logged_step(installed, real_namespace, worker) > 0, timeout=180)
        address = str(installed.get("pod", worker, real_namespace)["status"]["podIP"])  # type: ignore[index]
        fellow = {"name": "fellow", "labels": naming.job_labels(job)}
        insider = _reached(installed, real_namespace, fellow, address, ports)
        outsider = _reached(installed, plain_namespace, {"name": "outsider"}, address, ports)
        _still_running(installed, real_namespace, job, epochs)
        wait_for("the operator's poll to move the job's step", lambda: _step(installed, real_namespace, job) > 0, 60)
        _still_running(installed, real_namespace, job, epochs)
        _wait_succeeded(installed, real_namespace, job)
    assert insider == {str(port): True for port in ports}
    assert outsider == {str(port): False for port in ports}
    assert _finished_line(installed, real_namespace, worker)["steps"] == epochs * STEPS_PER_EPOCH


def _uid(cluster: Cluster, namespace: str, pod: str) -> str:
    found = cluster.get("pod", pod, namespace)
    assert found is not None, f"{pod} not found"
    return str(found["metadata"]["uid"])


def _restored(cluster: Cluster, namespace: str, pod: str) -> int | None:
    """The step the pod's running trainer restored, once it said so."""
    logs = cluster.kubectl("logs", "-n", namespace, pod, check=False).stdout
    steps = [int(json.loads(line)["step"]) for line in logs.splitlines() if line.startswith('{"event": "restored"')]
    return steps[-1] if steps else None


def _run_of(cluster: Cluster, namespace: str, pod: str) -> tuple[str, int]:
    found = cluster.get("pod", pod, namespace)
    assert found is not None, f"{pod} not found"
    return trainer_run(found)


def _resumed(cluster: Cluster, namespace: str, pod: str, before: tuple[str, int]) -> int:
    """The step that `pod`'s next attempt (another pod, or the same restarted in place: a run after `before`)
    restored; and then, once it trained 100 steps past it, the step it logged last."""

    def restored() -> int | None:
        found = cluster.get("pod", pod, namespace)
        if found is None or trainer_run(found) == before or "running" not in trainer_state(found):
            return None
        return _restored(cluster, namespace, pod)

    step = wait_for(f"{pod}'s next attempt restored", restored, timeout=240)
    wait_for(f"{pod} past step {step + 100}", lambda: _logged_step(cluster, namespace, pod) > step + 100, timeout=120)
    return step


def test_the_trainer_image_evicted_drained_and_suspended_costs_no_step(installed: Cluster, real_namespace: str) -> None:
    """One MultiWorkerMirrored worker evicted, then the node drained with the operator running (its next pods wait
    out the cordon), then the job suspended and resumed: with no periodic checkpoint since the start and no
    restart allowed, the workers save together each time and the job resumes at that step."""
    job = _submit(
        installed, real_namespace, MWMS, LONG_EPOCHS, suffix="-evicted", checkpoint_every=5000, backoff_limit=0
    )
    worker = f"{job}-worker-0"
    wait_for("past step 100", lambda: _logged_step(installed, real_namespace, worker) > 100, timeout=180)

    shown, run = _logged_step(installed, real_namespace, worker), _run_of(installed, real_namespace, worker)
    installed.evict(real_namespace, f"{job}-worker-1")
    assert _resumed(installed, real_namespace, worker, run) >= shown
    evicted = installed.job(real_namespace, job)["status"]
    assert (evicted["disruptions"], evicted["lastDisruption"]["reason"]) == (1, "EvictionByEvictionAPI")

    shown, run = _logged_step(installed, real_namespace, worker), _run_of(installed, real_namespace, worker)
    drain_and_uncordon(installed, real_node.NODE_NAME, real_namespace, job, count=2, timeout=DELETION_BOUND)
    assert _resumed(installed, real_namespace, worker, run) >= shown

    shown, run = _logged_step(installed, real_namespace, worker), _run_of(installed, real_namespace, worker)
    suspend(installed, real_namespace, job, True)
    wait_for("no pods", lambda: not installed.job_pods(real_namespace, job), timeout=DELETION_BOUND)
    suspend(installed, real_namespace, job, False)
    assert _resumed(installed, real_namespace, worker, run) >= shown

    finished = _wait_succeeded(installed, real_namespace, job)
    assert (finished["status"].get("restartCount", 0), finished["status"]["disruptions"]) == (0, 2)
    assert _finished_line(installed, real_namespace, worker)["steps"] == LONG_EPOCHS * STEPS_PER_EPOCH


def test_kueue_preempting_the_trainer_image_costs_it_no_step(
    installed: Cluster, kueue_process: None, real_namespace: str
) -> None:
    """Kueue, built from its source, suspends a low-priority job mid-run for a higher one and admits it again once
    that one finished: the low one's workers save on the way out and, with no restart allowed, it resumes at
    that step."""
    quota: dict[str, int | str] = {"cpu": 1, "memory": "2Gi"}  # the example's two workers, one job at a time
    with local_queue(installed, real_namespace, quota) as urgent:
        queued = {QUEUE_LABEL: LOCAL_QUEUE}
        low = _submit(installed, real_namespace, MWMS, LONG_EPOCHS, checkpoint_every=5000, backoff_limit=0,
                      suffix="-low", labels=queued)  # fmt: skip
        worker = f"{low}-worker-0"
        wait_for("past step 100", lambda: _logged_step(installed, real_namespace, worker) > 100, timeout=180)
        shown, run = _logged_step(installed, real_namespace, worker), _run_of(installed, real_namespace, worker)
        high = _submit(installed, real_namespace, MWMS, 2, suffix="-high",
                       labels={**queued, PRIORITY_LABEL: urgent})  # fmt: skip
        evicted_by_kueue(installed, real_namespace, low)
        _wait_succeeded(installed, real_namespace, high)
        try:
            resumed = _resumed(installed, real_namespace, worker, run)
        except TimeoutError as error:  # the in-cluster operator's log goes with its namespace: keep what it said
            logs = installed.kubectl("logs", "-n", OPERATOR_NAMESPACE, "-l", OPERATOR_LABEL, "--tail=60", check=False)
            seen = what_kueue_and_the_jobs_show(installed, real_namespace, [low, high], logs.stdout)
            raise AssertionError(f"{error}\n{seen}") from None
        assert resumed >= shown
        finished = _wait_succeeded(installed, real_namespace, low)
    assert finished["status"].get("restartCount", 0) == 0
    assert _finished_line(installed, real_namespace, worker)["steps"] == LONG_EPOCHS * STEPS_PER_EPOCH


# How long a deletion may take past the pods' grace period with no operator at all (docs/architecture.md).
DELETION_BOUND = 30 + 30


def _scale_operator(cluster: Cluster, replicas: int) -> None:
    cluster.kubectl("scale", "-n", OPERATOR_NAMESPACE, "deploy/disttrain-operator", f"--replicas={replicas}")
    if replicas:
        cluster.kubectl("rollout", "status", "-n", OPERATOR_NAMESPACE, "deploy/disttrain-operator", "--timeout=180s")
    else:
        wait_for("the operator stopped", lambda: not cluster.items("pods", OPERATOR_NAMESPACE, OPERATOR_LABEL))


def test_with_the_operator_stopped_an_eviction_and_a_drain_complete(installed: Cluster, real_namespace: str) -> None:
    """Then, back, the operator makes the pods again, the job (the stand-in in the trainer image) resumes to the
    exact step, and its status names the attempts whose log no one was there to keep."""
    job = _submit(installed, real_namespace, MWMS, epochs=FAULTED_EPOCHS, every_worker=True, trainer=PACED_STAND_IN)
    _past_first_checkpoint(installed, real_namespace, f"{job}-worker-0")
    replicas = installed.get("deploy", "disttrain-operator", OPERATOR_NAMESPACE)["spec"]["replicas"]  # type: ignore[index]
    _scale_operator(installed, 0)
    try:
        installed.evict(real_namespace, f"{job}-worker-1")
        wait_for("the evicted pod gone", lambda: installed.get("pod", f"{job}-worker-1", real_namespace) is None,
                 timeout=DELETION_BOUND)  # fmt: skip
        _still_running(installed, real_namespace, job)
        drain(installed, real_node.NODE_NAME, job, DELETION_BOUND)
        assert not installed.items("pods", real_namespace, f"disttrain.io/job-name={job}")
    finally:
        installed.kubectl("uncordon", real_node.NODE_NAME)
        _scale_operator(installed, replicas)
    finished = _wait_succeeded(installed, real_namespace, job)
    assert _finished_line(installed, real_namespace, f"{job}-worker-0")["steps"] == FAULTED_EPOCHS * STEPS_PER_EPOCH
    assert finished["status"]["replicaStatuses"]["Worker"]["attempts"] == [2, 2]

    def unkept() -> list[tuple[str, int, int]] | None:
        entries = installed.job(real_namespace, job)["status"].get("unkeptLogs", [])
        found = sorted((entry["replica"], entry["firstAttempt"], entry["lastAttempt"]) for entry in entries)
        return found if len(found) == 2 else None

    assert wait_for("the unkept attempts named", unkept) == [("worker-0", 1, 1), ("worker-1", 1, 1)]
    client = Client(kubeconfig=installed.kubeconfig, namespace=real_namespace)
    for replica in ("worker-0", "worker-1"):  # the attempts the operator was there for are kept, as ever
        assert [(a.number, a.kept, a.exit_code) for a in client.attempts(job, replica)] == [(2, True, 0)]


def test_the_uninstall_leaves_the_users_jobs_and_kept_logs_and_holds_nothing(
    installed: Cluster, real_namespace: str
) -> None:
    """As docs/admins.md has it: the operator and its rights go, the CRD, the jobs and their kept logs stay, and
    the namespace of a job still running is then deleted within the bound."""
    done = _submit(installed, real_namespace, MWMS, epochs=2)
    _wait_succeeded(installed, real_namespace, done)
    kept = f"disttrain.io/job-name={done}"
    wait_for("its logs kept", lambda: len(installed.items("configmaps", real_namespace, kept)) == 2)
    running = _submit(installed, real_namespace, MWMS, epochs=FAULTED_EPOCHS, suffix="-running")
    _past_first_checkpoint(installed, real_namespace, f"{running}-worker-0")
    uninstall = ["delete", "-k", str(ROOT / "overlays" / "local-images"), "-l", f"{KEPT_ON_UNINSTALL}!=true"]
    UNINSTALLED_AT.append(datetime.now(UTC).strftime(AUDIT_TIME))
    installed.kubectl(*uninstall, "--wait=true", "--timeout=120s")
    try:
        assert installed.get("namespace", OPERATOR_NAMESPACE, "") is None
        assert installed.get("crd", "disttrainjobs.disttrain.io", "") is not None
        assert holds(installed.job(real_namespace, done), "Succeeded")
        assert len(installed.items("configmaps", real_namespace, kept)) == 2
        installed.kubectl("delete", "namespace", real_namespace, "--wait=false")
        wait_for("the namespace gone", lambda: installed.get("namespace", real_namespace, "") is None,
                 timeout=DELETION_BOUND)  # fmt: skip
    finally:  # installed again, as the module's later tests and its fixture expect
        installed.kubectl("apply", "--server-side", "-k", str(ROOT / "overlays" / "local-images"))
        installed.kubectl("rollout", "status", "-n", OPERATOR_NAMESPACE, "deploy/disttrain-operator", "--timeout=180s")
