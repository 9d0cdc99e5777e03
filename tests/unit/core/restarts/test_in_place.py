"""Whole-job restarts in place: the rule the trainers' containers get, the runs a pod reports, and what the
planner makes of a run that ended in place, of a pod owed a restart in place, and of one that failed instead."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from disttrain_contract.exit_codes import ExitCode
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.tenant_input import ATTEMPT, LOG_MAX_BYTES, RUNS_COUNTED
from disttrain_core.builders import objects
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.observed import PodPhase, PodView, Runs, pod_view, restarts_on
from disttrain_core.planner import Plan, plan
from disttrain_core.restarts import in_place
from disttrain_core.restarts.record import record_outrun, record_restart
from disttrain_core.status_from_pods import aggregated
from support.job_builder import JobBuilder

NOW = datetime(2026, 1, 1, tzinfo=UTC)
IN_PLACE = BuildSettings(restart_in_place=True)
RETRYABLE = list(range(128, 256))


def _job(policy: str = "ExitCode", **run_policy: Any) -> DistTrainJob:
    return JobBuilder().counts({"Worker": 2}, restartPolicy=policy).run_policy(**run_policy).job()


def _container(job: DistTrainJob, settings: BuildSettings = IN_PLACE, kind: ReplicaType = ReplicaType.WORKER) -> Any:
    return objects.pod(job, kind, 0, settings)["spec"]["containers"][0]


def test_a_job_that_restarts_as_a_whole_restarts_in_place_on_every_code_its_policy_restarts_for() -> None:
    job = _job()
    manifest = objects.pod(job, ReplicaType.WORKER, 0, IN_PLACE)
    container = manifest["spec"]["containers"][0]
    assert container["restartPolicy"] == "Never"
    assert container["restartPolicyRules"] == [
        {"action": "Restart", "exitCodes": {"operator": "In", "values": RETRYABLE}}
    ]
    assert manifest["metadata"]["annotations"][RUNS_COUNTED] == "0"
    assert manifest["spec"]["restartPolicy"] == "Never"  # a code outside the rule fails the pod, as before


def test_the_rule_leaves_out_what_the_failure_policy_fails_and_what_diverged() -> None:
    rules = [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [137]}}]
    assert in_place.restart_codes(_job(failurePolicy={"rules": rules}), ReplicaType.WORKER) == [
        code for code in RETRYABLE if code != 137
    ]
    on_failure = _container(_job(policy="OnFailure"))["restartPolicyRules"][0]["exitCodes"]
    assert on_failure == {"operator": "NotIn", "values": [0, ExitCode.DIVERGED]}  # the shorter list of the two


def test_no_rule_where_the_cluster_or_the_job_does_not_restart_in_place_or_the_template_has_its_own() -> None:
    assert "restartPolicyRules" not in _container(_job(), BuildSettings())
    assert "restartPolicyRules" not in _container(_job(restartScope="Replica"))  # restarts a replica alone
    assert "restartPolicyRules" not in _container(_job(policy="Never"))  # no code restarts
    own = {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}
    job = _job()
    template = job.spec.replica_specs[ReplicaType.WORKER].template
    template["spec"]["containers"][0] |= {"restartPolicy": "Never", "restartPolicyRules": [own]}
    manifest = objects.pod(job, ReplicaType.WORKER, 0, IN_PLACE)
    assert manifest["spec"]["containers"][0]["restartPolicyRules"] == [own]
    assert RUNS_COUNTED not in manifest["metadata"]["annotations"]


def _body(restarts: int, counted: str | None, exit_code: int = 137) -> dict[str, Any]:
    annotations = {ATTEMPT: "3", **({} if counted is None else {RUNS_COUNTED: counted})}
    last = {"terminated": {"exitCode": exit_code, "reason": "Error", "finishedAt": "2026-01-01T00:00:00Z"}}
    container = {"name": "tensorflow", "restartCount": restarts, "state": {"running": {}}, "lastState": last}
    labels = {"disttrain.io/replica-type": "worker", "disttrain.io/replica-index": "0"}
    metadata = {"name": "job-worker-0", "uid": "u", "labels": labels, "annotations": annotations}
    spec = {"containers": [{"name": "tensorflow", "restartPolicy": "Never", "restartPolicyRules": [RULE]}]}
    return {"metadata": metadata, "spec": spec, "status": {"phase": "Running", "containerStatuses": [container]}}


RULE = in_place.restart_rule([code for code in range(1, 256) if code != ExitCode.DIVERGED])  # NotIn [0, 5]


def test_a_pod_that_restarts_in_place_reports_its_runs_and_each_run_is_an_attempt() -> None:
    view = pod_view(_body(restarts=2, counted="1"))
    assert view is not None and view.runs is not None
    assert (view.runs.ended, view.runs.counted, view.runs.exit_code, view.runs.uncounted) == (2, 1, 137, True)
    assert view.runs.finished_at == NOW
    assert view.attempt == 5  # made as attempt 3, and restarted twice
    plain = pod_view(_body(restarts=2, counted=None))
    assert plain is not None and (plain.runs, plain.attempt) == (None, 3)
    forged = pod_view(_body(restarts=2, counted="-4"))  # a tenant's own value that is no count: not followed
    assert forged is not None and forged.runs is None


def _worker(index: int, ended: int = 0, counted: int = 0, exit_code: int | None = None, **fields: Any) -> PodView:
    runs = Runs(ended=ended, counted=counted, exit_code=exit_code, finished_at=NOW if exit_code else None)
    name = f"job-worker-{index}"
    return PodView(name, ReplicaType.WORKER, index, PodPhase.RUNNING, uid=f"uid-{index}", runs=runs, **fields)


def _plan(job: DistTrainJob, pods: list[PodView], now: datetime = NOW, handled: frozenset[str] = frozenset()) -> Plan:
    status = aggregated(job, pods, created=True, now=now).status
    return plan(job.model_copy(update={"status": status}), pods, [], IN_PLACE, now=now, handled=handled)


def test_a_run_that_ended_in_place_restarts_the_job_in_place_counted_once() -> None:
    """Worker 0 was killed and restarted in place; worker 1 still runs its first run: neither is deleted, the
    restart is counted with worker 0's exit code, and it covers worker 0's run that ended and worker 1's to come."""
    job = _job()
    pods = [_worker(0, ended=1, exit_code=137), _worker(1)]
    decided = _plan(job, pods)
    assert decided.delete == [] and decided.restart is not None
    assert decided.restart.in_place == (("job-worker-0", 1), ("job-worker-1", 1))
    assert [(pod.name, pod.exit_code, pod.uid) for pod in decided.restart.failed] == [
        ("job-worker-0", 137, in_place.run_key("uid-0", 1))
    ]
    assert "exit code 137" in decided.restart.message and "the whole job restarts" in decided.restart.message
    # that run handled, nothing more happens: not even for worker 1, which ends as it was counted to
    handled = frozenset({in_place.run_key("uid-0", 1), in_place.run_key("uid-1", 1)})
    counted = [_worker(0, ended=1, counted=1, exit_code=137), _worker(1, ended=1, counted=1, exit_code=130)]
    assert _plan(job, counted, handled=handled).restart is None
    assert _plan(job, counted).restart is None  # the counts written on the pods say so to a fresh operator


