"""The trainer's progress, as the operator reads it: parsed, compared, and which task reports it.

Two sources, one shape (disttrain_contract.progress): the reporting pod's HTTP endpoint while
it runs, and its termination message once it ended. Whichever report is newest wins, and a job
keeps its last known progress across restarts until a newer report arrives. A report names the last
checkpoint saved, if any (`SavedCheckpoint`). The Evaluator's scores come in its termination message
too (disttrain_contract.evaluation).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC

import pydantic

from disttrain_contract import progress as contract
from disttrain_contract.evaluation import EVALUATION_FIELD
from disttrain_core.api.spec import DistTrainJobSpec, ReplicaType
from disttrain_core.api.status import MAX_HISTORY, OPERATOR_FIELDS, Evaluation, Progress, ProgressPoint, SavedCheckpoint

# What a trainer may report: the operator's own readings (the rate, the time left) are never taken from it.
_FIELDS = frozenset(
    name
    for key, field in Progress.model_fields.items()
    if key not in OPERATOR_FIELDS
    for name in (key, field.alias)
    if name
)


@dataclass(frozen=True)
class Report:
    """One record of the trainer: its progress, and the last checkpoint it says it saved."""

    progress: Progress
    checkpoint: SavedCheckpoint | None = None


def _no_number(_: str) -> None:
    return None


def _record(text: str | None) -> dict[str, object] | None:
    """A termination message's or a poll's JSON object; None for anything else (a user's own words, nothing).
    Python's `json.dumps` writes a diverged loss as NaN or Infinity, which JSON has no word for and the API
    server refuses in a status: each is read as no value."""
    if not text:
        return None
    try:
        record = json.loads(text, parse_constant=_no_number)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def parse_progress(text: str | None) -> Progress | None:
    """A report from its JSON text; None for anything else (a user's own message, garbage, nothing)."""
    record = _record(text)
    if record is None or "step" not in record:
        return None
    try:
        progress = Progress.model_validate({key: value for key, value in record.items() if key in _FIELDS})
    except pydantic.ValidationError:
        return None
    if progress.update_time is not None and progress.update_time.tzinfo is None:  # comparable with the rest
        progress = progress.model_copy(update={"update_time": progress.update_time.replace(tzinfo=UTC)})
    return progress


def parse_report(text: str | None) -> Report | None:
    """A report and its checkpoint from its JSON text; None where there is no report. A checkpoint that does
    not parse is left out and the progress kept."""
    progress = parse_progress(text)
    if progress is None:
        return None
    found = (_record(text) or {}).get(contract.CHECKPOINT_FIELD)
    try:
        checkpoint = SavedCheckpoint.model_validate(found) if isinstance(found, dict) else None
    except pydantic.ValidationError:
        checkpoint = None
    if checkpoint is not None and checkpoint.time is not None and checkpoint.time.tzinfo is None:
        checkpoint = checkpoint.model_copy(update={"time": checkpoint.time.replace(tzinfo=UTC)})
    return Report(progress, checkpoint)


def parse_evaluation(text: str | None) -> Evaluation | None:
    """The Evaluator's scores from its termination message; None for anything else."""
    found = (_record(text) or {}).get(EVALUATION_FIELD)
    if not isinstance(found, dict):
        return None
    metrics = found.get("metrics")
    if isinstance(metrics, dict):  # a score that is no number (NaN) is left out; the others stay
        found = {**found, "metrics": {name: value for name, value in metrics.items() if value is not None}}
    try:
        return Evaluation.model_validate(found)
    except pydantic.ValidationError:
        return None


def newest(*reports: Progress | None) -> Progress | None:
    """The most recent report (by its time, then its step); the earliest argument wins a tie."""
    best: Progress | None = None
    for report in reports:
        if report is None:
            continue
        if best is None or _later(report, best):
            best = report
    return best


def _later(report: Progress, than: Progress) -> bool:
    """Time first: a job resumed from an older checkpoint reports a lower step, and that is the truth."""
    if report.update_time is not None and than.update_time is not None:
        return (report.update_time, report.step or 0) > (than.update_time, than.step or 0)
    if report.update_time is None and than.update_time is None:
        return (report.step or 0) > (than.step or 0)
    return report.update_time is not None


def reporting_task(spec: DistTrainJobSpec) -> tuple[ReplicaType, int]:
    task_type, index = contract.reporting_task(has_chief=spec.replicas(ReplicaType.CHIEF) > 0)
    return ReplicaType.from_task_type(task_type), index


def with_report(history: list[ProgressPoint], report: Progress | None, limit: int = MAX_HISTORY) -> list[ProgressPoint]:
    """The curve with the newest report on its end.

    A report of a lower step (a job resumed from an earlier checkpoint) cuts the curve back to that
    step. When the curve holds more than `limit` points, every other point before the newest goes: the
    whole run stays in view with ever coarser early points, and the status never grows past the limit.
    """
    if report is None or report.step is None:
        return history
    point = ProgressPoint(
        step=report.step, loss=report.loss, examples_per_second=report.examples_per_second, time=report.update_time
    )
    if history and history[-1] == point:
        return history
    curve = [*(earlier for earlier in history if earlier.step < point.step), point]
    while len(curve) > limit:
        curve = [*curve[:-1][::2], point]
    return curve
