"""The process node's pure half: what a pod becomes on this machine, and what is reported of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from disttrain.local.containers import UnsupportedContainerError
from disttrain_dev.process_pods import (
    ContainerState,
    Mount,
    PodFolders,
    RestartBackoff,
    backing_off_message,
    claim_names,
    config_map_files,
    config_map_sources,
    host_names,
    hosts_file,
    pod_phase,
    pod_status,
    process_specs,
    restart_action,
    restarts,
    service_names,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FOLDERS = PodFolders(Path("/state/pods/ns_p_u"), Path("/state/volumes"))


def _pod(**container: Any) -> dict[str, Any]:
    main = {"name": "tensorflow", "image": "trainer", "command": ["disttrain-train"], "args": ["--epochs", "1"]}
    return {
        "metadata": {"name": "job-worker-0", "namespace": "ns", "uid": "u1"},
        "spec": {
            "nodeName": "process-node-0",
            "hostname": "job-worker-0",
            "subdomain": "job",
            "restartPolicy": "Never",
            "containers": [{**main, **container}],
            "volumes": [
                {"name": "ckpt", "persistentVolumeClaim": {"claimName": "job-checkpoint"}},
                {"name": "scratch", "emptyDir": {}},
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
            ],
        },
    }


def test_a_container_becomes_a_process_with_its_env_mounts_and_message_file() -> None:
    env = [
        {"name": "TF_CONFIG", "value": "{}"},
        {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "DISTTRAIN_TERMINATION_MESSAGE_PATH", "value": "/dev/termination-log"},
    ]
    mounts = [
        {"name": "ckpt", "mountPath": "/checkpoints"},
        {"name": "scratch", "mountPath": "/tmp/scratch"},
        {"name": "token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
    ]
    pod = _pod(env=env, volumeMounts=mounts, workingDir="/work")
    assert claim_names(pod) == ["job-checkpoint"]
    (spec,) = process_specs(pod, "10.250.0.7", FOLDERS, {"job-checkpoint": "pvc-1"})
    assert spec.argv == ("disttrain-train", "--epochs", "1")
    assert spec.env["MY_IP"] == "10.250.0.7"
    assert spec.env["DISTTRAIN_TERMINATION_MESSAGE_PATH"] == str(spec.termination_message)
    assert spec.mounts == (
        Mount(Path("/state/volumes/pvc-1"), "/checkpoints"),
        Mount(FOLDERS.pod / "volumes" / "scratch", "/tmp/scratch"),
    )  # the API token is not mounted
    assert (spec.working_dir, spec.log) == ("/work", FOLDERS.pod / "tensorflow.log")


def test_a_config_map_volume_is_a_folder_of_its_keys_as_the_kubelet_projects_them() -> None:
    pod = _pod(volumeMounts=[{"name": "function", "mountPath": "/etc/fn"}, {"name": "one", "mountPath": "/etc/one"}])
    pod["spec"]["volumes"] += [
        {"name": "function", "configMap": {"name": "job-function"}},
        {"name": "one", "configMap": {"name": "settings", "items": [{"key": "a", "path": "sub/a.txt"}]}},
    ]
    assert [source["name"] for source in config_map_sources(pod)] == ["job-function", "settings"]
    data = {"job-function": {"function.py": "def f(): ...\n", "call.json": "{}"}, "settings": {"a": "1", "b": "2"}}
    volumes = FOLDERS.pod / "volumes"
    assert config_map_files(pod, FOLDERS, data) == {
        volumes / "function" / "function.py": "def f(): ...\n",
        volumes / "function" / "call.json": "{}",
        volumes / "one" / "sub" / "a.txt": "1",
    }
    (spec,) = process_specs(pod, "10.250.0.7", FOLDERS, {"job-checkpoint": "pvc-1"})
    assert spec.mounts == (Mount(volumes / "function", "/etc/fn"), Mount(volumes / "one", "/etc/one"))


@pytest.mark.parametrize(
    ("container", "message"),
    [
        ({"command": None}, "run commands, not images"),
        ({"env": [{"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}, "env S"),
        ({"volumeMounts": [{"name": "config", "mountPath": "/etc/app"}]}, "volume config"),
    ],
)
def test_what_a_process_cannot_have_is_named(container: dict[str, Any], message: str) -> None:
    with pytest.raises(UnsupportedContainerError, match=message):
        process_specs(_pod(**container), "10.250.0.7", FOLDERS, {"job-checkpoint": "pvc-1"})


def test_names_resolve_as_the_headless_service_publishes_them() -> None:
    names = host_names(_pod())
    assert names == ["job-worker-0.job.ns.svc.cluster.local", "job-worker-0.job.ns.svc", "job-worker-0"]
    text = hosts_file([("10.250.0.3", ["b"]), ("10.250.0.2", names)])
    assert text.splitlines()[2:] == [f"10.250.0.2\t{' '.join(names)}", "10.250.0.3\tb"]


def test_a_headless_service_that_selects_the_pod_resolves_to_it() -> None:
    """As the cluster's DNS does for training-operator's Service per replica; not a Service with a cluster
    address, with no selector, of another namespace, or selecting other pods."""
    pod = _pod()
    pod["metadata"]["labels"] = {"replica-type": "worker", "replica-index": "0"}

    def service(name: str, selector: dict[str, str], namespace: str = "ns", cluster_ip: str = "None") -> dict[str, Any]:
        spec = {"clusterIP": cluster_ip, "selector": selector}
        return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}

    services = [
        service("tf-worker-0", {"replica-type": "worker", "replica-index": "0"}),
        service("tf-worker-1", {"replica-type": "worker", "replica-index": "1"}),
        service("elsewhere", {"replica-type": "worker"}, namespace="other"),
        service("addressed", {"replica-type": "worker"}, cluster_ip="10.96.0.9"),
        service("everything", {}),
    ]
    assert service_names(pod, services) == ["tf-worker-0.ns.svc.cluster.local", "tf-worker-0.ns.svc"]


def _rule(action: str, operator: str, values: list[int]) -> dict[str, Any]:
    return {"action": action, "exitCodes": {"operator": operator, "values": values}}


def test_phase_and_restarts_follow_the_restart_policy() -> None:
    running = ContainerState("a", T0)
    ok = ContainerState("a", T0, exit_code=0, finished=T0)
    failed = ContainerState("a", T0, exit_code=137, finished=T0)
    assert pod_phase([running], "Never") == "Running"
    assert pod_phase([ok], "Never") == "Succeeded"
    assert pod_phase([failed], "Never") == "Failed"
    assert pod_phase([failed], "Always") == "Running"
    assert (restarts("Never", 1), restarts("OnFailure", 1), restarts("OnFailure", 0), restarts("Always", 0)) == (
        False,
        True,
        False,
        True,
    )


@pytest.mark.parametrize(
    ("container", "exit_code", "action"),
    [
        ({}, 1, None),  # the pod's Never
        ({"restartPolicy": "OnFailure"}, 1, "Restart"),  # the container's own policy over the pod's
        ({"restartPolicy": "OnFailure"}, 0, None),
        (
            {"restartPolicy": "Never", "restartPolicyRules": [_rule("RestartAllContainers", "In", [42])]},
            42,
            "RestartAllContainers",
        ),
        ({"restartPolicy": "Never", "restartPolicyRules": [_rule("RestartAllContainers", "In", [42])]}, 1, None),
        (  # the first rule that matches decides
            {
                "restartPolicy": "Never",
                "restartPolicyRules": [_rule("Restart", "NotIn", [0, 42]), _rule("RestartAllContainers", "In", [42])],
            },
            42,
            "RestartAllContainers",
        ),
        (
            {
                "restartPolicy": "Never",
                "restartPolicyRules": [_rule("Restart", "NotIn", [0, 42]), _rule("RestartAllContainers", "In", [42])],
            },
            3,
            "Restart",
        ),
        ({"restartPolicy": "Always", "restartPolicyRules": [_rule("Restart", "In", [7])]}, 0, "Restart"),
    ],
)
def test_a_container_s_restart_rules_decide_as_the_kubelet_s_do(
    container: dict[str, Any], exit_code: int, action: str | None
) -> None:
    assert restart_action("Never", container, exit_code) == action


def test_a_pod_restarted_in_place_is_reported_in_the_kubelet_s_words() -> None:
    restarted = ContainerState("a", T0, restarts=1, last_exit_code=137, restarted_with_all=True)
    status = pod_status(_pod(), [restarted], "10.250.0.7", "10.250.0.1", T0)
    ended = status["containerStatuses"][0]["lastState"]["terminated"]
    assert (ended["exitCode"], ended["reason"]) == (137, "RestartingAllContainers")
    assert ended["message"] == "The container is removed because RestartAllContainers in place"
    assert {"type": "AllContainersRestarting", "status": "False"}.items() <= status["conditions"][-1].items()


def test_restarts_back_off_as_the_kubelet_s_do() -> None:
    """The first restart at once; each within 10 minutes of the last waits, 10 s doubling to 5 minutes; a run
    that ended more than 10 minutes after the last restart's starts at once again."""
    backoff, waits, ended = RestartBackoff(), [], 0.0
    for _ in range(8):
        wait = backoff.wait(ended)
        waits.append(wait)
        backoff = backoff.next(ended)
        ended += wait + 1
    assert waits == [0, 10, 20, 40, 80, 160, 300, 300]
    assert backoff.wait(ended + 601) == 0 and backoff.next(ended + 601).delay == 10


