"""The restart decision as the planner carries it: which failures restart the job, how far, counted or not, and
when the job fails instead; the pause quick restarts earn."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from disttrain_contract.exit_codes import ExitCode
from disttrain_core.api.spec import ReplicaType
from disttrain_core.observed import PodPhase
from disttrain_core.planner import plan
from disttrain_core.restarts.record import HEALTHY_RUN, RESTART_DECAY, record_restart, restart_backoff
from disttrain_core.status_from_pods import aggregated, failure
from disttrain_core.types import ObjectRef, Verdict
from support.planning import NOW, SETTINGS, job_of, planned, pod_of

JOB_CHILDREN = [ObjectRef("Service", "job"), ObjectRef("NetworkPolicy", "job")]


def _rules(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"rules": list(rules)}


def test_multi_worker_failure_restarts_the_whole_job() -> None:
    job = job_of({"Worker": 3})
    pods = [
        pod_of(ReplicaType.WORKER, 0),
        pod_of(ReplicaType.WORKER, 1, PodPhase.FAILED, exit_code=130),
        pod_of(ReplicaType.WORKER, 2),
    ]
    result = planned(job, pods)
    assert result.restart is not None
    assert result.delete == ["job-worker-0", "job-worker-1", "job-worker-2"]
    assert "job-worker-1 failed with exit code 130: the whole job restarts" in result.restart.message


def test_a_restart_is_decided_once() -> None:
    job = job_of({"Worker": 2})
    pods = [pod_of(ReplicaType.WORKER, 0), pod_of(ReplicaType.WORKER, 1, PodPhase.FAILED, exit_code=130)]
    assert planned(job, pods, handled={"uid-job-worker-1-0"}).restart is None


def test_parameter_server_worker_restarts_alone_and_a_ps_takes_the_chief_and_the_workers() -> None:
    job = job_of({"Chief": 1, "Worker": 2, "PS": 1})
    running = [pod_of(ReplicaType.CHIEF, 0), pod_of(ReplicaType.WORKER, 0), pod_of(ReplicaType.PS, 0)]
    worker = planned(job, [*running, pod_of(ReplicaType.WORKER, 1, PodPhase.FAILED, exit_code=137)])
    assert worker.delete == ["job-worker-1"]
    ps = planned(
        job, [running[0], running[1], pod_of(ReplicaType.PS, 0, PodPhase.FAILED, exit_code=None, reason="Evicted")]
    )
    assert ps.delete == ["job-chief-0", "job-ps-0", "job-worker-0"]
    assert ps.restart is not None and ps.restart.message.endswith("the PS, the Chief and the workers restart")


def test_a_lost_ps_waits_for_a_chief_created_moments_ago() -> None:
    """The Chief and the workers restart with their PS: one created but not in the view yet would be left behind."""
    job = job_of({"Chief": 1, "Worker": 1, "PS": 1})
    lost = [pod_of(ReplicaType.WORKER, 0), pod_of(ReplicaType.PS, 0, PodPhase.FAILED, exit_code=137)]
    waiting = planned(job, lost, awaited={"job-chief-0"})
    assert waiting.restart is None and waiting.delete == []
    assert planned(job, lost, awaited={"job-worker-0"}).restart is None
    shown = planned(job, [pod_of(ReplicaType.CHIEF, 0, generation=1), *lost])
    assert shown.delete == ["job-chief-0", "job-ps-0", "job-worker-0"]
    worker_lost = [pod_of(ReplicaType.PS, 0), pod_of(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=137)]
    alone = planned(job, worker_lost, awaited={"job-chief-0"})
    assert alone.delete == ["job-worker-0"]  # a worker restarts alone: nothing to wait for


def test_evaluator_restarts_alone_even_under_job_scope() -> None:
    job = job_of({"Chief": 1, "Worker": 2, "Evaluator": 1}, policy="OnFailure")
    pods = [pod_of(ReplicaType.CHIEF, 0), pod_of(ReplicaType.EVALUATOR, 0, PodPhase.FAILED, exit_code=1)]
    assert planned(job, pods).delete == ["job-evaluator-0"]


def test_permanent_exit_codes_and_never_do_not_restart() -> None:
    permanent = [pod_of(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=3)]
    assert planned(job_of({"Worker": 1}), permanent).restart is None
    never = [pod_of(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=137)]
    assert planned(job_of({"Worker": 1}, policy="Never"), never).restart is None


def test_backoff_limit_fails_the_job() -> None:
    job = job_of({"Worker": 2}, backoffLimit=1)
    job = job.model_copy(update={"status": job.status.model_copy(update={"restart_count": 1})})
    result = planned(
        job, [pod_of(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=143), pod_of(ReplicaType.WORKER, 1)]
    )
    assert result.fail is not None and result.fail.reason == "BackoffLimitExceeded"
    assert result.delete == [] and result.create == []


def test_a_disruption_restarts_past_the_backoff_limit_and_whatever_the_restart_policy() -> None:
    """An evicted, preempted or drained pod is not the job's fault: with backoffLimit 0 and restartPolicy
    Never the job restarts all the same; a real failure beside it makes the restart a counted one."""
    job = job_of({"Worker": 2}, policy="Never", backoffLimit=0)
    evicted = pod_of(ReplicaType.WORKER, 1, deleting=True, disruption="EvictionByEvictionAPI")
    result = planned(job, [pod_of(ReplicaType.WORKER, 0), evicted])
    assert result.fail is None and result.restart is not None
    assert result.restart.disruption == "EvictionByEvictionAPI"
    assert result.restart.message == (
        "job-worker-1 was taken away (EvictionByEvictionAPI): the whole job restarts, not counted against backoffLimit"
    )
    assert result.delete == ["job-worker-0"]
    preempted = pod_of(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=140, disruption="Preempted")
    assert planned(job, [preempted, pod_of(ReplicaType.WORKER, 1)]).restart is not None
    failed = pod_of(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=137)
    retried = job_of({"Worker": 2}, backoffLimit=0)
    mixed = planned(retried, [failed, evicted])
    assert mixed.restart is None and mixed.fail is not None and mixed.fail.reason == "BackoffLimitExceeded"


def test_a_peer_lost_beside_a_disruption_is_part_of_it_unless_a_rule_says_otherwise() -> None:
    """Worker 0 left with `a peer was lost` as worker 1 was evicted, both seen in one view: one uncounted
    restart. Alone, or under a rule that names its exit code, the same failure counts."""
    job = job_of({"Worker": 2}, backoffLimit=0)
    evicted = pod_of(ReplicaType.WORKER, 1, deleting=True, disruption="EvictionByEvictionAPI")
    peer_lost = pod_of(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=130)
    beside = planned(job, [peer_lost, evicted])
    assert beside.fail is None and beside.restart is not None
    assert beside.restart.disruption == "EvictionByEvictionAPI"
    alone = planned(job, [peer_lost, pod_of(ReplicaType.WORKER, 1)])
    assert alone.fail is not None and alone.fail.reason == "BackoffLimitExceeded"
    ruled = job_of(
        {"Worker": 2},
        backoffLimit=0,
        failurePolicy=_rules({"action": "RestartJob", "onExitCodes": {"operator": "In", "values": [130]}}),
    )
    counted = planned(ruled, [peer_lost, evicted])
    assert counted.fail is not None and counted.fail.reason == "BackoffLimitExceeded"


def test_the_first_failure_policy_rule_that_matches_decides_before_the_restart_policy() -> None:
    """A permanent code restarted, a retryable one failing the job, one replica alone, uncounted."""
    policy = _rules(
        {"action": "FailJob", "replicaTypes": ["Worker"], "onExitCodes": {"operator": "In", "values": [137]}},
        {"action": "RestartReplica", "onExitCodes": {"operator": "In", "values": [3]}},
        {"action": "Ignore", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}},
    )
    job = job_of({"Chief": 1, "Worker": 2}, backoffLimit=0, failurePolicy=policy)
    oom = [pod_of(ReplicaType.CHIEF, 0), pod_of(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=137)]
    assert planned(job, oom).restart is None
    assert failure(job, oom) == Verdict(
        "FailurePolicy",
        "pod job-worker-0 failed with exit code 137; failurePolicy rule 1 fails the job",
    )

    alone = planned(job, [pod_of(ReplicaType.CHIEF, 0), pod_of(ReplicaType.WORKER, 1, PodPhase.FAILED, exit_code=3)])
    assert alone.fail is not None and alone.fail.reason == "BackoffLimitExceeded"  # counted: backoffLimit 0
    job_with_room = job_of({"Chief": 1, "Worker": 2}, backoffLimit=1, failurePolicy=policy)
    alone = planned(
        job_with_room, [pod_of(ReplicaType.CHIEF, 0), pod_of(ReplicaType.WORKER, 1, PodPhase.FAILED, exit_code=3)]
    )
    assert alone.restart is not None and alone.delete == ["job-worker-1"]  # not the whole job, as scoped
    assert (
        alone.restart.message == "job-worker-1 failed with exit code 3 (failurePolicy rule 2): the failed pods restart"
    )

    chief = planned(job, [pod_of(ReplicaType.CHIEF, 0, PodPhase.FAILED, exit_code=137), pod_of(ReplicaType.WORKER, 0)])
    assert chief.fail is None and chief.restart is not None  # rule 1 is the workers'; rule 3 ignores 137
    assert chief.restart.disruption == "IgnoredByFailurePolicy" and chief.delete == ["job-chief-0", "job-worker-0"]


def test_failure_policy_rules_match_pod_conditions_and_can_fail_a_disrupted_job() -> None:
    policy = _rules({"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]})
    job = job_of({"Worker": 2}, failurePolicy=policy)
    evicted = pod_of(
        ReplicaType.WORKER,
        1,
        deleting=True,
        disruption="EvictionByEvictionAPI",
        conditions=frozenset({"DisruptionTarget"}),
    )
    assert planned(job, [pod_of(ReplicaType.WORKER, 0), evicted]).restart is None
    verdict = failure(job, [pod_of(ReplicaType.WORKER, 0), evicted])
    assert verdict is not None and verdict.reason == "FailurePolicy"  # deleted, not yet failed: the rule acts
    restarting = job_of(
        {"Worker": 2}, failurePolicy=_rules({"action": "RestartJob", "onPodConditions": [{"type": "Odd"}]})
    )
    assert planned(restarting, [pod_of(ReplicaType.WORKER, 0), evicted]).restart is not None  # no match: a disruption


def test_restarts_that_follow_each_other_quickly_pause_longer_each_time() -> None:
    """A trainer that exits at once with the preemption code (uncounted) restarts at once the first time, then
    waits 10 s, 20 s, 40 s before its pods start; 20 s of running resets the count."""
    job = job_of({"Worker": 2})
    now, pauses = NOW, []
    for _ in range(4):
        preempted = pod_of(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=ExitCode.PREEMPTED, disruption="Preempted")
        failed = [preempted, pod_of(ReplicaType.WORKER, 1)]
        status = aggregated(job, failed, created=True, now=now).status
        decided = plan(job.model_copy(update={"status": status}), failed, JOB_CHILDREN, SETTINGS, now=now)
        assert decided.restart is not None and decided.restart.disruption is not None  # uncounted
        restart = decided.restart
        status = record_restart(status, restart.failed, restart.message, now, 1, disruption=restart.disruption)
        assert status.restart_count == 0 and status.restart_backoff is not None
        until = status.restart_backoff.until
        pauses.append((until - now).total_seconds())
        job = job.model_copy(update={"status": status})
        held = plan(job, [], JOB_CHILDREN, SETTINGS, now=now + timedelta(seconds=1))
        assert [item["kind"] for item in held.create] == ([] if until > now else ["Pod", "Pod"])
        assert held.wake_at == (until if until > now + timedelta(seconds=1) else None)
        now = max(now, until) + timedelta(seconds=5)  # it fails 5 s after its pods could start
    assert pauses == [0, 10, 20, 40]
    assert any("4 restarts in a row" in condition.message for condition in status.conditions)
    healthy = restart_backoff(status.restart_backoff, now + timedelta(seconds=20))
    assert (healthy.quick_restarts, healthy.until) == (0, now + timedelta(seconds=20))


def _pauses(every: timedelta, restarts: int) -> list[float]:
    """The pause each of `restarts` restarts earns, each decided `every` after the last one's pods could start."""
    backoff, now, pauses = None, NOW, []
    for _ in range(restarts):
        backoff = restart_backoff(backoff, now)
        pauses.append((backoff.until - now).total_seconds())
        now = backoff.until + every
    return pauses


def test_a_loop_of_restarts_pauses_at_any_pace_faster_than_the_decay() -> None:
    """Restarts each a little over HEALTHY_RUN apart (a tenant deleting a pod every 21 s) are free for five,
    then pause longer each time; the goodput benchmark's four preemptions 30 s apart stay unpaused, and
    restarts slower than RESTART_DECAY never pause."""
    assert _pauses(HEALTHY_RUN + timedelta(seconds=1), 9) == [0, 0, 0, 0, 0, 10, 20, 40, 80]
    assert _pauses(timedelta(minutes=5), 7) == [0, 0, 0, 0, 0, 10, 20]
    assert _pauses(timedelta(seconds=30), 4) == [0, 0, 0, 0]
    assert _pauses(RESTART_DECAY, 50) == [0] * 50
