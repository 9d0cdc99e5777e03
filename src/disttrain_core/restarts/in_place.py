"""Whole-job restarts in place, on Kubernetes' container restart rules (`restartPolicyRules`, on from 1.35).

The kubelet restarts a container that exits with a code its rule names, in its pod, which keeps its UID,
address, node, volumes and devices: no scheduler, volume attachment or DNS change comes between the failure
and the resumed training. A job that restarts as a whole gets the rule `Restart` on its trainers' containers
for every exit code its policies restart for (`restart_rule`); the trainer that failed starts again at once
and its peers, which lose it, exit PEER_LOST and start again too. Not `RestartAllContainers`: the kubelet
reports a pod restarted so without the code or the log of the run that ended (docs/architecture.md).

The operator still decides and counts every restart. A pod's annotation says how many of its trainer's runs
ended within restarts already counted (`RUNS_COUNTED`); a run that ended beyond it is a failure the planner
answers as a failed pod's (`previous_runs`). A pod that has not restarted in place within `IN_PLACE_GRACE`,
or failed outright, is recreated as before; so is every pod of a restart that earns a pause (`restartBackoff`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from disttrain_contract.exit_codes import ExitCode
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType, RestartScope
from disttrain_core.api.tenant_input import RUNS_COUNTED
from disttrain_core.observed import PodPhase, PodView, run_disruption
from disttrain_core.restarts.rules import response
from disttrain_core.types import Manifest

RESTART = "Restart"
EXIT_CODES = range(1, 256)
# How long a pod that a restart needs is given to end its run and restart in place before it is recreated:
# the trainer's peers exit within seconds of losing one (`disttrain_trainer.main`).
IN_PLACE_GRACE = timedelta(seconds=20)


def restarts_in_place(job: DistTrainJob, replica_type: ReplicaType, enabled: bool) -> bool:
    """Whether this replica's pods restart in place: the install and the cluster allow it (`enabled`) and the
    job restarts as a whole; an Evaluator never joins a whole-job restart."""
    scoped = job.spec.effective_restart_scope is RestartScope.JOB
    return enabled and scoped and replica_type is not ReplicaType.EVALUATOR


def restart_codes(job: DistTrainJob, replica_type: ReplicaType) -> list[int]:
    """The exit codes on which the job restarts rather than fails, for a pod of this replica, as the failure
    policy answers them (`rules.response`): the rule restarts in place exactly what the operator
    would restart by recreating. DIVERGED is never among them: whether it fails the job is in the run's
    termination message (`rules.diverged`), which the kubelet does not read. Kept by what decides them (the
    replica's type and restartPolicy, the failure policy): asking 255 codes cost 40 times a pod's build, for
    every pod."""
    policy = job.spec.run_policy.failure_policy
    key = (replica_type, job.spec.replica_specs[replica_type].restart_policy, policy and policy.model_dump_json())
    codes = _CODES.get(key)
    if codes is None:
        codes = [
            code
            for code in EXIT_CODES
            if code != ExitCode.DIVERGED and not response(job, _ended_with(replica_type, code)).fails
        ]
        if len(_CODES) >= MOST_KEPT_CODES:
            _CODES.clear()
        _CODES[key] = codes
    return list(codes)


MOST_KEPT_CODES = 256  # answers kept: a failure policy is a tenant's, and there may be as many as jobs
_CODES: dict[tuple[object, ...], list[int]] = {}


def _ended_with(replica_type: ReplicaType, code: int) -> PodView:
    return PodView(name="", replica_type=replica_type, index=0, phase=PodPhase.FAILED, uid="", exit_code=code)


def restart_rule(codes: list[int]) -> Manifest:
    """The rule naming `codes`, as `In` or as `NotIn` the rest, whichever is shorter (the API takes 255 values)."""
    chosen = set(codes)
    others = [code for code in range(256) if code not in chosen]
    if len(codes) <= len(others):
        return {"action": RESTART, "exitCodes": {"operator": "In", "values": codes}}
    return {"action": RESTART, "exitCodes": {"operator": "NotIn", "values": others}}


def with_restart_rule(container: Manifest, codes: list[int]) -> bool:
    """Give the trainer's container the rule; False (and no change) where its template sets a restart policy or
    rules of its own, which stay the user's, or no code restarts."""
    if not codes or "restartPolicy" in container or "restartPolicyRules" in container:
        return False
    container["restartPolicy"] = "Never"
    container["restartPolicyRules"] = [restart_rule(codes)]
    return True


def counted_annotation(runs: int) -> dict[str, str]:
    return {RUNS_COUNTED: str(runs)}


def counted_patch(uid: str, runs: int) -> list[dict[str, Any]]:
    """A JSON patch that writes the count on the pod of that uid, refused (422) where the name is another pod's."""
    key = RUNS_COUNTED.replace("~", "~0").replace("/", "~1")
    return [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "add", "path": f"/metadata/annotations/{key}", "value": str(runs)},
    ]


def previous_runs(pods: Sequence[PodView]) -> list[PodView]:
    """Each run that ended in place beyond those counted, as the pod that failed with it would show: its own
    key (`run_key`), its exit code, reason, message and end. The planner restarts for it as for a failed pod."""
    return [_previous_run(pod) for pod in pods if pod.runs is not None and pod.runs.uncounted and not pod.ended]


def _previous_run(pod: PodView) -> PodView:
    runs = pod.runs
    assert runs is not None
    return replace(
        pod,
        phase=PodPhase.FAILED,
        uid=run_key(pod.uid, runs.ended),
        ready=False,
        exit_code=runs.exit_code,
        reason=runs.reason,
        message=runs.message,
        finished_at=runs.finished_at,
        diverged=runs.diverged,
        disruption=run_disruption(runs.exit_code),
        final_report=None,
        evaluation=None,
        log_due=False,
        run_log_due=None,
        log_due_body=None,
        runs=None,
    )


def loss_covered(pod: PodView) -> bool:
    """A pod deleted while owed a restart in place (`PodView.owed_restart_in_place`): the restart that counted the
    end of its current run covers its loss, and it is made again once it is gone. (One that ended so is
    `end_counted`.)"""
    return pod.deleting and pod.owed_restart_in_place


def outrun(pods: Sequence[PodView], handled: Collection[str]) -> tuple[tuple[str, int], ...]:
    """Pods that ended after restarting in place on runs no restart counted: the kubelet restarted the trainer and
    its next run ended the pod before the operator saw the end before. Each with the count of its runs that
    ended before its last, which the job's status counts as restarts (`record.record_outrun`) and the pod's
    note holds from then on (`RUNS_COUNTED`)."""
    return tuple(
        (pod.name, pod.runs.ended - 1)
        for pod in pods
        if pod.ended
        and pod.runs is not None
        and pod.runs.ended - 1 > pod.runs.counted
        and run_key(pod.uid, pod.runs.ended - 1) not in handled
    )


RUN_KEY = "/run-"  # between a pod's uid and the number of its run in a run's key


def run_key(uid: str, run: int) -> str:
    """What stands for a pod's `run`-th run that ended in place, where a pod's uid stands for its end."""
    return f"{uid}{RUN_KEY}{run}"


def pod_uid(key: str) -> str:
    """The uid of the pod a handled key names: the key itself, or the pod of the run it stands for."""
    return key.partition(RUN_KEY)[0]


def end_counted(pod: PodView) -> bool:
    """A pod that ended whose end a restart already counted: it was to restart in place, and failed instead (its
    peer lost, a user's image exits as it pleases; a kubelet that follows no rule)."""
    return pod.runs is not None and pod.ended and pod.runs.counted >= pod.runs.ended > 0
