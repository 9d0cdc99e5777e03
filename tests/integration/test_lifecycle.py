"""Job lifecycle on the real control plane: restarts, backoff, success cleanup, deadline, TTL."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from datetime import UTC, datetime
from typing import Any

from disttrain_contract.timestamps import format_time
from disttrain_dev.cluster import UNATTENDED_ANNOTATION
from disttrain_dev.polling import wait_for
from support.job_builder import JobBuilder
from support.job_checks import TrainerProgress, condition, holds, job_where
from support.kube_cluster import Cluster
from support.operator_process import OperatorProcess
from support.pod_checks import running_pods
from support.repository import ROOT

MWMS = (ROOT / "examples" / "multi-worker-mirrored-gpu.yaml").read_text()
PS = (ROOT / "examples" / "parameter-server.yaml").read_text()


def test_a_failed_worker_restarts_the_whole_job_with_the_same_names(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(namespace, MWMS)
    before = running_pods(cluster, namespace, "mnist-mwms", 4)
    cluster.set_pod_status(namespace, "mnist-mwms-worker-2", "Failed", exit_code=130)

    job_where(cluster, namespace, "mnist-mwms", "restartCount 1", lambda j: j["status"].get("restartCount") == 1)

    def restarting_event() -> str | None:  # the condition may already say the pods run again; the Event stays
        messages = [event["message"] for event in cluster.items("events", namespace) if event["reason"] == "Restarting"]
        return next((message for message in messages if "mnist-mwms-worker-2" in message), None)

    assert "mnist-mwms-worker-2 failed with exit code 130" in wait_for("the Restarting event", restarting_event)

    def all_replaced() -> dict[str, dict[str, Any]] | None:
        pods = running_pods(cluster, namespace, "mnist-mwms", 4)
        fresh = all(pods[name]["metadata"]["uid"] != before[name]["metadata"]["uid"] for name in before)
        return pods if fresh else None

    after = wait_for("every worker replaced", all_replaced, timeout=90)
    assert set(after) == set(before)
    for name, pod in after.items():
        assert pod["spec"]["containers"][0]["env"] == before[name]["spec"]["containers"][0]["env"]  # same TF_CONFIG
    recovered = job_where(
        cluster, namespace, "mnist-mwms", "Running again", lambda j: j["status"]["phase"] == "Running"
    )
    assert recovered["status"]["replicaStatuses"]["Worker"]["restarts"] == 1
    assert condition(recovered, "Restarting")["status"] == "False"  # type: ignore[index]
    cluster.wait_for_event(namespace, "Restarting")


def test_backoff_limit_fails_the_job_and_cleans_up(cluster: Cluster, operator: OperatorProcess, namespace: str) -> None:
    cluster.apply(namespace, MWMS.replace("backoffLimit: 3", "backoffLimit: 1"))
    running_pods(cluster, namespace, "mnist-mwms", 4)
    cluster.set_pod_status(namespace, "mnist-mwms-worker-1", "Failed", exit_code=143)
    job_where(cluster, namespace, "mnist-mwms", "restartCount 1", lambda j: j["status"].get("restartCount") == 1)
    running_pods(cluster, namespace, "mnist-mwms", 4)
    job_where(cluster, namespace, "mnist-mwms", "Running again", lambda j: j["status"]["phase"] == "Running")
    cluster.set_pod_status(namespace, "mnist-mwms-worker-3", "Failed", exit_code=143)

    failed = job_where(cluster, namespace, "mnist-mwms", "Failed", lambda j: holds(j, "Failed"))
    assert condition(failed, "Failed")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]
    assert failed["status"]["restartCount"] == 1
    wait_for(
        "running pods stopped (cleanPodPolicy Running)",
        lambda: all(p["status"].get("phase") != "Running" for p in cluster.job_pods(namespace, "mnist-mwms").values()),
        timeout=90,
    )
    cluster.wait_for_event(namespace, "BackoffLimitExceeded")


def test_an_evicted_worker_restarts_the_job_apart_from_the_backoff_limit(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    """An eviction (a drain, the autoscaler) is not the job's fault: with backoffLimit 0 the job restarts,
    and its status, an Event and the Restarting condition say it was disrupted. Every pod has the grace
    period the run policy gives to save."""
    policy = "backoffLimit: 0\n    terminationGracePeriodSeconds: 45"
    cluster.apply(namespace, MWMS.replace("backoffLimit: 3", policy))
    pods = running_pods(cluster, namespace, "mnist-mwms", 4)
    assert {pod["spec"]["terminationGracePeriodSeconds"] for pod in pods.values()} == {45}
    cluster.evict(namespace, "mnist-mwms-worker-1")
    disrupted = job_where(
        cluster, namespace, "mnist-mwms", "a disruption", lambda j: j["status"].get("disruptions") == 1
    )
    assert disrupted["status"].get("restartCount", 0) == 0
    assert disrupted["status"]["lastDisruption"]["reason"] == "EvictionByEvictionAPI"
    running_pods(cluster, namespace, "mnist-mwms", 4)
    running = job_where(cluster, namespace, "mnist-mwms", "Running again", lambda j: j["status"]["phase"] == "Running")
    assert not holds(running, "Failed") and running["status"].get("restartCount", 0) == 0
    cluster.wait_for_event(namespace, "Disrupted")


def test_success_stops_ps_and_evaluator_and_stays_succeeded(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.create_claim(namespace, "team-checkpoints")
    cluster.apply(namespace, PS)
    running_pods(cluster, namespace, "census-ps", 6)
    cluster.set_pod_status(namespace, "census-ps-evaluator-0", "Failed", exit_code=1)
    job_where(cluster, namespace, "census-ps", "evaluator restarted", lambda j: j["status"].get("restartCount") == 1)
    assert not holds(cluster.job(namespace, "census-ps"), "Failed")  # an evaluator never fails the job

    running_pods(cluster, namespace, "census-ps", 6)
    cluster.set_pod_status(namespace, "census-ps-chief-0", "Succeeded", exit_code=0)
    job_where(cluster, namespace, "census-ps", "Succeeded", lambda j: holds(j, "Succeeded"))

    def only_the_chief_left() -> dict[str, dict[str, Any]] | None:
        pods = cluster.job_pods(namespace, "census-ps")
        return pods if set(pods) == {"census-ps-chief-0"} else None

    left = wait_for("PS, workers and evaluator stopped", only_the_chief_left, timeout=90)
    assert left["census-ps-chief-0"]["status"]["phase"] == "Succeeded"  # finished pods stay for their logs
    final = cluster.job(namespace, "census-ps")
    assert final["status"]["phase"] == "Succeeded" and not holds(final, "Failed")


def test_the_peers_of_a_worker_0_that_succeeded_end_on_their_own_within_their_grace_or_are_stopped_after_it(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    """MultiWorkerMirrored's workers run the same steps and end together, worker 0 a moment first: when the
    job succeeds its peers are left running for their grace, so one that ends then keeps its exit code and
    last lines; one that does not is stopped by the cleanup (cleanPodPolicy Running) once it is over."""
    cluster.apply(namespace, MWMS.replace("replicas: 4", "replicas: 3"))
    running_pods(cluster, namespace, "mnist-mwms", 3)
    cluster.set_pod_status(namespace, "mnist-mwms-worker-0", "Succeeded", exit_code=0)
    job_where(cluster, namespace, "mnist-mwms", "Succeeded", lambda j: holds(j, "Succeeded"))
    pods = cluster.job_pods(namespace, "mnist-mwms")
    assert all("deletionTimestamp" not in pods[f"mnist-mwms-worker-{index}"]["metadata"] for index in (1, 2))
    cluster.set_pod_status(namespace, "mnist-mwms-worker-1", "Succeeded", exit_code=0)

    def worker_2_stopped() -> dict[str, dict[str, Any]] | None:
        pods = cluster.job_pods(namespace, "mnist-mwms")
        return pods if "mnist-mwms-worker-2" not in pods else None

    left = wait_for("worker 2 stopped after the grace", worker_2_stopped, timeout=60)
    assert {name: pod["status"]["phase"] for name, pod in left.items()} == {
        "mnist-mwms-worker-0": "Succeeded",
        "mnist-mwms-worker-1": "Succeeded",  # ended on its own: kept, with its exit code
    }
    assert cluster.job(namespace, "mnist-mwms")["status"]["phase"] == "Succeeded"


def _ps_job(cluster: Cluster, namespace: str, final_evaluation_seconds: int) -> None:
    cluster.create_claim(namespace, "team-checkpoints")
    job = JobBuilder.from_example("parameter-server.yaml").run_policy(finalEvaluationSeconds=final_evaluation_seconds)
    cluster.apply(namespace, json.dumps(job.obj()))
    running_pods(cluster, namespace, "census-ps", 6)
    cluster.set_pod_status(
        namespace, "census-ps-chief-0", "Succeeded", exit_code=0, finished_at=format_time(datetime.now(UTC))
    )


def _final_evaluation(cluster: Cluster, namespace: str) -> dict[str, Any]:
    def evaluating(job: dict[str, Any]) -> bool:
        return (condition(job, "Running") or {}).get("reason") == "FinalEvaluation"

    return job_where(cluster, namespace, "census-ps", "the final evaluation", evaluating)


def test_the_evaluator_scores_the_final_checkpoint_before_the_job_succeeds(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    _ps_job(cluster, namespace, final_evaluation_seconds=600)
    evaluating = _final_evaluation(cluster, namespace)
    assert evaluating["status"]["phase"] == "Running" and not holds(evaluating, "Succeeded")
    assert cluster.get("pod", "census-ps-evaluator-0", namespace) is not None  # not stopped with the chief
    scores = {"checkpoint": "/checkpoints/census/ckpt-300", "step": 300, "metrics": {"accuracy": 0.93}, "final": True}
    message = json.dumps({"evaluation": scores})
    cluster.set_pod_status(namespace, "census-ps-evaluator-0", "Succeeded", exit_code=0, message=message)
    done = job_where(cluster, namespace, "census-ps", "Succeeded", lambda j: holds(j, "Succeeded"))
    assert done["status"]["evaluation"] == scores
    header, row = cluster.kubectl("get", "dtj", "census-ps", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert header.split()[-3:] == ["EVAL-STEP", "EVAL-ACCURACY", "AGE"] and row.split()[-3:-1] == ["300", "0.93"]


def test_a_held_up_evaluator_is_stopped_when_its_time_is_up(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    _ps_job(cluster, namespace, final_evaluation_seconds=3)
    _final_evaluation(cluster, namespace)
    done = job_where(cluster, namespace, "census-ps", "Succeeded", lambda j: holds(j, "Succeeded"))
    said = (condition(done, "Succeeded") or {}).get("message", "")
    assert "did not end within finalEvaluationSeconds (3s) and is stopped" in said
    wait_for("the evaluator stopped", lambda: "census-ps-evaluator-0" not in cluster.job_pods(namespace, "census-ps"))


def test_deadline_is_enforced_when_nothing_else_happens(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(
        namespace, MWMS.replace("    backoffLimit: 3\n", "    backoffLimit: 3\n    activeDeadlineSeconds: 8\n")
    )
    running_pods(cluster, namespace, "mnist-mwms", 4)
    failed = job_where(cluster, namespace, "mnist-mwms", "DeadlineExceeded", lambda j: holds(j, "Failed"))
    assert condition(failed, "Failed")["reason"] == "DeadlineExceeded"  # type: ignore[index]
    cluster.wait_for_event(namespace, "DeadlineExceeded")


def test_ttl_deletes_the_finished_job_and_its_children(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(
        namespace,
        MWMS.replace("    backoffLimit: 3\n", "    backoffLimit: 3\n    ttlSecondsAfterFinished: 3\n"),
    )
    running_pods(cluster, namespace, "mnist-mwms", 4)
    cluster.set_pod_status(namespace, "mnist-mwms-worker-0", "Succeeded", exit_code=0)
    wait_for("the job to be deleted", lambda: cluster.get("dtj", "mnist-mwms", namespace) is None, timeout=90)
    wait_for("its pods to be collected", lambda: not cluster.job_pods(namespace, "mnist-mwms"), timeout=90)


def test_what_shapes_the_cluster_cannot_change_but_run_policy_can(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.apply(namespace, MWMS)

    def patch(change: dict[str, Any]) -> Any:
        text = json.dumps({"spec": change})
        return cluster.kubectl("patch", "dtj", "mnist-mwms", "-n", namespace, "--type=merge", "-p", text, check=False)

    refusals: dict[str, dict[str, Any]] = {
        "strategy cannot change": {"strategy": "Mirrored", "replicaSpecs": {"Worker": {"replicas": 1}}},
        "port cannot change": {"port": 3333},
        "progressPort cannot change": {"progressPort": 3334},
        "checkpoint cannot change": {"checkpoint": {"size": "20Gi"}},
        "replica types and counts cannot change": {"replicaSpecs": {"Worker": {"replicas": 8}}},
        "managedBy cannot change": {"managedBy": "kueue.x-k8s.io/multikueue"},
    }
    for message, change in refusals.items():
        result = patch(change)
        assert result.returncode != 0 and message in result.stderr, result.stderr
    assert patch({"runPolicy": {"backoffLimit": 9, "activeDeadlineSeconds": 3600}}).returncode == 0
    assert cluster.job(namespace, "mnist-mwms")["spec"]["runPolicy"]["backoffLimit"] == 9


def test_suspend_and_resume_as_kueue_drives_them(cluster: Cluster, operator: OperatorProcess, namespace: str) -> None:
    """Created suspended (Kueue's webhook does that), admitted with a node selector, preempted, resumed."""
    cluster.apply(namespace, MWMS.replace("    backoffLimit: 3\n", "    backoffLimit: 3\n    suspend: true\n"))
    suspended = job_where(cluster, namespace, "mnist-mwms", "Suspended", lambda j: holds(j, "Suspended"))
    assert suspended["status"]["phase"] == "Suspended" and "startTime" not in suspended["status"]
    wait_for("the volume", lambda: cluster.get("pvc", "mnist-mwms-checkpoint", namespace))
    assert not cluster.job_pods(namespace, "mnist-mwms")

    def patch(spec: dict[str, Any]) -> None:
        cluster.kubectl("patch", "dtj", "mnist-mwms", "-n", namespace, "--type=merge", "-p", json.dumps({"spec": spec}))

    admitted = {"Worker": {"template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}}}}}
    patch({"replicaSpecs": admitted, "runPolicy": {"suspend": False}})
    pods = running_pods(cluster, namespace, "mnist-mwms", 4)
    assert all(pod["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"} for pod in pods.values())
    first = job_where(cluster, namespace, "mnist-mwms", "Running", lambda j: j["status"]["phase"] == "Running")

    patch({"runPolicy": {"suspend": True}})
    job_where(cluster, namespace, "mnist-mwms", "Suspended again", lambda j: j["status"]["phase"] == "Suspended")
    wait_for("pods deleted", lambda: not cluster.job_pods(namespace, "mnist-mwms"), timeout=90)
    assert cluster.get("pvc", "mnist-mwms-checkpoint", namespace) is not None

    time.sleep(1.1)  # startTime has one-second resolution
    patch({"runPolicy": {"suspend": False}})
    running_pods(cluster, namespace, "mnist-mwms", 4)
    resumed = job_where(cluster, namespace, "mnist-mwms", "Running", lambda j: j["status"]["phase"] == "Running")
    assert resumed["status"]["startTime"] > first["status"]["startTime"]
    assert condition(resumed, "Suspended")["reason"] == "JobResumed"  # type: ignore[index]


def test_metrics_count_jobs_by_namespace(cluster: Cluster, operator: OperatorProcess, namespace: str) -> None:
    cluster.apply(namespace, MWMS)
    running_pods(cluster, namespace, "mnist-mwms", 4)
    cluster.set_pod_status(namespace, "mnist-mwms-worker-0", "Succeeded", exit_code=0)
    job_where(cluster, namespace, "mnist-mwms", "Succeeded", lambda j: holds(j, "Succeeded"))

    def scrape() -> str | None:
        with urllib.request.urlopen(operator.metrics_url, timeout=5) as response:
            text: str = response.read().decode()
        return text if f'disttrain_jobs_succeeded_total{{namespace="{namespace}"}} 1.0' in text else None

    text = wait_for("the success counted", scrape, timeout=30)
    assert f'disttrain_jobs_created_total{{namespace="{namespace}"}} 1.0' in text
    assert f'disttrain_jobs_active{{namespace="{namespace}"}} 0.0' in text
    assert f'disttrain_jobs{{namespace="{namespace}",phase="Succeeded"}} 1.0' in text
    assert f'disttrain_jobs{{namespace="{namespace}",phase="Running"}} 0.0' in text
    assert 'controller_runtime_reconcile_time_seconds_count{controller="disttrainjob"}' in text
    assert 'workqueue_depth{name="disttrainjob"}' in text
    assert "# TYPE disttrain_api_errors_total counter" in text


def test_a_pod_stuck_on_a_lost_node_is_replaced(cluster: Cluster, operator: OperatorProcess, namespace: str) -> None:
    """A pod whose kubelet stopped answering stays Terminating; the operator removes it by force and replaces it."""
    cluster.apply(namespace, MWMS)
    victim = running_pods(cluster, namespace, "mnist-mwms", 4)["mnist-mwms-worker-1"]
    cluster.kubectl("annotate", "pod", "mnist-mwms-worker-1", "-n", namespace, UNATTENDED_ANNOTATION)
    cluster.kubectl("delete", "pod", "mnist-mwms-worker-1", "-n", namespace, "--grace-period=1", "--wait=false")

    def replaced() -> dict[str, Any] | None:
        pod = cluster.job_pods(namespace, "mnist-mwms").get("mnist-mwms-worker-1")
        if pod is None or pod["metadata"]["uid"] == victim["metadata"]["uid"]:
            return None
        return pod if pod["status"].get("phase") == "Running" else None

    wait_for("a replacement of the stuck pod", replaced, timeout=90)
    cluster.wait_for_event(namespace, "PodStuckTerminating")


def test_gang_scheduling_makes_one_pod_group_never_recreated_after_the_end(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.kubectl("apply", "--server-side", "-f", str(ROOT / "tests" / "integration" / "crds" / "podgroups.yaml"))
    cluster.kubectl("wait", "--for=condition=Established", "crd/podgroups.scheduling.x-k8s.io", "--timeout=60s")
    policy = "    schedulingPolicy: {minAvailable: 3, queue: research, scheduleTimeoutSeconds: 120}\n"
    cluster.apply(namespace, MWMS.replace("    backoffLimit: 3\n", "    backoffLimit: 3\n" + policy))
    group = wait_for("the PodGroup", lambda: cluster.get("podgroups.scheduling.x-k8s.io", "mnist-mwms", namespace))
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["minResources"]["nvidia.com/gpu"] == "4"
    assert group["spec"]["scheduleTimeoutSeconds"] == 120
    assert group["metadata"]["ownerReferences"][0]["kind"] == "DistTrainJob"
    pods = wait_for("4 pods", lambda: (p := cluster.job_pods(namespace, "mnist-mwms")) and len(p) == 4 and p)
    for pod in pods.values():
        assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "mnist-mwms"

    cluster.set_pod_status(namespace, "mnist-mwms-worker-0", "Succeeded", exit_code=0)
    job_where(cluster, namespace, "mnist-mwms", "Succeeded", lambda j: holds(j, "Succeeded"))
    cluster.kubectl("delete", "podgroups.scheduling.x-k8s.io", "mnist-mwms", "-n", namespace)
    patch = json.dumps({"spec": {"runPolicy": {"backoffLimit": 4}}})  # a change to react to
    cluster.kubectl("patch", "dtj", "mnist-mwms", "-n", namespace, "--type=merge", "-p", patch)
    generation = cluster.job(namespace, "mnist-mwms")["metadata"]["generation"]
    job_where(
        cluster,
        namespace,
        "mnist-mwms",
        "the change observed",
        lambda j: j["status"]["observedGeneration"] == generation,
    )
    assert cluster.get("podgroups.scheduling.x-k8s.io", "mnist-mwms", namespace) is None


def test_trainer_progress_reaches_status_and_kubectl_get(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    """Polled from the reporting pod while it runs, then the final report from its termination message."""
    trainer = TrainerProgress()
    trainer.record = {"step": 120, "totalSteps": 300, "epoch": 2, "loss": 0.31, "updateTime": "2026-01-01T00:00:00Z"}
    try:
        cluster.apply(namespace, MWMS.replace("spec:\n", f"spec:\n  progressPort: {trainer.port}\n", 1))
        running_pods(cluster, namespace, "mnist-mwms", 4)
        # Worker 0 reports (there is no chief); its address becomes this machine, where the stand-in listens.
        cluster.kubectl("annotate", "pod", "mnist-mwms-worker-0", "-n", namespace, UNATTENDED_ANNOTATION)
        address = {"podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]}
        cluster.patch_pod_status(namespace, "mnist-mwms-worker-0", address)
        polled = job_where(
            cluster, namespace, "mnist-mwms", "progress step 120", lambda j: j["status"].get("progress", {}).get("step")
        )
        shown = polled["status"]["progress"]
        assert {key: shown.get(key) for key in trainer.record} == trainer.record
        assert shown["fractionDone"] == 0.4 and "stepsPerSecond" not in shown  # one report: no rate yet
        header, row = cluster.kubectl("get", "dtj", "mnist-mwms", "-n", namespace, "-o", "wide").stdout.splitlines()
        starts = [match.start() for match in re.finditer(r"\S+", header)]  # a column with no value prints blank
        cells = [row[start:end].strip() for start, end in zip(starts, [*starts[1:], None], strict=True)]
        columns = dict(zip(header.split(), cells, strict=True))
        assert (columns["STEP"], columns["EPOCH"], columns["LOSS"]) == ("120", "2", "0.31")

        final = {"step": 300, "totalSteps": 300, "epoch": 5, "loss": 0.12, "updateTime": "2026-01-01T00:10:00Z"}
        cluster.set_pod_status(namespace, "mnist-mwms-worker-0", "Succeeded", exit_code=0, message=json.dumps(final))
        done = job_where(cluster, namespace, "mnist-mwms", "Succeeded", lambda j: holds(j, "Succeeded"))
        assert done["status"]["progress"]["step"] == 300
    finally:
        trainer.server.shutdown()


def _reports_from_here(cluster: Cluster, namespace: str, pod: str) -> None:
    """The reporting pod's address becomes this machine, where a stand-in trainer listens."""
    cluster.kubectl("annotate", "pod", pod, "-n", namespace, UNATTENDED_ANNOTATION)
    cluster.patch_pod_status(namespace, pod, {"podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]})


def test_a_progress_deadline_judges_a_run_whose_trainer_answers_and_not_one_that_never_does(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    """Two jobs under the same deadline whose first step never comes: the one whose trainer answers 204 (the
    contract's "no report yet") is Stalled at its startup allowance and restarted; the one whose pods serve no
    progress port (a user's own image) runs on unjudged, saying so, and succeeds when its worker does."""
    trainer = TrainerProgress()  # no record: 204
    policy = {"progressDeadlineSeconds": 10, "startupDeadlineSeconds": 10, "backoffLimit": 3}
    try:

        def one_worker(name: str) -> JobBuilder:
            example = JobBuilder.from_example("multi-worker-mirrored-gpu.yaml").metadata(name=name)
            return example.replica("Worker", replicas=1).run_policy(**policy)

        answering, silent = one_worker("answering").spec(progressPort=trainer.port), one_worker("silent")
        for builder in (answering, silent):
            cluster.apply(namespace, json.dumps(builder.obj()))
        for job in ("answering", "silent"):
            running_pods(cluster, namespace, job, 1)
        _reports_from_here(cluster, namespace, "answering-worker-0")

        stalled = job_where(cluster, namespace, "answering", "Stalled", lambda j: holds(j, "Stalled"))
        said = condition(stalled, "Stalled")
        assert said is not None and said["reason"] == "NoProgress" and "within 10 s of the run" in said["message"]
        job_where(cluster, namespace, "answering", "restarted", lambda j: j["status"].get("restartCount") == 1)

        def unjudged(job: dict[str, Any]) -> bool:
            found = condition(job, "Stalled")
            return found is not None and found["status"] == "False" and found["reason"] == "ProgressNotReported"

        running = job_where(cluster, namespace, "silent", "ProgressNotReported", unjudged)
        message = condition(running, "Stalled")["message"]  # type: ignore[index]
        assert "progressDeadlineSeconds (10 s, the job's) does not apply" in message and "(9471)" in message
        cluster.wait_for_event(namespace, "ProgressNotReported")
        assert running["status"]["phase"] == "Running" and running["status"].get("restartCount", 0) == 0
        assert "progressAnswerTime" not in running["status"]
        cluster.set_pod_status(namespace, "silent-worker-0", "Succeeded", exit_code=0)
        done = job_where(cluster, namespace, "silent", "Succeeded", lambda j: holds(j, "Succeeded"))
        assert done["status"].get("restartCount", 0) == 0, done["status"]
    finally:
        trainer.server.shutdown()


def test_a_claim_that_cannot_bind_shows_in_the_status_with_its_storage_classs_words_until_it_binds(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    """The checkpoint claim names a StorageClass the cluster lacks: the PV controller's Warning on the claim
    reaches the job's VolumeUnbound condition and an Event; a volume made for the claim binds
    it, the condition turns False and the pods run."""
    job = (
        JobBuilder.from_example("multi-worker-mirrored-gpu.yaml")
        .metadata(name="unbound")
        .replica("Worker", replicas=1)
        .spec(checkpoint={"size": "1Gi", "storageClassName": "no-such-class"})
    )
    cluster.apply(namespace, json.dumps(job.obj()))
    wait_for("the pod", lambda: cluster.job_pods(namespace, "unbound"))
    unbound = job_where(cluster, namespace, "unbound", "VolumeUnbound", lambda j: holds(j, "VolumeUnbound"))
    said = condition(unbound, "VolumeUnbound")
    assert said is not None and said["reason"] == "ClaimUnbound", said
    assert said["message"] == (
        "the PersistentVolumeClaim unbound-checkpoint is not bound: "
        'ProvisioningFailed: storageclass.storage.k8s.io "no-such-class" not found'
    )
    cluster.wait_for_event(namespace, "ClaimUnbound")
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{namespace}-unbound"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "no-such-class",
            "hostPath": {"path": f"/tmp/{namespace}-unbound"},
            "claimRef": {"namespace": namespace, "name": "unbound-checkpoint"},
        },
    }
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(volume))
    try:
        bound = job_where(cluster, namespace, "unbound", "ClaimsBound", lambda j: not holds(j, "VolumeUnbound"))
        assert condition(bound, "VolumeUnbound")["reason"] == "ClaimsBound"  # type: ignore[index]
        running_pods(cluster, namespace, "unbound", 1)
    finally:
        cluster.kubectl("delete", "pv", f"{namespace}-unbound", "--wait=false")
