"""The job's TensorBoard in its status: where it serves, and the `TensorBoardReady` condition, from the
view of its Deployment (builders/tensorboard.py makes it). A Deployment that cannot create its pod
(a Pod Security refusal, a quota) or whose pod did not become ready within its progress deadline (an
image that cannot be pulled, a crash) turns the condition False with the Deployment's own reason and
message, which the status writer also posts as a Warning Event."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.status import ConditionType, DistTrainJobStatus, TensorBoardStatus
from disttrain_core.builders.tensorboard import TENSORBOARD_OF_LABEL, TENSORBOARD_PORT, tensorboard_name
from disttrain_core.naming import JOB_NAME_LABEL
from disttrain_core.status_from_pods import with_condition
from disttrain_core.types import Manifest, Verdict

FAILURE_REASONS = frozenset({"FailedCreate", "ProgressDeadlineExceeded"})  # TensorBoardReady False for these: a Warning


@dataclass(frozen=True)
class TensorBoardView:
    """What the operator keeps of a TensorBoard Deployment."""

    name: str
    ready: bool
    problem: Verdict | None = None  # why the cluster cannot run it


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def tensorboard_view(body: dict[str, Any]) -> TensorBoardView:
    status = body.get("status") or {}
    name = str(body["metadata"]["name"])
    failure, progressing = _condition(status, "ReplicaFailure"), _condition(status, "Progressing")
    problem = None
    if failure.get("status") == "True":
        problem = Verdict(str(failure.get("reason") or "FailedCreate"), str(failure.get("message") or ""))
    elif progressing.get("status") == "False" and progressing.get("reason") == "ProgressDeadlineExceeded":
        job_name = (body["metadata"].get("labels") or {}).get(JOB_NAME_LABEL, "")
        label = f"{TENSORBOARD_OF_LABEL}={job_name}"
        message = f"{progressing.get('message', '')}: `kubectl describe pods -l {label}` says why"
        problem = Verdict("ProgressDeadlineExceeded", message)
    return TensorBoardView(name, ready=int(status.get("readyReplicas") or 0) > 0, problem=problem)


def is_tensorboard_object(manifest: Manifest) -> bool:
    """One of the objects of a job's TensorBoard, whose refusal never fails the job (`refused` in
    `with_tensorboard`)."""
    job_name = (manifest["metadata"].get("labels") or {}).get(JOB_NAME_LABEL, "")
    kinds = {"Deployment", "Service", "NetworkPolicy"}
    return manifest["kind"] in kinds and manifest["metadata"]["name"] == tensorboard_name(job_name)


def with_tensorboard(
    job: DistTrainJob,
    status: DistTrainJobStatus,
    view: TensorBoardView | None,
    now: datetime,
    refused: Verdict | None = None,
) -> DistTrainJobStatus:
    """The status with the job's TensorBoard, if it has one. `refused`: why the cluster refused to create it;
    the job trains on without it."""
    if not job.spec.tensorboard_enabled:
        return status
    name = tensorboard_name(job.metadata.name)
    url = f"http://{name}.{job.metadata.namespace}.svc:{TENSORBOARD_PORT}"
    ready = view is not None and view.ready
    if ready:
        verdict = Verdict("TensorBoardReady", f"TensorBoard serves at {url}")
    elif refused is not None:
        verdict = refused
    elif view is not None and view.problem is not None:
        verdict = view.problem
    else:
        verdict = Verdict("TensorBoardStarting", "waiting for TensorBoard's pod to be ready")
    conditions = with_condition(
        status.conditions,
        ConditionType.TENSORBOARD_READY,
        holds=ready,
        verdict=verdict,
        now=now,
        generation=job.metadata.generation,
    )
    board = TensorBoardStatus(service=name, url=url, ready=ready)
    return status.model_copy(update={"conditions": conditions, "tensorboard": board})