def test_a_pod_owed_a_restart_in_place_is_replaced_with_its_peers_after_the_grace_and_one_that_failed_at_once() -> None:
    job = _job()
    status = record_restart(aggregated(job, [], created=True, now=NOW).status, [], "worker 0 failed", NOW, 1)
    job = job.model_copy(update={"status": status})
    owed = [_worker(0, ended=1, counted=1, exit_code=137), _worker(1, ended=0, counted=1)]
    waiting = plan(job, owed, [], IN_PLACE, now=NOW + timedelta(seconds=5))
    assert (waiting.delete, waiting.restart, waiting.wake_at) == ([], None, NOW + in_place.IN_PLACE_GRACE)
    late = plan(job, owed, [], IN_PLACE, now=NOW + in_place.IN_PLACE_GRACE)
    assert (late.delete, late.restart, late.fail) == (["job-worker-0", "job-worker-1"], None, None)  # all anew
    # a user's image that exits 1 on losing its peer: a permanent code, but an end the restart counted already
    failed = replace(owed[1], phase=PodPhase.FAILED, exit_code=ExitCode.INTERNAL_ERROR, runs=Runs(ended=1, counted=1))
    ended = plan(job, [owed[0], failed], [], IN_PLACE, now=NOW + timedelta(seconds=5))
    assert (ended.delete, ended.restart, ended.fail) == (["job-worker-1"], None, None)