def test_a_restart_held_back_is_waiting_with_the_run_that_ended_as_its_last_state() -> None:
    pod = _pod()
    held = ContainerState(
        "tensorflow",
        T0,
        restarts=2,
        exit_code=137,
        finished=T0 + timedelta(seconds=30),
        message="killed",
        backing_off=backing_off_message(10, "tensorflow", pod),
    )
    status = pod_status(pod, [held], "10.250.0.7", "10.250.0.1", T0)
    assert status["phase"] == "Running"
    (container,) = status["containerStatuses"]
    assert (container["restartCount"], container["ready"], container["started"]) == (2, False, False)
    assert container["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert container["state"]["waiting"]["message"].startswith("back-off 10s restarting failed container=tensorflow")
    assert container["lastState"]["terminated"] == {
        "exitCode": 137,
        "reason": "Error",
        "startedAt": "2026-01-01T00:00:00Z",
        "finishedAt": "2026-01-01T00:00:30Z",
        "message": "killed",
    }


def test_status_is_what_a_kubelet_reports() -> None:
    ended = ContainerState(
        "tensorflow",
        T0,
        restarts=1,
        exit_code=0,
        finished=T0 + timedelta(minutes=1),
        message='{"step": 3}',
        last_exit_code=1,
        last_started=T0 - timedelta(minutes=2),
        last_finished=T0 - timedelta(minutes=1),
        last_message='{"error": "a peer was lost"}',
    )
    status = pod_status(_pod(), [ended], "10.250.0.7", "10.250.0.1", T0)
    assert (status["phase"], status["podIP"], status["hostIP"]) == ("Succeeded", "10.250.0.7", "10.250.0.1")
    (container,) = status["containerStatuses"]
    assert container["restartCount"] == 1 and container["image"] == "trainer"
    assert container["state"]["terminated"] == {
        "exitCode": 0,
        "reason": "Completed",
        "startedAt": "2026-01-01T00:00:00Z",
        "finishedAt": "2026-01-01T00:01:00Z",
        "message": '{"step": 3}',
    }
    assert container["lastState"]["terminated"] == {  # the run before, as a container restarted alone keeps it
        "exitCode": 1,
        "reason": "Error",
        "startedAt": "2025-12-31T23:58:00Z",
        "finishedAt": "2025-12-31T23:59:00Z",
        "message": '{"error": "a peer was lost"}',
    }
    assert container["lastState"]["terminated"]["exitCode"] == 1
    ready = {c["type"]: c["status"] for c in status["conditions"]}["Ready"]
    assert ready == "False"
