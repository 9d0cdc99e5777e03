"""Fault injection through the real operator, API server and process node.

Every scenario breaks something mid-training and must still end Succeeded with exactly the step
count of an uninterrupted run: nothing lost, nothing repeated past the last checkpoint. Where what the operator
decides is tested (evictions, a drain, a suspend, Kueue's preemption, workers cut off, frozen jobs, a NaN, the
time left, a killed worker, a second restart, the operator, the API server or the leader going away) the job runs
the stand-in trainer (`disttrain-stand-in`, the trainer's contract without TensorFlow, MultiWorkerMirrored's
lockstep included); one frozen process of several runs the trainer, as what follows is TensorFlow's own doing.
The real node runs each class of fault with the trainer image.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from disttrain_core.restarts.record import HEALTHY_RUN
from disttrain_dev import cluster as devcluster
from disttrain_dev.polling import wait_for
from disttrain_dev.process_node import NODE_NAME as PROCESS_NODE
from support.job_checks import holds, job_where, restart_events, says_a_worker_is_unreachable, suspend
from support.kube_cluster import OPERATOR_TEST_NAMESPACE, Cluster, operator_kubeconfig
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
from support.pod_checks import drain_and_uncordon, trainer_run, trainer_state
from support.trainer_support import STAND_IN, TRAINER, events, job_manifest

pytestmark = [
    pytest.mark.tensorflow,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs the trainer extra"),
]

STEPS_PER_EPOCH = 1437 // 64  # the bundled digits' training split at the default batch
JOB = "faulty"


def _submit(
    cluster: Cluster,
    namespace: str,
    strategy: str,
    counts: dict[str, int],
    epochs: int,
    *,
    name: str = JOB,
    every_worker: bool = False,
    extra: tuple[str, ...] = (),
    checkpoint_every: int = 50,
    backoff_limit: int = 4,
    labels: dict[str, str] | None = None,
    cpu: str | None = None,
    run_policy: dict[str, Any] | None = None,
    command: str = TRAINER,
) -> int:
    """A job that checkpoints every 50 steps; returns its total step count. `every_worker`: the job succeeds
    once every worker did, so that none still running at the chief's end is stopped by the cleanup. `extra`:
    more of the trainer's arguments. `labels` on the job, and `cpu` requested by each pod, for a queue;
    `run_policy`: more of its fields; `command`: the stand-in, or the trainer."""
    args = ["--model", "mlp", "--dataset", "digits", "--epochs", str(epochs)]
    args += ["--checkpoint-every", str(checkpoint_every), *extra]
    manifest = job_manifest(name, strategy, counts, [*args, "--log-every", "5"])
    for spec in manifest["spec"]["replicaSpecs"].values():
        spec["restartPolicy"] = "ExitCode"
        spec["template"]["spec"]["automountServiceAccountToken"] = False
        spec["template"]["spec"]["containers"][0]["command"] = [command]
        if cpu is not None:
            spec["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    manifest["spec"]["runPolicy"] = {"backoffLimit": backoff_limit, **(run_policy or {})}
    manifest["spec"]["checkpoint"] = {"size": "1Gi"}
    if every_worker:
        manifest["spec"]["successPolicy"] = "AllWorkers"
    if labels:
        manifest["metadata"]["labels"] = labels
    cluster.apply(namespace, json.dumps(manifest))
    return epochs * STEPS_PER_EPOCH


def _job(cluster: Cluster, namespace: str, name: str = JOB) -> dict[str, Any]:
    return cluster.job(namespace, name)


def _at_step(cluster: Cluster, namespace: str, step: int) -> dict[str, Any]:
    """The job once its status reports at least `step` (the operator polls the chief every second here)."""

    def check() -> dict[str, Any] | None:
        job = _job(cluster, namespace)
        return job if job.get("status", {}).get("progress", {}).get("step", 0) >= step else None

    return wait_for(f"step {step}", check, timeout=240, interval=0.5)


def _succeeded(cluster: Cluster, namespace: str, total: int, name: str = JOB) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        job = _job(cluster, namespace, name)
        return job if holds(job, "Succeeded") else None

    job = wait_for(f"{name} Succeeded", check, timeout=300)
    assert job["status"]["progress"]["step"] == total
    assert job["status"]["progress"]["totalSteps"] == total
    return job


def _pod_folder(cluster: Cluster, namespace: str, pod: str, uid: str | None = None) -> Path:
    """The process node's folder of the pod, or of its attempt of `uid`."""
    uid = uid or cluster.get("pod", pod, namespace)["metadata"]["uid"]  # type: ignore[index]
    return devcluster.state_dir() / devcluster.PROCESS_NODE / "pods" / f"{namespace}_{pod}_{uid}"