def test_a_quick_restart_replaces_every_pod_for_the_pause_it_earns() -> None:
    job = _job()
    status = record_restart(aggregated(job, [], created=True, now=NOW).status, [], "worker 0 failed", NOW, 1)
    job = job.model_copy(update={"status": status})
    pods = [_worker(0, ended=2, counted=1, exit_code=137), _worker(1, ended=1, counted=1)]
    decided = plan(job, pods, [], IN_PLACE, now=NOW + timedelta(seconds=5))
    assert decided.restart is not None and decided.restart.in_place == ()
    assert decided.delete == ["job-worker-0", "job-worker-1"]


def test_a_failure_past_the_backoff_limit_fails_the_job_however_it_restarted() -> None:
    job = _job(backoffLimit=0)
    decided = _plan(job, [_worker(0, ended=1, exit_code=137), _worker(1)])
    assert decided.fail is not None and decided.fail.reason == "BackoffLimitExceeded"


def test_a_run_that_ended_shows_before_the_kubelet_counts_the_restart() -> None:
    """The kubelet counts a restart once the next run starts: the run that ended is read from the container's
    state, ended or waiting out CrashLoopBackOff, and its log is due only once the next run runs."""
    ended = _body(restarts=1, counted="1")
    container = ended["status"]["containerStatuses"][0]
    container["state"] = {"terminated": {"exitCode": 130, "finishedAt": "2026-01-01T00:00:00Z"}}
    view = pod_view(ended)
    assert view is not None and view.runs is not None
    assert (view.runs.ended, view.runs.exit_code, view.run_log_due) == (2, 130, None)
    container["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
    waiting = pod_view(ended)
    assert waiting is not None and waiting.runs is not None and (waiting.runs.ended, waiting.runs.exit_code) == (2, 137)


def test_a_run_the_rule_does_not_restart_is_the_pod_s_end_and_no_run_of_its_own() -> None:
    """The kubelet may show the trainer's last run ended a moment before the pod's phase follows: a success, or
    a code its rule leaves out, is no run that restarts in place (counted as one, a success restarted the job)."""
    for code in (0, ExitCode.DIVERGED):
        body = _body(restarts=1, counted="1")
        body["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": code, "reason": "Completed"}}
        view = pod_view(body)
        assert view is not None and view.runs is not None
        assert (view.runs.ended, view.runs.exit_code, view.runs.uncounted) == (1, 137, False), code
        body["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
        ended = pod_view(body)
        assert ended is not None and ended.runs is not None and (ended.runs.ended, ended.runs.exit_code) == (2, code)
        assert not in_place.end_counted(ended)  # its end is its own, not the one the restart counted
    assert restarts_on({"restartPolicyRules": [RULE]}, 130) and not restarts_on({}, 130)
    assert not restarts_on({"restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In"}}]}, 1)
    assert not restarts_on({"restartPolicyRules": "junk"}, True)


