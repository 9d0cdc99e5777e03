"""What one pod that failed or was taken away does to its job: one answer for the status and the planner.

In order: the first of `runPolicy.failurePolicy.rules` that matches the pod; else a disruption restarts
the job, uncounted; else a trainer that diverged (exit code 5 and its termination message's word,
`disttrain_contract.divergence`) fails the job, since a restart from the same checkpoint diverges again;
else the replica's `restartPolicy` restarts it, counted, or fails the job. An Evaluator that no rule
fails never fails the job (its replica status says it failed). A stall is the job's, not a pod's: only
`onStall` rules match it (`stall_rule`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from disttrain_contract.exit_codes import ExitCode, is_retryable
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ExitCodeOperator, FailureAction, FailureRule, ReplicaType, RestartPolicy
from disttrain_core.observed import PodView

IGNORED = "IgnoredByFailurePolicy"  # the disruption reason of a restart an Ignore rule called for


class Reach(Enum):
    """How far a restart reaches: as restartScope says, the whole job, or the pod alone."""

    AS_SCOPED = "as scoped"
    JOB = "job"
    REPLICA = "replica"


@dataclass(frozen=True)
class Response:
    """`fails`: the job fails; else it restarts as far as `reach` says, counted against backoffLimit
    unless `uncounted` names why not. `rule`: the 1-based failurePolicy rule that decided, if one did."""

    fails: bool
    reach: Reach = Reach.AS_SCOPED
    uncounted: str | None = None
    rule: int | None = None

    def says(self) -> str:
        return "" if self.rule is None else f" (failurePolicy rule {self.rule})"


def may_restart(policy: RestartPolicy, exit_code: int | None) -> bool:
    """Never: no. OnFailure and Always: yes. ExitCode: only retryable codes (>= 128, or none at all)."""
    if policy is RestartPolicy.EXIT_CODE:
        return is_retryable(exit_code)
    return policy in (RestartPolicy.ON_FAILURE, RestartPolicy.ALWAYS)


def diverged(pod: PodView) -> bool:
    """The trainer stopped on a loss that is no number: exit code DIVERGED and the word in its termination message
    file (`disttrain_contract.divergence`); a 5 from any other program is a failure like another."""
    return pod.exit_code == ExitCode.DIVERGED and pod.diverged and pod.disruption is None


def matches(rule: FailureRule, pod: PodView) -> bool:
    """Exit codes match a pod that failed on its own account: a pod taken away exits as it was killed, which
    says nothing of the job (its conditions, DisruptionTarget, match it instead). An onStall rule matches no pod."""
    if rule.on_stall:
        return False
    if rule.replica_types is not None and pod.replica_type not in rule.replica_types:
        return False
    if rule.on_exit_codes is not None:
        if pod.exit_code is None or pod.disruption is not None:
            return False
        listed = pod.exit_code in rule.on_exit_codes.values
        if listed != (rule.on_exit_codes.operator is ExitCodeOperator.IN):
            return False
    if rule.on_pod_conditions is not None:
        return any(condition.type in pod.conditions for condition in rule.on_pod_conditions)
    return True


_REACHES = {FailureAction.RESTART_JOB: Reach.JOB, FailureAction.RESTART_REPLICA: Reach.REPLICA}


def response(job: DistTrainJob, pod: PodView) -> Response:
    policy = job.spec.run_policy.failure_policy
    for number, rule in enumerate(policy.rules if policy is not None else (), start=1):
        if matches(rule, pod):
            uncounted = (pod.disruption or IGNORED) if rule.action is FailureAction.IGNORE else None
            reach = _REACHES.get(rule.action, Reach.AS_SCOPED)
            return Response(rule.action is FailureAction.FAIL_JOB, reach, uncounted, number)
    if pod.disruption is not None:
        return Response(fails=False, uncounted=pod.disruption)
    if diverged(pod):
        return Response(fails=True)
    restart_policy = job.spec.replica_specs[pod.replica_type].restart_policy
    return Response(fails=not may_restart(restart_policy, pod.exit_code))


def fails_job(job: DistTrainJob, pod: PodView) -> Response | None:
    """The response that fails the job for this pod, if it is one; an Evaluator fails it only by a rule."""
    answer = response(job, pod)
    if not answer.fails or (pod.replica_type is ReplicaType.EVALUATOR and answer.rule is None):
        return None
    return answer


def stall_rule(job: DistTrainJob) -> tuple[int, FailureRule] | None:
    """The first failurePolicy rule (1-based) that matches a stall, if any."""
    policy = job.spec.run_policy.failure_policy
    rules = enumerate(policy.rules if policy is not None else (), start=1)
    return next(((number, rule) for number, rule in rules if rule.on_stall), None)