def _signal_trainer(cluster: Cluster, namespace: str, pod: str, sig: signal.Signals) -> None:
    """Signal the process group of the pod's running trainer, as the node wrote its pid."""
    os.killpg(int((_pod_folder(cluster, namespace, pod) / "tensorflow.pid").read_text()), sig)


def _chief_log(cluster: Cluster, namespace: str, pod: str) -> str:
    return (_pod_folder(cluster, namespace, pod) / "tensorflow.log").read_text(errors="replace")


def _uids(cluster: Cluster, namespace: str) -> dict[str, str]:
    return {name: pod["metadata"]["uid"] for name, pod in cluster.job_pods(namespace, JOB).items()}


@pytest.mark.real_node_twin("test_parameter_server_absorbs_an_evicted_worker_and_resumes_an_evicted_ps_at_its_step")
def test_parameter_server_absorbs_an_evicted_worker_and_resumes_an_evicted_ps_where_it_stopped(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """Periodic checkpoints far apart and no restart allowed: neither eviction costs a step or the job."""
    counts = {"Chief": 1, "Worker": 2, "PS": 1}
    # The status shows progress up to 3 s late (a poll a second, count-only writes every 2 s): 60 epochs leave
    # over a thousand steps after the evictions, so that the job cannot finish before the PS's reaches it.
    total = _submit(
        process_cluster,
        process_namespace,
        "ParameterServer",
        counts,
        epochs=60,
        checkpoint_every=5000,
        backoff_limit=0,
        command=STAND_IN,
    )
    _at_step(process_cluster, process_namespace, 40)
    chief_uid = _uids(process_cluster, process_namespace)[f"{JOB}-chief-0"]
    process_cluster.evict(process_namespace, f"{JOB}-worker-0")
    wait_for("worker 0 replaced", lambda: _job(process_cluster, process_namespace)["status"].get("disruptions") == 1)
    _at_step(process_cluster, process_namespace, 120)
    assert _uids(process_cluster, process_namespace)[f"{JOB}-chief-0"] == chief_uid  # the coordinator carried on

    shown = _at_step(process_cluster, process_namespace, 160)["status"]["progress"]["step"]
    process_cluster.evict(process_namespace, f"{JOB}-ps-0")
    done = _succeeded(process_cluster, process_namespace, total)
    assert (done["status"].get("restartCount", 0), done["status"]["disruptions"]) == (0, 2)
    log = _chief_log(process_cluster, process_namespace, f"{JOB}-chief-0")
    assert events(log, "restored")[-1]["step"] >= shown  # saved on the way out, not a periodic checkpoint
    assert events(log, "finished")[-1]["steps"] == total


def test_the_operator_and_the_api_server_going_away_mid_job_cost_nothing(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """The operator killed and started again, and then the API server restarted, under one running job: no
    duplicate pod, no restart."""
    total = _submit(
        process_cluster,
        process_namespace,
        "MultiWorkerMirrored",
        {"Worker": 2},
        epochs=100,
        every_worker=True,
        command=STAND_IN,
    )
    _at_step(process_cluster, process_namespace, 100)
    before = _uids(process_cluster, process_namespace)
    operator.stop(signal.SIGKILL)
    time.sleep(2)
    operator.start()
    _at_step(process_cluster, process_namespace, 400)  # read by the restarted operator
    devcluster.restart_component("kube-apiserver", pause=5)

    done = _succeeded(process_cluster, process_namespace, total)
    assert _uids(process_cluster, process_namespace) == before  # the same two pods, never recreated
    assert done["status"].get("restartCount", 0) == 0


def _restored_since(cluster: Cluster, namespace: str, pod: str, before: tuple[str, int]) -> int:
    """The step that `pod`'s next attempt (another pod, or the same restarted in place: a run after `before`)
    restored, once it logged it."""

    def restored() -> int | None:
        found = cluster.get("pod", pod, namespace)
        if found is None or trainer_run(found) == before or "running" not in trainer_state(found):
            return None
        log = _pod_folder(cluster, namespace, pod, found["metadata"]["uid"]) / "tensorflow.log"
        try:
            steps = events(log.read_text(errors="replace"), "restored")
        except FileNotFoundError:  # not started on the node yet
            return None
        return int(steps[-1]["step"]) if steps else None

    return wait_for(f"{pod}'s next attempt restored", restored, timeout=240)


def _resumes_past(cluster: Cluster, namespace: str, fault: Callable[[], None], since: int) -> int:
    """Once the status shows `since` + 200 steps, `fault`; then worker 0's next attempt must restore at least the
    step shown before it. Returns the step it restored."""
    shown = _at_step(cluster, namespace, since + 200)["status"]["progress"]["step"]
    worker = f"{JOB}-worker-0"
    before = trainer_run(cluster.job_pods(namespace, JOB)[worker])
    fault()
    restored = _restored_since(cluster, namespace, worker, before)
    assert restored >= shown
    return restored


@pytest.mark.real_node_twin("test_the_trainer_image_evicted_drained_and_suspended_costs_no_step")
def test_an_eviction_a_drain_and_a_suspend_cost_a_running_job_no_step(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """Worker 1 evicted through the Eviction API (as the autoscaler evicts), the node drained with `kubectl drain`
    while the operator runs (the next pods wait out the cordon), and `runPolicy.suspend` set and cleared (as a
    user or Kueue's preemption does), one after the other: with no periodic checkpoint since the start and no
    restart allowed, the job resumes each time at the step it showed, and succeeds with exactly the steps of an
    uninterrupted run."""
    cluster, namespace = process_cluster, process_namespace
    total = _submit(  # 30 steps a second: the three faults, each a second or two, come well before its end
        cluster,
        namespace,
        "MultiWorkerMirrored",
        {"Worker": 2},
        epochs=90,
        checkpoint_every=5000,
        backoff_limit=0,
        extra=("--max-steps-per-second", "30"),
        command=STAND_IN,
    )
    step = _resumes_past(cluster, namespace, lambda: cluster.evict(namespace, f"{JOB}-worker-1"), 0)
    evicted = _job(cluster, namespace)["status"]
    assert (evicted.get("restartCount", 0), evicted["disruptions"]) == (0, 1)
    assert evicted["lastDisruption"]["reason"] == "EvictionByEvictionAPI"

    def drain() -> None:
        drain_and_uncordon(cluster, PROCESS_NODE, namespace, JOB, count=2, timeout=120)

    step = _resumes_past(cluster, namespace, drain, step)

    def suspend_and_resume() -> None:
        suspend(cluster, namespace, JOB, True)
        wait_for("no pods", lambda: not cluster.job_pods(namespace, JOB), timeout=120)
        assert holds(_job(cluster, namespace), "Suspended")
        suspend(cluster, namespace, JOB, False)

    _resumes_past(cluster, namespace, suspend_and_resume, step)
    done = _succeeded(cluster, namespace, total)
    assert (done["status"].get("restartCount", 0), done["status"]["disruptions"]) == (0, 2)
    assert events(_chief_log(cluster, namespace, f"{JOB}-worker-0"), "finished")[-1]["steps"] == total


@pytest.mark.real_node_twin("test_kueue_preempting_the_trainer_image_costs_it_no_step")
def test_kueue_preempting_a_running_job_costs_it_no_step(
    process_cluster: Cluster, operator: OperatorProcess, kueue_process: None, process_namespace: str
) -> None:
    """Kueue, built from its source, suspends a low-priority job mid-run for a higher one and admits it again once
    that one finished: the low one's workers save on the way out, and with no restart allowed it resumes at
    that step."""
    queued = {QUEUE_LABEL: LOCAL_QUEUE}
    with local_queue(process_cluster, process_namespace, {"cpu": 1}) as urgent:  # one job of 2 x 500m at a time
        total = _submit(
            process_cluster,
            process_namespace,
            "MultiWorkerMirrored",
            {"Worker": 2},
            epochs=60,
            checkpoint_every=5000,
            backoff_limit=0,
            labels=queued,
            cpu="500m",
            command=STAND_IN,
        )
        shown = _at_step(process_cluster, process_namespace, 200)["status"]["progress"]["step"]
        high = _submit(
            process_cluster,
            process_namespace,
            "MultiWorkerMirrored",
            {"Worker": 2},
            epochs=2,
            name="urgent",
            labels={**queued, PRIORITY_LABEL: urgent},
            cpu="500m",
            command=STAND_IN,
        )
        evicted_by_kueue(process_cluster, process_namespace, JOB)
        _succeeded(process_cluster, process_namespace, high, name="urgent")
        try:
            done = _succeeded(process_cluster, process_namespace, total)
        except TimeoutError as error:
            log = "\n".join(operator.log_path.read_text(errors="replace").splitlines()[-60:])
            seen = what_kueue_and_the_jobs_show(process_cluster, process_namespace, [JOB, "urgent"], log)
            raise AssertionError(f"{error}\n{seen}") from None
    assert done["status"].get("restartCount", 0) == 0
    log = _chief_log(process_cluster, process_namespace, f"{JOB}-worker-0")
    assert events(log, "restored")[-1]["step"] >= shown
    assert events(log, "finished")[-1]["steps"] == total


LEADER_ELECTION = ["--leader-elect", "--lease-seconds", "4", "--renew-seconds", "3", "--retry-seconds", "0.5"]


def _lease_holder(cluster: Cluster) -> str:
    lease = cluster.get("lease", "disttrain-operator", OPERATOR_TEST_NAMESPACE) or {}
    return str(lease.get("spec", {}).get("holderIdentity") or "")


def test_the_standby_replica_takes_over_mid_job_without_duplicates(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    """Two replicas with leader election, as deploy/ runs them; the active one is killed mid-job."""
    operator.stop()  # the suite's own operator would act on this job too
    process_cluster.kubectl("delete", "lease", "disttrain-operator", "-n", OPERATOR_TEST_NAMESPACE, check=False)
    kubeconfig = operator_kubeconfig(process_cluster, tmp_path)
    active, standby = (
        OperatorProcess(
            process_cluster,
            tmp_path / f"{name}.log",
            kubeconfig=kubeconfig,
            pod_name=name,
            leader_election=LEADER_ELECTION,
        )
        for name in ("operator-a", "operator-b")
    )
    try:
        active.start()
        wait_for("operator-a to lead", lambda: _lease_holder(process_cluster).startswith("operator-a_"))
        standby.start()
        total = _submit(
            process_cluster,
            process_namespace,
            "MultiWorkerMirrored",
            {"Worker": 2},
            epochs=80,
            every_worker=True,
            command=STAND_IN,
        )
        _at_step(process_cluster, process_namespace, 100)
        before = _uids(process_cluster, process_namespace)
        assert JOB not in standby.log()  # the standby has not touched the job

        active.stop(signal.SIGKILL)
        wait_for("operator-b to lead", lambda: _lease_holder(process_cluster).startswith("operator-b_"), timeout=30)
        done = _succeeded(process_cluster, process_namespace, total)
        assert _uids(process_cluster, process_namespace) == before  # the same two pods, never recreated
        assert done["status"].get("restartCount", 0) == 0
        lease = process_cluster.get("lease", "disttrain-operator", OPERATOR_TEST_NAMESPACE)
        assert lease is not None and lease["spec"]["leaseTransitions"] == 1

        standby.stop()  # a clean shutdown hands the lease back at once
        assert _lease_holder(process_cluster) == ""
    finally:
        active.stop(signal.SIGKILL)
        standby.stop(signal.SIGKILL)
        operator.start()


@pytest.mark.real_node_twin("test_workers_cut_off_from_each_other_say_so_on_the_job_then_finish")
def test_workers_cut_off_from_each_other_say_whom_they_wait_for_then_resume_once_joined(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """TensorFlow alone waits for an unreachable peer in silence. The port TF_CONFIG names is cut between the
    pods (a rule dropping it on the node's bridge, above the node's own): each worker's log names the peer it
    waits for, and after its bounded wait the job's status and an Event name the unreachable replica."""
    cut = ["FORWARD", "-i", "dtbr0", "-o", "dtbr0", "-p", "tcp", "--dport", "2222", "-j", "DROP"]
    with bridged_traffic_through_iptables():
        subprocess.run(["iptables", "-I", *cut], check=True)
        try:
            patience = ("--peer-wait-seconds", "15")
            total = _submit(
                process_cluster,
                process_namespace,
                "MultiWorkerMirrored",
                {"Worker": 2},
                2,
                extra=patience,
                command=STAND_IN,
            )
            peer = f"{JOB}-worker-1.{JOB}.{process_namespace}.svc:2222"

            def waiting_logged() -> bool:
                try:
                    log = _chief_log(process_cluster, process_namespace, f"{JOB}-worker-0")
                except (OSError, TypeError):  # no pod or no log yet
                    return False
                return any(wait["peers"] == [peer] for wait in events(log, "waiting for peers"))

            wait_for("worker 0's log naming the peer it waits for", waiting_logged, timeout=60)

            says_a_worker_is_unreachable(process_cluster, process_namespace, JOB, 15, timeout=90)
        finally:
            subprocess.run(["iptables", "-D", *cut], check=True)
    _succeeded(process_cluster, process_namespace, total)


def _condition(job: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in job["status"]["conditions"] if c["type"] == kind)


@pytest.mark.parametrize(
    ("strategy", "counts"),
    [("MultiWorkerMirrored", {"Worker": 2}), ("ParameterServer", {"Chief": 1, "Worker": 2, "PS": 1})],
    ids=["multi-worker-mirrored", "parameter-server"],
)
def test_a_frozen_job_is_named_stalled_restarts_from_its_checkpoint_and_finishes(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, strategy: str, counts: dict[str, int]
) -> None:
    """Every process of a running job frozen (SIGSTOP), with progressDeadlineSeconds 30: the job is Stalled
    within the deadline and one poll of its last step, restarts as a whole, counted, from its last checkpoint,
    which the Restarting condition names, and succeeds with the steps of an uninterrupted run."""
    cluster, namespace = process_cluster, process_namespace
    policy = {"progressDeadlineSeconds": 30, "terminationGracePeriodSeconds": 5}
    total = _submit(
        cluster, namespace, strategy, counts, epochs=20, checkpoint_every=40, run_policy=policy, command=STAND_IN
    )
    _at_step(cluster, namespace, 100)
    for pod in cluster.job_pods(namespace, JOB):
        _signal_trainer(cluster, namespace, pod, signal.SIGSTOP)

    def is_stalled() -> dict[str, Any] | None:
        job = _job(cluster, namespace)
        return job if holds(job, "Stalled") else None

    stalled = wait_for("Stalled", is_stalled, timeout=90)
    named = datetime.fromisoformat(_condition(stalled, "Stalled")["lastTransitionTime"])
    advanced = datetime.fromisoformat(stalled["status"]["progress"]["lastAdvanceTime"])
    assert (named - advanced).total_seconds() <= 30 + 1 + 2  # the deadline, one poll, a reconcile's write
    assert _condition(stalled, "Stalled")["reason"] == "NoProgress"
    done = _succeeded(cluster, namespace, total)
    restarting = _condition(done, "Restarting")
    assert done["status"]["restartCount"] == 1 and restarting["reason"] == "Recovered"
    cluster.wait_for_event(namespace, "Stalled")
    cluster.wait_for_event(namespace, "NoProgress")
    assert _condition(done, "Stalled")["status"] == "False"
    saved = re.search(r"from the last checkpoint reported, step (\d+) \(ckpt/ckpt-\1\)", restarting["message"])
    assert saved is not None, restarting["message"]
    chief = f"{JOB}-chief-0" if "Chief" in counts else f"{JOB}-worker-0"
    restored = events(_chief_log(cluster, namespace, chief), "restored")[0]["step"]
    assert restored >= int(saved[1]) and restored % 40 == 0  # a checkpoint saved within a poll of the freeze
    assert done["status"]["checkpoint"]["step"] == total  # the final save


FROZEN_TWIN = "test_one_process_frozen_through_containerd_restarts_the_job_as_tensorflow_lets_it_and_it_finishes"


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            (
                "MultiWorkerMirrored",
                {"Worker": 2},
                "faulty-worker-0 failed with exit code 130 (Error): a peer was lost",
            ),
            id="multi-worker-mirrored",
            marks=pytest.mark.real_node_twin(f"{FROZEN_TWIN}[multi-worker-mirrored]"),
        ),
        pytest.param(
            ("ParameterServer", {"Chief": 1, "Worker": 2, "PS": 1}, "the job stalled: step"),
            id="parameter-server",
            marks=pytest.mark.real_node_twin(f"{FROZEN_TWIN}[parameter-server]"),
        ),
    ],
)
def test_one_frozen_process_of_several_restarts_the_job_as_tensorflow_lets_it_and_it_finishes(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, case: tuple[str, dict[str, int], str]
) -> None:
    """worker-1 alone frozen (SIGSTOP), the reporting task still answering its polls, under a 30 s deadline. As
    measured: MultiWorkerMirrored's worker 0 loses its frozen peer within the deadline (TensorFlow's step fails
    with a "Graph execution error"), exits PEER_LOST and the job restarts for that, the frozen pod replaced once
    it does not restart in place; ParameterServer's coordinator waits in `join` for the steps it scheduled on the
    frozen worker, whose connection stays open, so no step comes and the job restarts as Stalled. Either way one
    restart, counted, and the job finishes with every step."""
    (strategy, counts, restarted_for), cluster, namespace = case, process_cluster, process_namespace
    policy = {"progressDeadlineSeconds": 30, "terminationGracePeriodSeconds": 5}
    total = _submit(cluster, namespace, strategy, counts, epochs=20, checkpoint_every=40, run_policy=policy)
    _at_step(cluster, namespace, 100)
    _signal_trainer(cluster, namespace, f"{JOB}-worker-1", signal.SIGSTOP)

    said = restart_events(cluster, namespace)
    assert any(restarted_for in message for message in said), said
    done = _succeeded(cluster, namespace, total)
    assert done["status"]["restartCount"] == 1, done["status"]
    assert done["status"]["progressAnswerTime"]  # the reporting trainer answered in its run


def test_a_nan_at_a_known_step_fails_the_job_as_diverged_there(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """The trainer's loss NaN from step 60 (--nan-at-step): the job fails at once as Diverged, not retried,
    naming step 60 and the last finite checkpoint (step 40)."""
    cluster, namespace = process_cluster, process_namespace
    _submit(
        cluster,
        namespace,
        "MultiWorkerMirrored",
        {"Worker": 2},
        epochs=20,
        checkpoint_every=40,
        extra=("--nan-at-step", "60"),
        command=STAND_IN,
    )

    def failed() -> dict[str, Any] | None:
        job = _job(cluster, namespace)
        return job if holds(job, "Failed") else None

    job = wait_for("Failed", failed, timeout=240)
    verdict = _condition(job, "Failed")
    assert verdict["reason"] == "Diverged", verdict
    assert "at step 60" in verdict["message"] and "ckpt/ckpt-40" in verdict["message"], verdict
    assert job["status"].get("restartCount", 0) == 0
    # the failure may come from worker 1's exit: the checkpoint comes with worker 0's final report, read once it ends
    job = job_where(cluster, namespace, JOB, "a checkpoint reported", lambda found: "checkpoint" in found["status"])
    assert job["status"]["checkpoint"]["step"] == 40


@pytest.mark.real_node_twin("test_at_mid_run_the_trainer_image_s_time_left_is_within_a_fifth_of_the_time_it_took")
def test_at_mid_run_the_time_left_is_within_a_fifth_of_the_time_it_took(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """status.progress.estimatedRemainingSeconds read once half the steps are done, against the time the trainer
    then took to its last step (both on the trainer's clock, from its reports; the export after it is no step)."""
    cluster, namespace = process_cluster, process_namespace
    total = _submit(  # some 30 s left at half
        cluster, namespace, "MultiWorkerMirrored", {"Worker": 2}, epochs=240, command=STAND_IN
    )

    def halfway() -> dict[str, Any] | None:
        progress = _job(cluster, namespace).get("status", {}).get("progress", {})
        return progress if progress.get("fractionDone", 0) >= 0.5 and "estimatedRemainingSeconds" in progress else None

    mid = wait_for("half the steps done, with a time left", halfway, timeout=240, interval=0.5)
    _succeeded(cluster, namespace, total)
    reports = events(_chief_log(cluster, namespace, f"{JOB}-worker-0"), "progress")
    last_step = next(report for report in reports if report["step"] == total)
    took = (datetime.fromisoformat(last_step["updateTime"]) - datetime.fromisoformat(mid["updateTime"])).total_seconds()
    assert abs(mid["estimatedRemainingSeconds"] - took) <= 0.2 * took, (mid, last_step, took)


def test_a_killed_worker_restarts_the_job_in_place_each_run_an_attempt_of_its_own(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """Worker 1's trainer killed (SIGKILL) mid-run: the job restarts in place, its two pods kept (their UIDs),
    counted once with the exit code in its Restarting condition and Event, resumes from its last checkpoint
    and succeeds with the steps of an uninterrupted run; worker 1's killed run and its next are two attempts,
    the first kept with its exit code and its log to its last line."""
    cluster, namespace = process_cluster, process_namespace
    # every worker: a worker 1 still running at worker 0's end would be stopped, its pod gone, by the cleanup
    total = _submit(
        cluster,
        namespace,
        "MultiWorkerMirrored",
        {"Worker": 2},
        epochs=60,
        checkpoint_every=40,
        every_worker=True,
        command=STAND_IN,
    )
    _at_step(cluster, namespace, 100)
    pods = _uids(cluster, namespace)
    worker = f"{JOB}-worker-1"
    _signal_trainer(cluster, namespace, worker, signal.SIGKILL)
    done = _succeeded(cluster, namespace, total)
    assert _uids(cluster, namespace) == pods  # the same pods, never recreated
    restarting = _condition(done, "Restarting")
    assert (done["status"]["restartCount"], restarting["reason"]) == (1, "Recovered")
    assert f"{worker} failed with exit code 137" in restarting["message"], restarting["message"]
    cluster.wait_for_event(namespace, "Restarting")
    assert events(_chief_log(cluster, namespace, f"{JOB}-worker-0"), "restored")  # the next run restored
    runs = cluster.job_pods(namespace, JOB)[worker]["metadata"]["annotations"]
    assert runs["disttrain.io/runs-counted"] == "1"

    def both_kept() -> list[dict[str, Any]] | None:
        kept = cluster.items("configmaps", namespace, "disttrain.io/kept-log-of=worker-1")
        return kept if len(kept) == 2 else None

    cluster.kubectl("delete", "pods", "-n", namespace, "-l", f"disttrain.io/job-name={JOB}", "--wait=true")
    kept = sorted(wait_for("both of worker 1's attempts kept", both_kept), key=lambda item: item["metadata"]["name"])
    notes = [item["metadata"]["annotations"] for item in kept]
    assert (notes[0]["disttrain.io/attempt"], notes[0]["disttrain.io/exit-code"]) == ("1", "137")
    assert notes[1]["disttrain.io/attempt"] == "2"
    first = [json.loads(line)["event"] for line in kept[0]["data"]["log"].splitlines() if line.startswith("{")]
    assert first[0] == "started" and "finished" not in first, first[-5:]  # killed mid-run, its log to the end


def test_a_second_restart_within_minutes_finds_the_trainers_held_back_and_replaces_their_pods(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str
) -> None:
    """Worker 1's trainer killed twice, the second time past a quick restart's window: the first restart is in
    place; at the second the node, as the kubelet, holds the trainers back (CrashLoopBackOff: a container starts
    again at once only the first time in 10 minutes), so the operator replaces their pods once their runs are
    counted, the restart counted once, and the job trains on from its checkpoint."""
    cluster, namespace = process_cluster, process_namespace
    _submit(cluster, namespace, "MultiWorkerMirrored", {"Worker": 2}, epochs=300, checkpoint_every=40, command=STAND_IN)
    _at_step(cluster, namespace, 100)
    pods, worker = _uids(cluster, namespace), f"{JOB}-worker-1"
    _signal_trainer(cluster, namespace, worker, signal.SIGKILL)
    first = job_where(cluster, namespace, JOB, "the first restart", _restarted(1))
    last_restart = datetime.fromisoformat(first["status"]["restartBackoff"]["lastRestart"])
    step = _at_step(cluster, namespace, first["status"]["progress"]["step"] + 100)["status"]["progress"]["step"]
    assert _uids(cluster, namespace) == pods  # in place
    quick_until = last_restart + HEALTHY_RUN + timedelta(seconds=2)
    time.sleep(max(0.0, (quick_until - datetime.now(UTC)).total_seconds()))
    _signal_trainer(cluster, namespace, worker, signal.SIGKILL)
    second = job_where(cluster, namespace, JOB, "the second restart", _restarted(2))
    assert second["status"]["restartBackoff"]["quickRestarts"] == 0, second["status"]["restartBackoff"]

    def replaced() -> dict[str, str] | None:
        now = _uids(cluster, namespace)
        return now if len(now) == 2 and not set(now.values()) & set(pods.values()) else None

    wait_for("both pods replaced", replaced, timeout=120)
    _at_step(cluster, namespace, step + 200)
    assert _job(cluster, namespace)["status"]["restartCount"] == 2


def _restarted(count: int) -> Callable[[dict[str, Any]], bool]:
    return lambda job: job.get("status", {}).get("restartCount", 0) >= count