def test_a_trainer_the_kubelet_holds_back_is_replaced_once_its_run_is_counted() -> None:
    """A restart within 10 minutes of the last waits out the kubelet's CrashLoopBackOff (10 s, doubling): a pod
    of its own starts sooner. Its run's end is counted first, in place, then the pod goes."""
    job = _job()
    held = Runs(ended=2, counted=1, backing_off=True, exit_code=137, finished_at=NOW)
    first = _plan(job, [_worker(0, ended=1, counted=1), replace(_worker(1), runs=held)])
    assert first.restart is not None and first.delete == []
    counted = replace(held, counted=2)
    then = _plan(job, [_worker(0, ended=2, counted=2), replace(_worker(1), runs=counted)])
    assert (then.restart, then.delete) == (None, ["job-worker-1"])
    waiting = _body(restarts=1, counted="2")
    waiting["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
    view = pod_view(waiting)
    assert view is not None and view.runs is not None and view.runs.backing_off


def test_a_count_a_tenant_wrote_on_its_pod_harms_only_that_job() -> None:
    """The annotation is the tenant's to write too: a count that is no number is not followed (the pod restarts
    as if it had none), and one too high holds nothing back past the grace, after which the job's pods are
    made anew, counting nothing."""
    for forged in ("lots", "1e9", str(2**40)):
        view = pod_view(_body(restarts=1, counted=forged))
        assert view is not None and view.runs is None, forged
    job = _job()
    status = record_restart(aggregated(job, [], created=True, now=NOW).status, [], "worker 0 failed", NOW, 1)
    job = job.model_copy(update={"status": status})
    inflated = [_worker(0, ended=1, counted=2**31 - 1), _worker(1, ended=1, counted=1)]
    late = plan(job, inflated, [], IN_PLACE, now=NOW + in_place.IN_PLACE_GRACE)
    assert (late.delete, late.restart, late.fail) == (["job-worker-0", "job-worker-1"], None, None)


def test_a_drain_that_evicts_a_pod_the_restart_covered_in_place_adds_no_disruption() -> None:
    """A drain evicts a job's pods one by one: the first eviction restarts the job, worker 0 in place, and the
    eviction of worker 0 that follows is part of that restart, made again once it is gone, not a second one."""
    job = _job()
    evicted = replace(_worker(1), deleting=True, disruption="EvictionByEvictionAPI")
    first = _plan(job, [_worker(0), evicted])
    assert first.restart is not None and first.restart.in_place == (("job-worker-0", 1),)
    status = record_restart(
        aggregated(job, [], created=True, now=NOW).status, first.restart.failed, "evicted", NOW, 1, disruption="Evicted"
    )
    then = job.model_copy(update={"status": status})
    owed_then_evicted = replace(_worker(0, counted=1), deleting=True, disruption="EvictionByEvictionAPI")
    handled = frozenset({evicted.uid, in_place.run_key("uid-0", 1)})
    second = plan(then, [owed_then_evicted, evicted], [], IN_PLACE, now=NOW + timedelta(seconds=1), handled=handled)
    assert (second.restart, second.fail) == (None, None)
    unowed = replace(owed_then_evicted, runs=Runs(ended=1, counted=1))  # its restart in place came: a loss of its own
    assert _plan(then, [unowed, evicted], handled=handled).restart is not None


def _succeeded(restarts: int, counted: str) -> dict[str, Any]:
    body = _body(restarts=restarts, counted=counted)
    body["metadata"]["annotations"][LOG_MAX_BYTES] = "1000"
    body["status"]["phase"] = "Succeeded"
    body["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    return body


def test_a_restart_in_place_the_job_outran_is_counted_once_and_its_run_s_log_kept() -> None:
    """The kubelet restarted worker 0 on its exit code and the next run succeeded before any plan saw the first
    end: the job's status counts that restart (restartCount and the Worker's), the pod's note then holds it, and
    the log of the run before the last is due."""
    job = JobBuilder().counts({"Worker": 1}, restartPolicy="ExitCode").job()
    view = pod_view(_succeeded(restarts=1, counted="0"))
    assert view is not None and view.runs is not None and (view.runs.ended, view.runs.counted) == (2, 0)
    assert view.run_log_due == 1
    decided = _plan(job, [view])
    assert (decided.outrun, decided.restart, decided.delete) == ((("job-worker-0", 1),), None, [])
    status = record_outrun(aggregated(job, [view], created=True, now=NOW).status, [view], decided.outrun)
    assert (status.phase, status.restart_count, status.replica_statuses[ReplicaType.WORKER].restarts) == (
        "Succeeded",
        1,
        1,
    )
    assert _plan(job, [view], handled=frozenset({in_place.run_key(view.uid, 1)})).outrun == ()
    noted = pod_view(_succeeded(restarts=1, counted="1"))
    assert noted is not None and _plan(job, [noted]).outrun == ()


def test_a_run_that_ended_in_place_beyond_those_counted_answers_as_the_pod_that_failed_with_it() -> None:
    """Its own key, Failed and not ready, with the run's exit code, reason, message and end; the pod's own reports
    and logs stay with the pod, which runs on. A pod whose runs were all counted, or that ended, has none."""
    ended_at = NOW - timedelta(seconds=5)
    runs = Runs(ended=2, counted=1, exit_code=137, reason="Error", message="killed", finished_at=ended_at)
    running = PodView(
        name="job-worker-0", replica_type=ReplicaType.WORKER, index=0, phase=PodPhase.RUNNING, uid="u", ready=True
    )
    (previous,) = in_place.previous_runs([replace(running, runs=runs)])
    assert (previous.name, previous.uid, previous.phase, previous.ready) == (
        "job-worker-0",
        in_place.run_key("u", 2),
        PodPhase.FAILED,
        False,
    )
    assert (previous.exit_code, previous.reason, previous.message, previous.finished_at) == (
        137,
        "Error",
        "killed",
        ended_at,
    )
    assert (previous.runs, previous.log_due, previous.final_report) == (None, False, None)
    counted = replace(running, runs=replace(runs, counted=2))
    failed = replace(running, phase=PodPhase.FAILED, runs=runs)
    assert in_place.previous_runs([counted, failed]) == []
