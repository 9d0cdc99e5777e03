"""What one failure calls for: the first failure-policy rule that matches, a disruption, the trainer's word that
it diverged, then the replica's restart policy."""

from __future__ import annotations

from typing import Any

import pytest

from disttrain_contract.exit_codes import ExitCode
from disttrain_core.api.spec import ReplicaType
from disttrain_core.observed import PodPhase
from disttrain_core.restarts.rules import IGNORED, Reach, Response, fails_job, response, stall_rule
from support.planning import job_of, pod_of


def _failed(code: int, kind: ReplicaType = ReplicaType.WORKER, **fields: Any) -> Any:
    return pod_of(kind, 0, PodPhase.FAILED, exit_code=code, **fields)


@pytest.mark.parametrize(
    ("policy", "code", "fails"),
    [
        ("Never", 130, True),
        ("OnFailure", 1, False),
        ("Always", 1, False),
        ("ExitCode", 1, True),  # a permanent code
        ("ExitCode", 137, False),  # killed: retryable
    ],
)
def test_without_a_rule_the_replica_s_restart_policy_decides(policy: str, code: int, fails: bool) -> None:
    assert response(job_of({"Worker": 2}, policy), _failed(code)) == Response(fails=fails)


def test_exit_code_5_fails_the_job_only_with_the_trainer_s_word() -> None:
    """Any program may exit 5: a TFJob's user code under OnFailure is retried, as TFJob retries it."""
    job = job_of({"Worker": 2}, "OnFailure")
    assert response(job, _failed(int(ExitCode.DIVERGED), diverged=True)) == Response(fails=True)
    assert response(job, _failed(int(ExitCode.DIVERGED))) == Response(fails=False)


def test_the_first_rule_that_matches_decides_and_names_itself() -> None:
    rules = [
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}},
        {"action": "RestartReplica", "onExitCodes": {"operator": "In", "values": [3, 4]}},
        {"action": "FailJob", "replicaTypes": ["PS"], "onExitCodes": {"operator": "NotIn", "values": [0]}},
    ]
    job = job_of({"Worker": 2, "PS": 1}, "Never", failurePolicy={"rules": rules})
    assert response(job, _failed(3)) == Response(False, Reach.AS_SCOPED, IGNORED, 1)
    assert response(job, _failed(4)) == Response(False, Reach.REPLICA, None, 2)
    assert response(job, _failed(4)).says() == " (failurePolicy rule 2)"
    assert response(job, _failed(1, ReplicaType.PS)) == Response(True, Reach.AS_SCOPED, None, 3)
    assert response(job, _failed(1)) == Response(fails=True)  # no rule: Never


def test_a_disruption_is_uncounted_and_exit_codes_do_not_match_it() -> None:
    """A pod taken away exits as it was killed, which says nothing of the job: its code matches no rule."""
    rule = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [143]}}
    job = job_of({"Worker": 2}, "Never", failurePolicy={"rules": [rule]})
    evicted = _failed(143, disruption="TerminationByKubelet")
    assert response(job, evicted) == Response(fails=False, uncounted="TerminationByKubelet")
    assert response(job, _failed(143)) == Response(True, Reach.AS_SCOPED, None, 1)


def test_an_evaluator_fails_the_job_only_by_a_rule() -> None:
    job = job_of({"Worker": 1, "Evaluator": 1}, "Never")
    assert fails_job(job, _failed(1, ReplicaType.EVALUATOR)) is None
    rule = {"action": "FailJob", "replicaTypes": ["Evaluator"], "onExitCodes": {"operator": "In", "values": [1]}}
    ruled = job_of({"Worker": 1, "Evaluator": 1}, "Never", failurePolicy={"rules": [rule]})
    assert fails_job(ruled, _failed(1, ReplicaType.EVALUATOR)) == Response(True, Reach.AS_SCOPED, None, 1)


def test_only_an_on_stall_rule_matches_a_stall_and_it_matches_no_pod() -> None:
    rules = [
        {"action": "RestartJob", "onExitCodes": {"operator": "In", "values": [1]}},
        {"action": "FailJob", "onStall": True},
    ]
    job = job_of({"Worker": 2}, "OnFailure", failurePolicy={"rules": rules})
    found = stall_rule(job)
    assert found is not None and found[0] == 2
    assert response(job, _failed(2)) == Response(fails=False)  # the onStall FailJob is no pod's
